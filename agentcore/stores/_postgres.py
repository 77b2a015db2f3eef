"""PostgresStore: transcripts in PostgreSQL, through psycopg 3 (async) and a connection pool.

psycopg is imported only when a store is constructed (extra ``agentcore[postgres]``), so
``import agentcore`` stays fast and works without it.

Layout (schema version 1):
    ``agentcore_runs`` holds one row per run with everything an append reads or checks:
    status, task, created_at / updated_at (the events' own times, Unix seconds), next_seq,
    and columns reserved for what comes next (tenant, owner, epoch, lease_until, the cancel
    request, chain_head), so that leases, tenants and chaining need no rewrite of the table.
    ``agentcore_events`` holds one row per event, ``PRIMARY KEY (run_id, seq)``; the body is
    the event's compact JSON without ``run_id`` and ``seq``, stored as TEXT, not jsonb:
    jsonb refuses the ``\\u0000`` escape, and an event must round-trip whatever it holds.
    ``list_runs`` reads only ``agentcore_runs`` (indexed by updated_at and by status).
    Times are DOUBLE PRECISION Unix seconds so a run's times read back exactly as the events
    carry them; lease times (later) come from the database clock, hence TIMESTAMPTZ.
    PostgreSQL text cannot hold a NUL character, which a task may contain: the row's free
    text (``task``, ``cancel_by``, ``cancel_reason``) is therefore kept as a JSON string
    literal (``"the task"``), escaped the same way as the bodies.

Migrations:
    :data:`MIGRATIONS` is the ordered list of numbered steps (the rule every store shares, in
    ``_migrations``): step ``n`` holds the SQL statements that take a database from version
    ``n - 1`` to ``n``, additions only. The applied versions are rows of
    ``agentcore_schema``. Opening a store checks the version; when it is behind, the missing
    steps run in one transaction under an advisory lock, so processes opening at once do not
    race. A database newer than this code is refused, untouched.

Appends:
    One statement, so one round trip: a data-modifying CTE advances the run row only if it
    is at the expected seq (``UPDATE ... WHERE next_seq = expected``; for a new run
    ``INSERT ... ON CONFLICT DO NOTHING``) and inserts the events only if it did. The row
    lock taken by the update orders concurrent writers: the loser re-checks ``next_seq``
    after the winner commits, matches nothing and writes nothing. A unique violation (an
    event row already there) fails the whole statement the same way: SeqConflictError.

Event loops:
    A pool belongs to the event loop that opened it. The store opens one pool per running
    loop, lazily, and a keeper task in that loop closes the pool when the loop shuts down
    (``asyncio.run`` cancels it), so code that calls ``asyncio.run`` repeatedly with one
    store object (the CLI, the ``*_sync`` methods) gets a fresh pool each time.

Claims:
    ``claim`` is synchronous in the store protocol, and an async pool cannot be used from
    synchronous code in a loop it belongs to. Claims therefore use one small synchronous
    connection per store, dedicated to claims: a claim is a session-level
    ``pg_try_advisory_lock`` on it, released by ``release()`` or when the connection (or the
    process) dies. One connection serves all of the store's claims, so a thousand runs in
    flight hold a thousand locks, not a thousand connections. Leases with fencing replace
    this; it is kept in :class:`_AdvisoryClaims` alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import re
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentcore.contracts.errors import (
    ConfigurationError,
    RunBusyError,
    RunNotFoundError,
    SeqConflictError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.events import Event, RunStarted, decode_event

from ._base import CancelRequest, RunClaim, RunSummary, check_batch, status_after
from ._codec import DECODE_ERRORS, encode_batch, run_label
from ._migrations import Migration, numbered, pending

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]

MIGRATIONS = numbered(
    Migration(
        1,
        "runs (with room for leases, tenants, cancel requests, chaining) and events",
        (
            """CREATE TABLE {runs} (
                run_id TEXT PRIMARY KEY,
                status TEXT NOT NULL,
                task TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                next_seq BIGINT NOT NULL,
                tenant TEXT NULL,
                owner TEXT NULL,
                epoch BIGINT NOT NULL DEFAULT 0,
                lease_until TIMESTAMPTZ NULL,
                cancel_by TEXT NULL,
                cancel_reason TEXT NULL,
                cancel_at DOUBLE PRECISION NULL,
                chain_head TEXT NULL
            )""",
            """CREATE TABLE {events} (
                run_id TEXT NOT NULL REFERENCES {runs} (run_id) ON DELETE CASCADE,
                seq BIGINT NOT NULL,
                type TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL,
                body TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
            # list_runs: most recently updated first, all runs or one status. Every append
            # rewrites updated_at, so these cost an index write per append (no HOT update):
            # the price of listing millions of runs without a sort.
            "CREATE INDEX agentcore_runs_by_updated ON {runs} (updated_at DESC, run_id)",
            "CREATE INDEX agentcore_runs_by_status ON {runs} (status, updated_at DESC, run_id)",
        ),
    ),
)
"""The layout's steps, in order (``{runs}`` and ``{events}`` are filled in per schema)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The layout this module writes and reads, recorded in ``agentcore_schema``."""

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")
_PASSWORD_IN_URL = re.compile(r"(://[^:/@?#]*):[^@/?#]*@")
_PASSWORD_IN_DSN = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)

