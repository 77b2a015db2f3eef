#!/usr/bin/env python
"""What the chain key's HMAC costs: the MACs a store computes over stored events.

5,000 event bodies (JSON text of ~200-400 bytes, as a tool step stores them) are MAC'd
with :meth:`ChainKey.mac` (the seal of a snapshot; a head's signature is the same call over
a short message), and 5,000 heads are signed with :meth:`ChainKey.sign`. For reference,
the same bodies are MAC'd with a new ``hmac.new(key, body, sha256)`` each (no pre-keyed
state). Each case runs R rounds, interleaved; the script prints the median and the range
in microseconds per MAC. With ``--revision REV``, the same two cases also run on
``agentcore/stores/_chain.py`` as it was at git revision REV (loaded beside this tree's,
in the same process, interleaved).

Usage::

    python bench/bench_chain.py              # R=9
    python bench/bench_chain.py --rounds 15 --revision HEAD~1
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from agentcore.stores._chain import ChainKey

ROOT = Path(__file__).resolve().parent.parent

N = 5_000
KEY = bytes(range(32))


def bodies() -> list[bytes]:
    """N event bodies of varying length, as the store encodes them."""
    out: list[bytes] = []
    for i in range(N):
        body = {
            "type": "tool_called",
            "seq": i,
            "tool": "get_order",
            "args": {"order_id": f"A{i:05d}", "note": "x" * (i % 200)},
            "thought": "Look up the next order.",
        }
        out.append(json.dumps(body, separators=(",", ":")).encode())
    return out


def chain_at(revision: str) -> ModuleType:
    """``agentcore/stores/_chain.py`` at ``revision``, as a module of ``agentcore.stores``
    (its relative imports resolve to this tree's)."""
    source = subprocess.run(
        ["git", "show", f"{revision}:agentcore/stores/_chain.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    name = "agentcore.stores._chain_at_revision"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "agentcore.stores"
    sys.modules[name] = module
    exec(compile(source, f"{revision}:_chain.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--revision", help="also time _chain.py at this git revision")
    args = parser.parse_args()
    data = bodies()

    def mac_bodies(key: ChainKey) -> Callable[[], None]:
        def run() -> None:
            for body in data:
                key.mac(body)

        return run

    def sign_heads(key: ChainKey) -> Callable[[], None]:
        def run() -> None:
            digest = b"\x01" * 32
            for i in range(N):
                key.sign("run-0001", 0, 0, i, digest)

        return run

    def plain_hmac() -> None:
        for body in data:
            hmac.new(KEY, body, hashlib.sha256).digest()

    key = ChainKey(KEY)
    cases: dict[str, Callable[[], None]] = {
        "ChainKey.mac (5,000 bodies)": mac_bodies(key),
        "ChainKey.sign (5,000 heads)": sign_heads(key),
    }
    if args.revision:
        old = chain_at(args.revision).ChainKey(KEY)
        assert old.mac(data[0]) == key.mac(data[0]), "the two revisions' MACs differ"
        cases[f"ChainKey.mac @ {args.revision}"] = mac_bodies(old)
        cases[f"ChainKey.sign @ {args.revision}"] = sign_heads(old)
    cases["hmac.new per body (reference)"] = plain_hmac
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) / N * 1e6)
    print(f"{args.rounds} rounds, us per MAC: median (min-max)")
    for name, samples in times.items():
        print(
            f"  {name:32} {statistics.median(samples):6.2f} ({min(samples):.2f}-{max(samples):.2f})"
        )


if __name__ == "__main__":
    main()
