"""Every event type, in every view of the transcript.

An event type is declared once, as a member of :data:`agentcore.events.Event`
(:data:`~agentcore.events.EVENT_TYPES`). Each view of a transcript (the fold, the messages
the model reads, ``agentcore show``, the console's timeline, the snapshots, the integrity
check) ends its ``match`` with :func:`~agentcore.events.unhandled_event`, so pyright reports
a member without a case and, at run time, a view refuses an event type it has no case for.
``CONTRIBUTES`` says what each type contributes to each view, for the instance that
``every_event_type()`` builds: a type added to the union without a row here fails
``test_every_event_type_has_a_row``, and a view that drops a type fails its row.
"""

from __future__ import annotations

import asyncio
import html
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from agentcore import RunStatus, check_transcript
from agentcore import event_schemas as schemas
from agentcore._render import Renderer
from agentcore._snapshot import dump_state, load_state
from agentcore._state import RunState
from agentcore.cli._transcript import describe
from agentcore.console import create_app
from agentcore.console._timeline import entry, timeline
from agentcore.events import EVENT_TYPES, Event
from agentcore.stores import MemoryStore, SQLiteStore
from agentcore.stores.testing import every_event_type

RUN = "every-type"


@dataclass(frozen=True)
class Contribution:
    """What one event (the first of its type in ``every_event_type(RUN)``) contributes.

    Attributes:
        fold: a fact of the run state just after the event is folded, and its value.
        messages: the start of each message the model reads for it (none: people's
            business).
        printed: its line in ``agentcore show`` (step, detail).
        shown: its title in the console's timeline.
    """

    fold: tuple[Callable[[RunState], object], object]
    messages: tuple[str, ...]
    printed: tuple[str, str]
    shown: str


CONTRIBUTES: dict[str, Contribution] = {
    "run_started": Contribution(
        (lambda s: (s.task, s.route), ("do the thing", ("scripted/a", "scripted/b"))),
        ("Task: do the thing",),
        ("", "task: do the thing  scope: lookup, delete_order  contract: sha256:abc"),
        "run started",
    ),
    "context_added": Contribution(
        (lambda s: s.context_step, 1),
        ("Context from files:\na\nb",),
        ("1", "files: a\nb"),
        "context from files",
    ),
    "model_called": Contribution(
        (lambda s: (s.model_calls, s.reasks, s.usage.input_tokens), (1, 1, 100)),
        ("{not json", "That reply is not a valid action: bad reply"),
        ("1", "scripted/a: invalid, 100+20 tokens, 812.5 ms  bad reply"),
        "model scripted/a: invalid",
    ),
    "action_proposed": Contribution(
        (lambda s: (s.steps, s.call and s.call.call_id), (1, "c1")),
        ('{"type":"plan","thought":"plan it"',),
        ("1", "[c1] plan: look | delete\n  thought: plan it"),
        "plan (c1)",
    ),
    "decision": Contribution(
        (lambda s: s.plan_approved, True),
        ("[c1] Plan approved. Go ahead with it.",),
        ("1", "[c1] execute"),
        "dispatcher: execute",
    ),
    "run_finished": Contribution(
        (lambda s: s.status, RunStatus.AWAITING_CONFIRMATION),
        (),
        ("", "awaiting_confirmation: "),
        "run awaiting_confirmation",
    ),
    "confirmation": Contribution(
        (lambda s: (s.status, s.call and s.call.run_args()), (RunStatus.RUNNING, {"id": "A2"})),
        ("[c2] Approved by alice with edited arguments.",),
        ("2", "[c2] approved by alice (edited args): ok"),
        "approved by alice",
    ),
    "tool_started": Contribution(
        (lambda s: (s.tool_calls, s.per_tool["delete_order"]), (1, 1)),
        (),
        ("2", f'[c2] delete_order {{"id": "A2"}}  key={RUN}:c2'),
        "delete_order started",
    ),
    "resolution": Contribution(
        (lambda s: s.call and s.call.rerun_authorised, True),
        ("[c2] The outcome of this call was lost; bob says it did not happen",),
        ("2", "[c2] resolved by bob: rerun: it did not happen"),
        "resolved (rerun) by bob",
    ),
    "tool_finished": Contribution(
        (lambda s: sum(s.failures.values()), 1),
        ("[c2] delete_order failed: EIO",),
        ("2", "[c2] delete_order -> ERROR EIO"),
        "delete_order failed",
    ),
    "run_resumed": Contribution(
        (lambda s: (s.status, s.budget.max_steps), (RunStatus.RUNNING, 20)),
        (),
        ("", "resumed with a new budget"),
        "resumed",
    ),
    "quota_reserved": Contribution(
        (lambda s: list(s.charged), ["c3"]),  # a request's reservation is no call's charge
        (),
        ("5", "quota reserved for the request (tokens 4200)"),
        "quota reserved for a model request",
    ),
    "quota_released": Contribution(
        (lambda s: s.charged, {}),
        (),
        ("", "[c3] quota given back (orders-per-day 1): create_order was undone"),
        "quota given back (c3)",
    ),
    "user_message": Contribution(
        (lambda s: (s.turn, s.status, s.budget.max_steps, s.call), (2, RunStatus.RUNNING, 5, None)),
        ("User: And the other one? ✓",),
        ("", "turn 2, the user: And the other one? ✓"),
        "turn 2: the user says",
    ),
    "approval_expired": Contribution(
        (lambda s: s.call and s.call.expiry and s.call.expiry.escalations, 1),
        (),
        ("3", "[c3] no approval after 3600s: escalated (1)"),
        "no approval after 3600s: escalated (time 1)",
    ),
    "approval": Contribution(
        (lambda s: s.call and [a.by for a in s.call.approvals], ["alice"]),
        (),
        ("3", "[c3] approved by alice (edited args): looks right (more needed)"),
        "approved by alice; more approvals needed",
    ),
    "compensation_started": Contribution(
        (lambda s: (s.status, s.compensating), (RunStatus.COMPLETED, True)),
        (),
        ("3", f"[c3] undoing create_order (by dave)  key={RUN}:c3:undo"),
        "undoing create_order (step 3)",
    ),
    "compensation_finished": Contribution(
        (lambda s: (s.status, s.compensating), (RunStatus.COMPLETED, True)),
        (),
        ("3", "[c3] create_order: undone"),
        "create_order undone",
    ),
}

