"""``agentcore usage``: what each quota's counters hold in their windows, and pruning the
counters of closed windows."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from agentcore.cli._common import (
    EXIT_USAGE,
    StoreOpt,
    abort,
    app,
    err,
    load_agent,
    no_store,
    open_listing,
    out,
    print_rows,
    run_async,
    valid_tenant,
)
from agentcore.contracts.errors import AgentcoreError, ConfigurationError
from agentcore.quotas import counter_parts, counter_words
from agentcore.stores import (
    QuotaStore,
    TranscriptStore,
    default_store_url,
    open_store,
    quota_store,
    store_layout,
)

__all__: list[str] = []  # private: see agentcore.cli

USAGE_FIELDS = ("key", "quota", "tenant", "per", "window", "used", "limit", "window_end")
"""The fields of a ``usage --json`` line."""


def _closes(window_end: float | None) -> str:
    if window_end is None:
        return "never"
    return dt.datetime.fromtimestamp(window_end, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _counters(st: TranscriptStore) -> QuotaStore:
    """``st`` as a store of quota counters; a usage error for a store that keeps none."""
    try:
        return quota_store(st)
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)


def _limits(agent_ref: str | None) -> Mapping[str, float] | None:
    """The limits of ``agent_ref``'s quotas by name (``None``: no agent given)."""
    if agent_ref is None:
        return None
    try:
        agent = load_agent(agent_ref)
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    quotas = agent.quotas
    return {q.name: q.limit for q in quotas}


@app.command()
def usage(
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Only this tenant's counters.", callback=valid_tenant),
    ] = None,
    quota: Annotated[str | None, typer.Option("--quota", help="Only this quota's counters.")] = (
        None
    ),
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="MODULE:ATTR of the Agent (or a factory) that declares the quotas: adds "
            "each quota's limit.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON Lines, one counter per line: key, quota, tenant, per ([[part, value], "
            "...]), window, used, limit (null without --agent), window_end (Unix seconds; "
            "null: never).",
        ),
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune", help="Delete the counters whose window has closed (a past hour or day)."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(help="With --prune: list what would be deleted; delete nothing.")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """What each quota has used in its window: per counter, what it is kept per, its
    window, what it holds, the limit (with --agent) and when the window closes.

    Creates nothing: a store that does not exist has no counters. With --prune, deletes
    the counters of closed windows instead (a new window starts at 0 anyway).
    """
    if dry_run and not prune:
        abort("--dry-run goes with --prune", EXIT_USAGE)
    if prune:
        _prune(store, dry_run)
        return
    limits = _limits(agent)

    async def go() -> list[Any] | None:  # Any: QuotaUsage rows
        st = open_listing(store)
        if st is None:
            return None
        try:
            return list(await _counters(st).list_quota_usage(tenant=tenant, quota=quota))
        finally:
            await st.close()

    rows = run_async(go())
    if rows is None:
        err.print(no_store(store), highlight=False, soft_wrap=True)
        return
    if as_json:
        for r in rows:
            parts = counter_parts(r.key)
            line = {
                "key": r.key,
                "quota": r.quota,
                "tenant": r.tenant,
                "per": None if parts is None else [list(p) for p in parts[0]],
                "window": None if parts is None else parts[1],
                "used": r.used,
                "limit": None if limits is None else limits.get(r.quota),
                "window_end": r.window_end,
            }
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        return
    if not rows:
        err.print("no quota counters" + _of(tenant, quota), highlight=False, soft_wrap=True)
        return
    columns = ["tenant", "quota", "counter", "used"]
    if limits is not None:
        columns.append("limit")
    columns.append("window closes")
    table: list[list[str]] = []
    for r in rows:
        row = [r.tenant or "-", r.quota, counter_words(r.key), f"{r.used:g}"]
        if limits is not None:
            limit = limits.get(r.quota)
            row.append("-" if limit is None else f"{limit:g}")
        row.append(_closes(r.window_end))
        table.append(row)
    print_rows(columns, table)


def _of(tenant: str | None, quota: str | None) -> str:
    said = [f"of tenant {tenant!r}"] if tenant is not None else []
    said += [f"of quota {quota!r}"] if quota is not None else []
    return (" " + " ".join(said)) if said else ""


def _prune(store: str | None, dry_run: bool) -> None:
    """``usage --prune``: as ``agentcore prune`` does, a missing store is not created and
    the store is not migrated."""
    url = store or default_store_url()
    try:
        layout = store_layout(url)
        if layout is not None and layout.status(url).version == 0:
            out.print(f"no store at {url}: nothing to prune", highlight=False)  # none created
            return
    except ConfigurationError as exc:
        abort(str(exc), EXIT_USAGE)
    except AgentcoreError as exc:
        abort(str(exc))
    now = time.time()

    async def go() -> int | list[Any]:  # Any: QuotaUsage rows
        st = open_store(url, migrate=False)  # a destructive command never migrates
        try:
            if dry_run:
                rows = await _counters(st).list_quota_usage()
                return [r for r in rows if r.window_end is not None and r.window_end <= now]
            return await _counters(st).prune_quota_usage(now)
        finally:
            await st.close()

    found = run_async(go())
    if isinstance(found, list):
        for r in found:
            out.print(
                f"{r.quota}  {counter_words(r.key)}  {r.used:g}", highlight=False, soft_wrap=True
            )
        out.print(
            f"would prune {len(found)} quota counter(s) of closed windows (dry run: nothing "
            "deleted)",
            highlight=False,
        )
        return
    out.print(f"pruned {found} quota counter(s) of closed windows", highlight=False)
