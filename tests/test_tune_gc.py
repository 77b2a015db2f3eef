"""``agentcore.tune_gc``: the collector set for a process that advances many runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import agentcore
from agentcore.errors import ConfigurationError


@pytest.fixture(autouse=True)
def restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_it_freezes_what_lives_and_raises_the_first_threshold() -> None:
    gc.set_threshold(700, 10, 10)
    assert gc.get_freeze_count() == 0
    before = agentcore.tune_gc()
    assert before == (700, 10, 10)
    assert gc.get_threshold() == (10_000, 10, 10)
    assert gc.get_freeze_count() > 1000  # the modules, pydantic's validators, this test
    garbage: list[object] = []
    garbage.append(garbage)  # a cycle made after the call is still collected
    del garbage
    assert gc.collect() >= 1


def test_without_freezing_and_with_a_threshold_of_ones_own() -> None:
    agentcore.tune_gc(threshold=2_000, freeze=False)
    assert gc.get_threshold()[0] == 2_000
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10000", True])
def test_a_threshold_that_is_not_a_whole_number_is_refused(bad: object) -> None:
    before = gc.get_threshold()
    with pytest.raises(ConfigurationError, match="threshold must be a whole number"):
        agentcore.tune_gc(threshold=bad)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
