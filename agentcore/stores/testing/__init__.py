"""The store conformance suite: what every :class:`TranscriptStore` must do, for the
built-in stores and for a store of your own (it needs pytest, pytest-asyncio and
hypothesis; ``import agentcore.stores`` does not load it).

A store passes by subclassing :class:`StoreConformance` in a ``Test...`` class and
overriding the ``store`` fixture (and ``peer`` when a second store object can open the same
data, so that races and leases are also checked across objects; and ``tamper`` when the
test can write the store's data behind its back, so that a changed event or snapshot is
shown to be found)::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        async def store(self) -> AsyncIterator[TranscriptStore]:
            s = MyStore(...)
            yield s
            await s.close()

Every test starts from an empty store. The snapshot checks run for a
:class:`SnapshotStore`, the chain checks for a :class:`ChainVerifier`, the quota checks
for a :class:`QuotaStore`; a store that is none of these skips them, saying so.
"""

from __future__ import annotations

import pytest

from .._protocol import TranscriptStore
from ._appends import AppendChecks
from ._builders import (
    UNICODE_SAMPLES,
    context,
    every_event_type,
    finished,
    folded_status,
    fresh_run_id,
    started,
    tool_result,
)
from ._chains import ChainChecks
from ._content import ContentChecks
from ._ownership import OwnershipChecks
from ._quota_builders import charge, charged_call, released
from ._quotas import QuotaChecks
from ._runs import RunChecks
from ._snapshots import SnapshotChecks
from ._tamper import Tamper

__all__ = [
    "UNICODE_SAMPLES",
    "StoreConformance",
    "Tamper",
    "charge",
    "charged_call",
    "context",
    "every_event_type",
    "finished",
    "folded_status",
    "fresh_run_id",
    "released",
    "started",
    "tool_result",
]


class StoreConformance(
    AppendChecks,
    RunChecks,
    OwnershipChecks,
    ContentChecks,
    SnapshotChecks,
    ChainChecks,
    QuotaChecks,
):
    """The behaviour every transcript store shares. Override ``store`` (and ``peer``,
    ``tamper``)."""

    @pytest.fixture
    async def store(self) -> TranscriptStore:
        """The store under test, empty, closed afterwards. Subclasses must override it."""
        pytest.fail(f"{type(self).__name__} must override the `store` fixture")

    @pytest.fixture
    async def peer(self, store: TranscriptStore) -> TranscriptStore | None:
        """A second store object on the same data as ``store``, or ``None`` where a store
        cannot be opened twice (MemoryStore). It races appends and leases across objects."""
        return None

    @pytest.fixture
    def tamper(self, store: TranscriptStore) -> Tamper | None:
        """Raw writes to ``store``'s data (:class:`Tamper`), or ``None`` where the test
        cannot make them: the checks that tampering is found then skip."""
        return None
