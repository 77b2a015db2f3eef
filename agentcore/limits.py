"""What a transcript may hold: the limits every recorded value passes.

The rules and their defaults are documented in one place, ``agentcore.contracts`` (the
lowest layer, so the contract, the adapters and the core apply the same ones); this module
is their public home in the core package. See docs/guarantees.md.
"""

from agentcore.contracts import (
    MAX_DEPTH,
    MAX_EVENT_BYTES,
    MAX_INT,
    MAX_RUN_ID_CHARS,
    MAX_STRING_CHARS,
    MAX_TENANT_CHARS,
    MIN_INT,
    check_json,
    check_run_id,
    check_tenant,
    check_text,
    clean_text,
    json_problem,
    to_recordable,
)
from agentcore.contracts.errors import LimitExceededError

__all__ = [
    "MAX_DEPTH",
    "MAX_EVENT_BYTES",
    "MAX_INT",
    "MAX_RUN_ID_CHARS",
    "MAX_STRING_CHARS",
    "MAX_TENANT_CHARS",
    "MIN_INT",
    "LimitExceededError",
    "check_json",
    "check_run_id",
    "check_tenant",
    "check_text",
    "clean_text",
    "json_problem",
    "to_recordable",
]
