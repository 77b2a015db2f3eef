"""Stored transcripts stay readable across versions.

Two halves: the event format is public (a JSON Schema per event schema version, generated
from the models and shipped in the package), and a SQLite store written by agentcore 0.1.0
(``tests/fixtures/store-0.1.0.db``, see ``make_store_0_1_0.py``) opens, lists, shows,
checks and continues to completion with today's code and the same tool definitions.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

from agentcore import Budget, RunStatus, check_transcript
from agentcore import event_schemas as schemas
from agentcore.cli import app
from agentcore.events import EVENT_SCHEMA_VERSION, dump_event
from agentcore.stores import SQLiteStore

FIXTURES = Path(__file__).parent / "fixtures"
DOCS = Path(__file__).parent.parent / "docs" / "events.md"

EXPECTED_STATUSES = {
    "v010-complete": "completed",
    "v010-delete": "awaiting_confirmation",
    "v010-budget": "budget_exhausted",
    "v010-lost": "needs_attention",
    "v010-crashed": "running",
    "v010-fail": "failed",
    "v010-cancelled": "cancelled",
}

# --------------------------------------------------------------------------- event schemas

REGENERATE = (
    "the event models changed: bump EVENT_SCHEMA_VERSION or document the upgrade (docs/"
    "events.md), then regenerate with `python -P -m agentcore.event_schemas`"
)


def test_the_shipped_schema_is_the_one_the_code_generates() -> None:
    shipped = schemas.schema_path(EVENT_SCHEMA_VERSION).read_text(encoding="utf-8")
    generated = schemas.render(schemas.event_schema())
    assert shipped == generated, REGENERATE


def test_every_version_up_to_the_current_one_is_shipped() -> None:
    for version in range(1, EVENT_SCHEMA_VERSION + 1):
        schema = schemas.shipped_schema(version)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert f"version {version}" in schema["title"]
    assert sorted(p.name for p in schemas.SCHEMA_DIR.glob("events-v*.json")) == [
        f"events-v{v}.json" for v in range(1, EVENT_SCHEMA_VERSION + 1)
    ]


def test_the_check_command_reports_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert schemas.main(["--check"]) == 0
    stale = tmp_path / f"events-v{EVENT_SCHEMA_VERSION}.json"
    edited = schemas.event_schema()
    edited["$defs"]["ToolFinished"]["properties"].pop("error")
    stale.write_text(schemas.render(edited), encoding="utf-8")
    monkeypatch.setattr(schemas, "SCHEMA_DIR", tmp_path)
    assert schemas.main(["--check"]) == 1
    assert "bump EVENT_SCHEMA_VERSION or document the upgrade" in capsys.readouterr().err
    # Regenerating fixes it (here in the temporary folder, not the package).
    assert schemas.main([]) == 0
    assert schemas.main(["--check"]) == 0


def event_fields(schema: dict[str, Any]) -> dict[str, tuple[set[str], set[str]]]:  # Any: JSON
    """Per event type: (its fields, its required fields)."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for type_, ref in schema["discriminator"]["mapping"].items():
        model = schema["$defs"][ref.rsplit("/", 1)[1]]
        out[type_] = (set(model["properties"]), set(model.get("required", ())))
    return out


def test_version_1_changed_only_compatibly_since_0_1_0_and_documented() -> None:
    if EVENT_SCHEMA_VERSION != 1:
        pytest.skip("a new version: compare it with the previous version's shipped file")
    old = event_fields(json.loads((FIXTURES / "events-0.1.0.json").read_text(encoding="utf-8")))
    new = event_fields(schemas.event_schema())
    docs = DOCS.read_text(encoding="utf-8")
    assert set(old) <= set(new), f"event types removed within version 1: {set(old) - set(new)}"
    for type_, (fields, required) in new.items():
        old_fields, old_required = old.get(type_, (set[str](), set[str]()))
        if type_ not in old:
            continue  # a new type: documented by test_every_event_type_is_documented
        assert old_fields <= fields, (
            f"{type_} lost fields {old_fields - fields} within version 1: "
            "bump EVENT_SCHEMA_VERSION and upgrade old events instead"
        )
        assert required <= old_required, (
            f"{type_} requires new fields {required - old_required}, which events written "
            "before lack: give them defaults or bump EVENT_SCHEMA_VERSION"
        )
        undocumented = [f for f in sorted(fields - old_fields) if f"`{type_}.{f}`" not in docs]
        assert not undocumented, (
            f"{type_} gained {undocumented} since 0.1.0: document the upgrade under "
            "'Changes within version 1' in docs/events.md"
        )


def test_every_event_type_is_documented() -> None:
    schema = schemas.event_schema()
    types = sorted(schema["discriminator"]["mapping"])
    assert len(types) >= 11
    text = DOCS.read_text(encoding="utf-8")
    assert f"agentcore/schemas/events-v{EVENT_SCHEMA_VERSION}.json" in text
    missing = [t for t in types if f"| `{t}`" not in text]
    assert not missing, f"docs/events.md does not describe the event types {missing}"


