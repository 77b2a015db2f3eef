#!/usr/bin/env python
"""Per-step time of two revisions of agentcore, measured in one run, interleaved.

Each round times every case once with the working tree's code and once with ``--base``'s
(in alternating order), each in a fresh process running that revision's own
``bench/bench_steps.py --only KIND:N``, so both see the same machine load. The base
revision is checked out into a temporary git worktree and imported through a link tree
(``agentcore`` -> its ``agentcore/``, with ``contracts/`` and ``adapters/`` mapped in as
the install does), with this interpreter's dependencies.

Usage::

    python bench/compare_revisions.py --base 8ceee31
    python bench/compare_revisions.py --base 8ceee31 --cases memory_async:1000 --rounds 9
    python bench/compare_revisions.py --base 9c1a250 --base main \
        --cases memory_async:1000,sqlite_normal:1000   # two bases, one run

A case is timed under the name each revision's own bench_steps.py gives it: a name a revision
lacks is taken from ``SAME_CASE`` when that revision has the same case under an older name
(the mapping is printed), and otherwise stops the comparison before anything is timed, never
timing another case in its place.

Prints, per case, the median and spread (min-max) of the per-step time (3 samples per
process, every round) for each revision and the ratio of the medians (working tree / each
base). With several ``--base``, every round times all of them, in a rotating order.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = re.compile(r"([0-9.]+) ms/step")
SAME_CASE = {"memory_async": "memory"}
"""This tree's cases that older revisions named otherwise: up to the split of the in-memory
case by tool kind, ``memory`` was the MemoryStore case with the async ``get_order``."""
_CASES_OF = """
import sys
sys.path.insert(0, "bench")
import bench_steps as b
if hasattr(b, "AGENT_CASES"):
    print(*b.FLOOR_LABELS, *b.AGENT_CASES)
else:  # before the cases were a table: one label per case
    print(*b.LABELS)
"""


def link_tree(source: Path, into: Path) -> Path:
    """A folder whose ``agentcore`` package is ``source``'s, laid out as installed."""
    pkg = into / "agentcore"
    pkg.mkdir(parents=True)
    for entry in (source / "agentcore").iterdir():
        (pkg / entry.name).symlink_to(entry)
    (pkg / "contracts").symlink_to(source / "contracts")
    (pkg / "adapters").symlink_to(source / "adapters")
    return into


def case_names(tree: Path, path_entry: Path | None) -> frozenset[str]:
    """The case names ``tree``'s bench_steps.py accepts with ``--only``."""
    env = dict(os.environ)
    if path_entry is not None:
        env["PYTHONPATH"] = str(path_entry)
    # -P: the tree's own agentcore/ (not laid out as installed) must not shadow path_entry's.
    out = subprocess.run(
        [sys.executable, "-P", "-c", _CASES_OF],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=False,
    )
    if out.returncode != 0 or not out.stdout.split():
        raise SystemExit(f"cannot list the cases of {tree}'s bench_steps.py:\n{out.stderr}")
    return frozenset(out.stdout.split())


def own_case(case: str, names: frozenset[str], revision: str) -> str:
    """``case`` (``KIND:N``) under the name ``revision`` gives it (its ``names``).

    Raises:
        SystemExit: ``revision`` has no such case, under this name or an older one.
    """
    kind, colon, n = case.partition(":")
    if kind in names:
        return case
    older = SAME_CASE.get(kind)
    if older in names:
        return f"{older}{colon}{n}"
    raise SystemExit(
        f"{revision}'s bench_steps.py has no case {kind!r} (its cases: "
        f"{', '.join(sorted(names))}); time only cases every revision has (--cases)."
    )


def time_case(tree: Path, path_entry: Path | None, case: str) -> list[float]:
    """Microseconds per step of each sample of one ``--only`` run (3 samples) of
    ``tree``'s bench_steps.py."""
    env = dict(os.environ)
    if path_entry is not None:
        env["PYTHONPATH"] = str(path_entry)
    out = subprocess.run(
        [sys.executable, str(tree / "bench" / "bench_steps.py"), "--only", case, "--reps", "3"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=True,
    ).stdout
    found = STEP.findall(out)
    if not found:
        raise SystemExit(f"no 'ms/step' figure in the output of {case} in {tree}:\n{out}")
    return [float(ms) * 1000 for ms in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--base",
        required=True,
        action="append",
        help="a revision to compare with (repeat the option for several)",
    )
    parser.add_argument(
        "--cases",
        default="memory_async:1000,memory_sync:1000,sqlite_normal:1000,sqlite_full:1000",
        help="comma-separated KIND:N cases of bench_steps.py --only",
    )
    parser.add_argument(
        "--head", default=None, help="a revision to time instead of the working tree"
    )
    parser.add_argument("--rounds", type=int, default=7, help="rounds (each times both)")
    args = parser.parse_args()
    cases = args.cases.split(",")
    bases = [f"base {rev}" for rev in args.base]
    with tempfile.TemporaryDirectory(prefix="agentcore-compare-") as tmp:
        trees: dict[str, tuple[Path, Path | None]] = {"head": (ROOT, None)}
        added: list[Path] = []
        try:
            revisions = [*zip(bases, args.base, strict=True), ("head", args.head)]
            for i, (name, rev) in enumerate(revisions):
                if rev is None:
                    continue
                tree = Path(tmp) / f"tree{i}"
                subprocess.run(
                    ["git", "worktree", "add", "--detach", "-q", str(tree), rev],
                    cwd=ROOT,
                    check=True,
                )
                added.append(tree)
                trees[name] = (tree, link_tree(tree, Path(tmp) / f"site{i}"))
            names = [*bases, "head"]
            own: dict[tuple[str, str], str] = {}
            for name in names:  # every name checked before anything is timed
                known = case_names(*trees[name])
                for case in cases:
                    own[(name, case)] = own_case(case, known, name)
                    if own[(name, case)] != case:
                        print(f"{name}: {case} is its {own[(name, case)]}", file=sys.stderr)
            times: dict[tuple[str, str], list[float]] = {}
            for r in range(args.rounds):
                for case in cases:
                    shift = r % len(names)
                    for name in names[shift:] + names[:shift]:
                        tree, entry = trees[name]
                        samples = time_case(tree, entry, own[(name, case)])
                        times.setdefault((name, case), []).extend(samples)
        finally:
            for tree in added:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False
                )
    load = os.getloadavg()[0]
    head = args.head or "working tree"
    print(f"{', '.join(bases)} vs {head}, {args.rounds} rounds, load {load:.1f}")
    print(
        "| case | "
        + " | ".join(f"{name} us/step (min-max)" for name in [*bases, "head"])
        + " | "
        + " | ".join(f"head / {name}" for name in bases)
        + " |"
    )
    print("|---" * (1 + 2 * len(bases) + 1) + "|")
    for case in cases:
        h = times[("head", case)]
        mh = statistics.median(h)
        cells = []
        for name in [*bases, "head"]:
            t = times[(name, case)]
            cells.append(f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})")
        ratios = [f"{mh / statistics.median(times[(name, case)]):.2f}" for name in bases]
        print(f"| {case} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
