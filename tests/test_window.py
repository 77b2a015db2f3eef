"""The window rule (issue 37): a long run's requests stay within ``Budget.max_request_tokens``
by showing older tool results as stubs, the transcript keeps every result whole, and a run
continued by another process sends the same requests byte for byte."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, tool
from agentcore._window import BLOCK_STEPS, CHARS_PER_TOKEN, KEEP_LAST_STEPS, estimate, fit
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import ToolFinished
from agentcore.testing import call, finish, plan

PAGE = "x" * 1_990  # a tool result of about 2,000 characters


@tool(effect="read")
def read_page(n: int) -> str:
    """Read one page of the log.

    Args:
        n: the page number.
    """
    return f"page {n}: {PAGE}"


@tool(effect="destructive")
def purge(n: int) -> str:
    """Purge one page of the log.

    Args:
        n: the page number.
    """
    return f"purged {n}"


def _result(step: int, size: int = 2_000) -> list[Message]:
    return [
        Message("assistant", f'{{"type":"tool","step":{step}}}', call_id=f"c{step}"),
        Message("user", f"[c{step}] read_page returned: " + "y" * size, call_id=f"c{step}"),
    ]


def _history(steps: int) -> list[Message]:
    return [
        Message("user", "Task: read the log"),
        *(m for s in range(1, steps + 1) for m in _result(s)),
    ]


def test_under_the_budget_nothing_is_elided() -> None:
    messages = _history(5)
    fitted = fit("system", messages, 10_000)
    assert fitted.fits and (fitted.cut, fitted.dropped) == (0, 0)
    assert fitted.messages == tuple(messages)
    assert fit("system", messages, None).messages == tuple(messages)


def test_older_results_are_elided_by_whole_blocks_and_the_latest_stay() -> None:
    messages = _history(40)
    whole = estimate("system", messages)
    fitted = fit("system", messages, whole // 2)
    assert fitted.fits and fitted.tokens <= whole // 2
    assert fitted.cut % BLOCK_STEPS == 0 and fitted.cut > 0 and fitted.dropped == 0
    for m in fitted.messages:
        if m.role == "user" and m.content.startswith("[c"):
            step = int(m.content[2 : m.content.index("]")])
            assert ("elided" in m.content) == (step < fitted.cut)
            if step < fitted.cut:
                assert m.content.startswith(f"[c{step}] read_page returned: (elided: 2000 ")
                assert "call read_page again" in m.content
    assert fit("system", messages, whole // 2) == fitted  # deterministic


def test_older_steps_are_left_out_whole_when_eliding_results_is_not_enough() -> None:
    messages = _history(200)
    fitted = fit("system", messages, 2_000)
    # a budget this tight leaves only the latest steps: the last resort, off the block grid
    assert fitted.fits and 200 - BLOCK_STEPS <= fitted.dropped <= 200 - KEEP_LAST_STEPS + 1
    assert fitted.messages[0].content == "Task: read the log"  # the task is always shown
    note = fitted.messages[1].content
    assert note.startswith(f"(Steps 1 to {fitted.dropped - 1} are not shown")
    shown = {int(m.call_id[1:]) for m in fitted.messages if m.call_id}
    assert shown == set(range(fitted.dropped, 201))
    # every shown step keeps its action and its result together (native tool-call pairs)
    for step in shown:
        roles = [m.role for m in fitted.messages if m.call_id == f"c{step}"]
        assert roles == ["assistant", "user"]


def test_the_latest_steps_are_never_elided_and_a_request_that_cannot_fit_says_so() -> None:
    messages = _history(10)
    fitted = fit("system", messages, 10)
    assert not fitted.fits
    kept = [m for m in fitted.messages if m.role == "user" and "elided" not in m.content]
    steps = {int(m.content[2 : m.content.index("]")]) for m in kept if m.content.startswith("[c")}
    assert steps == set(range(10 - KEEP_LAST_STEPS + 1, 11))


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, float("nan"), "100"])
def test_a_bad_request_budget_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_request_tokens"):
        Budget(max_request_tokens=bad)  # type: ignore[arg-type]  # hostile input


async def test_a_200_step_run_stays_within_its_request_budget_and_keeps_every_result() -> None:
    budget = 20_000
    script = [call("read_page", n=i) for i in range(1, 201)] + [finish("read")]
    model = ScriptedModel(script)
    agent = Agent(tools=[read_page], model=model, store="memory://")
    try:
        result = await agent.run(
            "Read the log", budget=Budget(max_steps=250, max_request_tokens=budget)
        )
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()
    assert result.status is RunStatus.COMPLETED, result.reason
    assert len(model.requests) == 201
    sizes = [estimate(r.system, r.messages) for r in model.requests]
    assert max(sizes) <= budget
    unbounded = sum(len(str(ev.result)) for ev in events if isinstance(ev, ToolFinished))
    assert unbounded // CHARS_PER_TOKEN > 6 * budget  # ~133k tokens without the rule
    results = [ev for ev in events if isinstance(ev, ToolFinished)]
    assert len(results) == 200 and all(len(str(ev.result)) > 1_990 for ev in results)
    # the prefix a provider caches breaks only where the window moves (once a block)
    breaks = 0
    for before, after in itertools.pairwise(model.requests):
        kept = list(before.messages)[:-1]  # the last message ends with the status note
        if list(after.messages)[: len(kept)] != kept:
            breaks += 1
    assert 0 < breaks <= 200 // BLOCK_STEPS + 2  # measured: 23 in 200 requests


async def test_a_run_continued_by_another_agent_sends_the_same_requests(tmp_path: Path) -> None:
    """The rule reads only the transcript and the recorded budget: continued from the store
    (snapshots and their rendered history included), the requests are the same bytes as
    those of the run continued in the process that paused it."""
    script = [
        *(call("read_page", n=i) for i in range(1, 31)),
        plan("purge page 3"),
        call("purge", n=3),
        *(call("read_page", n=i) for i in range(31, 41)),
        finish("done"),
    ]
    budget = Budget(max_steps=100, max_request_tokens=6_000)
    seen: dict[str, list[tuple[str, list[Message]]]] = {}
    for how in ("same process", "another agent"):
        store = f"sqlite:///{tmp_path / how.replace(' ', '_')}.db"
        first = ScriptedModel(script)
        agent = Agent(
            tools=[read_page, purge],
            model=first,
            store=store,
            snapshot_every=16,
            policy=Policy(),
        )
        try:
            paused = await agent.run("Read the log", budget=budget, run_id="window-run")
            assert paused.status is RunStatus.AWAITING_CONFIRMATION, paused.reason
            if how == "same process":
                done = await agent.confirm(paused.run_id, approve=True, by="alice")
                later = first.requests[len(first.requests) - 11 :]
        finally:
            await agent.close()
        if how == "another agent":
            second = ScriptedModel(script)
            other = Agent(tools=[read_page, purge], model=second, store=store, snapshot_every=16)
            try:
                done = await other.confirm(paused.run_id, approve=True, by="alice")
            finally:
                await other.close()
            later = second.requests
        assert done.status is RunStatus.COMPLETED, done.reason
        assert len(later) == 11
        seen[how] = [(r.system, list(r.messages)) for r in later]
        assert any("elided" in m.content for _, msgs in seen[how] for m in msgs)
    assert seen["same process"] == seen["another agent"]


async def test_a_request_that_cannot_fit_stops_the_run_and_a_larger_budget_continues_it() -> None:
    """Through the public API: a task too long for the request budget is not sent (the run
    stops as budget_exhausted, naming the estimate and the budget); resumed with a larger
    budget, it runs."""
    model = ScriptedModel([call("read_page", n=1), finish("read")])
    agent = Agent(tools=[read_page], model=model, store="memory://")
    try:
        task = "Read the log. " + "Context: " + "z" * 4_000
        stopped = await agent.run(task, budget=Budget(max_request_tokens=500))
        assert stopped.status is RunStatus.BUDGET_EXHAUSTED
        assert "max_request_tokens (500)" in (stopped.reason or "")
        assert model.requests == []  # nothing was sent
        done = await agent.resume(stopped.run_id, budget=Budget(max_request_tokens=50_000))
    finally:
        await agent.close()
    assert done.status is RunStatus.COMPLETED, done.reason
    assert len(model.requests) == 2
