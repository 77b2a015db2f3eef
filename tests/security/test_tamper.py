"""Tamper evidence, tested as an attacker would: someone who can write the store's tables
but has no key.

A run is written through the real agent and the CLI (the demo pauses on a destructive call,
``agentcore confirm`` in another process approves it, so the chain continues across
processes), then its rows are changed with raw SQL, and ``agentcore verify`` (or the
store's ``verify_chain``) must name the first broken seq. The chain's algorithm is
re-implemented here from its documentation (an attacker knows it): what protects the run
is the key, not the secrecy of the hash.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stores.conftest import drop_schema, pg_schema, postgres_dsn  # the PostgreSQL fixtures

from agentcore.stores import ChainReport, PostgresStore, SQLiteStore
from agentcore.stores.sqlite import SCHEMA_VERSION as SQLITE_VERSION

KEY = "tamper-test-key-0123456789abcdef"
KEY_VARIABLE = "AGENTCORE_CHAIN_KEY"
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")
EXIT_BROKEN = 10

__all__ = ["pg_schema", "postgres_dsn"]  # fixtures, imported to be found here

pytestmark = pytest.mark.subprocess


# -- the chain, as its documentation states it -------------------------------------------


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def genesis(run_id: str) -> bytes:
    return hashlib.sha256(b"agentcore.genesis.v1\x00" + _field(run_id.encode())).digest()


def link(prev: bytes, run_id: str, seq: int, type_: str, body: bytes) -> bytes:
    return hashlib.sha256(
        b"agentcore.chain.v1\x00"
        + prev
        + seq.to_bytes(8, "big", signed=True)
        + _field(run_id.encode())
        + _field(type_.encode())
        + _field(body)
    ).digest()


# -- the CLI, as a user runs it ---------------------------------------------------------


def cli(
    cwd: Path, store: str, *args: str, key: str | None = KEY
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*PROVIDER_KEYS, "AGENTCORE_MODEL", KEY_VARIABLE)
    }
    env |= {"AGENTCORE_STORE": store, "COLUMNS": "200"}
    if key is not None:
        env[KEY_VARIABLE] = key
    return subprocess.run(
        [sys.executable, "-m", "agentcore.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def demo_until_confirmation(
    cwd: Path, store: str, *, key: str | None = KEY
) -> tuple[str, list[str]]:
    """``agentcore demo``: it pauses on a destructive call. Returns the run id and the
    printed approve command (as CLI arguments, with a name filled in)."""
    demo = cli(cwd, store, "demo", key=key)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    (line,) = [ln for ln in demo.stdout.splitlines() if ln.startswith("approve: ")]
    approve = shlex.split(line.removeprefix("approve: "))[1:]
    return approve[1], [*approve, "--by", "alice"]


def demo_confirmed(cwd: Path, store: str) -> str:
    """A run written by two processes: the demo, then ``agentcore confirm``."""
    run_id, approve = demo_until_confirmation(cwd, store)
    done = cli(cwd, store, *approve)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_id


# -- raw access to the tables -------------------------------------------------------------


@dataclass
class Raw:
    """SQL on a store's tables, from outside the store (``?`` placeholders, ``{events}``
    and ``{runs}`` for the table names)."""

    run: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]

    def __call__(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.run(sql, params)

    def rows(self, run_id: str) -> list[tuple[int, str, bytes, bytes | None]]:
        got = self(
            "SELECT seq, type, body, chain FROM {events} WHERE run_id = ? ORDER BY seq", run_id
        )
        return [
            (
                int(s),
                str(t),
                b.encode() if isinstance(b, str) else bytes(b),
                None if c is None else bytes(c),
            )
            for s, t, b, c in got
        ]

    def count(self, run_id: str) -> int:
        return int(self("SELECT next_seq FROM {runs} WHERE run_id = ?", run_id)[0][0])

    def head(self, run_id: str) -> str | None:
        return self("SELECT chain_head FROM {runs} WHERE run_id = ?", run_id)[0][0]


def sqlite_raw(path: Path) -> Raw:
    def run(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            return conn.execute(sql.format(events="events", runs="runs"), params).fetchall()
        finally:
            conn.close()

    return Raw(run)


def postgres_raw(dsn: str, schema: str) -> Raw:
    import psycopg

    def run(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        text = sql.format(
            events=f'"{schema}".agentcore_events', runs=f'"{schema}".agentcore_runs'
        ).replace("?", "%s")
        with psycopg.connect(dsn, autocommit=True) as conn:
            cur = conn.execute(text.encode(), params)
            return cur.fetchall() if cur.description else []

    return Raw(run)


# -- what an attacker does -------------------------------------------------------------------


def change_body(raw: Raw, run_id: str, seq: int) -> None:
    (body,) = raw("SELECT body FROM {events} WHERE run_id = ? AND seq = ?", run_id, seq)[0]
    text = body.decode() if isinstance(body, bytes) else body
    changed = text.replace('"at":', '"at": ', 1)  # still valid JSON, still the same event
    assert changed != text
    raw("UPDATE {events} SET body = ? WHERE run_id = ? AND seq = ?", changed, run_id, seq)


def delete_last(raw: Raw, run_id: str) -> None:
    n = raw.count(run_id)
    raw("DELETE FROM {events} WHERE run_id = ? AND seq = ?", run_id, n - 1)
    raw("UPDATE {runs} SET next_seq = ? WHERE run_id = ?", n - 1, run_id)


def delete_middle(raw: Raw, run_id: str) -> None:
    raw("DELETE FROM {events} WHERE run_id = ? AND seq = ?", run_id, 5)


def swap_bodies(raw: Raw, run_id: str) -> None:
    rows = {s: (t, b) for s, t, b, _ in raw.rows(run_id)}
    for seq, other in ((4, 5), (5, 4)):
        t, b = rows[other]
        raw(
            "UPDATE {events} SET type = ?, body = ? WHERE run_id = ? AND seq = ?",
            t,
            b.decode(),
            run_id,
            seq,
        )


def rewrite(raw: Raw, run_id: str, *, mac: str) -> None:
    """Change seq 5, recompute every digest and the head's digest; sign with ``mac``."""
    change_body(raw, run_id, 5)
    prev = genesis(run_id)
    for seq, type_, body, _ in raw.rows(run_id):
        prev = link(prev, run_id, seq, type_, body)
        raw("UPDATE {events} SET chain = ? WHERE run_id = ? AND seq = ?", prev, run_id, seq)
    head = raw.head(run_id)
    assert head is not None
    version, first, since, last, _, _ = head.split(":")
    raw(
        "UPDATE {runs} SET chain_head = ? WHERE run_id = ?",
        f"{version}:{first}:{'-' if mac == '-' else since}:{last}:{prev.hex()}:{mac}",
        run_id,
    )


