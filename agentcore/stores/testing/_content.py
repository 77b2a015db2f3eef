"""What an event may hold: everything reads back as itself, or is refused."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.events import Event, ToolFinished, encode_event_body
from agentcore.limits import MAX_DEPTH, MAX_EVENT_BYTES, MAX_INT, MAX_STRING_CHARS, MIN_INT

from .._protocol import TranscriptStore
from ._builders import UNICODE_SAMPLES, context, fresh_run_id, started, tool_result


class ContentChecks:
    """What an event may hold: everything reads back as itself, or is refused.

    Part of :class:`StoreConformance`.
    """

    # ------------------------------------------------------------------ content

    @pytest.mark.parametrize("text", UNICODE_SAMPLES)
    async def test_unicode_round_trips(self, store: TranscriptStore, text: str) -> None:
        run = fresh_run_id("ünï-😀-שלום")
        events: list[Event] = [
            started(run, task=text),
            context(run, 1, content=text),
            tool_result(run, 2, {text: [text, {"k": text}]}),
        ]
        await store.append(run, 0, events)
        assert await store.load(run) == events
        [summary] = await store.list_runs()
        assert summary.run_id == run and summary.task == text

    async def test_large_events_round_trip(self, store: TranscriptStore) -> None:
        run = fresh_run_id()
        big = ("0123456789abcdef" * 16 * 1024)[: 256 * 1024]  # 256 KB
        events: list[Event] = [
            started(run),
            tool_result(run, 1, big),
            tool_result(run, 2, {"rows": [big[:65536]] * 4, "note": "ünï \u0000"}),
            context(run, 3, content=big[::-1]),
        ]
        await store.append(run, 0, events[:2])
        await store.append(run, 2, events[2:])
        loaded = await store.load(run)
        assert loaded == events
        assert isinstance(loaded[1], ToolFinished) and loaded[1].result == big

    async def test_values_at_the_limits_round_trip(self, store: TranscriptStore) -> None:
        """The largest values the limits let into a transcript read back equal."""
        run = fresh_run_id()
        deep: object = "bottom"
        for _ in range(MAX_DEPTH - 1):
            deep = [deep]
        longest = "\u20ac" * MAX_STRING_CHARS  # 3 bytes each in UTF-8: a 3 MB body
        events: list[Event] = [
            started(run),
            tool_result(run, 1, deep),
            tool_result(run, 2, {"max": MAX_INT, "min": MIN_INT, "float": 1.7976931348623157e308}),
            context(run, 3, content=longest),
        ]
        assert len(encode_event_body(events[3]).encode()) < MAX_EVENT_BYTES
        await store.append(run, 0, events)
        assert await store.load(run) == events
        assert await store.load(run, after=2) == events[3:]

    @settings(
        max_examples=25,
        deadline=None,
        # each example uses its own run; each subclass (executor) its own store
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(texts=st.lists(st.text(), min_size=1, max_size=3))
    def test_any_text_round_trips_from_fresh_event_loops(
        self, store: TranscriptStore, texts: list[str]
    ) -> None:
        """Any text reads back as itself; each example runs in its own ``asyncio.run`` (as
        the CLI and the ``*_sync`` methods use a store)."""
        run = fresh_run_id("hyp")
        events: list[Event] = [
            started(run, task=texts[0]),
            *(context(run, i, content=t) for i, t in enumerate(texts, start=1)),
            tool_result(run, len(texts) + 1, {t: t for t in texts}),
        ]

        async def round_trip() -> list[Event]:
            await store.append(run, 0, events)
            return await store.load(run)

        assert asyncio.run(round_trip()) == events
