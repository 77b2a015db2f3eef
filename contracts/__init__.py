"""The next-action contract: action types, per-run schema compiler, contract documents.

This package imports only pydantic and the standard library, and ``jsonschema`` in the one
module that validates tools defined as data (loaded on first use).
"""

from typing import TYPE_CHECKING, Any

from ._actions import (
    MAX_PLAN_STEPS,
    MAX_QUESTION_CHARS,
    MAX_THOUGHT_CHARS,
    AskAction,
    BatchAction,
    BatchCall,
    Effect,
    FinishAction,
    NextAction,
    PlanAction,
    ToolAction,
)

if TYPE_CHECKING:  # the dialect compilers load on first use: only adapters need them
    from ._dialects import (
        ANTHROPIC_MAX_OPTIONAL_PARAMS,
        ANTHROPIC_MAX_UNION_PARAMS,
        AnthropicLimitReport,
        Dialect,
        WireSchema,
        anthropic_limits,
        choose_form,
        compile_parameters,
        compile_wire_schema,
        fits_anthropic,
    )
from ._document import ContractDocument, ExampleTool, ExampleTurn, WorkedExample, load_contract

if TYPE_CHECKING:  # loads on first use: tools given as JSON Schema (examples, MCP, evals)
    from ._jsonschema import model_from_json_schema
from ._canonical import canonical_json
from ._limits import (
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
from ._output import OutputSpec, output_spec
from ._schema import (
    DEFAULT_MAX_REPLY_BYTES,
    ActionSchema,
    SchemaForm,
    compile_action_schema,
    dump_action,
)
from ._tools import TOOL_NAME_PATTERN, ToolSpec
from ._usage import Usage

__all__ = [
    "ANTHROPIC_MAX_OPTIONAL_PARAMS",
    "ANTHROPIC_MAX_UNION_PARAMS",
    "DEFAULT_MAX_REPLY_BYTES",
    "MAX_DEPTH",
    "MAX_EVENT_BYTES",
    "MAX_INT",
    "MAX_PLAN_STEPS",
    "MAX_QUESTION_CHARS",
    "MAX_RUN_ID_CHARS",
    "MAX_STRING_CHARS",
    "MAX_TENANT_CHARS",
    "MAX_THOUGHT_CHARS",
    "MIN_INT",
    "TOOL_NAME_PATTERN",
    "ActionSchema",
    "AnthropicLimitReport",
    "AskAction",
    "BatchAction",
    "BatchCall",
    "ContractDocument",
    "Dialect",
    "Effect",
    "ExampleTool",
    "ExampleTurn",
    "FinishAction",
    "NextAction",
    "OutputSpec",
    "PlanAction",
    "SchemaForm",
    "ToolAction",
    "ToolSpec",
    "Usage",
    "WireSchema",
    "WorkedExample",
    "anthropic_limits",
    "canonical_json",
    "check_json",
    "check_run_id",
    "check_tenant",
    "check_text",
    "choose_form",
    "clean_text",
    "compile_action_schema",
    "compile_parameters",
    "compile_wire_schema",
    "dump_action",
    "fits_anthropic",
    "json_problem",
    "load_contract",
    "model_from_json_schema",
    "output_spec",
    "to_recordable",
]


# Public names whose modules load on first use, by module: the dialect compilers (only
# adapters need them) and the JSON Schema model builder (tools given as JSON Schema).
_LAZY = {
    **dict.fromkeys(
        (
            "ANTHROPIC_MAX_OPTIONAL_PARAMS",
            "ANTHROPIC_MAX_UNION_PARAMS",
            "AnthropicLimitReport",
            "Dialect",
            "WireSchema",
            "anthropic_limits",
            "choose_form",
            "compile_parameters",
            "compile_wire_schema",
            "fits_anthropic",
        ),
        "_dialects",
    ),
    "model_from_json_schema": "_jsonschema",
}


def __getattr__(name: str) -> Any:  # Any: one of the lazily loaded public names
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module 'agentcore.contracts' has no attribute {name!r}")