def drop_head(raw: Raw, run_id: str) -> None:
    raw("UPDATE {runs} SET chain_head = NULL WHERE run_id = ?", run_id)


def null_chains_after(raw: Raw, run_id: str) -> None:
    raw("UPDATE {events} SET chain = NULL WHERE run_id = ? AND seq > ?", run_id, 10)


def append_after_head(raw: Raw, run_id: str) -> None:
    """A forged event at the end, with a correct digest, but no key to sign a new head."""
    rows = raw.rows(run_id)
    seq, type_, body, chain = rows[-1]
    assert chain is not None
    forged = link(chain, run_id, seq + 1, type_, body)
    raw(
        "INSERT INTO {events} (run_id, seq, type, at, body, chain) VALUES (?, ?, ?, ?, ?, ?)",
        run_id,
        seq + 1,
        type_,
        1.0,
        body.decode(),
        forged,
    )
    raw("UPDATE {runs} SET next_seq = ? WHERE run_id = ?", seq + 2, run_id)


def erase_everything(raw: Raw, run_id: str) -> None:
    """Every digest and the head NULL: the run looks written before chaining."""
    raw("UPDATE {events} SET chain = NULL WHERE run_id = ?", run_id)
    drop_head(raw, run_id)


LAST = -1  # the run's last seq, whatever it is
AFTER = -2  # the seq after it

