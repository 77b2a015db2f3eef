"""``agentcore verify``: check runs' tamper-evident hash chains, their signed heads and
their snapshots' seals."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable
from typing import Annotated

import typer

from agentcore.cli._common import (
    EXIT_USAGE,
    StoreOpt,
    abort,
    app,
    open_listing,
    out,
    plain,
    run_async,
    valid_run_id,
)
from agentcore.stores import ChainReport, ChainVerifier, default_store_url

__all__ = ["EXIT_BROKEN"]

EXIT_BROKEN = 10
"""``verify``: a run's chain is broken (an event changed, missing or unsigned)."""

_KEY_VARIABLE = "AGENTCORE_CHAIN_KEY"


@app.command()
def verify(
    run_id: Annotated[
        str | None,
        typer.Argument(help="The run to check (or --all).", callback=valid_run_id),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Check every run in the store, page by page.")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Check that a run's stored events are the ones written: recompute each event's
    digest over the one before it, and check the run's chain head and its signature.

    The key is $AGENTCORE_CHAIN_KEY (the one the runs were written with): with it, an
    unsigned or wrongly signed head is a break; without it the digests are checked and the
    output says the signatures were not. Events written before chaining are reported as an
    unchained prefix. Then the run's snapshots are checked as a resume reads them (bound to
    their event's digest, sealed): one that fails breaks the run (a resume ignores it).
    Exit 0 when every run checked is intact, 10 when one is broken (its first broken seq
    and why are printed), 1 for an unknown run or a store failure.
    """
    if (run_id is None) == (not all_runs):
        abort("give a RUN_ID or --all (not both)", EXIT_USAGE)
    url = store or default_store_url()
    if os.environ.get(_KEY_VARIABLE):
        out.print(f"key: ${_KEY_VARIABLE} (signatures are checked)", highlight=False)
    else:
        out.print(
            f"no key: ${_KEY_VARIABLE} is not set, so head signatures are NOT checked "
            "(only that the digests are consistent)",
            highlight=False,
        )

    async def go() -> tuple[int, int, int]:
        st = open_listing(url)
        if st is None:
            abort(f"no store at {url}")
        try:
            if not isinstance(st, ChainVerifier):
                abort(f"the store {url} cannot verify chains")
            checked = broken = unchained = 0
            reports = st.verify_chains() if run_id is None else _one(st.verify_chain(run_id))
            async for report in reports:
                checked += 1
                broken += not report.intact
                unchained += report.unchained > 0
                _line(report)
            return checked, broken, unchained
        finally:
            await st.close()

    checked, broken, unchained = run_async(go())
    if all_runs:
        extra = f", {unchained} with an unchained prefix" if unchained else ""
        out.print(
            f"checked {checked} run(s): {checked - broken} intact, {broken} broken{extra}",
            highlight=False,
        )
    if broken:
        abort(f"{broken} run(s) broken: see the first broken seq above", EXIT_BROKEN)


def _line(report: ChainReport) -> None:
    """``RUN_ID<tab>result`` when stdout is not a terminal (for scripts), else spaced."""
    if plain():
        sys.stdout.write(f"{report.run_id}\t{report.describe()}\n")
        sys.stdout.flush()
    else:
        out.print(f"{report.run_id}  {report.describe()}", highlight=False)


async def _one(report: Awaitable[ChainReport]) -> AsyncIterator[ChainReport]:
    yield await report
