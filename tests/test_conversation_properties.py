"""A stateful test of one conversation (hypothesis): replies, approvals, cancels and resumes
in any order, from several agent objects over one store.

One run per example, on a MemoryStore and on a SQLite file (snapshots every 2 events). Its
scripted model reads the user's latest message and does what it says: ``read mN`` reads a
document then finishes, ``wipe mN`` calls a destructive tool (the turn waits for a person),
``ask mN`` asks the user a question, ``long mN`` keeps reading past the turn's budget of
three steps. Every message carries a serial ``mN`` that the model repeats in each action of
its turn, so a turn that acted on another turn's message shows in the transcript. Rules:
reply (with an idempotency key from a small set, so retries happen), confirm (approve or
deny, bound to the waiting call or to a stale one), cancel, resume, and another agent
object over the same store (another process's view), each command sent through any of them.

After every rule:

- a reply is accepted iff the run was ``completed``, ``awaiting_input`` or
  ``budget_exhausted`` and its key is new; otherwise the documented error is raised and the
  transcript is unchanged (a cancelled run refuses every later reply);
- ``result.turns`` has one turn per ``user_message`` plus one, numbered 1..n, with the
  messages in the order they were accepted;
- the transcript passes ``check_transcript``; each turn's events end with a ``run_finished``
  before the next ``user_message``, and no turn's actions name another turn's message;
- the destructive tool ran exactly once per approval (an outside ledger), on the call the
  person approved;
- every agent object's ``result(run_id)`` equals what the last command returned.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentcore import Agent, Budget, Policy, RunResult, RunStatus, check_transcript, tool
from agentcore.adapters import Message, ScriptedModel
from agentcore.errors import (
    AgentcoreError,
    ConfirmationMismatchError,
    DuplicateReplyError,
    NotAcceptingRepliesError,
    NotAwaitingConfirmationError,
)
from agentcore.events import Event, RunFinished, UserMessage
from agentcore.stores import MemoryStore

T = TypeVar("T")

INTENTS = ("read", "wipe", "ask", "long")
AFTER = {
    "read": RunStatus.COMPLETED,
    "wipe": RunStatus.AWAITING_CONFIRMATION,
    "ask": RunStatus.AWAITING_INPUT,
    "long": RunStatus.BUDGET_EXHAUSTED,
}
"""How a turn on each intent ends."""
ACCEPTING = frozenset({RunStatus.COMPLETED, RunStatus.AWAITING_INPUT, RunStatus.BUDGET_EXHAUSTED})
TURN_ENDS = frozenset(s.value for s in ACCEPTING)
KEYS = st.sampled_from(["k1", "k2", "k3"])  # few, so that keys repeat
WHO = st.integers(0, 2)  # which agent object sends the command (modulo how many there are)
TOKEN = re.compile(r"\bm\d+\b")
MAX_AGENTS = 3
BUDGET = Budget(max_steps=3)


def latest_message(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """The user's latest message (the task or a reply) and this turn's steps after it."""
    last = max(
        i
        for i, m in enumerate(messages)
        if m.role == "user" and m.call_id is None and m.content.startswith(("Task: ", "User: "))
    )
    steps = [
        m
        for m in messages[last + 1 :]
        if not (m.role == "user" and m.call_id is None and m.content.startswith("Step "))
    ]
    return messages[last].content.split(": ", 1)[1], steps


def intent_model(messages: Sequence[Message]) -> dict[str, Any]:  # Any: an action's JSON
    """Does what the latest message says, naming its token (``mN``) in every action."""
    text, steps = latest_message(messages)
    intent, _, token = text.partition(" ")
    if intent == "ask":
        return {"type": "ask", "thought": token, "question": f"which one for {token}?"}
    if intent == "long":  # never finishes: the turn's budget ends it
        return {"type": "tool", "thought": token, "tool": "read_doc", "args": {"name": token}}
    if steps:  # the tool's result, or a person's denial: done
        return {"type": "finish", "thought": token, "answer": f"done {token}"}
    name = "wipe" if intent == "wipe" else "read_doc"
    return {"type": "tool", "thought": token, "tool": name, "args": {"name": token}}


class Conversation(RuleBasedStateMachine):
    """One run, its conversation driven by rules and checked after each."""

    on_sqlite: ClassVar[bool] = False
    snapshot_every: ClassVar[int | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.wiped: list[str] = []  # the outside ledger: what the destructive tool did
        self.approved: list[str] = []  # the tokens of the calls people approved
        self.tmp: Path | None = None
        if self.on_sqlite:
            self.tmp = Path(tempfile.mkdtemp(prefix="conversation-"))
            self.store: str | MemoryStore = f"sqlite:///{self.tmp / 'runs.db'}"
        else:
            self.store = MemoryStore()
        self.agents: list[Agent] = [self._agent()]
        self.run_id = ""
        self.messages: list[str] = []  # accepted, in turn order (the task first)
        self.keys: dict[str, int] = {}  # key -> the turn it began
        self.serial = 0
        self.last: RunResult | None = None
        self.waits: list[tuple[int, str | None]] = []  # (step, args_hash) of every call that waited
        self.cancelled = False

    def _agent(self) -> Agent:
        """A new agent object over the same store (another process's view)."""
        wiped = self.wiped

        @tool(effect="read")
        def read_doc(name: str) -> str:
            """Read a document.

            Args:
                name: which document.
            """
            return f"the text of {name}"

        @tool(effect="destructive")
        def wipe(name: str) -> str:
            """Wipe a document for good.

            Args:
                name: which document.
            """
            wiped.append(name)
            return f"wiped {name}"

        return Agent(
            tools=[read_doc, wipe],
            model=ScriptedModel(intent_model),
            store=self.store,
            policy=Policy(plan_before_writes=False, ask=True),
            snapshot_every=self.snapshot_every,
        )

    def _do(self, work: Awaitable[T]) -> T:
        return self.loop.run_until_complete(work)

    def _text(self, intent: str) -> str:
        self.serial += 1
        return f"{intent} m{self.serial}"

    def _events(self) -> list[Event]:
        return self._do(self.agents[0].transcript(self.run_id))

    def _took(self, result: RunResult) -> None:
        self.last = result
        if result.pending is not None:
            self.waits.append((result.pending.step, result.pending.args_hash))
        if result.status is RunStatus.CANCELLED:
            self.cancelled = True

    @property
    def status(self) -> RunStatus:
        assert self.last is not None
        return self.last.status

    # -- rules -----------------------------------------------------------------------------

    @initialize(intent=st.sampled_from(INTENTS))
    def start(self, intent: str) -> None:
        task = self._text(intent)
        result = self._do(self.agents[0].run(task, budget=BUDGET))
        self.run_id = result.run_id
        self.messages.append(task)
        assert result.status is AFTER[intent], result
        self._took(result)

    @rule(intent=st.sampled_from(INTENTS), key=KEYS, who=WHO)
    def reply(self, intent: str, key: str, who: int) -> None:
        self._reply(intent, key, who)

    @rule(intent=st.sampled_from(INTENTS), who=WHO)
    def reply_without_a_key(self, intent: str, who: int) -> None:
        self._reply(intent, None, who)

    @precondition(lambda self: bool(self.keys))
    @rule(intent=st.sampled_from(INTENTS), data=st.data(), who=WHO)
    def retry(self, intent: str, data: st.DataObject, who: int) -> None:
        """A reply whose key began a turn already (a retried request)."""
        self._reply(intent, data.draw(st.sampled_from(sorted(self.keys))), who)

    def _reply(self, intent: str, key: str | None, who: int) -> None:
        agent = self.agents[who % len(self.agents)]
        before, events = self.status, self._events()
        text = self._text(intent)
        duplicate = key is not None and key in self.keys
        try:
            result = self._do(agent.reply(self.run_id, text, key=key, wait_s=1.0))
        except (NotAcceptingRepliesError, DuplicateReplyError) as error:
            refused: AgentcoreError = error
        else:
            assert before in ACCEPTING, f"a {before.value} run took a reply"
            assert not duplicate, f"key {key!r} was taken twice"
            assert not self.cancelled
            self.messages.append(text)
            if key is not None:
                self.keys[key] = len(self.messages)
            assert result.status is AFTER[intent], result
            self._took(result)
            return
        if isinstance(refused, DuplicateReplyError):
            assert duplicate, f"key {key!r} is new but was refused as a duplicate"
            assert key is not None and refused.turn == self.keys[key]
        else:
            assert before not in ACCEPTING, f"a {before.value} run refused a reply"
        assert self._events() == events, "a refused reply recorded something"

    @precondition(lambda self: self.status is RunStatus.AWAITING_CONFIRMATION)
    @rule(approve=st.booleans(), who=WHO)
    def confirm(self, approve: bool, who: int) -> None:
        """A person answers the call waiting, bound to it as it was shown."""
        assert self.last is not None and self.last.pending is not None
        call = self.last.pending
        assert call.tool == "wipe" and call.args is not None and call.args_hash
        result = self._do(
            self.agents[who % len(self.agents)].confirm(
                self.run_id, approve=approve, by="pat", step=call.step, args_hash=call.args_hash
            )
        )
        if approve:
            self.approved.append(str(call.args["name"]))
        assert result.status is RunStatus.COMPLETED, result
        self._took(result)

    @precondition(lambda self: bool(self.waits))
    @rule(approve=st.booleans(), who=WHO, data=st.data())
    def confirm_out_of_turn(self, approve: bool, who: int, data: st.DataObject) -> None:
        """A person answers a call that waited earlier (a stale page), or a run that waits
        for no one: refused, nothing recorded."""
        waiting = self.status is RunStatus.AWAITING_CONFIRMATION
        old = [w for w in self.waits if w != self.waits[-1]] if waiting else self.waits
        if not old:
            return
        step, args_hash = data.draw(st.sampled_from(old))
        events = self._events()
        refused = ConfirmationMismatchError if waiting else NotAwaitingConfirmationError
        with pytest.raises(refused):
            self._do(
                self.agents[who % len(self.agents)].confirm(
                    self.run_id, approve=approve, by="pat", step=step, args_hash=args_hash
                )
            )
        assert self._events() == events, "a refused confirmation recorded something"

    # cancelling turn 1 is the single task's lifecycle (tests/test_lifecycle_model.py): here
    # the conversation has begun, so that the other rules get the steps
    @precondition(lambda self: len(self.messages) >= 2)
    @rule(who=WHO)
    def cancel(self, who: int) -> None:
        before = self.status
        result = self._do(self.agents[who % len(self.agents)].cancel(self.run_id, by="pat"))
        expected = RunStatus.COMPLETED if before is RunStatus.COMPLETED else RunStatus.CANCELLED
        assert result.status is expected, (before, result)
        self._took(result)

    @rule(who=WHO)
    def resume(self, who: int) -> None:
        before = self.last
        result = self._do(self.agents[who % len(self.agents)].resume(self.run_id))
        assert before is not None
        assert result.status is before.status, (before, result)
        assert result.turns[:-1] == before.turns[:-1]
        self._took(result)

    @precondition(lambda self: len(self.agents) < MAX_AGENTS)
    @rule()
    def another_process(self) -> None:
        self.agents.append(self._agent())

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def every_agent_reads_what_the_last_command_returned(self) -> None:
        if self.last is None:
            return
        want = self.last
        for agent in self.agents:
            got = self._do(agent.result(self.run_id))
            assert (got.status, got.answer, got.reason, got.pending, got.turns) == (
                want.status,
                want.answer,
                want.reason,
                want.pending,
                want.turns,
            )

    @invariant()
    def the_turns_are_the_messages_in_order(self) -> None:
        if self.last is None:
            return
        turns = self.last.turns
        assert [t.number for t in turns] == list(range(1, len(self.messages) + 1))
        assert [t.message for t in turns] == self.messages
        assert turns[-1].status is self.status
        events = self._events()
        users = [e for e in events if isinstance(e, UserMessage)]
        assert len(turns) == len(users) + 1
        assert [(u.turn, u.text, u.seq) for u in users] == [
            (t.number, t.message, t.seq) for t in turns[1:]
        ]

    @invariant()
    def the_transcript_is_sound_and_turns_do_not_interleave(self) -> None:
        if self.last is None:
            return
        events = self._events()
        assert check_transcript(events) == []
        assert isinstance(events[-1], RunFinished) and events[-1].status == self.status.value
        starts = [0] + [e.seq for e in events if isinstance(e, UserMessage)]
        ends = [*starts[1:], len(events)]
        for number, (begin, end) in enumerate(zip(starts, ends, strict=True), 1):
            if end < len(events):  # the turn ended before the next message began
                ended = events[end - 1]
                assert isinstance(ended, RunFinished) and ended.status in TURN_ENDS, ended
            token = self.messages[number - 1].split()[1]
            for e in events[begin:end]:  # its message, actions, results, answer, question
                named = set(TOKEN.findall(e.model_dump_json()))
                assert named <= {token}, f"turn {number} ({token}): {e.type} names {named}"

    @invariant()
    def the_destructive_tool_ran_once_per_approval(self) -> None:
        assert self.wiped == self.approved

    @invariant()
    def a_cancelled_run_stays_cancelled(self) -> None:
        if self.cancelled:
            assert self.status is RunStatus.CANCELLED

    def teardown(self) -> None:
        try:
            for agent in self.agents:
                self._do(agent.close())
        finally:
            self.loop.close()
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)


SETTINGS = settings(
    max_examples=100,
    stateful_step_count=15,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_conversation_on_a_memory_store() -> None:
    run_state_machine_as_test(Conversation, settings=SETTINGS)


def test_a_conversation_on_sqlite_with_snapshots() -> None:
    class OnSqlite(Conversation):
        on_sqlite = True
        snapshot_every = 2

    run_state_machine_as_test(OnSqlite, settings=SETTINGS)