CASES: list[tuple[str, Callable[[Raw, str], None], int, str]] = [
    ("body-changed", lambda r, i: change_body(r, i, 7), 7, "does not match its body"),
    ("last-deleted-count-fixed", delete_last, LAST, "is missing (the head covers up to"),
    ("middle-deleted", delete_middle, 5, "the event at seq 5 is missing"),
    ("bodies-swapped", swap_bodies, 4, "does not match its body"),
    (
        "rewritten-head-unsigned",
        lambda r, i: rewrite(r, i, mac="-"),
        0,
        "the head is not signed, but a key was given",
    ),
    (
        "rewritten-head-forged",
        lambda r, i: rewrite(r, i, mac="ab" * 32),
        0,
        "signature does not verify",
    ),
    ("head-dropped", drop_head, 0, "the run's chain head is missing"),
    ("chains-nulled-after-10", null_chains_after, 11, "NULL after chained events"),
    ("appended-after-head", append_after_head, AFTER, "appended after the head"),
]


def expected_seq(seq: int, events: int) -> int:
    return {LAST: events - 1, AFTER: events}.get(seq, seq)


# -- SQLite, through the CLI ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A SQLite store holding one run written by ``demo`` and ``confirm`` with the key."""
    where = tmp_path_factory.mktemp("pristine")
    run_id = demo_confirmed(where, f"sqlite:///{where / 'runs.db'}")
    return where / "runs.db", run_id


@pytest.fixture
def copy(pristine: tuple[Path, str], tmp_path: Path) -> tuple[Path, str, str]:
    path, run_id = pristine
    target = tmp_path / "runs.db"
    shutil.copy(path, target)
    return target, run_id, f"sqlite:///{target}"


def test_an_untouched_run_is_intact_and_signed(copy: tuple[Path, str, str]) -> None:
    path, run_id, url = copy
    events = sqlite_raw(path).count(run_id)
    res = cli(path.parent, url, "verify", run_id)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"intact: chained seq 0..{events - 1}; head signed, signature valid" in res.stdout


@pytest.mark.parametrize(("name", "tamper", "seq", "why"), CASES, ids=[c[0] for c in CASES])
def test_the_cli_names_the_first_broken_seq(
    copy: tuple[Path, str, str],
    name: str,
    tamper: Callable[[Raw, str], None],
    seq: int,
    why: str,
) -> None:
    path, run_id, url = copy
    raw = sqlite_raw(path)
    events = raw.count(run_id)
    tamper(raw, run_id)
    res = cli(path.parent, url, "verify", run_id)
    assert res.returncode == EXIT_BROKEN, (name, res.stdout, res.stderr)
    assert f"BROKEN at seq {expected_seq(seq, events)}: " in res.stdout, res.stdout
    assert why in res.stdout
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1  # one line: how many runs are broken


def test_without_the_key_verify_says_the_signature_was_not_checked(
    copy: tuple[Path, str, str],
) -> None:
    path, run_id, url = copy
    res = cli(path.parent, url, "verify", run_id, key=None)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "head signatures are NOT checked" in res.stdout
    assert "head signed, signature NOT checked" in res.stdout
    # ... but a rewrite that only the key would catch is then not caught: say so plainly.
    rewrite(sqlite_raw(path), run_id, mac="ab" * 32)
    assert cli(path.parent, url, "verify", run_id, key=None).returncode == 0