KINDS = sorted(EVENT_TYPES)


def first_of(kind: str) -> tuple[list[Event], Event]:
    """The kit's run, and the first event of type ``kind`` in it."""
    events = every_event_type(RUN)
    return events, next(ev for ev in events if ev.type == kind)


def test_every_event_type_has_a_row() -> None:
    published = set(schemas.event_schema()["discriminator"]["mapping"])
    assert set(EVENT_TYPES) == published  # the union's members, by their tags
    assert all(cls.model_fields["type"].default == t for t, cls in EVENT_TYPES.items())
    missing = sorted(published - set(CONTRIBUTES))
    assert not missing, f"say what these event types contribute to each view: {missing}"
    assert set(CONTRIBUTES) == published


def test_the_kit_builds_every_event_type_in_a_sound_run() -> None:
    events = every_event_type(RUN)
    assert {ev.type for ev in events} == set(EVENT_TYPES)
    assert check_transcript(events) == []
    state = RunState(RUN)
    for ev in events:
        state.apply(ev)
    assert (state.status, state.compensating) == (RunStatus.CANCELLED, True)


@pytest.mark.parametrize("kind", KINDS)
def test_folded(kind: str) -> None:
    events, event = first_of(kind)
    state = RunState(RUN)
    for ev in events[: event.seq + 1]:
        state.apply(ev)
    fact, value = CONTRIBUTES[kind].fold
    assert fact(state) == value


@pytest.mark.parametrize("kind", KINDS)
def test_rendered_for_the_model(kind: str) -> None:
    events, event = first_of(kind)
    renderer = Renderer(10_000)
    renderer.render(events, event.seq)
    before = len(renderer.messages)
    renderer.render(events, event.seq + 1)
    added = [m.content for m in renderer.messages[before:]]
    expected = CONTRIBUTES[kind].messages
    assert len(added) == len(expected), added
    for content, start in zip(added, expected, strict=True):
        assert content.startswith(start)


