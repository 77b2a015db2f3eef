"""An agent's parts: its configuration, and the operations on its runs.

:class:`~agentcore.agent.Agent` is a facade over two parts it holds. A
:class:`~agentcore._configuration.Configuration` is what ``Agent(...)`` was given,
checked. :class:`RunOperations` is what is done to the agent's runs (starting, advancing
and resuming them, reading them, and what people decide about them); it owns the agent's
store and the one :class:`~agentcore._run.Session` built from the configuration and that
store. The agent's public methods check their arguments (a person's name through
:func:`person`, the one place that checks one) and hand over; each operation asks a pure
command (``_run._commands``) for the events that carry it out and gives them to the
session, which records them under the run's lease and continues the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any, Generic

from agentcore.contracts import check_text
from agentcore.contracts.errors import (
    ConfigurationError,
    NotAcceptingRepliesError,
    OutputTypeChangedError,
    RunBusyError,
)

from ._configuration import Configuration
from ._run import (
    NewRun,
    Session,
    Settle,
    Shift,
    commands,
    refuse_rerun_while_running,
)
from ._run._quota import charge_approvals
from ._state import OutputT, RunResult, RunState, RunStatus
from ._subagent import child_waiting
from .approvals import person_name
from .events import Event
from .policy import Budget
from .stores import TranscriptStore, open_store
from .tools import Tool

__all__ = ["CONFIRM_WAIT_S", "RunOperations", "person", "tool_table"]

CONFIRM_WAIT_S = 10.0
"""How long ``confirm`` waits for a run another worker holds (another person's answer
being recorded) before it raises ``RunBusyError``."""


def person(by: str, method: str) -> str:
    """``by`` as it is recorded (:func:`~agentcore.approvals.person_name`): the one check
    of a person's name that every method taking ``by`` makes.

    Raises:
        ConfigurationError: ``by`` names nobody (empty once normalised).
        LimitExceededError: ``by`` cannot be recorded.
    """
    name = person_name(by)
    if not name:
        raise ConfigurationError(
            f"{method}() needs by=<a person's name>; it is recorded, got {by!r}."
        )
    check_text(name, f"{method}()'s by")
    return name


class RunOperations(Generic[OutputT]):
    """What is done to an agent's runs, with its arguments checked by the agent.

    Args:
        config: the agent's configuration.
        store: a store already open for it (a clone's, a run tree's), else ``None``: it
            opens ``config.store`` on first use.
    """

    def __init__(self, config: Configuration, store: TranscriptStore | None = None) -> None:
        self.config = config
        given = None if isinstance(config.store, str | None) else config.store
        self._store = store if store is not None else given
        self._session: Session | None = None

    @property
    def opened(self) -> TranscriptStore | None:
        """The store, if it is open."""
        return self._store

    @property
    def store(self) -> TranscriptStore:
        """The transcript store (opened on first use)."""
        if self._store is None:
            url = self.config.store
            self._store = open_store(url if isinstance(url, str) else None)
        return self._store

    @property
    def session(self) -> Session:
        """What loading, owning and advancing the agent's runs needs: built once, when the
        store is first used."""
        if self._session is None:
            config = self.config
            self._session = Session(
                config.setup(self.store), config.owner, config.lease_s, config.policy, config.name
            )
        return self._session

    async def close(self) -> None:
        """Close the store if the agent opened it."""
        if self._store is not None and isinstance(self.config.store, str | None):
            await self._store.close()
            self._store = None
            self._session = None

    # -- starting and advancing runs -------------------------------------------------------

    async def run(self, new: NewRun) -> RunResult[OutputT]:
        """``Agent.run``."""
        session = self.session
        begun = await session.start(new)
        if isinstance(begun, RunResult):  # the run exists: read as result() reads it
            return await self.result(begun.run_id)
        state, history = begun
        try:
            async with session.owned(state.run_id) as own:
                result = self._typed(await session.drive(own, state, history))
            return await self._surfaced(result)
        except RunBusyError:
            return await self.result(state.run_id)  # someone resumed it already

    async def submit(self, new: NewRun) -> str:
        """``Agent.submit``."""
        begun = await self.session.start(new)
        if isinstance(begun, RunResult):
            return begun.run_id
        self._handed_off(begun[0].result())
        return begun[0].run_id

    async def advance(self, run_id: str, shift: Shift) -> RunResult[OutputT]:
        """``Agent.advance``."""
        config, session = self.config, self.session
        async with session.owned(run_id) as own:
            state, history = await session.load(run_id)
            if state.status is not RunStatus.RUNNING:
                return self._typed(commands.read(state, config.output_hash))
            first = commands.advance(
                state,
                config.tools,
                worker=config.owner,
                taken_over=own.lease.taken_over is not None,
                output_hash=config.output_hash,
            )
            return self._typed(await session.drive(own, state, history, first, shift=shift))

    async def resume(
        self, run_id: str, budget: Budget | None, by: str | None, accept_tool_changes: bool
    ) -> RunResult[OutputT]:
        """``Agent.resume``, ``by`` checked."""
        config, session = self.config, self.session
        state, history = await session.load(run_id)
        if not commands.needs_continuing(state, by):
            return self._typed(commands.read(state, config.output_hash))
        try:
            async with session.owned(run_id) as own:
                await session.catch_up(state, history)  # what others wrote before we owned it
                if not commands.needs_continuing(state, by):
                    return self._typed(commands.read(state, config.output_hash))
                first = commands.resume(
                    state,
                    config.tools,
                    taken_over=own.lease.taken_over is not None,
                    budget=budget,
                    by=by,
                    accept_tool_changes=accept_tool_changes,
                    output_hash=config.output_hash,
                )
                result = await session.drive(
                    own, state, history, first, advance=config.queue is None
                )
        except RunBusyError:  # another worker has it
            return self._typed(commands.read(state, config.output_hash))
        return await self._surfaced(self._typed(self._handed_off(result)))

    async def reply(
        self, run_id: str, message: commands.Reply, wait_s: float
    ) -> RunResult[OutputT]:
        """``Agent.reply``: record the user's message under the run's lease (waiting up to
        ``wait_s`` for a turn in progress, or another reply's, to end), then advance it."""
        config, session = self.config, self.session
        give_up = time.monotonic() + wait_s
        pause = 0.05
        while True:
            try:
                result = await session.execute(
                    run_id,
                    lambda state: commands.reply(state, message, output_hash=config.output_hash),
                    advance=config.queue is None,
                    wait_s=max(0.0, give_up - time.monotonic()),
                )
                break
            except commands.TurnInProgressError as exc:
                if config.queue is None or time.monotonic() >= give_up:
                    raise NotAcceptingRepliesError(
                        f"{exc} The process advancing it stopped, or it did not end within "
                        f"{wait_s:g} s: resume it (agentcore resume {run_id}), then reply."
                        if config.queue is None
                        else f"{exc} It did not end within {wait_s:g} s; reply again later."
                    ) from None
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
        return await self._surfaced(self._typed(self._handed_off(result)))

    # -- reading runs -----------------------------------------------------------------------

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """``Agent.result``: the pin compared, a sub-agent's waiting call surfaced."""
        state, _ = await self.session.load(run_id)
        result = self._typed(commands.read(state, self.config.output_hash))
        waiting = await child_waiting(self.config.tools, state)
        return result if waiting is None else dataclasses.replace(result, pending=waiting[1])

    async def transcript(self, run_id: str) -> list[Event]:
        """``Agent.transcript``."""
        return await self.store.load(run_id)

    # -- what people decide ---------------------------------------------------------------

    async def confirm(self, run_id: str, answer: commands.Answer) -> RunResult[OutputT]:
        """``Agent.confirm``, ``by`` and ``reason`` checked."""
        config, session = self.config, self.session
        state, _ = await session.load(run_id)
        waiting = await child_waiting(config.tools, state)
        if waiting is not None:  # the call waits in a sub-agent's run: answer it there
            child, pending = waiting
            assert pending.run_id is not None
            answered = await child.confirm(pending.run_id, **dataclasses.asdict(answer))
            return await self._after_child(run_id, answered, answer.by)

        def command(state: RunState) -> Sequence[Event]:
            events = commands.confirm(
                state,
                config.tools,
                answer,
                output_hash=config.output_hash,
                authorize=config.policy.authorize,
            )
            if not config.quotas:
                return events
            return charge_approvals(events, state, config.quotas, config.tools, config.clock())

        result = await session.execute(
            run_id,
            command,
            advance=config.queue is None,
            wait_s=min(config.lease_s, CONFIRM_WAIT_S),
        )
        return await self._surfaced(self._typed(self._handed_off(result)))

    async def resolve(
        self,
        run_id: str,
        *,
        by: str,
        decision: commands.Settlement,
        result: Any,  # Any: the JSON result the lost call produced
        reason: str | None,
        accept_tool_changes: bool,
    ) -> RunResult[OutputT]:
        """``Agent.resolve``, its arguments checked."""
        config = self.config
        settled = await self.session.execute(
            run_id,
            lambda state: commands.resolve(
                state,
                config.tools,
                decision=decision,
                by=by,
                result=result,
                reason=reason,
                accept_tool_changes=accept_tool_changes,
                output_hash=config.output_hash,
            ),
            advance=config.queue is None,
            check=(
                functools.partial(refuse_rerun_while_running, self.store)
                if decision == "rerun"
                else None
            ),
        )
        return self._typed(self._handed_off(settled))

    async def compensate(
        self, run_id: str, *, by: str, settle: Mapping[str, Settle]
    ) -> RunResult[OutputT]:
        """``Agent.compensate``, its arguments checked."""
        wait_s = min(self.config.lease_s, CONFIRM_WAIT_S)
        return self._typed(
            await self.session.compensate(run_id, by=by, settle=dict(settle), wait_s=wait_s)
        )

    async def expire_approvals(self, *, limit: int) -> list[RunResult[OutputT]]:
        """``Agent.expire_approvals``."""
        expired = await self.session.expire_approvals(
            time.time(), limit=limit, advance=self.config.queue is None
        )
        return [self._typed(self._handed_off(result)) for result in expired]

    async def cancel(self, run_id: str, *, by: str, reason: str | None) -> RunResult[OutputT]:
        """``Agent.cancel``, ``by`` and ``reason`` checked."""
        return self._typed(await self.session.cancel(run_id, by=by, reason=reason))

    # -- a run tree: where a sub-agent's run waits on a person ----------------------------
    # (``result`` shows the child's waiting call as the run's ``pending``, via
    # ``child_waiting``; ``confirm`` answers it in the child, then comes here.)

    async def _after_child(
        self, run_id: str, answered: RunResult[Any], by: str
    ) -> RunResult[OutputT]:  # Any: the child's output type
        """The parent run after a person answered its child's waiting call: as it stands
        while the child waits again (or a worker has it), else resumed by that person (the
        call adopts the child's outcome)."""
        if answered.status in (RunStatus.AWAITING_CONFIRMATION, RunStatus.RUNNING):
            return await self.result(run_id)
        return await self.resume(run_id, None, by, False)

    async def _surfaced(self, result: RunResult[OutputT]) -> RunResult[OutputT]:
        """``result``, with the call a sub-agent's run waits on as its ``pending`` when the
        run stopped for that (one more read, only for a run in ``needs_attention`` of an
        agent with sub-agents)."""
        if result.status is not RunStatus.NEEDS_ATTENTION or not self.config.has_subagents:
            return result
        return await self.result(result.run_id)

    # -- plumbing ---------------------------------------------------------------------------

    def _typed(self, result: RunResult[Any]) -> RunResult[OutputT]:  # Any: not decoded yet
        """``result`` with ``output`` set: a completed run's answer as this agent's output
        type (decoded from the canonical JSON the run recorded), else ``None``.

        Raises:
            OutputTypeChangedError: the answer does not validate as this agent's output
                type (the run was started by an agent with another one).
        """
        answer = result.answer
        output = self.config.output
        if result.status is not RunStatus.COMPLETED or answer is None:
            return dataclasses.replace(result, output=None)
        if output is None:
            return dataclasses.replace(result, output=answer)
        try:
            value = output.decode(answer)
        except ValueError as exc:  # pydantic's ValidationError
            raise OutputTypeChangedError(
                f"Run {result.run_id} answered {answer[:200]!r}, which is not a "
                f"{output.name}: it was started by an agent with another output type. "
                "Read it with an agent whose output= is the one it started with."
            ) from exc
        return dataclasses.replace(result, output=value)

    def _handed_off(self, result: RunResult) -> RunResult:
        """With a queue: enqueue a run that is ready to advance (after the lease is
        released, so the worker does not find it busy)."""
        queue, name = self.config.queue, self.config.name
        if queue is not None and name and result.status is RunStatus.RUNNING:
            queue.enqueue(name, result.run_id)
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