_EMPTY_STATUS = ""  # fold start: a batch that changes no status leaves the row's as it is


def _text_in(value: str) -> str:
    """Free text as the row keeps it: a JSON string literal (no NUL can reach the column)."""
    return json.dumps(value, ensure_ascii=False)


def _text_out(stored: str) -> str:
    value = json.loads(stored)
    if not isinstance(value, str):
        raise TypeError(f"expected a JSON string, found {type(value).__name__}")
    return value


def _redact(dsn: str) -> str:
    """The DSN with any password replaced, for messages."""
    return _PASSWORD_IN_DSN.sub(r"\1***", _PASSWORD_IN_URL.sub(r"\1:***@", dsn))


def _lock_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key (pg_try_advisory_lock takes a bigint)."""
    text = "\x1f".join(("agentcore", *parts))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _require_psycopg() -> None:
    try:  # checked here so that the error names the extra
        importlib.import_module("psycopg")
        importlib.import_module("psycopg_pool")
    except ImportError as exc:
        raise ConfigurationError(
            f"The PostgreSQL store needs psycopg 3 and psycopg-pool ({exc}): "
            "pip install 'agentcore[postgres]'"
        ) from exc


@dataclass(frozen=True, slots=True)
class _Sql:
    """Every statement, with the tables' (possibly schema-qualified) names filled in."""

    runs: str
    events: str
    version_table: str
    append_new: bytes
    append_next: bytes
    next_seq: bytes
    load: bytes
    list_all: bytes
    list_status: bytes
    lock_run: bytes
    bodies: bytes
    delete_after: bytes
    reset_run: bytes
    request_cancel: bytes
    cancel_request: bytes

    @classmethod
    def build(cls, schema: str | None) -> _Sql:
        from psycopg import sql

        def name(table: str) -> sql.Identifier:
            return sql.Identifier(schema, table) if schema else sql.Identifier(table)

        tables = {"runs": name("agentcore_runs"), "events": name("agentcore_events")}

        def q(template: str) -> bytes:
            return sql.SQL(template).format(**tables).as_bytes(None)  # pyright: ignore[reportArgumentType]  # runtime SQL text, names quoted by sql.Identifier

        insert_events = """ins AS (
            INSERT INTO {events} (run_id, seq, type, at, body)
            SELECT run.run_id, e.seq, e.type, e.at, e.body
            FROM run, unnest(%(seqs)s::bigint[], %(types)s::text[], %(ats)s::float8[],
                             %(bodies)s::text[]) AS e (seq, type, at, body)
            RETURNING 1
        )
        SELECT count(*) FROM ins"""
        columns = "run_id, status, task, created_at, updated_at, next_seq"
        return cls(
            runs=name("agentcore_runs").as_string(None),
            events=name("agentcore_events").as_string(None),
            version_table=name("agentcore_schema").as_string(None),
            append_new=q(
                """WITH run AS (
                    INSERT INTO {runs} (run_id, status, task, created_at, updated_at, next_seq)
                    VALUES (%(run_id)s, %(status)s, %(task)s, %(created)s, %(updated)s, %(end)s)
                    ON CONFLICT (run_id) DO NOTHING
                    RETURNING run_id
                ), """
                + insert_events
            ),
            append_next=q(
                """WITH run AS (
                    UPDATE {runs}
                    SET next_seq = %(end)s, updated_at = %(updated)s,
                        status = COALESCE(%(status)s::text, status)
                    WHERE run_id = %(run_id)s AND next_seq = %(expected)s
                    RETURNING run_id
                ), """
                + insert_events
            ),
            next_seq=q("SELECT next_seq FROM {runs} WHERE run_id = %s"),
            # One statement, one snapshot: no row means no run; a row with NULL event
            # columns means a run with no events after ``after``.
            load=q(
                """SELECT r.next_seq, e.seq, e.type, e.body
                FROM {runs} AS r LEFT JOIN {events} AS e ON e.run_id = r.run_id AND e.seq > %s
                WHERE r.run_id = %s
                ORDER BY e.seq"""
            ),
            list_all=q(f"SELECT {columns} FROM {{runs}} ORDER BY updated_at DESC, run_id LIMIT %s"),
            list_status=q(
                f"SELECT {columns} FROM {{runs}} WHERE status = %s "
                "ORDER BY updated_at DESC, run_id LIMIT %s"
            ),
            lock_run=q("SELECT 1 FROM {runs} WHERE run_id = %s FOR UPDATE"),
            bodies=q("SELECT seq, body FROM {events} WHERE run_id = %s ORDER BY seq"),
            delete_after=q("DELETE FROM {events} WHERE run_id = %s AND seq > %s"),
            reset_run=q("UPDATE {runs} SET next_seq = %s, status = %s WHERE run_id = %s"),
            request_cancel=q(
                """UPDATE {runs} SET cancel_by = %s, cancel_reason = %s,
                    cancel_at = extract(epoch FROM statement_timestamp())::float8
                WHERE run_id = %s RETURNING 1"""
            ),
            cancel_request=q(
                "SELECT cancel_by, cancel_reason, cancel_at FROM {runs} WHERE run_id = %s"
            ),
        )

    def migration(self, statement: str) -> bytes:
        """A statement of :data:`MIGRATIONS` with the table names filled in."""
        return statement.format(runs=self.runs, events=self.events).encode()


