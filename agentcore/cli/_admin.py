"""Commands that look after a store: prune (retention), db status, db upgrade."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar
from urllib.parse import quote

import typer

from agentcore import RunStatus
from agentcore.cli._common import (
    EXIT_USAGE,
    StoreOpt,
    TenantOpt,
    abort,
    app,
    cutoff_time,
    err,
    out,
    run_async,
)
from agentcore.contracts.errors import AgentcoreError, ConfigurationError
from agentcore.events import dump_event
from agentcore.stores import (
    FINISHED_STATUSES,
    TranscriptStore,
    default_store_url,
    open_store,
    schema_status,
    store_layout,
    upgrade_schema,
)

__all__ = ["EXIT_NEWER_STORE", "export_path"]

T = TypeVar("T")

EXIT_NEWER_STORE = 9
"""``db status`` / ``db upgrade``: the store was written by a newer agentcore."""

db_app = typer.Typer(help="The store's layout: its version and migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def export_path(directory: Path, run_id: str) -> Path:
    """Where ``prune --export`` writes a run: ``<run id, percent-encoded>.jsonl`` (a long
    id is cut and given a hash, so every name fits a file system)."""
    name = quote(run_id, safe="")
    if len(name) > 180:
        name = f"{name[:120]}-{hashlib.sha256(run_id.encode()).hexdigest()[:16]}"
    return directory / f"{name}.jsonl"


async def _export(st: TranscriptStore, run_id: str, directory: Path) -> Path:
    """Write the run as ``agentcore export`` does, durably (a temporary file, fsynced, then
    renamed), so a run is deleted only once its file is complete on disk."""
    events = await st.load(run_id)
    target = export_path(directory, run_id)
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh:
            for ev in events:
                fh.write(json.dumps(dump_event(ev), ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        partial.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename itself, durable
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return target


@app.command()
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            help="Prune runs whose last event is older than this: 30d, 12h, 90m, or an ISO "
            "date (UTC unless it names a zone)."
        ),
    ],
    status: Annotated[
        list[str] | None,
        typer.Option(
            help="A status to prune (repeat for several); default: completed, cancelled, "
            "failed. Others (e.g. needs_attention) only when named."
        ),
    ] = None,
    tenant: TenantOpt = None,
    export: Annotated[
        Path | None,
        typer.Option(
            help="Write each run to DIR/<run id>.jsonl (as `agentcore export` does) before "
            "deleting it; a run whose export fails is kept."
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="List what would be pruned; delete nothing.")] = (
        False
    ),
    store: StoreOpt = None,
) -> None:
    """Delete finished runs older than a date (retention), optionally exporting them first.

    A run that someone holds a live lease on is never pruned, and each run's conditions are
    checked again when it is deleted. Exit 0 when every chosen run was pruned (or listed),
    1 when some export failed (those runs were kept).
    """
    statuses = tuple(status) if status else FINISHED_STATUSES
    valid = {s.value for s in RunStatus}
    unknown = [s for s in statuses if s not in valid]
    if unknown:
        abort(f"unknown status {unknown[0]!r}; valid: {', '.join(sorted(valid))}", EXIT_USAGE)
    before = cutoff_time(older_than, "--older-than")
    url = store or default_store_url()
    layout = _guard(lambda: store_layout(url))
    if layout is not None and _guard(lambda: layout.status(url)).version == 0:
        out.print(f"no store at {url}: nothing to prune", highlight=False)  # none created
        return
    if export is not None and not dry_run:
        try:
            export.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            abort(f"--export {export}: cannot create the directory: {exc}")

    async def go() -> tuple[list[str], list[str], list[tuple[str, str]]]:
        st = open_store(url, migrate=False)  # a destructive command never migrates
        try:
            chosen = await st.prune(before=before, statuses=statuses, tenant=tenant, dry_run=True)
            if dry_run:
                return chosen, [], []
            if export is None:
                return chosen, await st.prune(before=before, statuses=statuses, tenant=tenant), []
            exported: list[str] = []
            failed: list[tuple[str, str]] = []
            for run_id in chosen:
                try:
                    await _export(st, run_id, export)
                except (AgentcoreError, OSError) as exc:
                    failed.append((run_id, str(exc)))
                else:
                    exported.append(run_id)
            pruned = await st.prune(
                before=before, statuses=statuses, tenant=tenant, run_ids=exported
            )
            return chosen, pruned, failed
        finally:
            await st.close()

    chosen, pruned, failed = run_async(go())
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(before))
    what = f"{', '.join(statuses)} runs last updated before {cutoff}"
    what += f" of tenant {tenant!r}" if tenant is not None else ""
    if dry_run:
        for run_id in chosen:
            out.print(run_id, highlight=False, soft_wrap=True)
        out.print(f"would prune {len(chosen)} {what} (dry run: nothing deleted)", highlight=False)
        return
    for run_id, why in failed:
        err.print(f"kept {run_id}: its export failed: {why}", highlight=False, soft_wrap=True)
    where = f"; exported to {export}" if export is not None else ""
    kept = len(chosen) - len(pruned) - len(failed)
    out.print(f"pruned {len(pruned)} {what}{where}", highlight=False, soft_wrap=True)
    if kept > 0:
        out.print(f"{kept} changed or were taken meanwhile and were kept", highlight=False)
    if failed:
        abort(f"{len(failed)} run(s) were not exported and were kept")


@db_app.command("status")
def db_status(store: StoreOpt = None) -> None:
    """Show the store's layout version and the migrations an upgrade would apply.

    Exit 0 (whether or not migrations are pending); 9 when the store was written by a
    newer agentcore.
    """
    url = store or default_store_url()
    st = _guard(lambda: schema_status(url))
    out.print(f"store: {st.store}", highlight=False)
    out.print(f"schema version: {st.version} (this agentcore: {st.latest})", highlight=False)
    if st.newer:
        abort(
            f"the store's layout (version {st.version}) is newer than this agentcore's "
            f"({st.latest}): upgrade agentcore to use it.",
            EXIT_NEWER_STORE,
        )
    if not st.pending:
        out.print("up to date: nothing to apply", highlight=False)
        return
    out.print(f"pending ({len(st.pending)}): apply with: agentcore db upgrade", highlight=False)
    for version, summary in st.pending:
        out.print(f"  {version}  {summary}", highlight=False)


@db_app.command("upgrade")
def db_upgrade(store: StoreOpt = None) -> None:
    """Apply the store's pending migrations, all in one transaction (they only add).

    Exit 0 when the store is up to date afterwards; 9 (the store untouched) when it was
    written by a newer agentcore; 1 when the upgrade failed (rolled back).
    """
    url = store or default_store_url()
    st = _guard(lambda: schema_status(url))
    if st.newer:
        abort(
            f"{st.store} has layout version {st.version}, newer than this agentcore's "
            f"({st.latest}); it was left untouched: upgrade agentcore instead.",
            EXIT_NEWER_STORE,
        )
    before, after = _guard(lambda: upgrade_schema(url))
    if before == after:
        out.print(f"{st.store}: already at version {after}; nothing to apply", highlight=False)
        return
    out.print(
        f"{st.store}: upgraded from version {before} to {after} "
        f"({after - before} migration(s) in one transaction)",
        highlight=False,
    )


def _guard(fn: Callable[[], T]) -> T:
    """``fn()``, with our errors as messages and exit codes (as ``run_async`` does)."""
    try:
        return fn()
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    except AgentcoreError as exc:
        abort(str(exc))
