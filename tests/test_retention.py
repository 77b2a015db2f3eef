"""Retention and the store's layout from the command line: ``agentcore prune`` and
``agentcore db status`` / ``db upgrade`` (issue 10)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcore.cli import app
from agentcore.events import RunFinished, RunStarted
from agentcore.stores import SQLiteStore, schema_status


def started(run_id: str, at: float, tenant: str | None = None) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        seq=0,
        at=at,
        task=f"task of {run_id}",
        scope=[],
        budget={},
        policy={},
        contract={"hash": "h"},
        route=["scripted/a"],
        tools={},
        tenant=tenant,
    )


def make_runs(db: Path, runs: dict[str, tuple[str, float, str | None]]) -> None:
    """``run id -> (status, last update, tenant)``; ``running`` runs have no run_finished."""

    async def go() -> None:
        store = SQLiteStore(db)
        try:
            for run_id, (status, at, tenant) in runs.items():
                await store.append(run_id, 0, [started(run_id, at - 1, tenant)])
                if status != "running":
                    done = RunFinished(run_id=run_id, seq=1, at=at, status=status, reason="r")
                    await store.append(run_id, 1, [done])
        finally:
            await store.close()

    asyncio.run(go())


def listed(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT run_id FROM runs")}


def cli(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--store", f"sqlite:///{db}"])
    return result.exit_code, result.output


OLD = 1_000_000_000.0  # 2001: older than any --older-than used here
NEW = 4_000_000_000.0  # 2096: newer than any


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    make_runs(
        path,
        {
            "old-done": ("completed", OLD, None),
            "old/failed ✓": ("failed", OLD, "acme"),
            "old-cancelled": ("cancelled", OLD, "acme"),
            "old-attention": ("needs_attention", OLD, None),
            "old-running": ("running", OLD, None),
            "new-done": ("completed", NEW, None),
        },
    )
    return path


def test_prune_dry_run_lists_and_deletes_nothing(db: Path) -> None:
    code, output = cli(db, "prune", "--older-than", "30d", "--dry-run")
    assert code == 0, output
    assert {"old-done", "old/failed ✓", "old-cancelled"} <= set(output.split("\n"))
    assert "would prune 3" in output and "old-attention" not in output
    assert len(listed(db)) == 6


def test_prune_deletes_old_finished_runs_only(db: Path) -> None:
    code, output = cli(db, "prune", "--older-than", "30d")
    assert code == 0, output
    assert "pruned 3" in output
    assert listed(db) == {"old-attention", "old-running", "new-done"}
    with sqlite3.connect(db) as conn:
        left = {row[0] for row in conn.execute("SELECT DISTINCT run_id FROM events")}
    assert left == listed(db)  # the events went with their runs


def test_prune_by_tenant_and_named_statuses(db: Path) -> None:
    code, output = cli(db, "prune", "--older-than", "2020-01-01", "--tenant", "acme")
    assert code == 0, output
    assert listed(db) == {"old-done", "old-attention", "old-running", "new-done"}
    code, output = cli(
        db, "prune", "--older-than", "30d", "--status", "needs_attention", "--status", "running"
    )
    assert code == 0, output
    assert listed(db) == {"old-done", "new-done"}


def test_prune_exports_each_run_as_agentcore_export_does(db: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "archive"
    expected = CliRunner().invoke(app, ["export", "old/failed ✓", "--store", f"sqlite:///{db}"])
    code, output = cli(db, "prune", "--older-than", "30d", "--export", str(out_dir))
    assert code == 0, output
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["old%2Ffailed%20%E2%9C%93.jsonl", "old-cancelled.jsonl", "old-done.jsonl"]
    text = (out_dir / files[0]).read_text(encoding="utf-8")
    assert text == expected.output
    events = [json.loads(line) for line in text.splitlines()]
    assert [(ev["run_id"], ev["type"]) for ev in events] == [
        ("old/failed ✓", "run_started"),
        ("old/failed ✓", "run_finished"),
    ]
    assert "old/failed ✓" not in listed(db)


def test_a_failed_export_deletes_nothing_for_that_run(db: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "archive"
    out_dir.mkdir()
    (out_dir / "old-done.jsonl.partial").mkdir()  # the export of old-done cannot be written
    code, output = cli(db, "prune", "--older-than", "30d", "--export", str(out_dir))
    assert code == 1
    assert "kept old-done" in output and "pruned 2" in output
    assert "old-done" in listed(db)
    assert not (out_dir / "old-done.jsonl").exists()
    assert {"old-done", "old/failed ✓", "old-cancelled"} & listed(db) == {"old-done"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "soon"], "--older-than 'soon'"),
        (["--older-than", "30d", "--status", "done"], "unknown status 'done'"),
        (["--older-than", "30d", "--tenant", "a\nb"], "control character"),
    ],
)
def test_prune_usage_errors(db: Path, args: list[str], message: str) -> None:
    code, output = cli(db, "prune", *args)
    assert code == 2
    assert message in output
    assert len(listed(db)) == 6


def test_prune_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "runs.db"
    code, output = cli(db, "prune", "--older-than", "30d")
    assert code == 0 and "nothing to prune" in output, output
    assert not db.parent.exists()


def test_prune_refuses_an_older_store_instead_of_migrating_it(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX runs_by_updated")
        conn.execute("PRAGMA user_version = 3")
    code, output = cli(db, "prune", "--older-than", "30d")
    assert code == 1 and "agentcore db upgrade" in output, output
    assert len(listed(db)) == 6


# --------------------------------------------------------------------------- db


def test_db_status_and_upgrade_of_an_older_file(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    asyncio.run(_close(SQLiteStore(db)))
    with sqlite3.connect(db) as conn:  # back to version 3, as agentcore wrote it before 4
        for name in (
            "runs_by_updated",
            "runs_by_status_updated",
            "runs_by_tenant_updated",
            "runs_by_tenant_status_updated",
        ):
            conn.execute(f"DROP INDEX {name}")
        conn.execute("ALTER TABLE runs DROP COLUMN metadata")  # added by version 5
        conn.execute("ALTER TABLE runs DROP COLUMN chain_head")  # added by version 6
        conn.execute("ALTER TABLE events DROP COLUMN chain")
        conn.execute("PRAGMA user_version = 3")
    latest = schema_status(f"sqlite:///{db}").latest
    code, output = cli(db, "db", "status")
    assert code == 0, output
    assert f"schema version: 3 (this agentcore: {latest})" in output
    assert "4  indexes that list runs" in output
    code, output = cli(db, "db", "upgrade")
    assert code == 0, output
    assert f"upgraded from version 3 to {latest}" in output
    code, output = cli(db, "db", "status")
    assert "up to date" in output
    code, output = cli(db, "db", "upgrade")
    assert code == 0 and "nothing to apply" in output


def test_db_status_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "nowhere" / "runs.db"
    code, output = cli(db, "db", "status")
    assert code == 0, output
    assert "schema version: 0" in output and "1  events and runs" in output
    assert not db.parent.exists()


def test_a_newer_store_is_refused_with_its_own_exit_code(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    asyncio.run(_close(SQLiteStore(db)))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    before = db.read_bytes()
    for command in (["db", "status"], ["db", "upgrade"]):
        code, output = cli(db, *command)
        assert code == 9, output
        assert "newer than this agentcore" in output
    assert db.read_bytes() == before


async def _close(store: SQLiteStore) -> None:
    await store.close()


def test_prune_goes_through_runs_in_chunks(tmp_path: Path) -> None:
    from agentcore.stores._base import PRUNE_CHUNK

    n = 2 * PRUNE_CHUNK + 1

    async def go() -> tuple[list[str], list[str], int]:
        store = SQLiteStore(tmp_path / "many.db", synchronous="NORMAL")
        try:
            for i in range(n):
                run_id = f"r{i:05}"
                done = RunFinished(run_id=run_id, seq=1, at=OLD, status="completed")
                await store.append(run_id, 0, [started(run_id, OLD - 1), done])
            dry = await store.prune(before=OLD + 1, dry_run=True)
            pruned = await store.prune(before=OLD + 1)
            return dry, pruned, len(await store.list_runs(limit=n))
        finally:
            await store.close()

    dry, pruned, left = asyncio.run(go())
    assert len(dry) == n and sorted(pruned) == sorted(dry) and left == 0


def test_db_upgrade_of_a_0_1_0_store(tmp_path: Path) -> None:
    import shutil

    db = tmp_path / "store-0.1.0.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "store-0.1.0.db", db)
    latest = schema_status(f"sqlite:///{db}").latest
    code, output = cli(db, "db", "status")
    assert code == 0 and "schema version: 1" in output, output
    assert [f"  {v}  " in output for v in range(2, latest + 1)] == [True] * (latest - 1)
    code, output = cli(db, "db", "upgrade")
    assert code == 0 and f"upgraded from version 1 to {latest}" in output, output
    code, output = cli(db, "prune", "--older-than", "1d", "--dry-run")
    assert code == 0, output  # the 0.1.0 runs read through the new indexes