def test_a_wrong_key_breaks_every_signed_run(copy: tuple[Path, str, str]) -> None:
    path, _run_id, url = copy
    res = cli(path.parent, url, "verify", "--all", key="another key entirely")
    assert res.returncode == EXIT_BROKEN
    assert "BROKEN at seq 0: the head's signature does not verify under the key" in res.stdout
    assert "checked 1 run(s): 0 intact, 1 broken" in res.stdout


def test_verify_checks_the_snapshots_a_resume_would_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCORE_SNAPSHOT_EVERY", "2")  # the demo's few events, snapshotted
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = demo_confirmed(tmp_path, url)
    raw = sqlite_raw(tmp_path / "runs.db")
    seqs = [
        seq for (seq,) in raw("SELECT seq FROM snapshots WHERE run_id = ? ORDER BY seq", run_id)
    ]
    assert len(seqs) >= 3
    res = cli(tmp_path, url, "verify", run_id)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(seqs)} snapshot(s) verify" in res.stdout
    # Rewrite what a snapshot says the run had done: the events still verify, the run not.
    raw("UPDATE snapshots SET state = ? WHERE run_id = ? AND seq = ?", "{}", run_id, seqs[1])
    res = cli(tmp_path, url, "verify", run_id)
    assert res.returncode == EXIT_BROKEN, res.stdout + res.stderr
    assert f"BROKEN at seq {seqs[1]}: the snapshot covering seq" in res.stdout
    assert "its seal does not verify under the key" in res.stdout
    assert "Traceback" not in res.stderr
    # The run still reads back from its events.
    shown = cli(tmp_path, url, "show", run_id)
    assert shown.returncode == 0 and "completed" in shown.stdout, shown.stdout + shown.stderr


def test_an_append_without_the_key_is_refused_rather_than_unsign_the_run(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id, approve = demo_until_confirmation(tmp_path, url)
    res = cli(tmp_path, url, *approve, key=None)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "chain head is signed, but this store has no chain key" in res.stderr
    assert KEY_VARIABLE in res.stderr and "Traceback" not in res.stderr
    assert cli(tmp_path, url, "verify", run_id).returncode == 0  # nothing was written
    assert cli(tmp_path, url, *approve).returncode == 0  # with the key it goes on


def test_verify_all_reports_each_run_and_fails_on_one_broken(
    copy: tuple[Path, str, str],
) -> None:
    path, run_id, url = copy
    other, approve = demo_until_confirmation(path.parent, url)
    change_body(sqlite_raw(path), other, 3)
    res = cli(path.parent, url, "verify", "--all")
    assert res.returncode == EXIT_BROKEN, res.stdout + res.stderr
    lines = {ln.split("\t")[0]: ln for ln in res.stdout.splitlines() if "\t" in ln}
    assert "intact" in lines[run_id]
    assert "BROKEN at seq 3" in lines[other]
    assert "checked 2 run(s): 1 intact, 1 broken" in res.stdout
    del approve


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["verify"], 2, "give a RUN_ID or --all"),
        (["verify", "x", "--all"], 2, "give a RUN_ID or --all"),
        (["verify", "no-such-run"], 1, "No run 'no-such-run'"),
    ],
)
def test_verify_usage_and_unknown_runs(
    copy: tuple[Path, str, str], args: list[str], code: int, needle: str
) -> None:
    path, _, url = copy
    res = cli(path.parent, url, *args)
    assert res.returncode == code, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr


def test_erasing_a_whole_runs_chain_is_not_detected(copy: tuple[Path, str, str]) -> None:
    """The documented limit: with every digest and the head gone, a run looks written
    before chaining. verify reports it as an unchained prefix (exit 0), which is what
    docs/security.md says: keep a copy of the heads elsewhere to catch this."""
    path, run_id, url = copy
    raw = sqlite_raw(path)
    events = raw.count(run_id)
    erase_everything(raw, run_id)
    res = cli(path.parent, url, "verify", run_id)
    assert res.returncode == 0
    assert f"unchained prefix seq 0..{events - 1}" in res.stdout


