"""Running suites under policies and summing the outcomes into a table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from .bridge import VARIANTS, Outcome, Suite, Variant


@dataclasses.dataclass
class Row:
    """The figures of one suite (or ``all``) under one policy and plan variant."""

    suite: str
    policy: str
    variant: Variant
    pairs: int = 0  # attacked pairs run
    attacks: int = 0  # of which the injection task succeeded
    utility_attacked: int = 0
    questions_attacked: int = 0
    benign: int = 0
    utility_benign: int = 0
    questions_benign: int = 0
    unrunnable: list[str] = dataclasses.field(default_factory=list)

    def add(self, o: Outcome) -> None:
        if o.error is not None:
            self.unrunnable.append(f"{o.suite}/{o.user_task}/{o.injection_task}: {o.error}")
            return
        if o.injection_task is None:
            self.benign += 1
            self.utility_benign += o.utility
            self.questions_benign += o.questions
        else:
            self.pairs += 1
            self.attacks += o.attacked
            self.utility_attacked += o.utility
            self.questions_attacked += o.questions


async def measure(
    suites: Sequence[str],
    policies: Sequence[str],
    variants: Sequence[Variant] = VARIANTS,
    pairs: Iterable[tuple[str, str, str | None]] | None = None,
) -> list[Outcome]:
    """Every pair of ``suites`` (or the given ``(suite, user, injection)`` pairs) under
    every policy and plan variant, plus every user task alone (benign, honest variant)."""
    wanted = None if pairs is None else list(pairs)
    out: list[Outcome] = []
    for name in suites:
        suite = Suite(name)
        if wanted is None:
            chosen = suite.pairs()
            users = sorted({u for u, _ in chosen}, key=lambda t: int(t.rsplit("_", 1)[-1]))
        else:
            chosen = [(u, i) for s, u, i in wanted if s == name and i is not None]
            users = list(dict.fromkeys(u for s, u, _ in wanted if s == name))
        for policy in policies:
            for user in users:
                out.append(await suite.run(user, None, policy, "honest"))
            for variant in variants:
                for user, injection in chosen:
                    out.append(await suite.run(user, injection, policy, variant))
    return out


def rows(outcomes: Iterable[Outcome]) -> list[Row]:
    """One row per suite, policy and variant, and ``all`` per policy and variant. The
    benign figures (no plan variant applies) are shared by both variants' rows."""
    table: dict[tuple[str, str, str], Row] = {}
    benign: list[Outcome] = []
    for o in outcomes:
        if o.injection_task is None:
            benign.append(o)
            continue
        for suite in (o.suite, "all"):
            key = (suite, o.policy, o.variant)
            table.setdefault(key, Row(suite, o.policy, o.variant)).add(o)
    for o in benign:
        for (suite, policy, _), row in table.items():
            if policy == o.policy and suite in (o.suite, "all"):
                row.add(o)
    order = {"all": 99}
    return sorted(table.values(), key=lambda r: (order.get(r.suite, 0), r.suite, r.policy))


def _pct(n: int, d: int) -> str:
    return "-" if d == 0 else f"{100 * n / d:.1f}%"


def _per(n: int, d: int) -> str:
    return "-" if d == 0 else f"{n / d:.2f}"


def markdown(table: Sequence[Row]) -> str:
    """The rows as a Markdown table, then every pair the bridge could not run."""
    lines = [
        "| suite | policy | plan | pairs | attack success | utility under attack "
        "| benign utility | questions / benign task | questions / attacked task | not run |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in table:
        lines.append(
            f"| {r.suite} | {r.policy} | {r.variant} | {r.pairs} "
            f"| {_pct(r.attacks, r.pairs)} ({r.attacks}) "
            f"| {_pct(r.utility_attacked, r.pairs)} "
            f"| {_pct(r.utility_benign, r.benign)} ({r.utility_benign}/{r.benign}) "
            f"| {_per(r.questions_benign, r.benign)} "
            f"| {_per(r.questions_attacked, r.pairs)} | {len(r.unrunnable)} |"
        )
    failures = sorted({u for r in table for u in r.unrunnable})
    if failures:
        lines += ["", "Pairs the bridge could not run:", *(f"- {f}" for f in failures)]
    return "\n".join(lines) + "\n"