class PostgresStore:
    """A durable store in PostgreSQL; the same semantics as :class:`SQLiteStore`.

    Any number of processes and store objects may share a database: conditional appends
    keep them consistent, and claims are exclusive across all of them.

    Args:
        dsn: a ``postgresql://`` / ``postgres://`` URL or a libpq ``key=value`` string.
        schema: the schema to keep the tables in (created if missing); by default the
            connection's ``search_path`` decides (e.g. ``?options=-csearch_path%3Dmine``).
        min_connections, max_connections: the size of each event loop's pool.
        connect_timeout_s: how long opening a connection (or waiting for a free one from
            the pool) may take before a StoreError.
        migrate: bring an older schema up to date on open (default). When false, an older
            schema is refused with a StoreError; an empty database is still initialised.

    Attributes:
        url: the DSN as given (it may contain a password; messages never show it).
        schema: the schema given, or ``None``.

    Raises:
        ConfigurationError: psycopg is not installed (``pip install 'agentcore[postgres]'``),
            or an invalid option.
        StoreError: the database cannot be reached, or its schema is newer than this code.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout_s: float = 10.0,
        migrate: bool = True,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise ConfigurationError(
                f"Invalid schema name {schema!r}: use letters, digits and underscores, "
                "starting with a letter or underscore (at most 63 characters)."
            )
        if not 0 <= min_connections <= max_connections or max_connections < 1:
            raise ConfigurationError(
                f"Invalid pool size min_connections={min_connections}, "
                f"max_connections={max_connections}: need 0 <= min <= max and max >= 1."
            )
        if connect_timeout_s <= 0:
            raise ConfigurationError(f"connect_timeout_s must be > 0, got {connect_timeout_s!r}")
        _require_psycopg()
        self.url = dsn
        self.schema = schema
        self._display = _redact(dsn)
        self._min = min_connections
        self._max = max_connections
        self._timeout = connect_timeout_s
        self._sql = _Sql.build(schema)
        self._closed = False
        self._lock = threading.Lock()
        self._pools: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        self._migrate(migrate)
        self._claims = _AdvisoryClaims(self)

    # ------------------------------------------------------------------ protocol

    async def append(self, run_id: str, expected_seq: int, events: Sequence[Event]) -> None:
        """See :meth:`TranscriptStore.append`."""
        import psycopg

        check_batch(run_id, expected_seq, events)
        bodies = encode_batch(run_id, events)  # refuses what would not read back as itself
        end = expected_seq + len(events)
        status = _EMPTY_STATUS if expected_seq else "running"
        for ev in events:
            status = status_after(status, ev)
        first = events[0]
        params: dict[str, Any] = {  # Any: query parameters of several types
            "run_id": run_id,
            "expected": expected_seq,
            "end": end,
            "updated": events[-1].at,
            "status": status or None,
            "task": _text_in(first.task if isinstance(first, RunStarted) else ""),
            "created": first.at,
            "seqs": [ev.seq for ev in events],
            "types": [ev.type for ev in events],
            "ats": [ev.at for ev in events],
            "bodies": bodies,
        }
        where = (
            f"cannot append to run {run_label(run_id)} at seq {expected_seq}; nothing was written"
        )
        statement = self._sql.append_new if expected_seq == 0 else self._sql.append_next
        pool = await self._pool(where)
        try:
            async with pool.connection() as conn:
                row = await (await conn.execute(statement, params)).fetchone()
                if row is not None and row[0] == len(events):
                    return
                found = await (await conn.execute(self._sql.next_seq, (run_id,))).fetchone()
        except psycopg.errors.UniqueViolation as exc:
            raise SeqConflictError(
                f"run {run_id}: an event at seq {expected_seq}..{end - 1} is already stored "
                "(another writer advanced it); nothing was written"
            ) from exc
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, where) from exc
        current = 0 if found is None else int(found[0])
        raise SeqConflictError(
            f"run {run_id}: expected to append at seq {expected_seq}, but the transcript "
            f"has {current} events (another writer advanced it); nothing was written"
        )

    async def load(self, run_id: str, *, after: int = -1) -> list[Event]:
        """See :meth:`TranscriptStore.load`."""
        import psycopg

        where = f"cannot load run {run_label(run_id)} after seq {after}"
        pool = await self._pool(where)
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(self._sql.load, (after, run_id))
                rows = await cur.fetchall()
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, where) from exc
        if not rows:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
        next_seq = int(rows[0][0])
        out: list[Event] = []
        expected = max(after + 1, 0)
        for _, seq, type_, body in rows:
            if seq is None or body is None:
                break  # the run exists but has no events after ``after``
            if seq != expected:
                raise self._corrupted(run_id, expected, f"the event at seq {expected} is missing")
            try:
                event = decode_event(run_id, seq, body)
            except DECODE_ERRORS as exc:
                raise self._corrupted(run_id, seq, f"its body cannot be decoded: {exc}") from exc
            if event.type != type_:
                raise self._corrupted(
                    run_id, seq, f"its type column says {type_!r} but its body says {event.type!r}"
                )
            out.append(event)
            expected += 1
        if expected < next_seq:
            raise self._corrupted(run_id, expected, f"the event at seq {expected} is missing")
        return out

    async def truncate(
        self, run_id: str, *, after: int, dry_run: bool = False
    ) -> list[tuple[int, str]]:
        """See :meth:`TranscriptStore.truncate`."""
        import psycopg

        if after < 0:
            raise StoreError("truncate keeps at least run_started: use after >= 0")
        where = f"cannot truncate run {run_label(run_id)} after seq {after}"
        pool = await self._pool(where)
        try:
            async with pool.connection() as conn, conn.transaction():
                if await (await conn.execute(self._sql.lock_run, (run_id,))).fetchone() is None:
                    raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
                rows = await (await conn.execute(self._sql.bodies, (run_id,))).fetchall()
                status, kept = "running", 0
                for seq, body in rows:
                    if seq > after:
                        continue
                    try:
                        status = status_after(status, decode_event(run_id, seq, body))
                    except DECODE_ERRORS as exc:
                        raise StoreCorruptedError(
                            f"Run {run_label(run_id)} in {self._display} is corrupted at seq "
                            f"{seq}: an event the truncation would keep cannot be decoded ({exc}); "
                            "truncate earlier"
                        ) from exc
                    kept += 1
                if not dry_run:
                    await conn.execute(self._sql.delete_after, (run_id, after))
                    await conn.execute(self._sql.reset_run, (kept, status, run_id))
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, where) from exc
        return [(int(seq), str(body)) for seq, body in rows if seq > after]

    async def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunSummary]:
        """See :meth:`TranscriptStore.list_runs`."""
        import psycopg

        where = "cannot list runs"
        if limit < 0:
            raise StoreError(f"list_runs(limit={limit}): the limit must be >= 0")
        pool = await self._pool(where)
        try:
            async with pool.connection() as conn:
                if status is None:
                    cur = await conn.execute(self._sql.list_all, (limit,))
                else:
                    cur = await conn.execute(self._sql.list_status, (status, limit))
                rows = await cur.fetchall()
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, where) from exc
        out: list[RunSummary] = []
        for run_id, st, task, created, updated, events in rows:
            try:
                text = _text_out(task)
            except (ValueError, TypeError) as exc:
                raise StoreCorruptedError(
                    f"Run {run_label(run_id)} in {self._display} is corrupted: its row's task is "
                    f"not a JSON string ({exc}); its events are not affected"
                ) from exc
            out.append(RunSummary(run_id, st, text, float(created), float(updated), int(events)))
        return out

    async def request_cancel(self, run_id: str, *, by: str, reason: str | None = None) -> None:
        """See :meth:`TranscriptStore.request_cancel`. The request's time is the database's
        clock, the one every worker shares."""
        import psycopg

        where = f"cannot record a cancel request for run {run_label(run_id)}"
        params = (_text_in(by), None if reason is None else _text_in(reason), run_id)
        pool = await self._pool(where)
        try:
            async with pool.connection() as conn:
                row = await (await conn.execute(self._sql.request_cancel, params)).fetchone()
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, where) from exc
        if row is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")

    async def cancel_request(self, run_id: str) -> CancelRequest | None:
        """See :meth:`TranscriptStore.cancel_request`."""
        import psycopg

        where = f"cannot read the cancel request of run {run_label(run_id)}"
        pool = await self._pool(where)
        try:
            async with pool.connection() as conn:
                row = await (await conn.execute(self._sql.cancel_request, (run_id,))).fetchone()
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, where) from exc
        if row is None:
            raise RunNotFoundError(f"No run {run_label(run_id)} in {self._display}")
        by, reason, at = row
        if by is None:
            return None
        try:
            return CancelRequest(
                by=_text_out(by),
                reason=None if reason is None else _text_out(reason),
                at=float(at),
            )
        except (ValueError, TypeError) as exc:
            raise StoreCorruptedError(
                f"Run {run_label(run_id)} in {self._display}: its cancel request cannot be read "
                f"({exc})"
            ) from exc

    def claim(self, run_id: str) -> RunClaim:
        """See :meth:`TranscriptStore.claim`: a session-level advisory lock per run, on the
        store's claim connection; it dies with the connection or the process. Exclusive
        across every process and store object using the same database and schema."""
        if self._closed:
            raise StoreError(f"The store {self._display} is closed; open a new one")
        return self._claims.claim(run_id)

    async def close(self) -> None:
        """Close every pool and the claim connection (releasing all claims). Idempotent."""
        with self._lock:
            self._closed = True
            pools, self._pools = self._pools, {}
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, slot in pools.items():
            if loop is current:
                slot.keeper.cancel()
                await asyncio.gather(slot.keeper, return_exceptions=True)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(slot.keeper.cancel)
        self._claims.close()

    # ------------------------------------------------------------------ internals

    async def _pool(self, where: str) -> AsyncConnectionPool[Any]:
        """This event loop's pool, opened on first use (Any: psycopg's row type)."""
        import psycopg

        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise StoreError(f"The store {self._display} is closed; open a new one")
            slot = self._pools.get(loop)
            if slot is None or (slot.keeper.done() and not slot.ready.done()):
                for old in [lp for lp in self._pools if lp.is_closed()]:
                    del self._pools[old]
                ready: asyncio.Future[AsyncConnectionPool[Any]] = loop.create_future()
                slot = _LoopPool(ready, loop.create_task(self._keep_pool(ready)))
                self._pools[loop] = slot
        try:
            return await asyncio.shield(slot.ready)
        except psycopg.Error as exc:
            with self._lock:
                if self._pools.get(loop) is slot:
                    del self._pools[loop]  # the next call tries again
            raise self._error(exc, f"{where}: cannot connect") from exc

    async def _keep_pool(self, ready: asyncio.Future[AsyncConnectionPool[Any]]) -> None:
        """Open a pool for the running loop, hand it out, close it when cancelled (by
        :meth:`close` or by the loop shutting down)."""
        from psycopg import AsyncConnection
        from psycopg_pool import AsyncConnectionPool

        # Every connection the pool opens, to close them even when the pool cannot close
        # itself: a loop that shuts down cancels the pool's workers too, and then
        # ``pool.close()`` stops at their cancellation before closing its connections.
        opened: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()

        async def track(conn: AsyncConnection[Any]) -> None:
            opened.add(conn)

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.url,
            kwargs={"autocommit": True},
            min_size=self._min,
            max_size=self._max,
            timeout=self._timeout,
            configure=track,
            open=False,
            name="agentcore",
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except asyncio.CancelledError:
            ready.cancel()
            await _shut(pool, opened)
            raise
        except Exception as exc:
            ready.set_exception(exc)
            await _shut(pool, opened)
            return
        ready.set_result(pool)
        try:
            await asyncio.Event().wait()
        finally:
            await _shut(pool, opened)

    def _migrate(self, migrate: bool) -> None:
        """Create or upgrade the schema (synchronously: called by the constructor)."""
        import psycopg

        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self._timeout))
            ) as conn:
                version = _schema_version(conn, self._sql)
                if not pending(MIGRATIONS, version, store=self._display):
                    return
                if version and not migrate:
                    raise StoreError(
                        f"PostgreSQL store {self._display} has schema version {version}, "
                        f"older than this agentcore's ({len(MIGRATIONS)}); open it with "
                        "migrate=True to upgrade it."
                    )
                with conn.transaction():
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s)",
                        (_lock_key("migrate", self.schema or ""),),
                    )
                    if self.schema:
                        conn.execute(
                            f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'.encode()  # name checked
                        )
                    conn.execute(
                        f"""CREATE TABLE IF NOT EXISTS {self._sql.version_table} (
                            version INTEGER PRIMARY KEY,
                            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                        )""".encode()
                    )
                    version = _schema_version(conn, self._sql)  # again, under the lock
                    for migration in pending(MIGRATIONS, version, store=self._display):
                        for statement in migration.statements:
                            conn.execute(self._sql.migration(statement))
                        conn.execute(
                            f"INSERT INTO {self._sql.version_table} (version) VALUES (%s)".encode(),
                            (migration.version,),
                        )
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a lone surrogate
            raise self._error(exc, "cannot open the database") from exc

    def _error(self, exc: psycopg.Error | UnicodeError, what: str) -> StoreError:
        sqlstate = getattr(exc, "sqlstate", None)
        code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
        text = str(exc).strip() or type(exc).__name__
        return StoreError(f"PostgreSQL store {self._display}: {what}: {text}{code}")

    def _corrupted(self, run_id: str, seq: int, why: str) -> StoreCorruptedError:
        return StoreCorruptedError(
            f"Run {run_label(run_id)} in {self._display} is corrupted at seq {seq}: {why}. The "
            "transcript is not guessed at: repair or remove the bad event explicitly."
        )


@dataclass(frozen=True, slots=True)
class _LoopPool:
    """One event loop's pool: ``ready`` gets it once open; ``keeper`` closes it."""

    ready: asyncio.Future[AsyncConnectionPool[Any]]
    keeper: asyncio.Task[None]


