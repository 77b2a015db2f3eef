"""What is done to runs that exist: reading them, and what people and operators decide.

:class:`RunOperations` is the base of :class:`~agentcore.agent.Agent`; its public methods
(``result``, ``transcript``, ``confirm``, ``resolve``, ``cancel``, ``compensate``,
``expire_approvals``) are the agent's. Each checks its arguments, asks a pure command
(``_run._commands``) for the events that carry it out and hands them to a session
(``_run._session``), which records them under the run's lease and continues the run.
``agent.py`` holds the rest: making an agent, and starting and advancing runs.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic

from agentcore.adapters import ModelAdapter
from agentcore.contracts import (
    ActionSchema,
    ContractDocument,
    OutputSpec,
    check_run_id,
    check_text,
)
from agentcore.contracts.errors import ConfigurationError, OutputTypeChangedError

from ._run import (
    ContextProvider,
    RunSetup,
    Session,
    Settle,
    commands,
    refuse_rerun_while_running,
)
from ._state import OutputT, RunResult, RunStatus
from ._subagent import SubagentTool, child_waiting
from ._twins import StreamTwin, SyncTwin
from .approvals import person_name
from .events import Event
from .policy import Policy
from .queue import RunQueue
from .secrets import Redactor, SecretResolver
from .stores import TranscriptStore, open_store
from .tools import DepsFactory, Tool

__all__ = ["CONFIRM_WAIT_S", "RunOperations", "tool_table"]

CONFIRM_WAIT_S = 10.0
"""How long ``confirm`` waits for a run another worker holds (another person's answer
being recorded) before it raises ``RunBusyError``."""

_UNSET: Any = object()  # Any: a sentinel for "no result given" (None is a valid result)


class RunOperations(Generic[OutputT]):
    """The base of :class:`~agentcore.agent.Agent`: reading its runs, what people decide
    about them (confirm, resolve, cancel, compensate, expire approvals), and the plumbing
    shared with the agent's own methods. ``Agent.__init__`` sets every attribute declared
    here."""

    tools: dict[str, Tool]
    route: tuple[ModelAdapter, ...]
    plan_route: tuple[ModelAdapter, ...]
    policy: Policy
    contract: ContractDocument
    instructions: str | None
    owner: str
    lease_s: float
    name: str | None
    queue: RunQueue | None
    secrets: SecretResolver | None
    deps: DepsFactory | None
    lost_call_wait_s: float
    snapshot_every: int
    _output: OutputSpec | None
    _context: tuple[ContextProvider, ...]
    _redactor: Redactor
    _store_arg: str | TranscriptStore | None
    _store: TranscriptStore | None
    _schema_cache: dict[tuple[object, ...], ActionSchema]
    _system_cache: dict[tuple[str, ...], str]

    if TYPE_CHECKING:  # Agent's, used by confirm when a sub-agent's call was answered

        async def resume(self, run_id: str, *, by: str | None = None) -> RunResult[OutputT]: ...

    @property
    def store(self) -> TranscriptStore:
        """The transcript store (opened on first use)."""
        if self._store is None:
            self._store = open_store(self._store_arg if isinstance(self._store_arg, str) else None)
        return self._store

    def _session(self) -> Session:
        """What loading, owning and advancing this agent's runs needs (the store opens on
        first use)."""
        setup = RunSetup(
            tools=self.tools,
            contract=self.contract,
            instructions=self.instructions,
            route=self.route,
            plan_route=self.plan_route,
            context_providers=self._context,
            store=self.store,
            schema_cache=self._schema_cache,
            system_cache=self._system_cache,
            secrets=self.secrets,
            redactor=self._redactor,
            snapshot_every=self.snapshot_every,
            lost_call_wait_s=self.lost_call_wait_s,
            deps=self.deps,
            output=self._output,
        )
        return Session(setup, self.owner, self.lease_s, self.policy, self.name)

    # -- reading runs -------------------------------------------------------------------------

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """The run's current result, without advancing it.

        Raises:
            RunNotFoundError: no such run.
            LimitExceededError: ``run_id`` is not a valid run id.
            OutputTypeChangedError: the run completed with an answer that is not of this
                agent's output type.
        """
        check_run_id(run_id)
        state, _ = await self._session().load(run_id)
        result = self._typed(commands.read(state, self._output_hash))  # the pin, compared
        waiting = await child_waiting(self.tools, state)
        return result if waiting is None else dataclasses.replace(result, pending=waiting[1])

    async def transcript(self, run_id: str) -> list[Event]:
        """Every event of the run, in order."""
        check_run_id(run_id)
        return await self.store.load(run_id)

    async def close(self) -> None:
        """Close the store if the agent opened it."""
        if self._store is not None and isinstance(self._store_arg, str | None):
            await self._store.close()
            self._store = None

    # -- what people decide -------------------------------------------------------------------

    async def resolve(
        self,
        run_id: str,
        *,
        by: str,
        result: Any = _UNSET,  # Any: the JSON result the lost call produced
        rerun: bool = False,
        fail: bool = False,
        reason: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult[OutputT]:
        """Settle a call whose outcome was lost, for a run in ``needs_attention``.

        Exactly one of: ``result=<JSON value>`` (the call happened and returned this),
        ``rerun=True`` (it did not happen: run it once), ``fail=True`` (treat it as failed;
        the model sees the failure). The decision is recorded, then the run continues.

        Like :meth:`resume`, it first checks the tools the run used against the definitions
        recorded when it started.

        Args:
            accept_tool_changes: continue although a tool the run used (the lost call's
                included) changed since the run started; the accepted changes are recorded.

        Raises:
            RunError: the run is not waiting on a lost call.
            ConfigurationError: not exactly one of ``result``, ``rerun``, ``fail``; empty ``by``;
                an invalid run id (:class:`LimitExceededError`).
            ToolManifestChangedError: a tool the run used changed or is gone.
        """
        check_run_id(run_id)
        by = person_name(by)  # recorded normalised; see agentcore.approvals
        if not by:
            raise ConfigurationError("resolve() needs by=<who decided>; it is recorded.")
        check_text(by + (reason or ""), "resolution's by/reason")
        options: tuple[tuple[commands.Settlement, bool], ...] = (
            ("result", result is not _UNSET),
            ("rerun", rerun),
            ("fail", fail),
        )
        chosen: list[commands.Settlement] = [name for name, on in options if on]
        if len(chosen) != 1:
            raise ConfigurationError(
                "resolve() takes exactly one of result=..., rerun=True, fail=True."
            )
        settled = await self._session().apply(
            run_id,
            lambda state: commands.resolve(
                state,
                self.tools,
                decision=chosen[0],
                by=by,
                result=result,
                reason=reason,
                accept_tool_changes=accept_tool_changes,
                output_hash=self._output_hash,
            ),
            advance=self.queue is None,
            check=(
                functools.partial(refuse_rerun_while_running, self.store)
                if chosen[0] == "rerun"
                else None
            ),
        )
        return self._typed(self._handed_off(settled))

    async def confirm(
        self,
        run_id: str,
        *,
        approve: bool,
        by: str,
        reason: str | None = None,
        args: Mapping[str, Any] | None = None,  # Any: JSON arguments, validated by the tool
        step: int | None = None,
        args_hash: str | None = None,
        accept_tool_changes: bool = False,
    ) -> RunResult[OutputT]:
        """Approve or deny the call a run is waiting on, then continue the run.

        The approved call runs exactly as persisted (or with ``args``, validated against
        the tool's schema); the model is not asked again. A denial's ``reason`` is shown
        to the model.

        **Unbound unless you bind it.** Without ``step`` and ``args_hash`` this approves
        whatever call the run is waiting on when the approval arrives, which may not be the
        one the person saw. Pass ``step=pending.step, args_hash=pending.args_hash`` from
        the :class:`PendingCall` that was shown; the CLI always does.

        Like :meth:`resume`, it first checks the tools the run used (and the waiting call's
        tool) against the definitions recorded when the run started. With
        ``Policy(approval_ttl=...)`` an approval that arrives later than that many seconds
        after the call began waiting is refused (the run keeps waiting; a denial is still
        accepted).

        Args:
            approve: approve (``True``) or deny (``False``).
            by: who decided (recorded).
            reason: why; shown to the model on a denial.
            args: edited arguments to run instead of the proposed ones.
            step: with ``args_hash``, binds the approval to what the person saw; a mismatch
                refuses.
            args_hash: see ``step``.
            accept_tool_changes: continue although a tool the run used changed since it
                started; the accepted changes are recorded in the confirmation.

        Raises:
            NotAwaitingConfirmationError: the run is not waiting for a person.
            ConfirmationMismatchError: ``step`` or ``args_hash`` is not what is waiting, or
                the approval came after ``Policy.approval_ttl``.
            ToolManifestChangedError: a tool the run used changed or is gone.
            OutputTypeChangedError: the run was started with another output type.
            ConfigurationError: ``by`` is empty, edited ``args`` do not validate or an
                argument policy of the tool refuses them, or the run
                id is invalid (:class:`LimitExceededError`).
            RunBusyError: another worker is advancing the run right now.
        """
        check_run_id(run_id)
        by = person_name(by)  # recorded normalised; see agentcore.approvals
        if not by:
            raise ConfigurationError("confirm() needs by=<who decided>; it is recorded.")
        check_text(by + (reason or ""), "confirmation's by/reason")
        state, _ = await self._session().load(run_id)
        waiting = await child_waiting(self.tools, state)
        if waiting is not None:  # the call waits in a sub-agent's run: answer it there
            child, pending = waiting
            assert pending.run_id is not None
            answered = await child.confirm(
                pending.run_id,
                approve=approve,
                by=by,
                reason=reason,
                args=args,
                step=step,
                args_hash=args_hash,
                accept_tool_changes=accept_tool_changes,
            )
            if answered.status in (RunStatus.AWAITING_CONFIRMATION, RunStatus.RUNNING):
                return await self.result(run_id)  # it waits again, or a worker has it
            return await self.resume(run_id, by=by)  # the call adopts the child's outcome
        result = await self._session().apply(
            run_id,
            lambda state: commands.confirm(
                state,
                self.tools,
                approve=approve,
                by=by,
                reason=reason,
                args=args,
                step=step,
                bound_hash=args_hash,
                accept_tool_changes=accept_tool_changes,
                output_hash=self._output_hash,
                authorize=self.policy.authorize,
            ),
            advance=self.queue is None,
            wait_s=min(self.lease_s, CONFIRM_WAIT_S),
        )
        return await self._surfaced(self._typed(self._handed_off(result)))

    async def compensate(
        self, run_id: str, *, by: str, settle: Mapping[str, Settle] | None = None
    ) -> RunResult[OutputT]:
        """Undo a stopped run's committed effects, newest first, each at most once.

        Every committed call of a tool with ``@tool(compensate=...)`` is undone; the run
        then ends ``cancelled`` with a reason that lists what was undone and what could not
        be (tools without ``compensate``). A call whose own outcome is unknown is reconciled
        first, or put to a person; an undo that fails, or whose outcome is lost and cannot
        be reconciled, stops the run as ``needs_attention``: call ``compensate`` again (it
        goes on where it stopped), with ``settle`` for what a person found out. A run whose
        compensation began never advances again.

        An undo is governed like the call it undoes: ``Policy.authorize`` is asked about
        each (``pending.kind == "undo"``), and an undo of a call whose tool needs N
        approvals (``Policy.approvals``) needs N different people, each calling
        ``compensate`` (until then the run stops as ``needs_attention`` saying who
        approved). A completed run is undone only with ``Policy(compensate_completed=True)``.

        Args:
            by: who asks (recorded on each undo).
            settle: a person's word, by call id, on a call or an undo whose outcome is
                unknown: ``"done"`` (it happened) or ``"not_done"`` (it did not).

        Raises:
            RunError: the run is running or waiting for a person (cancel it first), it is
                completed and this agent's ``Policy.compensate_completed`` is not set, or
                ``settle`` names a call with nothing in doubt.
            NotAuthorizedError: ``Policy.authorize`` refuses ``by`` for an undo still to
                do (nothing recorded).
            AlreadyApprovedError: ``by`` approved every undo that waits for more people
                already (nothing recorded).
            RunBusyError: another worker holds the run.
            RunNotFoundError: no such run.
            ConfigurationError: ``by`` is empty, or the run id is invalid.
        """
        check_run_id(run_id)
        by = person_name(by)  # recorded normalised; see agentcore.approvals
        if not by:
            raise ConfigurationError("compensate() needs by=<who asks>; it is recorded.")
        check_text(by, "compensation's by")
        for call_id, word in (settle or {}).items():
            if word not in ("done", "not_done"):
                raise ConfigurationError(
                    f"settle[{call_id!r}] must be 'done' or 'not_done', got {word!r}"
                )
        return self._typed(
            await self._session().compensate(
                run_id, by=by, settle=dict(settle or {}), wait_s=min(self.lease_s, CONFIRM_WAIT_S)
            )
        )

    async def expire_approvals(self, *, limit: int = 1_000) -> list[RunResult[OutputT]]:
        """Apply ``Policy.approval_expiry`` to every waiting call whose approval window
        (``Policy.approval_ttl``) has passed: deny it (the run continues, the model is
        told) or escalate it (``on_pending`` hears of it, the window starts again). Run it
        periodically (a cron job, a Celery beat task, ``agentcore expire``); runs that
        another worker holds are left for the next pass, and runs of other agents sharing
        the store (a scope beyond this agent's tools) are left alone.

        Returns:
            The runs it changed, as they stand afterwards.
        """
        expired = await self._session().expire_approvals(
            time.time(), limit=limit, advance=self.queue is None
        )
        return [self._typed(self._handed_off(result)) for result in expired]

    async def cancel(
        self, run_id: str, *, by: str, reason: str | None = None
    ) -> RunResult[OutputT]:
        """End a run for good (status ``cancelled``), now or at its next safe point.

        With no live process advancing the run, the cancellation is recorded now (under
        the run's lease). If another process or task is advancing it, the request is
        recorded in the store and that process honours it at its next safe point: a tool
        that is running finishes and its outcome is recorded, then the cancellation;
        nothing is abandoned mid-call. A call that started and has no recorded outcome
        (its process died, or it timed out) gets a ``tool_finished`` saying its outcome is
        unknown before the cancellation, so no started call is ever silently dropped.

        Returns:
            The run's result. ``status`` is ``cancelled`` when the run is cancelled now;
            otherwise (the run is still ``running``, or paused) the request is recorded and
            the process advancing the run cancels it at its next safe point. A completed
            run is returned as it is.

        Raises:
            RunNotFoundError: no such run.
            ConfigurationError: ``by`` is empty, or the run id is invalid
                (:class:`LimitExceededError`).
        """
        check_run_id(run_id)
        by = person_name(by)  # recorded normalised; see agentcore.approvals
        if not by:
            raise ConfigurationError("cancel() needs by=<who cancels>; it is recorded.")
        check_text(by + (reason or ""), "cancellation's by/reason")
        return self._typed(await self._session().cancel(run_id, by=by, reason=reason))

    stream_confirm = StreamTwin(confirm)
    """:meth:`confirm`, streamed like :meth:`Agent.stream`."""
    confirm_sync = SyncTwin(confirm)
    """:meth:`confirm` for code without an event loop."""

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def _output_hash(self) -> str | None:
        """What runs of this agent pin in ``run_started.output_hash``."""
        return None if self._output is None else self._output.hash

    def _typed(self, result: RunResult[Any]) -> RunResult[OutputT]:  # Any: not decoded yet
        """``result`` with ``output`` set: a completed run's answer as this agent's output
        type (decoded from the canonical JSON the run recorded), else ``None``.

        Raises:
            OutputTypeChangedError: the answer does not validate as this agent's output
                type (the run was started by an agent with another one).
        """
        answer = result.answer
        if result.status is not RunStatus.COMPLETED or answer is None:
            return dataclasses.replace(result, output=None)
        if self._output is None:
            return dataclasses.replace(result, output=answer)
        try:
            value = self._output.decode(answer)
        except ValueError as exc:  # pydantic's ValidationError
            raise OutputTypeChangedError(
                f"Run {result.run_id} answered {answer[:200]!r}, which is not a "
                f"{self._output.name}: it was started by an agent with another output type. "
                "Read it with an agent whose output= is the one it started with."
            ) from exc
        return dataclasses.replace(result, output=value)

    async def _surfaced(self, result: RunResult[OutputT]) -> RunResult[OutputT]:
        """``result``, with the call a sub-agent's run waits on as its ``pending`` when the
        run stopped for that (one more read, only for a run in ``needs_attention`` of an
        agent with sub-agents)."""
        if result.status is not RunStatus.NEEDS_ATTENTION or not any(
            isinstance(t, SubagentTool) for t in self.tools.values()
        ):
            return result
        return await self.result(result.run_id)

    def _handed_off(self, result: RunResult) -> RunResult:
        """With a queue: enqueue a run that is ready to advance (after the lease is
        released, so the worker does not find it busy)."""
        if self.queue is not None and self.name and result.status is RunStatus.RUNNING:
            self.queue.enqueue(self.name, result.run_id)
        return result


def tool_table(tools: Sequence[Tool]) -> dict[str, Tool]:
    """An agent's tools by name.

    Raises:
        ConfigurationError: a plain function (not ``@tool``-decorated), or two tools with
            one name.
    """
    table: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]  # untyped callers pass plain functions
            raise ConfigurationError(
                f"{t!r} is not a tool: decorate it with @tool(effect=...) so its effect is "
                "explicit."
            )
        if t.name in table:
            raise ConfigurationError(f"Two tools are named {t.name!r}; tool names must be unique.")
        table[t.name] = t
    return table
