"""The PostgreSQL store's layout: numbered migrations, the statements, and the upgrade.

The applied versions are rows of ``agentcore_schema (version, applied_at)``. Opening a store
reads the version; when it is behind, the missing steps run in one transaction under an
advisory lock (two processes opening an empty database at once upgrade it once), and the
version is re-read under the lock. Migrations only add. A database newer than the code is
refused, untouched. The same numbering rule (``_migrations``) covers SQLite.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentcore.contracts.errors import StoreError

from .._migrations import Migration, numbered, pending

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "QUOTA_REFUSED",
    "SCHEMA_VERSION",
    "Statements",
    "lock_key",
    "schema_version",
    "upgrade",
]

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
    Migration(
        2,
        "indexes that list a tenant's runs, all or by status, newest first",
        (
            # list_runs(tenant=...) and (tenant=..., status=...): an index per shape, equality
            # columns first, then the listing's order, so a listing reads only its limit.
            # Partial (tenant IS NOT NULL): runs without a tenant pay no index write for them.
            """CREATE INDEX IF NOT EXISTS agentcore_runs_by_tenant
                ON {runs} (tenant, updated_at DESC, run_id) WHERE tenant IS NOT NULL""",
            """CREATE INDEX IF NOT EXISTS agentcore_runs_by_tenant_status
                ON {runs} (tenant, status, updated_at DESC, run_id) WHERE tenant IS NOT NULL""",
        ),
    ),
    Migration(
        3,
        "the run's metadata on its row, so a search reads no events",
        (
            # run_started.metadata as compact JSON (NULL when empty), written by the append
            # that creates the run: list_runs(search=...) matches it on the row instead of
            # reading each run's first event.
            "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS metadata TEXT NULL",
            """UPDATE {runs} AS r SET metadata = (e.body::json -> 'metadata')::text
                FROM {events} AS e
                WHERE e.run_id = r.run_id AND e.seq = 0
                    AND json_typeof(e.body::json -> 'metadata') = 'object'
                    AND (e.body::json -> 'metadata')::text NOT IN ('{{}}', '{{ }}')""",
        ),
    ),
    Migration(
        4,
        "tamper evidence: a digest per event (the run's signed head is runs.chain_head)",
        (
            # Each event's sha256 over the one before it (``_chain``); NULL for the events
            # written before this migration, which are never back-filled. The head's column
            # was reserved by migration 1.
            "ALTER TABLE {events} ADD COLUMN IF NOT EXISTS chain BYTEA NULL",
        ),
    ),
    Migration(
        5,
        "snapshots: a run's folded state and rendered history every few hundred events",
        (
            # agentcore._snapshot: a cache of what the events say, bound to the digest of
            # event ``seq`` and sealed; a resume reads these and the events after the last.
            """CREATE TABLE IF NOT EXISTS {snapshots} (
                run_id TEXT NOT NULL REFERENCES {runs} (run_id) ON DELETE CASCADE,
                seq BIGINT NOT NULL,
                start BIGINT NOT NULL,
                tag TEXT NOT NULL,
                chain BYTEA NOT NULL,
                seal BYTEA NOT NULL,
                state TEXT NOT NULL,
                history TEXT NOT NULL,
                PRIMARY KEY (run_id, seq)
            )""",
        ),
    ),
    Migration(
        6,
        "quota counters: what the appends charged, per counter",
        (
            # ``_quota``: one row per counter, ``used`` in whole millionths, written only by
            # the appends that charge it (in their transaction) and by its prune. Collation
            # "C": counters list in code point order, as every store lists them.
            """CREATE TABLE IF NOT EXISTS {quota_usage} (
                key TEXT COLLATE "C" PRIMARY KEY,
                quota TEXT COLLATE "C" NOT NULL,
                tenant TEXT COLLATE "C" NULL,
                used BIGINT NOT NULL,
                window_end DOUBLE PRECISION NULL
            )""",
            """CREATE INDEX IF NOT EXISTS agentcore_quota_usage_by_tenant
                ON {quota_usage} (tenant, key) WHERE tenant IS NOT NULL""",
            """CREATE INDEX IF NOT EXISTS agentcore_quota_usage_by_quota
                ON {quota_usage} (quota, key)""",
            """CREATE INDEX IF NOT EXISTS agentcore_quota_usage_by_window_end
                ON {quota_usage} (window_end) WHERE window_end IS NOT NULL""",
            # An append whose charge would pass a limit calls this, which aborts its
            # statement (and so its events and every counter it charged) with SQLSTATE
            # AGQ01; the detail is what each counter held before, as JSON.
            """CREATE OR REPLACE FUNCTION {quota_refused}(counters TEXT) RETURNS BOOLEAN
                LANGUAGE plpgsql AS $$
                BEGIN
                    RAISE EXCEPTION 'agentcore: a quota would pass its limit'
                        USING ERRCODE = 'AGQ01', DETAIL = counters;
                END
                $$""",
        ),
    ),
)
"""The layout's steps, in order (``{runs}``, ``{events}``, ... are filled in per schema)."""

