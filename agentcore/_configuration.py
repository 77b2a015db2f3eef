"""What an agent was made with: :class:`Configuration`, checked.

A leaf below the facade: the agent (``agent``), its operations (``_operations``) and its
sub-agent tools (``_subagent``) all read it, and it imports none of them (a tool that runs
a sub-agent says so through :attr:`~agentcore.tools.Tool.runs_agent`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from agentcore.adapters import ModelAdapter
from agentcore.contracts import ContractDocument, OutputSpec

from ._run import ContextProvider, RunSetup
from .policy import Policy
from .queue import RunQueue
from .quotas import Clock, Quota
from .secrets import Redactor, SecretResolver
from .stores import TranscriptStore
from .stores._quota import quota_store
from .tools import DepsFactory, Tool

__all__ = ["Configuration"]


@dataclass(frozen=True, slots=True)
class Configuration:
    """What an agent was made with, checked (see :class:`~agentcore.agent.Agent`'s
    arguments); ``store`` is the store as given (a URL, a store, or ``None``: the
    default)."""

    tools: dict[str, Tool]
    route: tuple[ModelAdapter, ...]
    plan_route: tuple[ModelAdapter, ...]
    policy: Policy
    contract: ContractDocument
    instructions: str | None
    context: tuple[ContextProvider, ...]
    owner: str
    lease_s: float
    name: str | None
    queue: RunQueue | None
    secrets: SecretResolver | None
    redactor: Redactor
    snapshot_every: int
    lost_call_wait_s: float
    deps: DepsFactory | None
    output: OutputSpec | None
    store: str | TranscriptStore | None
    quotas: tuple[Quota, ...] = ()
    clock: Clock = time.time

    @property
    def output_hash(self) -> str | None:
        """What runs of this agent pin in ``run_started.output_hash``."""
        return None if self.output is None else self.output.hash

    @property
    def has_subagents(self) -> bool:
        """Whether a run of this agent can wait on a sub-agent's run."""
        return any(t.runs_agent for t in self.tools.values())

    def setup(self, store: TranscriptStore) -> RunSetup:
        """What a driver needs from the agent, with ``store`` opened.

        Raises:
            ConfigurationError: the agent has quotas and ``store`` keeps no counters.
        """
        if self.quotas:
            quota_store(store)
        return RunSetup(
            tools=self.tools,
            contract=self.contract,
            instructions=self.instructions,
            route=self.route,
            plan_route=self.plan_route,
            context_providers=self.context,
            store=store,
            schema_cache={},
            system_cache={},
            secrets=self.secrets,
            redactor=self.redactor,
            snapshot_every=self.snapshot_every,
            lost_call_wait_s=self.lost_call_wait_s,
            deps=self.deps,
            output=self.output,
            quotas=self.quotas,
            clock=self.clock,
            rules=self.policy.rules,
        )