# -- a store written before chaining ------------------------------------------------------


def as_version_5(path: Path) -> None:
    """The file as agentcore wrote it before migration 6: no chain columns (and none of
    the later migrations' tables)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP TABLE IF EXISTS snapshots")
        conn.execute("ALTER TABLE events DROP COLUMN chain")
        conn.execute("ALTER TABLE runs DROP COLUMN chain_head")
        conn.execute("PRAGMA user_version = 5")
    finally:
        conn.close()


def test_a_run_begun_before_chaining_keeps_an_unchained_prefix(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id, approve = demo_until_confirmation(tmp_path, url)
    as_version_5(tmp_path / "runs.db")
    paused_at = sqlite_raw(tmp_path / "runs.db").count(run_id)
    upgraded = cli(tmp_path, url, "db", "upgrade")
    assert upgraded.returncode == 0 and f"from version 5 to {SQLITE_VERSION}" in upgraded.stdout
    assert cli(tmp_path, url, *approve).returncode == 0  # continued after the upgrade
    raw = sqlite_raw(tmp_path / "runs.db")
    rows = raw.rows(run_id)
    assert all(chain is None for _, _, _, chain in rows[:paused_at])  # never back-filled
    assert all(chain is not None for _, _, _, chain in rows[paused_at:])
    res = cli(tmp_path, url, "verify", run_id)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        f"intact: unchained prefix seq 0..{paused_at - 1} (written before chaining); "
        f"chained seq {paused_at}..{len(rows) - 1}; head signed, signature valid"
    ) in res.stdout
    # The chained rest is protected as any other chain.
    change_body(raw, run_id, paused_at + 1)
    res = cli(tmp_path, url, "verify", run_id)
    assert res.returncode == EXIT_BROKEN and f"BROKEN at seq {paused_at + 1}" in res.stdout


# -- every single-byte change, found at its seq -------------------------------------------


@pytest.fixture(scope="module")
def stored(
    pristine: tuple[Path, str],
) -> tuple[str, int, str, list[tuple[int, str, bytes, bytes | None]]]:
    path, run_id = pristine
    raw = sqlite_raw(path)
    return run_id, raw.count(run_id), raw.head(run_id) or "", raw.rows(run_id)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_byte_change_is_found_at_its_seq(
    stored: tuple[str, int, str, list[tuple[int, str, bytes, bytes | None]]],
    data: st.DataObject,
) -> None:
    from agentcore.stores._chain import ChainKey, check_chain  # the verifier itself

    run_id, events, head, rows = stored
    index = data.draw(st.integers(0, len(rows) - 1), label="row")
    seq, type_, body, chain = rows[index]
    assert chain is not None
    column = data.draw(st.sampled_from(["body", "chain"]), label="column")
    target = body if column == "body" else chain
    at = data.draw(st.integers(0, len(target) - 1), label="byte")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != target[at]), label="value")
    changed = target[:at] + bytes([new]) + target[at + 1 :]
    tampered = list(rows)
    tampered[index] = (
        (seq, type_, changed, chain) if column == "body" else (seq, type_, body, changed)
    )
    report = check_chain(run_id, events, head, tampered, ChainKey(KEY))
    assert not report.intact
    assert report.broken_seq == seq, report


def test_the_stored_rows_verify_as_they_are(
    stored: tuple[str, int, str, list[tuple[int, str, bytes, bytes | None]]],
) -> None:
    from agentcore.stores._chain import ChainKey, check_chain

    run_id, events, head, rows = stored
    assert check_chain(run_id, events, head, rows, ChainKey(KEY)).intact


# -- PostgreSQL, real, through the same CLI -------------------------------------------------


@pytest.fixture
def pg_run(postgres_dsn: str, pg_schema: str, tmp_path: Path) -> Iterator[tuple[Raw, str, str]]:
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{pg_schema}"'.encode())
    url = f"{postgres_dsn}?options=-csearch_path%3D{pg_schema}"
    run_id = demo_confirmed(tmp_path, url)
    try:
        yield postgres_raw(postgres_dsn, pg_schema), run_id, url
    finally:
        drop_schema(postgres_dsn, pg_schema)


async def _verify_pg(dsn: str, schema: str, run_id: str) -> ChainReport:
    store = PostgresStore(dsn, schema=schema, chain_key=KEY)
    try:
        return await store.verify_chain(run_id)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgres_every_tampering_is_found_at_its_seq(
    pg_run: tuple[Raw, str, str], postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    raw, run_id, url = pg_run
    res = cli(tmp_path, url, "verify", run_id)
    assert res.returncode == 0 and "head signed, signature valid" in res.stdout, res.stdout
    events = raw.count(run_id)
    snapshot = [
        f'CREATE TABLE "{pg_schema}".saved_runs AS TABLE "{pg_schema}".agentcore_runs',
        f'CREATE TABLE "{pg_schema}".saved_events AS TABLE "{pg_schema}".agentcore_events',
    ]
    for statement in snapshot:
        raw(statement)
    for name, tamper, seq, why in CASES:
        tamper(raw, run_id)
        report = await _verify_pg(postgres_dsn, pg_schema, run_id)
        assert not report.intact, name
        assert report.broken_seq == expected_seq(seq, events), (name, report)
        assert report.reason is not None and why in report.reason, (name, report)
        raw("DELETE FROM {runs}")  # the events go with the runs (ON DELETE CASCADE)
        raw(f'INSERT INTO {{runs}} SELECT * FROM "{pg_schema}".saved_runs')
        raw(f'INSERT INTO {{events}} SELECT * FROM "{pg_schema}".saved_events')
        assert (await _verify_pg(postgres_dsn, pg_schema, run_id)).intact, name
    change_body(raw, run_id, 3)  # and through the CLI, as a user sees it
    res = cli(tmp_path, url, "verify", "--all")
    assert res.returncode == EXIT_BROKEN and "BROKEN at seq 3" in res.stdout, res.stdout


@pytest.mark.postgres
async def test_postgres_a_run_begun_before_chaining_keeps_an_unchained_prefix(
    postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{pg_schema}"'.encode())
    url = f"{postgres_dsn}?options=-csearch_path%3D{pg_schema}"
    try:
        run_id, approve = demo_until_confirmation(tmp_path, url)
        raw = postgres_raw(postgres_dsn, pg_schema)
        paused_at = raw.count(run_id)
        # As migration 3 left the database: no chain column, the reserved head NULL.
        raw("ALTER TABLE {events} DROP COLUMN chain")
        raw("UPDATE {runs} SET chain_head = NULL")
        raw(f'DELETE FROM "{pg_schema}".agentcore_schema WHERE version >= 4')
        assert cli(tmp_path, url, "db", "upgrade").returncode == 0
        assert cli(tmp_path, url, *approve).returncode == 0
        report = await _verify_pg(postgres_dsn, pg_schema, run_id)
        assert report.intact and report.signature == "valid", report
        assert report.unchained == paused_at and report.first == paused_at
        assert report.last == raw.count(run_id) - 1
    finally:
        drop_schema(postgres_dsn, pg_schema)


# -- the store as a library -------------------------------------------------------------------


async def test_a_store_verifies_without_the_cli(copy: tuple[Path, str, str]) -> None:
    path, run_id, _ = copy
    store = SQLiteStore(path, chain_key=KEY)
    try:
        report = await store.verify_chain(run_id)
        assert report.intact and report.signature == "valid" and report.unchained == 0
        change_body(sqlite_raw(path), run_id, 2)
        report = await store.verify_chain(run_id)
        assert (report.intact, report.broken_seq) == (False, 2)
        assert report.describe().startswith("BROKEN at seq 2: ")
    finally:
        await store.close()
