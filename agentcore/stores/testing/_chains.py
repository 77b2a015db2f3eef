"""The hash chain: every append extends it, truncation keeps it whole, and a row changed
behind the store's back is found at its seq (``agentcore verify``)."""

from __future__ import annotations

import pytest

from agentcore.contracts.errors import RunNotFoundError
from agentcore.events import encode_event_body

from .._chain import ChainReport
from .._protocol import ChainVerifier, TranscriptStore
from ._builders import context, fresh_run_id, started
from ._tamper import Tamper


def _verifier(store: TranscriptStore) -> ChainVerifier:
    if not isinstance(store, ChainVerifier):
        pytest.skip(f"{type(store).__name__} keeps no hash chain (it is not a ChainVerifier)")
    return store


async def _run(store: TranscriptStore, run: str, events: int = 4) -> None:
    """A run of ``events`` events, appended in two batches."""
    await store.append(run, 0, [started(run)])
    await store.append(run, 1, [context(run, s) for s in range(1, events)])


class ChainChecks:
    """The hash chain (:class:`ChainVerifier`); skipped for a store that keeps none.

    Part of :class:`StoreConformance`.
    """

    async def test_appends_keep_the_chain_intact(self, store: TranscriptStore) -> None:
        chains = _verifier(store)
        run = fresh_run_id("chain")
        await _run(store, run)
        await store.append(run, 4, [context(run, 4)])
        report = await chains.verify_chain(run)
        assert report.intact, report
        assert (report.run_id, report.events, report.first, report.last) == (run, 5, 0, 4)
        assert (report.broken_seq, report.reason, report.unchained) == (None, None, 0)

    async def test_truncation_keeps_the_chain_intact(self, store: TranscriptStore) -> None:
        chains = _verifier(store)
        run = fresh_run_id("chain")
        await _run(store, run)
        await store.truncate(run, after=1)
        assert (await chains.verify_chain(run)).intact
        await store.append(run, 2, [context(run, 2, content="after the repair")])
        report = await chains.verify_chain(run)
        assert report.intact and (report.events, report.last) == (3, 2), report

    async def test_verify_chains_reports_every_run_in_id_order(
        self, store: TranscriptStore
    ) -> None:
        chains = _verifier(store)
        runs = sorted(fresh_run_id(f"chain-{i}") for i in range(5))
        for run in runs:
            await _run(store, run, events=2)
        reports: list[ChainReport] = [r async for r in chains.verify_chains(page=2)]
        assert [r.run_id for r in reports] == runs
        assert all(r.intact for r in reports), reports

    async def test_verifying_a_missing_run_says_so(self, store: TranscriptStore) -> None:
        chains = _verifier(store)
        with pytest.raises(RunNotFoundError):
            await chains.verify_chain(fresh_run_id("missing"))

    async def test_a_tampered_event_is_found_at_its_seq(
        self, store: TranscriptStore, tamper: Tamper | None
    ) -> None:
        chains = _verifier(store)
        if tamper is None:
            pytest.skip("the store's test gives no `tamper` fixture")
        runs = sorted(fresh_run_id(f"chain-{i}") for i in range(2))
        for run in runs:
            await _run(store, run)
        forged = context(runs[0], 2, content="what the log never said")
        tamper.event_body(runs[0], 2, encode_event_body(forged))
        assert (await store.load(runs[0]))[2] == forged  # it reads back as a real event
        report = await chains.verify_chain(runs[0])
        assert not report.intact and report.broken_seq == 2, report
        assert report.reason
        reports = [r async for r in chains.verify_chains()]
        assert [(r.run_id, r.intact, r.broken_seq) for r in reports] == [
            (runs[0], False, 2),
            (runs[1], True, None),
        ]
