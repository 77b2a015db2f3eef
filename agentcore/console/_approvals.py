"""Approving or denying a waiting call from the console, then handing the run on.

Everything a person could get wrong is checked before anything is saved: the run exists and
waits for a person, the step and args hash are the ones the page showed, and edited
arguments are a JSON object valid against the tool's schema as recorded in the run's
``run_started``. Then the agent records the bound confirmation (``Agent.confirm`` checks
the binding again under the run's lease) and the run is handed on: to the agent's queue
when it has one (Celery, ...), otherwise to a background task of this process, so the
request returns at once and the page follows the run live.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue, TypeAdapter, ValidationError

from agentcore import (
    COMPENSATION_ENDINGS,
    UNDO_SUFFIX,
    Agent,
    PendingCall,
    RunResult,
    RunState,
    RunStatus,
    get_logger,
)
from agentcore.approvals import person_key
from agentcore.contracts.errors import (
    ConfigurationError,
    ConfirmationMismatchError,
    NotAuthorizedError,
    NotAwaitingConfirmationError,
    RunBusyError,
    RunError,
    RunNotFoundError,
    ToolManifestChangedError,
)
from agentcore.events import (
    Approval,
    CompensationStarted,
    Event,
    RunFinished,
    RunStarted,
    ToolFinished,
)
from agentcore.queue import InProcessQueue

__all__ = [
    "Answer",
    "Approvals",
    "ConsoleError",
    "compensable",
    "json_object",
    "pending_of",
    "undo_approved_by",
]

_COMPENSATED = COMPENSATION_ENDINGS[0]
"""How the reason of a run whose compensation ended begins."""

_UNDOABLE_FROM = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.CANCELLED,
        RunStatus.FAILED,
        RunStatus.BUDGET_EXHAUSTED,
        RunStatus.NEEDS_ATTENTION,
    }
)


def compensable(events: Sequence[Event]) -> bool:
    """Whether the run page offers to undo the run: it stopped, a call with an effect
    committed (or a compensation stopped half-way), and it was not compensated yet."""
    first, last = events[0], events[-1]
    if not isinstance(first, RunStarted):
        return False
    if isinstance(last, RunFinished) and (last.reason or "").startswith(_COMPENSATED):
        return False
    state = RunState.of(events)
    if state.status not in _UNDOABLE_FROM:
        return False
    if state.compensating:
        return True
    effects = {name: entry.get("effect") for name, entry in first.tools.items()}
    return any(
        isinstance(ev, ToolFinished) and ev.ok and effects.get(ev.tool, "read") != "read"
        for ev in events
    )


def undo_approved_by(events: Sequence[Event], user: str) -> bool:
    """Whether ``user`` approved every undo of the run that waits for more people (an
    undo approval with no ``compensation_started`` yet): their Compensate would only be
    refused as a second approval."""
    waiting: dict[str, set[str]] = {}
    started: set[str] = set()
    for ev in events:
        if isinstance(ev, Approval) and ev.call_id.endswith(UNDO_SUFFIX):
            waiting.setdefault(ev.call_id.removesuffix(UNDO_SUFFIX), set()).add(person_key(ev.by))
        elif isinstance(ev, CompensationStarted):
            started.add(ev.call_id)
    me = person_key(user)
    still = [who for call_id, who in waiting.items() if call_id not in started]
    return bool(still) and all(me in who for who in still)


class ConsoleError(Exception):
    """A request the console refuses: ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to a waiting call, as the console received it.

    Attributes:
        approve: approve or deny.
        step, args_hash: what the page showed; the decision is bound to them.
        args: edited arguments as JSON text (``None`` or blank: as proposed).
        reason: why (required to deny: the model reads it).
    """

    approve: bool
    step: int | None
    args_hash: str | None
    args: str | None = None
    reason: str | None = None


_OBJECT: TypeAdapter[dict[str, JsonValue]] = TypeAdapter(dict[str, JsonValue])


def json_object(text: str | bytes, what: str) -> dict[str, JsonValue]:
    """``text`` as a JSON object.

    Raises:
        ConsoleError: 422 naming ``what`` when it is not JSON or not an object.
    """
    try:
        return _OBJECT.validate_json(text)
    except ValidationError as exc:
        raise ConsoleError(422, f"{what} must be a JSON object: {exc.errors()[0]['msg']}.") from exc


def pending_of(events: Sequence[Event]) -> PendingCall | None:
    """The call the run waits on, folded from its events."""
    return RunState.of(events).pending()


class Approvals:
    """Confirms runs through their agents and advances them after.

    Args:
        agents: the agents whose runs the console may confirm, by name (a run started
            from the command line names its agent in ``metadata["agent"]``), or a list
            (named by ``Agent.name``).
    """

    def __init__(self, agents: Mapping[str, Agent] | Sequence[Agent]) -> None:
        if isinstance(agents, Mapping):
            self.agents: dict[str, Agent] = dict(agents)
        else:
            self.agents = {a.name or f"agent-{i}": a for i, a in enumerate(agents)}
        self._handing: dict[str, Agent] = {}
        self._queue = InProcessQueue(self._advance)
        self.log = get_logger()

    def agent_for(self, first: RunStarted) -> tuple[str, Agent]:
        """The agent the run names (``metadata["agent"]``), else the first that owns it
        (:meth:`Agent.owns`).

        Raises:
            ConsoleError: 409 when no agent of the console can run the call.
        """
        recorded = first.metadata.get("agent")
        if isinstance(recorded, str) and recorded in self.agents:
            return recorded, self.agents[recorded]
        for name, agent in self.agents.items():
            if agent.owns(first):
                return name, agent
        raise ConsoleError(
            409,
            f"No agent of this console has the tools of run {first.run_id}; start the console "
            "with the agent that owns them (create_app(agents=...), agentcore serve --agent).",
        )

    async def compensate(self, events: Sequence[Event], by: str) -> RunResult:
        """Undo the run's committed effects through the agent that owns its tools
        (``Agent.compensate``), as ``by``.

        Raises:
            ConsoleError: 409 (running, waiting, busy, in doubt, approved by ``by``
                already, a completed run the policy keeps: the error says what a person
                must do), 403 (``Policy.authorize`` refuses ``by`` for an undo), 404 (no
                such run), 422 (a bad argument).
        """
        first = events[0]
        assert isinstance(first, RunStarted)
        _, agent = self.agent_for(first)
        try:
            return await agent.compensate(first.run_id, by=by)
        except RunNotFoundError as exc:
            raise ConsoleError(404, str(exc)) from exc
        except NotAuthorizedError as exc:
            raise ConsoleError(403, str(exc)) from exc
        except RunError as exc:  # RunBusyError included
            raise ConsoleError(409, str(exc)) from exc
        except ConfigurationError as exc:
            raise ConsoleError(422, str(exc)) from exc

    async def decide(self, events: Sequence[Event], decision: Answer, by: str) -> RunResult:
        """Check ``decision`` against the run, record it, hand the run on.

        Raises:
            ConsoleError: 409 (not waiting, stale step or hash, busy, no agent, tools
                changed), 422 (bad edited arguments, a denial without a reason).
        """
        first = events[0]
        assert isinstance(first, RunStarted)
        pending = pending_of(events)
        if pending is None:
            raise ConsoleError(409, f"Run {first.run_id} is not waiting for a person.")
        if decision.step is None or (not decision.args_hash and pending.kind == "tool"):
            raise ConsoleError(
                422, "Give step and args_hash of the call you saw: a decision is bound to them."
            )
        if decision.step != pending.step or (
            pending.kind == "tool" and decision.args_hash != pending.args_hash
        ):
            raise ConsoleError(
                409,
                f"Run {first.run_id} now waits at step {pending.step} with args hash "
                f"{pending.args_hash}, not what you saw (step {decision.step}, hash "
                f"{decision.args_hash}); reload it. Nothing was recorded.",
            )
        reason = (decision.reason or "").strip() or None
        if not decision.approve and reason is None:
            raise ConsoleError(422, "Say why you deny the call: the model reads the reason.")
        args = self.edited_args(pending, decision.args) if decision.approve else None
        name, agent = self.agent_for(first)
        try:
            return await self._handing_agent(name, agent).confirm(
                first.run_id,
                approve=decision.approve,
                by=by,
                reason=reason,
                args=args,
                step=pending.step,
                args_hash=pending.args_hash,
            )
        except (NotAwaitingConfirmationError, ConfirmationMismatchError) as exc:
            raise ConsoleError(409, f"{exc} Reload the run.") from exc
        except (RunBusyError, ToolManifestChangedError) as exc:
            raise ConsoleError(409, str(exc)) from exc
        except RunNotFoundError as exc:
            raise ConsoleError(404, str(exc)) from exc
        except NotAuthorizedError as exc:
            raise ConsoleError(403, str(exc)) from exc
        except ConfigurationError as exc:
            if args is None:
                raise ConsoleError(422, str(exc)) from exc
            raise ConsoleError(  # the command validated the edit, as it does for every caller
                422,
                f"The edited arguments do not fit {pending.tool!r}'s schema and policies: "
                f"{exc} Nothing was recorded.",
            ) from exc

    @staticmethod
    def edited_args(pending: PendingCall, text: str | None) -> dict[str, Any] | None:  # Any: JSON
        """The edited arguments as a JSON object, for ``Agent.confirm`` to validate (the
        tool's schema and argument policies, as for any caller); ``None`` when there are
        none or they equal the proposed ones.

        Raises:
            ConsoleError: 422 for text that is not a JSON object, or an edit of a plan.
        """
        if text is None or not text.strip():
            return None
        if pending.kind != "tool" or pending.tool is None:
            raise ConsoleError(422, "Only a tool call's arguments can be edited, not a plan's.")
        edited = json_object(text, "The edited arguments")
        return None if edited == pending.args else edited

    def _handing_agent(self, name: str, agent: Agent) -> Agent:
        """``agent`` itself when it has a queue; otherwise a copy whose queue is a task of
        this process, so ``confirm`` records, releases the run and returns at once."""
        if agent.queue is not None:
            return agent
        found = self._handing.get(name)
        if found is None:
            _ = agent.store  # opened once, shared by the copy
            found = copy.copy(agent)
            found.name = name
            found.queue = self._queue
            self._handing[name] = found
        return found

    async def _advance(self, name: str, run_id: str) -> None:
        agent = self.agents[name]
        try:
            result = await agent.advance(run_id)
            while result.status is RunStatus.RUNNING:
                result = await agent.advance(run_id)
        except RunBusyError:
            pass  # another worker advances it
        except Exception:  # a background task: say so instead of dying unseen
            # The transcript keeps everything up to the failure: the run can be resumed.
            self.log.exception("console_advance_failed", run_id=run_id)

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Wait up to ``grace_s`` for runs being advanced, then cancel them (a cancelled
        run stays resumable from its transcript)."""
        with contextlib.suppress(TimeoutError):  # the timeout cancels the gathered turns
            await asyncio.wait_for(self._queue.drain(), grace_s)
