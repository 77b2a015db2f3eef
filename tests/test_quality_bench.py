"""The quality benchmark's statistics and sampling, without a model (bench/quality/)."""

from __future__ import annotations

import random

import pytest

from agentcore.errors import ConfigurationError
from agentcore.evals import bootstrap_interval, paired_difference, split_halves


def test_interval_brackets_the_estimate_and_is_reproducible() -> None:
    outcomes = [True] * 30 + [False] * 70
    a = bootstrap_interval(outcomes, resamples=1000, seed=1)
    b = bootstrap_interval(outcomes, resamples=1000, seed=1)
    assert a == b
    assert a.estimate == pytest.approx(0.3)
    assert a.low < 0.3 < a.high
    # the normal approximation: 1.96 * sqrt(.3 * .7 / 100) = 0.09
    assert a.high - a.low == pytest.approx(0.18, abs=0.03)
    assert a.n == 100 and a.resamples == 1000 and a.level == 0.95


def test_interval_narrows_with_more_cases() -> None:
    small = bootstrap_interval([1, 0] * 25, seed=2)
    large = bootstrap_interval([1, 0] * 400, seed=2)
    assert large.high - large.low < (small.high - small.low) / 3


def test_constant_outcomes_have_no_spread() -> None:
    i = bootstrap_interval([1.0] * 20, resamples=50)
    assert (i.low, i.estimate, i.high) == (1.0, 1.0, 1.0)


def test_paired_difference_cancels_what_the_cases_share() -> None:
    """Two variants that agree on 190 of 200 cases and differ on 10, all in one direction:
    the unpaired intervals overlap, the paired one excludes zero."""
    rng = random.Random(3)
    base = {f"c{i}": float(rng.random() < 0.5) for i in range(200)}
    better = dict(base)
    flipped = [k for k, v in base.items() if v == 0.0][:10]
    for k in flipped:
        better[k] = 1.0
    diff = paired_difference(better, base, seed=4)
    assert diff.estimate == pytest.approx(10 / 200)
    assert diff.excludes_zero
    ia = bootstrap_interval(list(better.values()), seed=4)
    ib = bootstrap_interval(list(base.values()), seed=4)
    assert ia.low < ib.high  # unpaired: the intervals overlap


def test_paired_difference_within_the_noise() -> None:
    base = {f"c{i}": float(i % 2) for i in range(200)}
    other = dict(base)
    other["c0"], other["c1"] = 1.0, 0.0  # one case better, one worse
    diff = paired_difference(other, base)
    assert diff.estimate == 0.0
    assert not diff.excludes_zero


def test_paired_difference_uses_only_common_cases() -> None:
    diff = paired_difference({"a": 1, "b": 1, "x": 0}, {"a": 0, "b": 1, "y": 1}, resamples=10)
    assert diff.n == 2 and diff.estimate == 0.5
    with pytest.raises(ConfigurationError, match="no case in common"):
        paired_difference({"a": 1}, {"b": 1})


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        bootstrap_interval([])
    with pytest.raises(ConfigurationError):
        bootstrap_interval([1], resamples=0)
    with pytest.raises(ConfigurationError):
        bootstrap_interval([1], level=1.0)


def test_percent_formats() -> None:
    i = bootstrap_interval([1, 0, 0, 0], resamples=200)
    assert i.percent().startswith("25.0% [")
    assert paired_difference({"a": 1}, {"a": 0}, resamples=5).percent(signed=True) == (
        "+100.0 pts [+100.0, +100.0]"
    )


STRATA = {
    "x": [f"x{i}" for i in range(30)],
    "y": [f"y{i}" for i in range(10)],
    "z": [f"z{i}" for i in range(50)],
}


def test_halves_are_disjoint_stratified_and_reproducible() -> None:
    per = {"x": 12, "y": 5, "z": 20}
    first, second = split_halves(STRATA, per, seed=7)
    assert (first, second) == split_halves(STRATA, per, seed=7)
    assert not set(first) & set(second)
    for half in (first, second):
        assert len(half) == len(set(half)) == 37
        for name, k in per.items():
            assert sum(c.startswith(name) for c in half) == k
    assert split_halves(STRATA, per, seed=8) != (first, second)


def test_halves_do_not_depend_on_input_order_or_other_strata() -> None:
    per = {"x": 12, "y": 5}
    shuffled = {k: list(reversed(v)) for k, v in STRATA.items()}
    a = split_halves(STRATA, per, seed=7)
    b = split_halves(shuffled, per, seed=7)
    assert a == b
    with_z = split_halves(STRATA, {**per, "z": 20}, seed=7)
    assert [c for c in with_z[0] if not c.startswith("z")] == a[0]


def test_every_prefix_keeps_the_proportions() -> None:
    first, _ = split_halves(STRATA, {"x": 12, "y": 4, "z": 20}, seed=7)
    for n in (9, 18, 27):
        prefix = first[:n]
        assert abs(sum(c.startswith("z") for c in prefix) - n * 20 / 36) <= 1
        assert abs(sum(c.startswith("y") for c in prefix) - n * 4 / 36) <= 1


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="need 22"):
        split_halves(STRATA, {"y": 11})
    with pytest.raises(ConfigurationError, match="Unknown stratum"):
        split_halves(STRATA, {"w": 1})
    with pytest.raises(ConfigurationError, match="twice"):
        split_halves({"a": ["1", "2"], "b": ["2", "3"]}, {"a": 1})
