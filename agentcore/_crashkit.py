"""The crash kit behind :func:`agentcore.testing.crash_test`: a user's tool run under a real
SIGKILL at each durability boundary, the run resumed by a fresh process, the effects counted.

The parent (:func:`crash_test`) starts two child processes per boundary, each
``python -m agentcore._crashkit <kill|recover> <spec as JSON>``, over a fresh SQLite store:

- ``kill`` runs a one-tool scripted agent (call the tool, then finish) with the boundary's
  crash point armed, so that the process SIGKILLs itself there. A destructive tool waits for
  a person first: the child approves it, and arms the point only for the confirmation when
  the boundary lies after the model's answer.
- ``recover`` resumes the run as any fresh worker would (approving again when the run waits
  for a person), checks the transcript and prints the outcome as one JSON line.

Between the children the parent asks the user's ``effects`` how many times the effect has
happened. POSIX only (the kill is a real SIGKILL).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, Literal, cast, get_args

from agentcore.contracts.errors import ConfigurationError

from . import _faults
from ._integrity import check_transcript
from ._state import RunResult, RunStatus
from .agent import Agent
from .errors import AgentcoreError
from .policy import Policy
from .tools import Tool

__all__ = ["BOUNDARIES", "Boundary", "BoundaryResult", "CrashReport", "crash_test", "load_tool"]

Boundary = Literal[
    "before_intent",
    "after_intent",
    "after_effect",
    "approval",
    "undo_before_intent",
    "undo_after_intent",
    "undo_after_effect",
]
"""Where the process is killed:

- ``before_intent``: the model asked for the call; nothing of it is recorded.
- ``after_intent``: the intent (``tool_started``) is durable; the tool has not run.
- ``after_effect``: the tool returned (its effect happened); its outcome is not recorded.
- ``approval``: a person's approval of a destructive call is durable; the process dies
  inside the commit of the intent it authorizes.
- ``undo_before_intent``, ``undo_after_intent``, ``undo_after_effect``: the same three
  points of the call's compensation (``@tool(compensate=...)``): the run completed, was
  compensated, and the process died before the undo's intent, after it (the undo not
  run), or after the undo (its outcome not recorded); the fresh process compensates again.
