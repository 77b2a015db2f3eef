"""Contract health: how runs behave per contract version and model, over time, as SVG.

The figures are :func:`agentcore.collect_stats`'s (``agentcore stats``), computed per time bucket
for each (contract, model) series: steps per run, the share of plan, tool and finish
actions, invalid replies per model call, re-asked steps per step, and the share of runs
that exhausted a budget. Each chart marks the time each contract version first appears,
so a contract edit that makes models stop planning shows as a line that drops at a mark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentcore import ContractStats, collect_stats
from agentcore.events import Event, ModelCalled, RunStarted

__all__ = [
    "METRICS",
    "Chart",
    "Dot",
    "Health",
    "Line",
    "Mark",
    "Plot",
    "Series",
    "Text",
    "health",
    "plot",
]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")

METRICS: tuple[tuple[str, str, Callable[[ContractStats], float], bool], ...] = (
    ("steps_per_run", "steps per run", lambda s: s.steps_per_run, False),
    ("plan_share", "share of plan actions", lambda s: s.share("plan"), True),
    ("tool_share", "share of tool actions", lambda s: s.share("tool"), True),
    ("finish_share", "share of finish actions", lambda s: s.share("finish"), True),
    ("invalid_rate", "invalid replies per model call", lambda s: s.invalid_rate, True),
    ("reask_rate", "re-asked steps per step", lambda s: s.reask_rate, True),
    (
        "budget_exhausted",
        "runs that exhausted a budget",
        lambda s: s.budget_exhausted / s.runs if s.runs else 0.0,
        True,
    ),
)
"""(key, title, value of a bucket's stats, is a share between 0 and 1)."""


@dataclass(slots=True)
class Series:
    """One (contract, model) line: its buckets' start times and stats."""

    contract: str
    model: str
    color: str
    points: list[tuple[float, ContractStats]] = field(
        default_factory=list[tuple[float, ContractStats]]
    )

    @property
    def label(self) -> str:
        """``contract · model``."""
        return f"{self.contract} · {self.model}"


@dataclass(frozen=True, slots=True)
class Text:
    """A label at a point (``anchor``: SVG's text-anchor)."""

    x: float
    y: float
    text: str
    css: str = "tick"
    anchor: str = "start"


@dataclass(frozen=True, slots=True)
class Mark:
    """A dashed vertical line where a contract version first appeared, with its label."""

    x: float
    title: str
    label: str


@dataclass(frozen=True, slots=True)
class Dot:
    """One bucket's value on a series, with its tooltip."""

    x: float
    y: float
    color: str
    tip: str


@dataclass(frozen=True, slots=True)
class Line:
    """A series' polyline (``points``: "x,y x,y ...")."""

    points: str
    color: str


@dataclass(frozen=True, slots=True)
class Plot:
    """One chart's geometry and text, drawn as SVG by ``templates/_chart.html``, whose
    autoescaping escapes every text in it (titles, contract names, tooltips)."""

    width: int
    height: int
    left: float
    right: float
    top: float
    base: float
    """The y of the value 0 (the horizontal axis)."""
    title: str
    texts: list[Text]
    marks: list[Mark]
    lines: list[Line]
    dots: list[Dot]


@dataclass(slots=True)
class Chart:
    """One metric's chart."""

    key: str
    title: str
    plot: Plot


@dataclass(slots=True)
class Health:
    """Everything the health page shows."""

    runs: int
    bucket_s: float
    series: list[Series]
    contract_dates: dict[str, float]
    charts: list[Chart]

    @property
    def bucket(self) -> str:
        """The bucket size in words."""
        return {86400.0: "day", 3600.0: "hour"}.get(self.bucket_s, "minute")


def run_model(events: Sequence[Event]) -> str:
    """The model that chose the run's first action (else the first of its route)."""
    for ev in events:
        if isinstance(ev, ModelCalled) and ev.role not in ("extract", "child"):
            return ev.model
    first = events[0]
    return first.route[0] if isinstance(first, RunStarted) and first.route else "?"


def bucket_size(span_s: float) -> float:
    """Days for a span of more than two days, hours for more than two hours, else minutes."""
    if span_s > 2 * 86400:
        return 86400.0
    if span_s > 2 * 3600:
        return 3600.0
    return 60.0


def health(transcripts: Sequence[Sequence[Event]]) -> Health:
    """Series and charts for these transcripts."""
    runs = [t for t in transcripts if t and isinstance(t[0], RunStarted)]
    starts = [t[0].at for t in runs]
    size = bucket_size(max(starts) - min(starts)) if starts else 86400.0
    buckets: dict[tuple[str, str, float], list[Sequence[Event]]] = {}
    contract_dates: dict[str, float] = {}
    for events in runs:
        first = events[0]
        assert isinstance(first, RunStarted)
        contract = f"v{first.contract.get('version', '?')}:{first.contract.get('hash', '?')}"
        at = first.at - first.at % size
        contract_dates[contract] = min(contract_dates.get(contract, first.at), first.at)
        buckets.setdefault((contract, run_model(events), at), []).append(events)
    by_line: dict[tuple[str, str], Series] = {}
    for contract, model, at in sorted(buckets, key=lambda k: (k[0], k[1], k[2])):
        line = by_line.get((contract, model))
        if line is None:
            line = Series(contract, model, PALETTE[len(by_line) % len(PALETTE)])
            by_line[contract, model] = line
        [stats] = collect_stats(buckets[contract, model, at])
        line.points.append((at, stats))
    series = list(by_line.values())
    charts = [
        Chart(key, title, plot(title, series, value, share, contract_dates, size))
        for key, title, value, share in METRICS
    ]
    return Health(len(runs), size, series, contract_dates, charts)


def _stamp(at: float, size: float) -> str:
    import time

    fmt = "%Y-%m-%d" if size >= 86400 else "%m-%d %H:%M"
    return time.strftime(fmt, time.gmtime(at))


def plot(
    title: str,
    series: Sequence[Series],
    value: Callable[[ContractStats], float],
    share: bool,
    contract_dates: dict[str, float],
    size: float,
    *,
    width: int = 640,
    height: int = 200,
) -> Plot:
    """A line chart: one polyline per series, a dashed mark where each contract appeared."""
    left, right, top, bottom = 48, 12, 20, 28
    xs = [at for s in series for at, _ in s.points] + list(contract_dates.values())
    lo = min(xs) if xs else 0.0
    hi = max(xs) + size if xs else 1.0
    top_value = 1.0 if share else max([value(p) for s in series for _, p in s.points] + [1.0])
    top_value *= 1.0 if share else 1.1

    def x(at: float) -> float:
        return round(left + (at - lo) / (hi - lo or 1.0) * (width - left - right), 1)

    def y(v: float) -> float:
        return round(top + (1 - v / top_value) * (height - top - bottom), 1)

    texts = [
        Text(left - 4, round(y(v) + 4, 1), f"{v:.0%}" if share else f"{v:.1f}", anchor="end")
        for v in (top_value * frac for frac in (0.0, 0.5, 1.0))
    ]
    texts.append(Text(left, height - 6, _stamp(lo, size)))
    texts.append(Text(width - right, height - 6, _stamp(hi, size), anchor="end"))
    marks = [
        Mark(x(at), f"{contract} first seen {_stamp(at, 60)}", contract.split(":")[0])
        for contract, at in sorted(contract_dates.items(), key=lambda kv: kv[1])
    ]
    lines: list[Line] = []
    dots: list[Dot] = []
    for s in series:
        pts = [(x(at + size / 2), y(value(stats)), at, stats) for at, stats in s.points]
        if len(pts) > 1:
            lines.append(Line(" ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts), s.color))
        for px, py, at, stats in pts:
            v = value(stats)
            shown = f"{v:.0%}" if share else f"{v:.2f}"
            tip = f"{s.label} {_stamp(at, size)}: {shown} ({stats.runs} runs)"
            dots.append(Dot(px, py, s.color, tip))
    return Plot(width, height, left, right, top, y(0), title, texts, marks, lines, dots)
