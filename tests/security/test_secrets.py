"""Secrets: a parameter the model never sees, filled from the application's resolver; and
listed values (strings, environment variables) redacted wherever the run writes.

The end-to-end test searches every byte written: the SQLite store's files, the log output,
the JSON Lines export, and the HTTP requests a real adapter (OpenAI, through litellm) sent
to a loopback fake provider."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Annotated

import pytest
import structlog

from agentcore import Agent, Policy, RunStatus, Secret, configure_logging, env_secrets, tool
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.events import ToolFinished, ToolStarted, dump_event
from agentcore.secrets import Redactor
from agentcore.stores import SQLiteStore
from agentcore.testing import call

KEY = "sk-live-7f3a9c1e55d2-MAILKEY"  # the secret a resolver returns
DB_PASSWORD = "db-pass-91c2e7aa04"  # an environment variable listed in redact_env
LISTED = "ACCT-5521-9907-XYZ"  # a string listed in redact
VALUES = (KEY, DB_PASSWORD, LISTED)


def _fakes() -> ModuleType:
    """tests/adapters/fakes.py (the loopback fake provider), loaded by path: the package
    name ``adapters`` is the library's own."""
    name = "security_fakes"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parents[1] / "adapters" / "fakes.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@tool(effect="read")
def send_mail(to: str, body: str, api_key: Annotated[str, Secret("MAIL_KEY")]) -> str:
    """Send an email.

    Args:
        to: the address.
        body: the text.
        api_key: the mail service's key.
    """
    assert api_key == KEY
    return f"sent to {to} with key {api_key} ({len(body)} chars)"  # a careless tool echoes it


@tool(effect="read")
def leak_in_error(api_key: Annotated[str, Secret("MAIL_KEY")]) -> str:
    """A tool whose error holds its key."""
    raise RuntimeError(f"auth failed for key {api_key}")


def test_the_model_never_sees_a_secret_parameter() -> None:
    schema = json.dumps(send_mail.spec.args_model.model_json_schema())
    assert "api_key" not in schema and "MAIL_KEY" not in schema
    assert set(send_mail.spec.args_model.model_fields) == {"to", "body"}
    assert send_mail.secret_params == {"api_key": "MAIL_KEY"}


@pytest.fixture
def restore_structlog() -> Iterator[None]:
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


@pytest.mark.usefixtures("restore_structlog")
async def test_every_byte_written_is_free_of_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcore.adapters.openai import OpenAIAdapter

    fakes = _fakes()
    monkeypatch.setenv("APP_DB_PASSWORD", DB_PASSWORD)
    monkeypatch.setenv("MAIL_KEY", KEY)
    out = io.StringIO()
    configure_logging(json=True, level="debug", file=out)
    with fakes.FakeProvider() as fake:
        strict = fakes.ok  # OpenAI strict replies: the union wrapped as {"action": ...}
        fake.queue(
            strict(
                {
                    "action": {
                        "type": "tool",
                        "thought": "mail",
                        "call": {
                            "tool": "send_mail",
                            "args": {
                                "to": "ann@example.com",
                                "body": f"pw {DB_PASSWORD}, acct {LISTED}",
                            },
                        },
                    }
                }
            ),
            strict(
                {
                    "action": {
                        "type": "tool",
                        "thought": "again",
                        "call": {"tool": "leak_in_error", "args": {}},
                    }
                }
            ),
            strict(
                {
                    "action": {
                        "type": "finish",
                        "thought": f"done {LISTED}",
                        "answer": f"Sent; the key was {KEY}.",
                    }
                }
            ),
        )
        db = tmp_path / "runs.db"
        agent = Agent(
            [send_mail, leak_in_error],
            OpenAIAdapter("gpt-4.1-mini", api_base=fake.base_url, api_key="sk-test", timeout=5),
            store=SQLiteStore(db),
            policy=Policy(plan_before_writes=False),
            secrets=env_secrets(),
            redact=[LISTED],
            redact_env=["APP_DB_PASSWORD"],
            instructions=f"The billing account is {LISTED}.",
        )
        result = await agent.run(f"Mail Ann her account number {LISTED} and the pw {DB_PASSWORD}.")
        assert result.status is RunStatus.COMPLETED, result.reason
        events = await agent.transcript(result.run_id)
        export = "\n".join(json.dumps(dump_event(e)) for e in events)
        await agent.close()
        sent = [r.raw for r in fake.requests] + [
            json.dumps(dict(r.headers)).encode() for r in fake.requests
        ]
    # The tool ran with its key; what it echoed was redacted.
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[0].ok and "[secret:MAIL_KEY]" in str(finished[0].result)
    assert not finished[1].ok and "[secret:MAIL_KEY]" in (finished[1].error or "")
    started = next(e for e in events if isinstance(e, ToolStarted))
    assert set(started.args) == {"to", "body"}  # the secret parameter is not an argument
    assert "[secret:APP_DB_PASSWORD]" in started.args["body"]
    assert "[secret:redacted]" in started.args["body"]
    assert result.answer == "Sent; the key was [secret:MAIL_KEY]."
    # Every byte written: store files, logs, export, provider requests.
    written = _files(tmp_path)
    written["log"] = out.getvalue().encode()
    written["export"] = export.encode()
    written.update({f"request {i}": raw for i, raw in enumerate(sent)})
    assert any(p.startswith("runs.db") for p in written) and len(sent) >= 6
    assert b"[secret:" in written["export"] and any(b"[secret:" in r for r in sent[1:3])
    for where, data in written.items():
        for value in VALUES:
            assert value.encode() not in data, f"{value!r} was written to {where}"


async def test_a_missing_resolver_or_secret_is_an_error_without_the_value() -> None:
    script = [call("leak_in_error"), {"type": "finish", "thought": "t", "answer": "a"}]
    agent = Agent([leak_in_error], ScriptedModel(script), store="memory://")
    result = await agent.run("x")
    fin = next(e for e in await agent.transcript(result.run_id) if isinstance(e, ToolFinished))
    assert not fin.ok and "no secret resolver" in (fin.error or "")

    def broken(name: str) -> str:
        raise LookupError(f"{name} = {KEY}")  # a resolver whose message holds a value

    agent = Agent([leak_in_error], ScriptedModel(script), store="memory://", secrets=broken)
    result = await agent.run("x")
    fin = next(e for e in await agent.transcript(result.run_id) if isinstance(e, ToolFinished))
    assert fin.error == "the secret 'MAIL_KEY' could not be resolved (LookupError)"


async def test_an_async_resolver() -> None:
    async def resolve(name: str) -> str:
        return KEY

    script = [
        call("send_mail", to="a@b.c", body="hi"),
        {"type": "finish", "thought": "t", "answer": "ok"},
    ]
    agent = Agent(
        [send_mail],
        ScriptedModel(script),
        store="memory://",
        secrets=resolve,
        policy=Policy(plan_before_writes=False),
    )
    result = await agent.run("x")
    assert result.status is RunStatus.COMPLETED
    events = await agent.transcript(result.run_id)
    assert KEY not in json.dumps([dump_event(e) for e in events])


def test_short_listed_values_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="at least 6"):
        Agent([send_mail], ScriptedModel([]), store="memory://", redact=["abc"])


def test_redactor_walks_keys_and_values() -> None:
    r = Redactor({"K": "secret-value"})
    assert r.value({"secret-value": ["x secret-value y", 3]}) == {
        "[secret:K]": ["x [secret:K] y", 3]
    }
    assert not Redactor() and r