QUOTA_REFUSED = "AGQ01"
"""The SQLSTATE of an append refused by a quota's limit (its detail: each counter's value
before the append, in units, as a JSON object)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The layout this module writes and reads, recorded in ``agentcore_schema``."""


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key (pg_try_advisory_lock takes a bigint)."""
    text = "\x1f".join(("agentcore", *parts))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement, with the tables' (possibly schema-qualified) names filled in."""

    runs: str
    events: str
    snapshots: str
    quota_usage: str
    quota_refused: str
    version_table: str
    append_new: bytes
    append_next: bytes
    append_leased: bytes
    append_new_charged: bytes
    append_next_charged: bytes
    append_leased_charged: bytes
    quota_lock: bytes
    quota_read: bytes
    quota_list: bytes
    quota_prune: bytes
    run_state: bytes
    acquire: bytes
    renew: bytes
    release: bytes
    lease_state: bytes
    load: bytes
    list_all: bytes
    list_status: bytes
    list_tenant: bytes
    list_tenant_status: bytes
    chain_state: bytes
    chain_rows: bytes
    run_page: bytes
    lock_run: bytes
    bodies: bytes
    delete_after: bytes
    reset_run: bytes
    request_cancel: bytes
    cancel_request: bytes
    cancel_requests: bytes
    snapshot_target: bytes
    snapshots_from: bytes
    snapshot_insert: bytes
    snapshots_load: bytes
    snapshots_after: bytes

    @classmethod
    def build(cls, schema: str | None) -> Statements:
        from psycopg import sql

        def name(table: str) -> sql.Identifier:
            return sql.Identifier(schema, table) if schema else sql.Identifier(table)

        tables = {
            "runs": name("agentcore_runs"),
            "events": name("agentcore_events"),
            "snapshots": name("agentcore_snapshots"),
            "quota_usage": name("agentcore_quota_usage"),
            "quota_refused": name("agentcore_quota_refused"),
        }

        def q(template: str) -> bytes:
            return sql.SQL(template).format(**tables).as_bytes(None)  # pyright: ignore[reportArgumentType]  # runtime SQL text, names quoted by sql.Identifier

        ins = """ins AS (
            INSERT INTO {events} (run_id, seq, type, at, body, chain)
            SELECT run.run_id, e.seq, e.type, e.at, e.body, e.chain
            FROM run, unnest(%(seqs)b::bigint[], %(types)b::text[], %(ats)b::float8[],
                             %(bodies)b::text[], %(chains)b::bytea[])
                AS e (seq, type, at, body, chain)
            RETURNING 1
        )"""
        result = """
        SELECT (SELECT count(*) FROM ins), run.cancel_by, run.cancel_reason, run.cancel_at
        FROM run"""
        insert_events = ins + result
        # The same, charging the batch's counters when (and only when) the run's condition
        # passed: one upsert per counter (``%(q_*)b``: one element per counter, its charges
        # summed), then the check: ``cap`` is the most the counter may have held before
        # the append for every charge with a limit to pass (``_quota_params``). Over it,
        # the function raises, and the statement (events, counters) is undone whole. The
        # upsert locks each counter's row and adds to its latest value: concurrent appends
        # charging one counter take turns, each checking what the others committed.
        insert_events_charged = (
            ins
            + """,
        charges AS (
            SELECT * FROM unnest(%(q_keys)b::text[], %(q_quotas)b::text[],
                                 %(q_tenants)b::text[], %(q_units)b::int8[],
                                 %(q_caps)b::int8[], %(q_ends)b::float8[])
                AS c (key, quota, tenant, units, cap, window_end)
        ),
        charged AS (
            INSERT INTO {quota_usage} AS q (key, quota, tenant, used, window_end)
            SELECT c.key, c.quota, c.tenant, c.units, c.window_end FROM run, charges AS c
            ORDER BY c.key
            ON CONFLICT (key) DO UPDATE SET used = q.used + EXCLUDED.used
            RETURNING q.key, q.used
        )"""
            + result
            + """
        WHERE CASE
            WHEN EXISTS (SELECT 1 FROM charged AS h JOIN charges AS c USING (key)
                         WHERE h.used - c.units > c.cap)
            THEN {quota_refused}((SELECT jsonb_object_agg(h.key, h.used - c.units)::text
                                  FROM charged AS h JOIN charges AS c USING (key)))
            ELSE true
        END"""
        )
        returned = "run_id, cancel_by, cancel_reason, cancel_at"
        columns = (
            "run_id, status, task, created_at, updated_at, next_seq, tenant, owner, "
            "extract(epoch FROM lease_until)::float8"
        )
        newest = "ORDER BY updated_at DESC, run_id LIMIT %s"
        # The chain head the batch extends rides in the same condition as the seq (the
        # store read it earlier, or wrote it itself): a head changed meanwhile refuses.
        advance = """UPDATE {runs}
                    SET next_seq = %(end)s, updated_at = %(updated)s,
                        status = COALESCE(%(status)s::text, status), chain_head = %(head)s
                    WHERE run_id = %(run_id)s AND next_seq = %(expected)s
                        AND chain_head IS NOT DISTINCT FROM %(prev_head)s::text"""
        # Lease times are the database's clock, never a worker's: every worker shares it.
        until = "extract(epoch FROM lease_until)::float8"
        now = "extract(epoch FROM clock_timestamp())::float8"
        lease_for = "clock_timestamp() + make_interval(secs => %(ttl)s)"
        new_run = """WITH run AS (
                    INSERT INTO {runs}
                        (run_id, status, task, created_at, updated_at, next_seq, tenant,
                         metadata, chain_head)
                    VALUES (%(run_id)s, %(status)s, %(task)s, %(created)s, %(updated)s, %(end)s,
                            %(tenant)s, %(metadata)s, %(head)s)
                    ON CONFLICT (run_id) DO NOTHING
                    RETURNING run_id, cancel_by, cancel_reason, cancel_at
                ), """
        next_run = "WITH run AS (" + advance + f" RETURNING {returned}), "
        # The fencing check rides in the same UPDATE as the seq check: no round trip.
        leased_run = (
            "WITH run AS ("
            + advance
            + f" AND owner = %(owner)s AND epoch = %(epoch)s RETURNING {returned}), "
        )
        return cls(
            runs=name("agentcore_runs").as_string(None),
            events=name("agentcore_events").as_string(None),
            snapshots=name("agentcore_snapshots").as_string(None),
            quota_usage=name("agentcore_quota_usage").as_string(None),
            quota_refused=name("agentcore_quota_refused").as_string(None),
            version_table=name("agentcore_schema").as_string(None),
            append_new=q(new_run + insert_events),
            # Each append also returns the run's cancel request, read in its transaction.
            append_next=q(next_run + insert_events),
            append_leased=q(leased_run + insert_events),
            append_new_charged=q(new_run + insert_events_charged),
            append_next_charged=q(next_run + insert_events_charged),
            append_leased_charged=q(leased_run + insert_events_charged),
            # Taken first by a transaction that charges counters, one per counter in a
            # fixed order (``_commit``): batches of several appends never lock two
            # counters in opposite orders (a deadlock).
            quota_lock=b"SELECT pg_advisory_xact_lock(%s)",
            quota_read=q("SELECT key, used FROM {quota_usage} WHERE key = ANY(%s::text[])"),
            quota_list=q(
                """SELECT key, quota, tenant, used, window_end FROM {quota_usage}
                WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
                    AND (%(quota)s::text IS NULL OR quota = %(quota)s::text)
                ORDER BY key"""
            ),
            # A chunk of the counters whose window closed; rows an append holds are
            # skipped, not waited for (no lock cycle with it).
            quota_prune=q(
                """DELETE FROM {quota_usage} WHERE key = ANY(ARRAY(
                    SELECT key FROM {quota_usage} WHERE window_end <= %(before)s
                    LIMIT %(limit)s FOR UPDATE SKIP LOCKED))"""
            ),
            # Why an append wrote nothing (read after it failed).
            run_state=q(
                f"SELECT next_seq, owner, epoch, {until}, {now}, chain_head FROM {{runs}} "
                "WHERE run_id = %s"
            ),
            # One statement: free (never leased, released or expired) -> taken, epoch + 1.
            # Concurrent acquirers queue on the row lock and re-check the condition on the
            # winner's row, so exactly one wins.
            # ``prev`` reads the owner before the update: a non-NULL one was taken over.
            acquire=q(
                f"""UPDATE {{runs}}
                SET owner = %(owner)s, epoch = epoch + 1, lease_until = {lease_for}
                FROM (SELECT owner AS prev_owner FROM {{runs}}
                      WHERE run_id = %(run_id)s FOR UPDATE) AS prev
                WHERE run_id = %(run_id)s
                    AND (owner IS NULL OR lease_until IS NULL OR lease_until < clock_timestamp())
                RETURNING epoch, {until}, prev.prev_owner"""
            ),
            renew=q(
                f"""UPDATE {{runs}} SET lease_until = {lease_for}
                WHERE run_id = %(run_id)s AND owner = %(owner)s AND epoch = %(epoch)s
                RETURNING {until}"""
            ),
            release=q(
                """UPDATE {runs} SET owner = NULL, lease_until = NULL
                WHERE run_id = %(run_id)s AND owner = %(owner)s AND epoch = %(epoch)s"""
            ),
            lease_state=q(f"SELECT owner, epoch, {until}, {now} FROM {{runs}} WHERE run_id = %s"),
            # One statement, one snapshot: no row means no run; a row with NULL event
            # columns means a run with no events after ``after``.
            load=q(
                """SELECT r.next_seq, e.seq, e.type, e.body
                FROM {runs} AS r LEFT JOIN {events} AS e ON e.run_id = r.run_id AND e.seq > %s
                WHERE r.run_id = %s
                ORDER BY e.seq"""
            ),
            # Each shape walks one index in the listing's order (migrations 1 and 2).
            list_all=q(f"SELECT {columns} FROM {{runs}} {newest}"),
            list_status=q(f"SELECT {columns} FROM {{runs}} WHERE status = %s {newest}"),
            list_tenant=q(f"SELECT {columns} FROM {{runs}} WHERE tenant = %s {newest}"),
            list_tenant_status=q(
                f"SELECT {columns} FROM {{runs}} WHERE tenant = %s AND status = %s {newest}"
            ),
            # The head an append extends, when the store has not written it itself; whether
            # the last event is chained (a run without a head whose events are: tampered).
            chain_state=q(
                """SELECT r.next_seq, r.chain_head,
                    EXISTS (SELECT 1 FROM {events} AS e WHERE e.run_id = r.run_id
                            AND e.seq = r.next_seq - 1 AND e.chain IS NOT NULL)
                FROM {runs} AS r WHERE r.run_id = %s"""
            ),
            # Verification: the run's row and every event, in one statement (one snapshot).
            chain_rows=q(
                """SELECT r.next_seq, r.chain_head, e.seq, e.type, e.body, e.chain
                FROM {runs} AS r LEFT JOIN {events} AS e ON e.run_id = r.run_id
                WHERE r.run_id = %s
                ORDER BY e.seq"""
            ),
            run_page=q("SELECT run_id FROM {runs} WHERE run_id > %s ORDER BY run_id LIMIT %s"),
            lock_run=q("SELECT chain_head FROM {runs} WHERE run_id = %s FOR UPDATE"),
            bodies=q("SELECT seq, body, chain FROM {events} WHERE run_id = %s ORDER BY seq"),
            delete_after=q("DELETE FROM {events} WHERE run_id = %s AND seq > %s"),
            reset_run=q(
                "UPDATE {runs} SET next_seq = %s, status = %s, chain_head = %s WHERE run_id = %s"
            ),
            request_cancel=q(
                """UPDATE {runs} SET cancel_by = %s, cancel_reason = %s,
                    cancel_at = extract(epoch FROM statement_timestamp())::float8
                WHERE run_id = %s RETURNING 1"""
            ),
            cancel_request=q(
                "SELECT cancel_by, cancel_reason, cancel_at FROM {runs} WHERE run_id = %s"
            ),
            # Several runs' requests in one statement (_reads.CancelReads).
            cancel_requests=q(
                "SELECT run_id, cancel_by, cancel_reason, cancel_at FROM {runs} "
                "WHERE run_id = ANY(%s::text[])"
            ),
            # Snapshots (agentcore._snapshot): the run's lease and event seq's digest, the
            # run's row locked until the snapshot is in (an append waits, briefly).
            snapshot_target=q(
                f"""SELECT r.owner, r.epoch, {until}, {now}, e.chain
                FROM {{runs}} AS r LEFT JOIN {{events}} AS e
                    ON e.run_id = r.run_id AND e.seq = %s
                WHERE r.run_id = %s FOR UPDATE OF r"""
            ),
            snapshots_from=q("DELETE FROM {snapshots} WHERE run_id = %s AND seq >= %s"),
            snapshot_insert=q(
                """INSERT INTO {snapshots} (run_id, seq, start, tag, chain, seal, state, history)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"""
            ),
            snapshots_load=q(
                """SELECT s.seq, s.start, s.tag, s.chain, e.chain, s.seal, s.state, s.history
                FROM {snapshots} AS s LEFT JOIN {events} AS e
                    ON e.run_id = s.run_id AND e.seq = s.seq
                WHERE s.run_id = %s ORDER BY s.seq"""
            ),
            snapshots_after=q("DELETE FROM {snapshots} WHERE run_id = %s AND seq > %s"),
        )

    def prune(self, *, tenant: bool, run_ids: bool, dry_run: bool) -> bytes:
        """The statement that picks (``dry_run``) or deletes (``RETURNING run_id``) runs to
        prune: ``%(statuses)s``, ``%(before)s``, then ``%(tenant)s``, ``%(run_ids)s`` when
        asked, and ``%(limit)s`` when deleting. A deleted run's events go with it (``ON
        DELETE CASCADE``); rows another transaction holds are skipped, not waited for."""
        pick = (
            f"SELECT run_id FROM {self.runs} WHERE status = ANY(%(statuses)s::text[]) "
            "AND updated_at < %(before)s "
            "AND (owner IS NULL OR lease_until IS NULL OR lease_until < clock_timestamp())"
        )
        if tenant:
            pick += " AND tenant = %(tenant)s"
        if run_ids:
            pick += " AND run_id = ANY(%(run_ids)s::text[])"
        if dry_run:
            return pick.encode()
        # = ANY(ARRAY(...)): the picked ids as one array, each deleted through the primary
        # key (an IN (...) join may plan a scan of every run to match a few hundred ids).
        return (
            f"DELETE FROM {self.runs} WHERE run_id = ANY(ARRAY("
            f"{pick} LIMIT %(limit)s FOR UPDATE SKIP LOCKED)) RETURNING run_id"
        ).encode()

    def migration(self, statement: str) -> bytes:
        """A statement of :data:`MIGRATIONS` with the table names filled in."""
        return statement.format(
            runs=self.runs,
            events=self.events,
            snapshots=self.snapshots,
            quota_usage=self.quota_usage,
            quota_refused=self.quota_refused,
        ).encode()


