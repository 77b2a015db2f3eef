"""Contract drift: per contract version, how runs behave (``agentcore stats``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from .events import ActionProposed, Event, ModelCalled, RunFinished, RunStarted
from .stores import TranscriptStore

__all__ = ["ContractStats", "collect_stats", "contract_stats"]


@dataclass
class ContractStats:
    """What runs under one contract (version and hash) did.

    Attributes:
        contract: ``v<version>:<hash>``.
        runs: runs started under it.
        steps: accepted actions across those runs.
        actions: accepted actions by type (plan, tool, finish).
        model_calls: model calls (invalid replies and errors included).
        invalid_replies: model calls whose reply was not a valid action.
        reasked_steps: steps that needed at least one re-ask.
        budget_exhausted: runs that stopped at least once on a budget.
    """

    contract: str
    runs: int = 0
    steps: int = 0
    actions: Counter[str] = field(default_factory=Counter[str])
    model_calls: int = 0
    invalid_replies: int = 0
    reasked_steps: int = 0
    budget_exhausted: int = 0

    def share(self, kind: str) -> float:
        """The share of accepted actions of one type."""
        return self.actions[kind] / self.steps if self.steps else 0.0

    @property
    def steps_per_run(self) -> float:
        """Average accepted actions per run."""
        return self.steps / self.runs if self.runs else 0.0

    @property
    def invalid_rate(self) -> float:
        """Invalid replies per model call."""
        return self.invalid_replies / self.model_calls if self.model_calls else 0.0

    @property
    def reask_rate(self) -> float:
        """Steps that needed a re-ask, per step."""
        return self.reasked_steps / self.steps if self.steps else 0.0


def collect_stats(transcripts: Sequence[Sequence[Event]]) -> list[ContractStats]:
    """Aggregate transcripts by the contract recorded in their ``run_started``."""
    by_contract: dict[str, ContractStats] = {}
    for events in transcripts:
        if not events or not isinstance(events[0], RunStarted):
            continue
        first = events[0]
        key = f"v{first.contract.get('version', '?')}:{first.contract.get('hash', '?')}"
        stats = by_contract.setdefault(key, ContractStats(key))
        stats.runs += 1
        invalid_this_step = False
        exhausted = False
        for ev in events:
            match ev:
                case ModelCalled(role="extract" | "child"):
                    pass  # an extraction inside a tool: not an ask of the contract
                case ModelCalled(outcome=outcome):
                    stats.model_calls += 1
                    if outcome == "invalid":
                        stats.invalid_replies += 1
                        invalid_this_step = True
                case ActionProposed(action=action):
                    stats.steps += 1
                    stats.actions[action.type] += 1
                    stats.reasked_steps += invalid_this_step
                    invalid_this_step = False
                case RunFinished(status="budget_exhausted"):
                    exhausted = True
                case _:
                    pass
        stats.budget_exhausted += exhausted
    return sorted(by_contract.values(), key=lambda s: s.contract)


async def contract_stats(
    store: TranscriptStore,
    *,
    since: float | None = None,
    tenant: str | None = None,
    limit: int = 10_000,
) -> list[ContractStats]:
    """Load the store's runs (updated at or after ``since``; only ``tenant``'s when given)
    and aggregate them."""
    transcripts: list[list[Event]] = []
    for summary in await store.list_runs(tenant=tenant, limit=limit):
        if since is not None and summary.updated_at < since:
            continue
        transcripts.append(await store.load(summary.run_id))
    return collect_stats(transcripts)
