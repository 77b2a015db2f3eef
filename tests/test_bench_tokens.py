"""bench/tokens (issue 37): agentcore's one-tool lookup through the real OpenAI adapter
against the loopback fake gives one sane record per model call; the counting rules hold."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

TOKENS = Path(__file__).resolve().parent.parent / "bench" / "tokens"
sys.path.insert(0, str(TOKENS))

from count import cacheable, records, serialize, tokens  # noqa: E402  # pyright: ignore[reportMissingImports]
from fake import Turn  # noqa: E402  # pyright: ignore[reportMissingImports]
from measure import run_agentcore  # noqa: E402  # pyright: ignore[reportMissingImports]


def test_the_lookup_is_one_record_per_model_call_with_sane_counts() -> None:
    run = asyncio.run(run_agentcore("lookup", "structured"))

    assert run.status == "completed", run.reason
    assert len(run.records) == run.model_calls == len(run.turns) == 2
    first, second = run.records
    for r in run.records:
        assert r.input_tokens > 0
        assert r.output_tokens > 0
        assert 0 <= r.prefix_tokens <= r.input_tokens
        assert r.schemas > 0 and r.framework > 0 and r.instructions > 0 and r.history > 0
        assert r.schemas + r.framework + r.instructions + r.history == r.input_tokens
    assert first.prefix_tokens == 0 and first.cacheable_tokens == 0 and first.kept_pct is None
    # The second request repeats the first (tools, system text, task) and adds the result.
    assert second.input_tokens > first.input_tokens
    assert second.prefix_tokens > first.input_tokens // 2
    assert second.cacheable_tokens == cacheable(second.prefix_tokens)


def test_openai_caches_from_1024_tokens_in_128_token_steps() -> None:
    assert [cacheable(n) for n in (0, 1023, 1024, 1151, 1152, 5000)] == [
        0,
        0,
        1024,
        1024,
        1152,
        1024 + 128 * ((5000 - 1024) // 128),
    ]


def test_the_schemas_come_first_and_the_prefix_is_what_two_requests_share() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    one = {"tools": tools, "messages": [{"role": "system", "content": "Be brief. Rules."}]}
    two = {
        "tools": tools,
        "messages": [
            {"role": "system", "content": "Be brief. Rules."},
            {"role": "user", "content": "hello there"},
        ],
    }
    text, schemas, _ = serialize(two)
    assert text.startswith(schemas) and schemas.startswith('[{"type":"function"')

    a, b = records([one, two], [Turn("ok"), Turn(None, (("f", "{}"),))], "Be brief.")

    assert a.instructions == tokens("Be brief.")
    assert b.prefix_tokens == a.input_tokens and b.kept_pct == 100.0
    assert b.output_tokens == tokens("f") + tokens("{}")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--tasks", "support,nope"], "unknown task(s) nope"),
        (["--rev", "deadbeef0000"], "names no commit"),
    ],
)
def test_a_task_or_revision_it_does_not_know_stops_it_before_anything_is_measured(
    args: list[str], said: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(TOKENS / "run.py"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and said in done.stderr, done.stderr[-500:]
    assert "Tokens per task" not in done.stdout


def test_the_parts_of_a_request_add_up_and_tell_the_note_the_results_and_the_framing_apart() -> (
    None
):
    from count import PARTS, request_parts  # pyright: ignore[reportMissingImports]

    system = (
        "Reply with one JSON action.\n\nTools you can call:\n- f(x: str) (effect: read): F.\n\n"
        "Example: one\nReply: {}\n\nInstructions from the operator:\nBe brief."
    )
    body = {
        "response_format": {"type": "json_schema", "json_schema": {"name": "a"}},
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Task: find x."},
            {"role": "assistant", "content": '{"type":"tool","tool":"f","args":{"x":"1"}}'},
            {"role": "user", "content": '[c1] f returned: {"x":"one"}\n\nStep 2 of 25.'},
        ],
    }
    parts = request_parts(body, "Be brief.", ['{"x":"one"}'])

    assert list(parts) == list(PARTS)
    assert sum(parts.values()) == tokens(serialize(body)[0])
    assert parts["tools"] == 0 and parts["response_format"] > 0
    assert parts["operator instructions"] == tokens("Be brief.")
    assert parts["tool list"] == tokens("Tools you can call:\n- f(x: str) (effect: read): F.\n\n")
    assert parts["worked examples"] == tokens("Example: one\nReply: {}\n\n")
    assert parts["step notes"] == tokens("\n\nStep 2 of 25.")
    assert parts["tool results"] == tokens('{"x":"one"}')
    observation = '<|user|>[c1] f returned: {"x":"one"}'
    assert parts["observation framing"] == tokens(observation) - tokens('{"x":"one"}') > 0
    assert parts["model replies"] == tokens(
        '<|assistant|>{"type":"tool","tool":"f","args":{"x":"1"}}'
    )
    # A peer's request: no sections, the result is the whole tool message.
    peer = {
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "find x"},
            {"role": "tool", "content": '{"x":"one"}'},
        ],
    }
    p = request_parts(peer, "Be brief.", ['{"x":"one"}'])
    assert p["step notes"] == p["tool list"] == p["worked examples"] == p["response_format"] == 0
    assert p["tool results"] == tokens('{"x":"one"}')
    assert p["observation framing"] == tokens('<|tool|>{"x":"one"}') - tokens('{"x":"one"}') > 0
    assert sum(p.values()) == tokens(serialize(peer)[0])


def test_the_output_forms_keep_the_decisions_and_drop_only_the_envelope() -> None:
    from run import output_forms  # pyright: ignore[reportMissingImports]

    wrapped = json.dumps(
        {"action": {"type": "tool", "thought": "Look.", "call": {"tool": "f", "args": {"x": 1}}}}
    )
    forms = output_forms([Turn(wrapped), Turn("plain answer")])

    assert forms["as scripted"] == tokens(wrapped) + tokens("plain answer")
    assert forms["flat action"] == tokens(
        '{"type":"tool","thought":"Look.","tool":"f","args":{"x":1}}'
    ) + tokens("plain answer")
    assert forms["flat, no type key"] == tokens(
        '{"thought":"Look.","tool":"f","args":{"x":1}}'
    ) + tokens("plain answer")
    assert (
        forms["as scripted"]
        > forms["compact JSON"]
        > forms["flat action"]
        > forms["flat, no type key"]
    )


@pytest.mark.parametrize("mode", ["structured", "native"])
def test_the_ask_rows_measure_the_offer_against_the_defaults_request_for_request(
    mode: str,
) -> None:
    from run import ASK, CONFIGS, Row, ask_table  # pyright: ignore[reportMissingImports]

    from agentcore import Policy

    assert {c.mode for c in CONFIGS if c.ask} == {"structured", "native"}
    assert CONFIGS[4].label.endswith("no plan-before-writes")  # levers_table reads it by index
    base = asyncio.run(run_agentcore("lookup", mode))
    asked = asyncio.run(run_agentcore("lookup", mode, policy=Policy(ask=True)))

    assert base.status == asked.status == "completed"
    assert len(asked.records) == len(base.records) == 2  # the model never asks: same script
    deltas = {
        a.input_tokens - b.input_tokens for a, b in zip(asked.records, base.records, strict=True)
    }
    (delta,) = deltas  # the offer costs the same in every request
    assert delta > 0
    offer = "response_format" if mode == "structured" else "tools"
    assert '"ask"' in json.dumps(asked.bodies[0][offer])
    assert '"ask"' not in json.dumps(base.bodies[0][offer])

    defaults = CONFIGS[0] if mode == "structured" else CONFIGS[1]
    rows = [
        Row(defaults.label, "lookup", base.records),
        Row(ASK[mode].label, "lookup", asked.records),
    ]
    (line,) = [x for x in ask_table(rows, ["lookup"]) if x.startswith("| lookup")]
    assert line.startswith(f"| lookup / agentcore / {mode} | 2 |")
    assert line.endswith(f"| {delta:+,.1f} |")
