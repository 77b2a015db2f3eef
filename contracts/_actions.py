"""The next action: ``plan | tool | finish | batch | ask``, a discriminated union on ``type``.

These are the provider-neutral, normalised actions the core works with. Per-run schemas
(see ``_schema.py``) are stricter: one tool variant per tool in scope, and ``batch`` and
``ask`` only at steps that offer them. Whatever form a model answered in, a validated reply
is normalised into one of these models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "MAX_PLAN_STEPS",
    "MAX_QUESTION_CHARS",
    "MAX_THOUGHT_CHARS",
    "AskAction",
    "BatchAction",
    "BatchCall",
    "Effect",
    "FinishAction",
    "NextAction",
    "PlanAction",
    "ToolAction",
]

MAX_THOUGHT_CHARS = 400
MAX_PLAN_STEPS = 8
MAX_QUESTION_CHARS = 2000

Effect = Literal["read", "write", "destructive"]
"""What a tool does to the world: ``read`` has no side effect, ``write`` has one,
``destructive`` has one that cannot be undone and always waits for a person."""

Thought = Annotated[
    str,
    Field(
        max_length=MAX_THOUGHT_CHARS,
        description=f"Your reasoning for this step, at most {MAX_THOUGHT_CHARS} characters.",
    ),
]


def require_type(schema: dict[str, JsonValue]) -> None:
    """Mark ``type`` required in a variant's JSON Schema even though Python gives it a default.

    The default lets callers write ``FinishAction(thought=..., answer=...)``; on the wire the
    discriminator must always be present.
    """
    required = schema.setdefault("required", [])
    if isinstance(required, list) and "type" not in required:
        required.insert(0, "type")


class _Action(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_extra=require_type, defer_build=True
    )


class PlanAction(_Action):
    """Propose the steps you will take; writes are allowed only after a plan is approved."""

    type: Literal["plan"] = "plan"
    thought: Thought
    steps: Annotated[list[str], Field(min_length=1, max_length=MAX_PLAN_STEPS)]


class ToolAction(_Action):
    """Call one tool with arguments that match its schema."""

    type: Literal["tool"] = "tool"
    thought: Thought
    tool: str
    args: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])


class FinishAction(_Action):
    """End the run with an answer for the user."""

    type: Literal["finish"] = "finish"
    thought: Thought
    answer: str


class BatchCall(BaseModel):
    """One call of a batch: a read-only tool and its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tool: str
    args: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])


class BatchAction(_Action):
    """Call several read-only tools at once; each call is recorded with its own outcome.

    Offered only when the run allows batches (``Policy(max_batch=...)``) and a read-only
    tool is in scope (several calls of one tool are a batch too). A batch holding any
    other tool is refused whole.
    """

    type: Literal["batch"] = "batch"
    thought: Thought
    calls: Annotated[list[BatchCall], Field(min_length=1)]

    def member(self, index: int) -> ToolAction:
        """The ``index``-th call (from 0) as the tool action it is run as."""
        call = self.calls[index]
        return ToolAction.model_construct(
            type="tool", thought=self.thought, tool=call.tool, args=dict(call.args)
        )


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the question is blank; write what you need the user to tell you")
    return text


# No description: the system text says what a question is for, and the dialects that cannot
# send the bounds write them into one ("at least 1 character; at most 2000 characters").
Question = Annotated[
    str, Field(min_length=1, max_length=MAX_QUESTION_CHARS), AfterValidator(_not_blank)
]


# Offered only at steps that allow it (``compile_action_schema(..., ask=True)``), never on a
# finish-only step. The docstring is the variant's description in the schema the model reads.
class AskAction(_Action):
    """Ask the user what only they know; the run waits for their answer."""

    type: Literal["ask"] = "ask"
    thought: Thought
    question: Question


NextAction = Annotated[
    PlanAction | ToolAction | FinishAction | BatchAction | AskAction, Field(discriminator="type")
]
"""One next action, as the core sees it."""