async def _shut(
    pool: AsyncConnectionPool[Any], opened: Iterable[psycopg.AsyncConnection[Any]]
) -> None:
    """Close a pool and every connection it opened (Any: psycopg's row type)."""
    with contextlib.suppress(asyncio.CancelledError):  # its workers were cancelled already
        await pool.close(timeout=1.0)
    for conn in list(opened):
        if not conn.closed:
            with contextlib.suppress(Exception):
                await conn.close()


def _schema_version(conn: psycopg.Connection[Any], sql: _Sql) -> int:
    """The highest applied migration, 0 for an empty database (Any: psycopg's row type)."""
    row = conn.execute("SELECT to_regclass(%s)::text", (sql.version_table,)).fetchone()
    if row is None or row[0] is None:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {sql.version_table}".encode()).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


class _AdvisoryClaims:
    """Run claims as session-level advisory locks on one synchronous connection.

    A session may take the same advisory lock twice, so the runs this store holds are also
    tracked here: a second claim of a held run through the same store is refused too.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._held: dict[str, psycopg.Connection[Any]] = {}

    def claim(self, run_id: str) -> RunClaim:
        import psycopg

        key = _lock_key("claim", self._store.schema or "", run_id)
        busy = f"Run {run_id} is being advanced by another worker right now."
        with self._lock:
            if run_id in self._held:
                raise RunBusyError(busy)
            try:
                conn = self._connection()
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except psycopg.Error as exc:
                self._drop()
                raise self._store._error(exc, f"cannot claim run {run_label(run_id)}") from exc  # pyright: ignore[reportPrivateUsage]  # same module
            if row is None or not row[0]:
                raise RunBusyError(busy)
            self._held[run_id] = conn
        return _AdvisoryClaim(self, run_id, key, conn)

    def release(self, run_id: str, key: int, conn: psycopg.Connection[Any]) -> None:
        import psycopg

        with self._lock:
            if self._held.get(run_id) is not conn:
                return
            del self._held[run_id]
            if conn.closed:
                return  # the lock died with the connection
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                self._drop()  # a broken connection: its locks are gone with it

    def close(self) -> None:
        with self._lock:
            self._held.clear()
            self._drop()

    def _connection(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = psycopg.connect(
                self._store.url,
                autocommit=True,
                connect_timeout=max(1, round(self._store._timeout)),  # pyright: ignore[reportPrivateUsage]  # same module
            )
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
            for run_id in [r for r, c in self._held.items() if c is conn]:
                del self._held[run_id]


class _AdvisoryClaim:
    """A held advisory lock; :meth:`release` gives it back (idempotent)."""

    def __init__(
        self, claims: _AdvisoryClaims, run_id: str, key: int, conn: psycopg.Connection[Any]
    ) -> None:
        self._claims: _AdvisoryClaims | None = claims
        self._args = (run_id, key, conn)

    def release(self) -> None:
        claims, self._claims = self._claims, None
        if claims is not None:
            claims.release(*self._args)