@pytest.mark.parametrize("kind", KINDS)
def test_snapshotted(kind: str) -> None:
    """The state and the history just after the event come back from a snapshot equal."""
    events, event = first_of(kind)
    state, renderer = RunState(RUN), Renderer(10_000)
    for ev in events[: event.seq + 1]:
        state.apply(ev)
    chunk = renderer.chunk(events, event.seq + 1)
    assert load_state(RUN, dump_state(state)) == state
    restored = Renderer.restored(10_000, [chunk])
    assert (restored.rendered, restored.messages) == (event.seq + 1, renderer.messages)


@pytest.mark.parametrize("kind", KINDS)
def test_shown_in_the_console_timeline(kind: str) -> None:
    _, event = first_of(kind)
    shown = entry(event)
    assert (shown.seq, shown.kind, shown.title) == (event.seq, kind, CONTRIBUTES[kind].shown)


@pytest.fixture(scope="module")
def show_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    """``agentcore show`` of the kit's run, as a user runs it (stdout not a terminal: one
    tab-separated row per event), by seq."""

    folder = tmp_path_factory.mktemp("show")

    async def seed() -> None:
        store = SQLiteStore(folder / "runs.db")
        try:
            await store.append(RUN, 0, every_event_type(RUN))
        finally:
            await store.close()

    asyncio.run(seed())
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"AGENTCORE_STORE": f"sqlite:///{folder / 'runs.db'}", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "agentcore.cli", "show", RUN],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    return {int(row[0]): row[1:] for row in rows if row[0].isdigit()}


@pytest.mark.parametrize("kind", KINDS)
def test_printed_by_agentcore_show(kind: str, show_lines: dict[int, list[str]]) -> None:
    _, event = first_of(kind)
    step, detail = CONTRIBUTES[kind].printed
    # a row per event: whitespace inside a value is printed as one space
    assert show_lines[event.seq] == [step, kind, " ".join(detail.split())]
    assert describe(event, full=True) == (step, detail)


async def test_the_console_page_shows_every_event_type() -> None:
    store = MemoryStore()
    events = every_event_type(RUN)
    await store.append(RUN, 0, events)
    app = create_app(store, authenticate=lambda _request: "ada")
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://console.test") as client,
    ):
        page = await client.get(f"/runs/{RUN}")
    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    for kind in KINDS:
        assert CONTRIBUTES[kind].shown in text, kind
    blocks = timeline(events)
    assert [e.seq for b in blocks for e in b.entries] == [ev.seq for ev in events]


# ----------------------------------------------------------------------------- refused


@dataclass(frozen=True)
class OrderShipped:
    """An event type no view has a case for (not a member of ``Event``)."""

    run_id: str
    seq: int
    at: float = 1.0
    step: int = 1
    type: str = "order_shipped"
    v: int = 1


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(TypeError) as caught:
        call()
    return str(caught.value)


def test_every_view_refuses_an_event_type_it_has_no_case_for() -> None:
    """Instead of skipping it without a word (the fold and the model's view did), each
    view names itself and the type."""
    foreign: Event = OrderShipped(RUN, 0)  # pyright: ignore[reportAssignmentType]  # on purpose
    later: Event = OrderShipped(RUN, 1)  # pyright: ignore[reportAssignmentType]  # on purpose
    first = every_event_type(RUN)[0]
    fold = "the run state's fold (RunState.apply)"
    views: list[tuple[str, Callable[[], object]]] = [
        (fold, lambda: RunState(RUN).apply(foreign)),
        (
            "the model's view of the transcript (Renderer)",
            lambda: Renderer(100).render([foreign], 1),
        ),
        ("the CLI's transcript (agentcore show)", lambda: describe(foreign)),
        ("the console's timeline", lambda: entry(foreign)),
        # the transcript check folds each event before it looks at it: the fold refuses it
        (fold, lambda: check_transcript([first, later])),
    ]
    for view, call in views:
        message = refusal(call)
        assert message.startswith(f"{view} has no case for the event type 'order_shipped'")
        assert "every member of agentcore.events.Event needs one" in message
