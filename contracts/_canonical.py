"""The canonical JSON form that hashes are computed over (arguments, output schemas).

A leaf: both the action schema and the output specs hash through it.
"""

from __future__ import annotations

import json

__all__ = ["canonical_json"]


def canonical_json(value: object) -> str:
    """Compact JSON with sorted keys: the form argument hashes are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
