"""How sure a score is: bootstrap intervals, paired differences, and fixed case samples.

A scorecard's accuracy on a few hundred cases moves by several points when other cases are
drawn; two variants measured on the same cases differ by less than that noise more often
than not. These helpers say how much, without a model:

* :func:`bootstrap_interval`: a percentile bootstrap interval of a mean (accuracy: the mean
  of 0/1 outcomes), resampling cases with replacement from a fixed seed;
* :func:`paired_difference`: the same for the difference between two variants measured on
  the same cases, resampling cases (both outcomes of a case together), so what the cases
  have in common cancels out;
* :func:`split_halves`: two disjoint stratified samples drawn with a fixed seed (a tuning
  half to try variants on, a confirmation half to measure the chosen one once), in an order
  whose every prefix keeps the strata's proportions, so a run cut short is still a sample.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentcore.contracts.errors import ConfigurationError

__all__ = ["Interval", "bootstrap_interval", "paired_difference", "split_halves"]

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261201


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its bootstrap interval.

    Attributes:
        estimate: the mean over the cases as measured.
        low, high: the interval's bounds (percentiles of the resampled means).
        n: cases.
        level: the interval's coverage (0.95).
        resamples: bootstrap resamples drawn.
    """

    estimate: float
    low: float
    high: float
    n: int
    level: float
    resamples: int

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or below zero (a difference beyond the noise)."""
        return self.low > 0 or self.high < 0

    def percent(self, *, signed: bool = False) -> str:
        """``"12.5% [8.0, 17.0]"`` (``signed``: ``"+2.5 pts [-1.0, +6.0]"``)."""
        if signed:
            return f"{self.estimate * 100:+.1f} pts [{self.low * 100:+.1f}, {self.high * 100:+.1f}]"
        return f"{self.estimate:.1%} [{self.low * 100:.1f}, {self.high * 100:.1f}]"


def _check(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ConfigurationError(f"resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ConfigurationError(f"level must be between 0 and 1, got {level}")


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _interval(values: Sequence[float], resamples: int, seed: int, level: float) -> Interval:
    _check(resamples, level)
    n = len(values)
    if n == 0:
        raise ConfigurationError("No cases to resample.")
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return Interval(
        estimate=sum(values) / n,
        low=_percentile(means, tail),
        high=_percentile(means, 1 - tail),
        n=n,
        level=level,
        resamples=resamples,
    )


def bootstrap_interval(
    outcomes: Sequence[float | bool],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> Interval:
    """The mean of ``outcomes`` (a case's 1 or 0, say) with its percentile bootstrap interval.

    Raises:
        ConfigurationError: no outcomes, ``resamples`` below 1 or ``level`` outside (0, 1).
    """
    return _interval([float(v) for v in outcomes], resamples, seed, level)


def paired_difference(
    a: Mapping[str, float | bool],
    b: Mapping[str, float | bool],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> Interval:
    """``mean(a) - mean(b)`` over the cases both measured (keyed by case id), with a paired
    bootstrap interval: each resample draws cases, and takes both outcomes of a drawn case.

    Raises:
        ConfigurationError: no case in common, or bad ``resamples`` or ``level``.
    """
    common = sorted(a.keys() & b.keys())
    if not common:
        raise ConfigurationError("The two variants have no case in common.")
    return _interval([float(a[k]) - float(b[k]) for k in common], resamples, seed, level)


def split_halves(
    strata: Mapping[str, Sequence[str]],
    per_half: Mapping[str, int],
    *,
    seed: int = DEFAULT_SEED,
) -> tuple[list[str], list[str]]:
    """Two disjoint samples of case ids, ``per_half[s]`` from each stratum ``s`` in each.

    Each stratum's ids are sorted, then shuffled by a generator seeded with ``seed`` and the
    stratum's name (so adding a stratum does not move the others' draws); the first
    ``per_half[s]`` go to the first half, the next ``per_half[s]`` to the second. Each half
    is returned interleaved: a case's place is its rank within its stratum's share, so every
    prefix of a half holds the strata in about their final proportions.

    Raises:
        ConfigurationError: a stratum has fewer than ``2 * per_half[s]`` ids, a stratum in
            ``per_half`` is unknown, or an id appears twice.
    """
    seen: set[str] = set()
    for ids in strata.values():
        dup = seen & set(ids)
        if dup or len(set(ids)) != len(ids):
            raise ConfigurationError(
                f"Case ids appear twice: {sorted(dup)[:5] or 'in one stratum'}"
            )
        seen |= set(ids)
    halves: tuple[list[tuple[float, str, str]], list[tuple[float, str, str]]] = ([], [])
    for name, k in sorted(per_half.items()):
        if name not in strata:
            raise ConfigurationError(f"Unknown stratum {name!r}.")
        ids = sorted(strata[name])
        if k < 0 or 2 * k > len(ids):
            raise ConfigurationError(
                f"Stratum {name!r} has {len(ids)} cases; two halves of {k} need {2 * k}."
            )
        random.Random(f"{seed}:{name}").shuffle(ids)
        for half, chosen in zip(halves, (ids[:k], ids[k : 2 * k]), strict=True):
            half.extend(((i + 0.5) / k, name, case_id) for i, case_id in enumerate(chosen))
    first, second = (sorted(h) for h in halves)
    return [c for _, _, c in first], [c for _, _, c in second]
