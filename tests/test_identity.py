"""One person is one person however their name is spelt: names are recorded NFKC-normalised
and stripped, and compared case-folded, in approvals and wherever a name is recorded.

"alice" and then "alice " (or a full-width or zero-width look-alike) used to satisfy a
two-person rule, since names were compared byte for byte, and an ``authorize`` that
normalises names let both through.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import Agent, Policy, RunStatus, tool
from agentcore.adapters import ScriptedModel
from agentcore.approvals import person_key, person_name
from agentcore.errors import AlreadyApprovedError, ConfigurationError
from agentcore.events import Approval, Confirmation, RunFinished
from agentcore.stores import MemoryStore

PAY = {"to": "acme", "amount": 120}


def make_agent(ledger: list[dict[str, Any]]) -> Agent:  # Any: JSON arguments
    @tool(effect="write")
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        ledger.append({"to": to, "amount": amount})
        return "paid"

    return Agent(
        tools=[pay],
        model=ScriptedModel(
            [
                {"type": "tool", "thought": "pay", "tool": "pay", "args": PAY},
                {"type": "finish", "thought": "done", "answer": "paid"},
            ]
        ),
        store=MemoryStore(),
        policy=Policy(
            approvals={"tool:pay": 2},
            plan_before_writes=False,
            authorize=lambda by, pending: by.strip().casefold() in {"alice", "bob"},
        ),
    )


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


LOOK_ALIKES = [
    "alice ",
    " alice",
    "Alice",
    "ALICE",
    "alice\u3000",  # an ideographic space
    "\u00a0alice\t",
    _full_width("alice"),
    "ali\u200bce",  # a zero-width space
    "\u200ealice",  # a left-to-right mark
    "\ufeffalice",  # a byte order mark
]


@pytest.mark.parametrize("second", LOOK_ALIKES)
async def test_a_look_alike_of_the_first_approver_does_not_count_twice(second: str) -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger)
    paused = await agent.run("pay acme", run_id="r1")
    assert paused.status is RunStatus.AWAITING_CONFIRMATION
    await agent.confirm("r1", approve=True, by="alice")
    with pytest.raises(AlreadyApprovedError):
        await agent.confirm("r1", approve=True, by=second)
    assert ledger == []
    done = await agent.confirm("r1", approve=True, by=" bob ")
    assert done.status is RunStatus.COMPLETED and ledger == [PAY]
    events = await agent.transcript("r1")
    (approval,) = [e for e in events if isinstance(e, Approval)]
    (final,) = [e for e in events if isinstance(e, Confirmation)]
    assert (approval.by, final.by, final.approvers) == ("alice", "bob", ["alice", "bob"])


async def test_names_are_recorded_normalised_everywhere_a_person_answers() -> None:
    ledger: list[dict[str, Any]] = []
    agent = make_agent(ledger)
    await agent.run("pay acme", run_id="r1")
    first = await agent.confirm("r1", approve=True, by=_full_width("Alice") + " ")
    assert first.pending is not None and first.pending.approvals == ("Alice",)
    await agent.cancel("r1", by="\u200bbob\u3000", reason="not today")
    events = await agent.transcript("r1")
    ended = [e for e in events if isinstance(e, RunFinished)][-1]
    assert ended.reason is not None and "cancelled by bob: not today" in ended.reason


@pytest.mark.parametrize("nobody", ["", "   ", "\u200b", "\u3000\u200e"])
async def test_a_name_that_is_only_spaces_or_invisible_is_refused(nobody: str) -> None:
    agent = make_agent([])
    await agent.run("pay acme", run_id="r1")
    with pytest.raises(ConfigurationError, match="by="):
        await agent.confirm("r1", approve=True, by=nobody)
    with pytest.raises(ConfigurationError, match="by="):
        await agent.cancel("r1", by=nobody)


_SPACES = st.sampled_from([" ", "\t", "\u00a0", "\u3000", "\u2003", "\n"])
_INVISIBLE = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u200e", "\u2060", "\ufeff"])


@st.composite
def look_alikes(draw: st.DrawFn) -> tuple[str, str]:
    """A name, and a spelling of it: other case, full-width letters, spaces around it,
    invisible characters inside it."""
    name = draw(st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz-."), min_size=1, max_size=12))
    chars: list[str] = []
    for letter in name:
        spelt = letter.upper() if draw(st.booleans()) else letter
        chars.append(_full_width(spelt) if draw(st.booleans()) else spelt)
        if draw(st.integers(0, 4)) == 0:
            chars.append(draw(_INVISIBLE))
    before = "".join(draw(st.lists(_SPACES, max_size=3)))
    after = "".join(draw(st.lists(_SPACES | _INVISIBLE, max_size=3)))
    return name, before + "".join(chars) + after


@settings(max_examples=300, deadline=None)
@given(look_alikes())
def test_every_generated_spelling_is_the_same_person(pair: tuple[str, str]) -> None:
    name, spelling = pair
    assert person_key(spelling) == person_key(name)
    recorded = person_name(spelling)
    assert recorded == recorded.strip() and unicodedata.is_normalized("NFKC", recorded)
    assert recorded.casefold() == name.casefold()  # case kept as given, nothing else


def test_composed_and_decomposed_letters_are_one_name() -> None:
    assert person_key("Jos\u00e9") == person_key("Jose\u0301") == person_key("JOSE\u0301 ")
    assert person_name("Jose\u0301") == "Jos\u00e9"


def test_letters_of_another_script_are_another_name() -> None:
    assert person_key("\u0430lice") != person_key("alice")  # Cyrillic a