"""

BOUNDARIES: tuple[Boundary, ...] = get_args(Boundary)

_POINTS: dict[Boundary, str] = {
    "before_intent": "after_model_response",
    "after_intent": "after_intent_commit",
    "after_effect": "after_tool_return",
    # The confirming process appends the approval on its own, then the intent: the second
    # append of that process.
    "approval": "in_append_transaction:2",
    "undo_before_intent": "before_compensation_intent",
    "undo_after_intent": "after_compensation_intent",
    "undo_after_effect": "after_compensation_effect",
}
_UNDO: tuple[Boundary, ...] = ("undo_before_intent", "undo_after_intent", "undo_after_effect")
_BY = "crash-kit"
_ANSWER = "The call is done."
_TIMEOUT_S = 120.0


def load_tool(ref: str) -> Tool:
    """The :class:`~agentcore.Tool` that ``ref`` (``"module:attribute"``) names.

    Raises:
        ConfigurationError: ``ref`` is not ``module:attribute``, or does not name a tool.
    """
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(
            f"A tool reference is 'module:attribute' (as in 'myapp.tools:refund'), not {ref!r}."
        )
    found: object = import_module(module_name)
    for part in attr.split("."):
        found = getattr(found, part)
    if not isinstance(found, Tool):
        raise ConfigurationError(
            f"{ref!r} is a {type(found).__name__}, not a tool; decorate the function with @tool."
        )
    return found


@dataclass(frozen=True)
class BoundaryResult:
    """What happened to one run killed at one boundary and resumed by a fresh process.

    Attributes:
        boundary: where the process was killed (see :data:`Boundary`).
        crash_point: agentcore's crash point for it (``AGENTCORE_CRASH_AT``'s value).
        run_id: the run's id; the call's idempotency key is ``f"{run_id}:1"``.
        killed: the process died of SIGKILL there (otherwise the boundary was never reached).
        recorded_at_kill: the types of the events durable when the process died, in order.
        effects_at_kill: how many times the effect had happened when the process died.
        effects: how many times it happened in all, after the fresh process resumed the run.
        approvals_on_resume: how many times the resumed run waited for a person (and was
            approved); a call whose approval was durable before the kill is not asked again.
        status: the run's status after the resume (``None`` when the resume raised).
        reason: why the run stopped, when it did not complete (or the resume's error).
        transcript_problems: what :func:`~agentcore.check_transcript` found (none: sound).
        undos_at_kill, undos: for the ``undo_*`` boundaries, how many times the effect had
            been undone when the process died, and in all.
    """

    boundary: Boundary
    crash_point: str
    run_id: str
    killed: bool
    recorded_at_kill: tuple[str, ...]
    effects_at_kill: int
    effects: int
    approvals_on_resume: int
    status: RunStatus | None
    reason: str | None
    transcript_problems: tuple[str, ...]
    undos_at_kill: int = 0
    undos: int = 0

    def problems(self) -> list[str]:
        """Why this boundary breaks the at-most-once promise, in words; none when it holds.

        It holds when the process was killed, the transcript is sound, and either the run
        completed with the effect made exactly once, or it stopped as ``needs_attention``
        (a person decides) with the effect made at most once. At an ``undo_*`` boundary the
        effect must have been made once, and the same holds of the undo, with the run
        ending compensated (``cancelled``) instead of completed.
        """
        found: list[str] = []
        if not self.killed:
            found.append(f"the process was never killed at {self.crash_point}")
        if self.boundary in _UNDO:
            if self.effects != 1:
                found.append(f"the effect was made {self.effects} times, not once")
            done, ended, count, what = RunStatus.CANCELLED, "was compensated", self.undos, "undone"
        else:
            done, ended, count, what = RunStatus.COMPLETED, "completed", self.effects, "made"
        if self.status is done and count != 1:
            found.append(f"the run {ended} with the effect {what} {count} times, not once")
        elif self.status is RunStatus.NEEDS_ATTENTION and count > 1:
            found.append(f"the effect was {what} {count} times before a person was asked")
        elif self.status not in (done, RunStatus.NEEDS_ATTENTION):
            status = self.status.value if self.status else "an error"
            found.append(f"the resumed run ended as {status}: {self.reason}")
        found += [f"transcript: {p}" for p in self.transcript_problems]
        return found

    @property
    def ok(self) -> bool:
        """The promise holds at this boundary (see :meth:`problems`)."""
        return not self.problems()


@dataclass(frozen=True)
class CrashReport:
    """The outcome of :func:`~agentcore.testing.crash_test`: one result per boundary.

    Attributes:
        tool: the tool's reference (``"module:attribute"``).
        results: one :class:`BoundaryResult` per boundary, in the order run.
    """

    tool: str
    results: tuple[BoundaryResult, ...]

    def __getitem__(self, boundary: Boundary) -> BoundaryResult:
        for result in self.results:
            if result.boundary == boundary:
                return result
        raise KeyError(f"{boundary!r} was not tested; tested: {[r.boundary for r in self]}")

    def __iter__(self) -> Iterator[BoundaryResult]:
        return iter(self.results)

    def __str__(self) -> str:
        lines = [f"crash test of {self.tool}:"]
        for r in self.results:
            status = r.status.value if r.status else "error"
            verdict = "ok" if r.ok else "BROKEN: " + "; ".join(r.problems())
            undos = f" undos={r.undos_at_kill}->{r.undos}" if r.boundary in _UNDO else ""
            lines.append(
                f"  {r.boundary:<18} killed={'yes' if r.killed else 'no':<3} "
                f"effects={r.effects_at_kill}->{r.effects}{undos} status={status:<15} {verdict}"
            )
        return "\n".join(lines)

    def assert_at_most_once(self) -> None:
        """Fail unless the promise holds at every boundary tested.

        Raises:
            AssertionError: a boundary where the effect happened twice, a completed run
                without it, a process never killed, or an unsound transcript; the message
                is the whole report.
        """
        if not all(r.ok for r in self.results):
            raise AssertionError(f"the tool is not at-most-once under a crash\n{self}")


def crash_test(
    tool: str,
    args: Mapping[str, Any],  # Any: JSON arguments, validated by the tool
    *,
    effects: Callable[[], int],
    boundaries: Sequence[Boundary] | None = None,
    env: Mapping[str, str] | None = None,
    undone: Callable[[], int] | None = None,
) -> CrashReport:
    """Prove a tool at-most-once: kill a real process at each durability boundary of one
    call, resume the run in a fresh process, and count how many times the effect happened.

    Per boundary, over a fresh SQLite store: a child process runs a one-tool agent (the
    model calls ``tool`` with ``args``, then finishes) and SIGKILLs itself at the boundary;
    a second child resumes the run as any worker would, with the tool's ``idempotent`` and
    ``reconcile`` as declared, and approves the call when it waits for a person. Each run
    has an id of its own, fresh on every invocation (``crash-<boundary>-<random hex>``), so
    each call its own idempotency key (``f"{run_id}:1"``): the kit can run again and again
    against one ledger, one test database or one provider's sandbox.

    The children import the tool by reference and see this process's import path, working
    directory and environment (plus ``env``): point the tool at a test's ledger, database
    or server through them. POSIX only.

    Args:
        tool: the tool as ``"module:attribute"`` (a child process rebuilds it from there).
        args: the call's arguments.
        effects: how many times the effect has happened so far, read from the system the
            tool acts on (rows in a table, lines in a ledger, requests a fake server saw);
            called before and after each child, so a running count is enough.
        boundaries: which of :data:`~agentcore.testing.BOUNDARIES` to test (default all
            that apply; ``approval`` only to a destructive tool). Each costs two processes.
        env: environment variables for the children, on top of this process's.
        undone: how many times the effect has been undone so far (for a tool with
            ``compensate``): with it, the ``undo_*`` boundaries are tested too (the run
            completes, is compensated, and the compensating process is killed).

    Returns:
        The report; :meth:`CrashReport.assert_at_most_once` fails a test on a double
        effect, a completed run without the effect, or an unsound transcript.

    Raises:
        ConfigurationError: ``tool`` does not name a tool, or a boundary does not apply.

    Example:
        >>> report = crash_test(  # doctest: +SKIP
        ...     "myapp.tools:refund", {"order_id": "A-1"}, effects=lambda: count_refunds()
        ... )
        >>> report.assert_at_most_once()  # doctest: +SKIP
    """
    found = load_tool(tool)
    destructive = found.spec.effect == "destructive"
    chosen = (
        tuple(boundaries)
        if boundaries is not None
        else _default_boundaries(destructive, found.compensation is not None and undone is not None)
    )
    for boundary in chosen:
        if boundary in _UNDO and (found.compensation is None or undone is None):
            raise ConfigurationError(
                f"The {boundary} boundary needs a tool with compensate= and undone= (how many "
                "times the effect was undone) to count with."
            )
        if boundary not in BOUNDARIES:
            raise ConfigurationError(
                f"Unknown boundary {boundary!r}. Valid boundaries: {', '.join(BOUNDARIES)}."
            )
        if boundary == "approval" and not destructive:
            raise ConfigurationError(
                f"The approval boundary needs a tool that waits for a person; "
                f"{found.name!r} has effect={found.spec.effect!r}, not 'destructive'."
            )
    child_env = _child_env(env)
    with tempfile.TemporaryDirectory(prefix="agentcore-crashkit-") as tmp:
        results = tuple(
            _one(Path(tmp), tool, dict(args), boundary, effects, undone, child_env)
            for boundary in chosen
        )
    return CrashReport(tool, results)


def _default_boundaries(destructive: bool, undoes: bool) -> tuple[Boundary, ...]:
    return tuple(
        b for b in BOUNDARIES if (b != "approval" or destructive) and (b not in _UNDO or undoes)
    )


def _child_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The parent's environment and import path, no crash point of its own."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTCORE_CRASH_AT"}
    env.update(extra or {})
    paths = [os.path.abspath(p or os.curdir) for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _one(
    tmp: Path,
    tool: str,
    args: dict[str, Any],  # Any: JSON arguments
    boundary: Boundary,
    effects: Callable[[], int],
    undone: Callable[[], int] | None,
    env: dict[str, str],
) -> BoundaryResult:
    # Fresh on every invocation: the system the tool acts on outlives the kit's store, and a
    # tool that reconciles by key would find an earlier invocation's effect under a reused one.
    run_id = f"crash-{boundary.replace('_', '-')}-{uuid.uuid4().hex[:12]}"
    spec = {
        "tool": tool,
        "args": args,
        "db": str(tmp / f"{run_id}.db"),
        "run_id": run_id,
        "boundary": boundary,
    }
    base = effects()
    undo_base = undone() if undone is not None else 0
    killed = _child("kill", spec, env)
    at_kill = effects() - base
    undos_at_kill = undone() - undo_base if undone is not None else 0
    recovered = _child("recover", spec, env)
    out = _last_json(recovered.stdout)
    status = out.get("status")
    return BoundaryResult(
        boundary=boundary,
        crash_point=_POINTS[boundary],
        run_id=run_id,
        killed=killed.returncode == -signal.SIGKILL,
        recorded_at_kill=tuple(out.get("recorded_at_kill", ())),
        effects_at_kill=at_kill,
        effects=effects() - base,
        approvals_on_resume=int(out.get("approvals", 0)),
        status=RunStatus(status) if isinstance(status, str) else None,
        reason=out.get("reason") or out.get("error") or _tail(recovered.stderr),
        transcript_problems=tuple(out.get("problems", ())),
        undos_at_kill=undos_at_kill,
        undos=undone() - undo_base if undone is not None else 0,
    )


def _child(cmd: str, spec: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentcore._crashkit", cmd, json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=_TIMEOUT_S,
        check=False,
    )


def _last_json(stdout: str) -> dict[str, Any]:  # Any: the child's JSON
    lines = stdout.strip().splitlines()
    try:
        found: object = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return {}
    return cast("dict[str, Any]", found) if isinstance(found, dict) else {}  # the child's JSON


def _tail(text: str) -> str | None:
    return text.strip()[-2000:] or None


# -- the child process -------------------------------------------------------------------------


async def _kill(spec: dict[str, Any]) -> RunResult:  # Any: the spec's JSON
    """Run the call with the boundary's crash point armed; returns only if never killed."""
    agent, tool = _agent(spec)
    point = _POINTS[spec["boundary"]]
    waits = tool.spec.effect == "destructive"
    undo = spec["boundary"] in _UNDO
    try:
        if not undo and (not waits or spec["boundary"] == "before_intent"):
            _faults.arm(point)
        result = await agent.run("Make the call once.", run_id=spec["run_id"])
        if result.status is RunStatus.AWAITING_CONFIRMATION:
            if not undo:
                _faults.arm(point)
            result = await agent.confirm(spec["run_id"], approve=True, by=_BY)
        if undo:  # the call is done: now undo it, and die in the middle
            _faults.arm(point)
            result = await agent.compensate(spec["run_id"], by=_BY)
        return result
    finally:
        await agent.close()


async def _recover(spec: dict[str, Any]) -> dict[str, Any]:  # Any: JSON in and out
    """Resume the run as a fresh worker, approving what waits; the outcome as JSON."""
    agent, _ = _agent(spec)
    run_id = spec["run_id"]
    try:
        recorded = [ev.type for ev in await agent.transcript(run_id)]
        if spec["boundary"] in _UNDO:
            result = await agent.compensate(run_id, by=_BY)
        else:
            result = await agent.resume(run_id)
        approvals = 0
        while result.status is RunStatus.AWAITING_CONFIRMATION and approvals < 3:
            approvals += 1  # the call was never approved, or its approval was lost
            result = await agent.confirm(run_id, approve=True, by=_BY)
        problems = check_transcript(await agent.transcript(run_id))
    finally:
        await agent.close()
    return {
        "status": result.status.value,
        "reason": result.reason,
        "problems": problems,
        "recorded_at_kill": recorded,
        "approvals": approvals,
    }


def _agent(spec: dict[str, Any]) -> tuple[Agent, Tool]:  # Any: the spec's JSON
    from agentcore.adapters import ScriptedModel

    tool = load_tool(spec["tool"])
    action = {"type": "tool", "thought": "Make the call.", "tool": tool.name, "args": spec["args"]}
    finish = {"type": "finish", "thought": "The call is done.", "answer": _ANSWER}
    # As agentcore.testing.scripted_agent builds it (that module imports this one).
    agent = Agent(
        tools=[tool],
        model=ScriptedModel([action, finish]),
        # The undo boundaries compensate the completed run: the kit allows that explicitly.
        policy=Policy(plan_before_writes=False, compensate_completed=True),
        store=f"sqlite:///{spec['db']}",
    )
    return agent, tool


def main(argv: Sequence[str]) -> int:
    """``kill`` or ``recover`` (see the module docstring); prints one JSON line."""
    if len(argv) != 2 or argv[0] not in ("kill", "recover"):
        raise SystemExit(__doc__)
    spec = json.loads(argv[1])
    try:
        if argv[0] == "kill":
            result = asyncio.run(_kill(spec))
            out: dict[str, Any] = {"status": result.status.value, "reason": result.reason}
        else:
            out = asyncio.run(_recover(spec))
    except AgentcoreError as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