def read_fixture() -> sqlite3.Connection:
    """The committed fixture, read-only and immutable: no lock or WAL files next to it."""
    return sqlite3.connect(f"file:{FIXTURES / 'store-0.1.0.db'}?mode=ro&immutable=1", uri=True)


def fixture_events() -> list[dict[str, Any]]:  # Any: exported JSON events
    conn = read_fixture()
    try:
        rows = conn.execute("SELECT run_id, seq, body FROM events ORDER BY run_id, seq")
        return [{"run_id": r, "seq": s, **json.loads(b)} for r, s, b in rows]
    finally:
        conn.close()


def test_events_written_by_0_1_0_validate_against_the_shipped_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(schemas.shipped_schema(1))
    events = fixture_events()
    assert len(events) == 78
    for event in events:
        errors = [e.message for e in validator.iter_errors(event)]
        assert not errors, (event["run_id"], event["seq"], errors)


# --------------------------------------------------------------------------- 0.1.0's store


def load_fixture_agent() -> ModuleType:
    """The tools and model that wrote the fixture, freshly imported (its call log empty)."""
    spec = importlib.util.spec_from_file_location(
        "store_0_1_0_agent", FIXTURES / "store_0_1_0_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def old_db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "store-0.1.0.db"
    shutil.copy(FIXTURES / "store-0.1.0.db", path)
    yield path
    conn = read_fixture()  # the committed fixture is never touched by a test
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    finally:
        conn.close()


@pytest.fixture
async def old_store(old_db: Path) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(old_db)
    try:
        yield store
    finally:
        await store.close()


async def test_it_opens_and_lists(old_store: SQLiteStore) -> None:
    listed = await old_store.list_runs()
    assert {r.run_id: r.status for r in listed} == EXPECTED_STATUSES
    by_id = {r.run_id: r for r in listed}
    assert by_id["v010-complete"].task == "scenario complete"
    assert by_id["v010-complete"].events == 18
    for run_id in EXPECTED_STATUSES:
        events = await old_store.load(run_id)
        assert events[0].type == "run_started"
        assert all(e.v == 1 for e in events)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_the_cli_lists_shows_and_checks_every_run(old_db: Path) -> None:
    url = f"sqlite:///{old_db}"
    code, out = cli("runs", "--store", url)
    assert code == 0, out
    for run_id in EXPECTED_STATUSES:
        assert run_id in out
    for run_id in EXPECTED_STATUSES:
        code, out = cli("show", run_id, "--store", url)
        assert code == 0, out
        assert "run_started" in out or "started" in out
        code, out = cli("show", run_id, "--json", "--store", url)
        assert code == 0, out
        lines = [json.loads(line) for line in out.splitlines()]
        assert [e["seq"] for e in lines] == list(range(len(lines)))
        code, out = cli("check", run_id, "--store", url)
        assert code == 0, (run_id, out)
        assert "transcript sound" in out


async def test_its_runs_continue_to_completion(old_store: SQLiteStore) -> None:
    fx = load_fixture_agent()
    agent = fx.make(store=old_store)

    # Waiting for confirmation of a destructive tool: approve, the call runs once, as stored.
    done = await agent.confirm("v010-delete", approve=True, by="ops")
    assert done.status is RunStatus.COMPLETED, done
    assert fx.CALLS == [("delete_account", {"account_id": "A7"})]

    # Budget exhausted: resume with a larger budget.
    done = await agent.resume("v010-budget", budget=Budget(max_tokens=10_000))
    assert done.status is RunStatus.COMPLETED, done
    assert done.answer == "both looked up"

    # Needs attention (a lost non-idempotent call): settle it; nothing runs again.
    done = await agent.resolve("v010-lost", by="ops", result={"charged": 5}, reason="seen")
    assert done.status is RunStatus.COMPLETED, done
    assert not [c for c in fx.CALLS if c[0] == "charge"]

    # Crashed mid-call under 0.1.0: resuming stops for a person, a rerun charges once.
    paused = await agent.resume("v010-crashed")
    assert paused.status is RunStatus.NEEDS_ATTENTION, paused
    done = await agent.resolve("v010-crashed", by="ops", rerun=True)
    assert done.status is RunStatus.COMPLETED, done
    assert [c for c in fx.CALLS if c[0] == "charge"] == [("charge", {"amount": 5})]

    # Final runs stay as they were.
    for run_id in ("v010-complete", "v010-fail", "v010-cancelled"):
        before = len(await old_store.load(run_id))
        result = await agent.resume(run_id)
        assert result.status.value == EXPECTED_STATUSES[run_id]
        assert len(await old_store.load(run_id)) == before

    listed = {r.run_id: r.status for r in await old_store.list_runs()}
    assert listed == dict.fromkeys(EXPECTED_STATUSES, "completed") | {
        "v010-fail": "failed",
        "v010-cancelled": "cancelled",
    }
    for run_id in EXPECTED_STATUSES:
        events = await old_store.load(run_id)
        assert check_transcript(events) == [], run_id
        # What today's code appended alongside 0.1.0's events exports as JSON too.
        assert [dump_event(e)["seq"] for e in events] == list(range(len(events)))