def schema_version(conn: psycopg.Connection[Any], sql: Statements) -> int:
    """The highest applied migration, 0 for an empty database (Any: psycopg's row type)."""
    row = conn.execute("SELECT to_regclass(%s)::text", (sql.version_table,)).fetchone()
    if row is None or row[0] is None:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {sql.version_table}".encode()).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def upgrade(
    conn: psycopg.Connection[Any],
    sql: Statements,
    *,
    schema: str | None,
    display: str,
    migrate: bool,
) -> int:
    """Create the schema of an empty database or apply the missing migrations.

    Args:
        conn: an autocommit connection.
        schema: the schema to create the tables in (checked by the caller), or ``None``.
        display: the store's DSN without secrets, for messages.
        migrate: upgrade an older schema; when false, refuse it.

    Returns:
        The version the database had before (0: empty).

    Raises:
        StoreError: the schema is newer than :data:`MIGRATIONS`, or older and ``migrate``
            is false.
        psycopg.Error: the database failed (the transaction was rolled back).
    """
    version = schema_version(conn, sql)
    if not pending(MIGRATIONS, version, store=display):
        return version
    if version and not migrate:
        raise StoreError(
            f"PostgreSQL store {display} has schema version {version}, older than this "
            f"agentcore's ({len(MIGRATIONS)}); upgrade it with: agentcore db upgrade --store "
            "URL (or open it with migrate=True)."
        )
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("migrate", schema or ""),))
        if schema:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'.encode())  # name checked
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {sql.version_table} (
                version INTEGER PRIMARY KEY,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )""".encode()
        )
        version = schema_version(conn, sql)  # again, under the lock
        for migration in pending(MIGRATIONS, version, store=display):
            for statement in migration.statements:
                conn.execute(sql.migration(statement))
            conn.execute(
                f"INSERT INTO {sql.version_table} (version) VALUES (%s)".encode(),
                (migration.version,),
            )
    return version
