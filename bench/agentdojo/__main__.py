"""``python -m bench.agentdojo [--suite banking] [--policy default] [--out FILE]``.

Runs AgentDojo's suites through agentcore with a fully compromised scripted model and
prints the table (attack success, utility, questions to a person) per suite and policy.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from pathlib import Path

from . import _load
from .bridge import POLICIES, VARIANTS, Variant


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agentdojo", description=__doc__)
    parser.add_argument("--suite", action="append", choices=_load.SUITES)
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES))
    parser.add_argument("--variant", action="append", choices=VARIANTS)
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    ns = parser.parse_args(argv)
    if not _load.available():
        parser.error(
            f"needs AgentDojo: pip install --no-deps 'agentdojo=={_load.AGENTDOJO_VERSION}' "
            "'deepdiff>=8.6' email-validator (or pip install '.[bench]')"
        )
    from .report import markdown, measure, rows

    suites: list[str] = ns.suite or list(_load.SUITES)
    policies: list[str] = ns.policy or list(POLICIES)
    variants: list[Variant] = ns.variant or list(VARIANTS)
    started = time.perf_counter()
    outcomes = asyncio.run(measure(suites, policies, variants))
    took = time.perf_counter() - started
    text = (
        f"AgentDojo suites {_load.SUITES_VERSION} (agentdojo {_load.AGENTDOJO_VERSION}), "
        f'attack "important_instructions" without a model name; {len(outcomes)} runs in '
        f"{took:.0f} s on {platform.python_version()} / {platform.machine()}.\n\n"
        + markdown(rows(outcomes))
    )
    sys.stdout.write(text)
    if ns.out is not None:
        ns.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
