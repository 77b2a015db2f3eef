"""Compile the per-run action schema from the tools in scope, and parse replies against it.

Two forms:

* ``typed`` (default): one ``tool`` variant per tool, ``tool`` a literal of its name and
  ``args`` that tool's own argument model. Out-of-scope tools are not representable.
* ``generic``: ``tool`` an enum of the names in scope and ``args_json`` a string holding the
  arguments as JSON, validated here against the tool's model. For providers whose strict
  schema limits the typed form exceeds, or that cannot express a schema in it.

With a typed output (:class:`OutputSpec`), the typed form's ``finish`` variant has an
``answer`` of that type; the generic form's has ``answer_json``, a string holding the answer
as JSON, validated here against the type (a type a strict dialect cannot express, such as an
open ``dict[str, int]``, would otherwise be sent as an object with no properties, and a
constrained decoder could then write nothing but ``{}``). Either way the normalised
``finish`` carries the answer's canonical JSON.

Whatever the form, :meth:`ActionSchema.parse` returns the normalised
:data:`~agentcore.contracts.NextAction` or raises :class:`InvalidActionError` with a message
written for the model.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from ._actions import (
    MAX_PLAN_STEPS,
    AskAction,
    BatchAction,
    BatchCall,
    FinishAction,
    NextAction,
    PlanAction,
    Question,
    Thought,
    ToolAction,
    require_type,
)
from ._canonical import canonical_json
from ._limits import MAX_DEPTH, json_problem
from ._output import OutputSpec
from ._tools import ToolSpec
from .errors import ConfigurationError, InvalidActionError, UnknownToolError

__all__ = [
    "DEFAULT_MAX_REPLY_BYTES",
    "ActionSchema",
    "SchemaForm",
    "ToolArgs",
    "compile_action_schema",
]

SchemaForm = Literal["typed", "generic"]
ToolArgs = Literal["json_schema", "signature"]
"""How the system text shows a tool's arguments: its whole JSON Schema (descriptions and
enums included), or a one-line signature (names, types, which are optional), leaving
descriptions and enums to the action schema (and, in the generic form, whose schema does not
hold them, to the wire schema's prompt: see ``compile_wire_schema``)."""
DEFAULT_MAX_REPLY_BYTES = 64 * 1024
_MAX_ERRORS_SHOWN = 5
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


@functools.cache
def _next_action() -> TypeAdapter[PlanAction | ToolAction | FinishAction | BatchAction | AskAction]:
    return TypeAdapter(NextAction)


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_extra=require_type, defer_build=True
    )


def _class_name(tool_name: str) -> str:
    return "Call_" + re.sub(r"[^A-Za-z0-9_]", "_", tool_name)


def _literal(*values: str) -> Any:  # Any: a Literal type built at run time from data
    return Literal[values]  # pyright: ignore[reportInvalidTypeForm]  # run-time literal is the point


def _ordered(fields: dict[str, Any], thought_first: bool) -> dict[str, Any]:  # Any: fields
    """``type`` then ``thought`` then the rest, or ``thought`` first (see
    :attr:`ActionSchema.thought_first`)."""
    if not thought_first:
        return fields
    return {"thought": fields["thought"]} | {k: v for k, v in fields.items() if k != "thought"}


def _typed_variant(spec: ToolSpec, thought_first: bool = False) -> type[BaseModel]:
    fields: dict[str, Any] = {  # Any: pydantic field definitions
        "type": (Literal["tool"], "tool"),
        "thought": (Thought, ...),
        "tool": (_literal(spec.name), ...),
        "args": (spec.args_model, ...),
    }
    return create_model(
        _class_name(spec.name),
        __base__=_Strict,
        __doc__=spec.description,
        **_ordered(fields, thought_first),
    )


def _generic_variant(names: Sequence[str], thought_first: bool = False) -> type[BaseModel]:
    fields: dict[str, Any] = {  # Any: pydantic field definitions
        "type": (Literal["tool"], "tool"),
        "thought": (Thought, ...),
        "tool": (_literal(*names), ...),
        "args_json": (str, Field(description="The tool's arguments as a JSON object string.")),
    }
    doc = "Call one tool; args_json holds its arguments as a JSON object."
    return create_model(
        "ToolCall", __base__=_Strict, __doc__=doc, **_ordered(fields, thought_first)
    )


def _batch_item(spec: ToolSpec) -> type[BaseModel]:
    return create_model(
        "BatchCall_" + _class_name(spec.name).removeprefix("Call_"),
        __base__=_StrictItem,
        __doc__=spec.description,
        tool=(_literal(spec.name), ...),
        args=(spec.args_model, ...),
    )


class _StrictItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _batch_variant(
    specs: Sequence[ToolSpec], form: SchemaForm, most: int, thought_first: bool
) -> type[BaseModel]:
    """The ``batch`` variant: up to ``most`` calls of the read-only tools ``specs``."""
    item: Any  # Any: a union type built at run time
    if form == "generic":
        item = create_model(
            "BatchCall",
            __base__=_StrictItem,
            __doc__="One read-only call; args_json holds its arguments as a JSON object.",
            tool=(_literal(*(s.name for s in specs)), ...),
            args_json=(str, Field(description="The tool's arguments as a JSON object string.")),
        )
    else:
        items = [_batch_item(s) for s in specs]
        item = items[0]
        for v in items[1:]:
            item = item | v
        if len(items) > 1:
            item = Annotated[item, Field(discriminator="tool")]
    fields: dict[str, Any] = {  # Any: pydantic field definitions
        "type": (Literal["batch"], "batch"),
        "thought": (Thought, ...),
        "calls": (Annotated[list[item], Field(min_length=1, max_length=most)], ...),
    }
    return create_model(
        "BatchAction",
        __base__=_Strict,
        __doc__=(
            "Call several read-only tools at once, in one step; each call gets its own "
            "result. Only read-only tools may be in a batch."
        ),
        **_ordered(fields, thought_first),
    )


def batch_tools(tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools a batch may call: read-only and idempotent."""
    return tuple(t for t in tools if t.effect == "read" and t.idempotent)


def batch_note(most: int, reads: Sequence[str]) -> str:
    """The paragraph the system text gains when the model may batch reads."""
    return (
        'You may also reply with a batch: {"type": "batch", "thought": "...", '
        '"calls": [{"tool": "<name>", "args": {...}}, ...]} calls up to '
        f"{most} read-only tools at once, in one step, when you need several lookups; "
        "you will see each result under its own id. Only these tools may be in a batch: "
        f"{', '.join(reads)}. A batch holding any other tool is refused whole; call a tool "
        "that changes things alone."
    )


def ask_note() -> str:
    """The paragraph the system text gains when the model may ask the user a question (a
    step compiled with ``ask=True``; without it the text is unchanged)."""
    return (
        'You may also reply {"type": "ask", "thought": "...", "question": "..."} to ask the '
        "user what only they know (a missing required value); the run waits for their "
        "answer. Do not ask what a tool can find out."
    )


_ThoughtFirstPlan: type[BaseModel] = create_model(
    "PlanAction",  # the wire schema names it as the usual order does
    __base__=_Strict,
    __doc__=PlanAction.__doc__,
    thought=(Thought, ...),
    type=(Literal["plan"], "plan"),
    steps=(Annotated[list[str], Field(min_length=1, max_length=MAX_PLAN_STEPS)], ...),
)
_ThoughtFirstFinish: type[BaseModel] = create_model(
    "FinishAction",
    __base__=_Strict,
    __doc__=FinishAction.__doc__,
    thought=(Thought, ...),
    type=(Literal["finish"], "finish"),
    answer=(str, ...),
)
_ThoughtFirstAsk: type[BaseModel] = create_model(
    "AskAction",
    __base__=_Strict,
    __doc__=AskAction.__doc__,
    thought=(Thought, ...),
    type=(Literal["ask"], "ask"),
    question=(Question, ...),
)


@functools.cache
def _typed_finish(output: OutputSpec, thought_first: bool) -> type[BaseModel]:
    """The ``finish`` variant whose ``answer`` has the run's output type (named as the text
    one, so the wire schema reads the same)."""
    fields: dict[str, Any] = {  # Any: pydantic field definitions
        "type": (Literal["finish"], "finish"),
        "thought": (Thought, ...),
        "answer": (output.answer_type, ...),
    }
    return create_model(
        "FinishAction",
        __base__=_Strict,
        __doc__=FinishAction.__doc__,
        **_ordered(fields, thought_first),
    )


@functools.cache
def _generic_finish(thought_first: bool) -> type[BaseModel]:
    """The generic form's ``finish`` with a typed output: the answer as a JSON string,
    validated client-side like a generic tool call's ``args_json`` (named as the text one,
    so the wire schema reads the same)."""
    fields: dict[str, Any] = {  # Any: pydantic field definitions
        "type": (Literal["finish"], "finish"),
        "thought": (Thought, ...),
        "answer_json": (
            str,
            Field(description="The answer as JSON text that matches the answer's schema."),
        ),
    }
    return create_model(
        "FinishAction",
        __base__=_Strict,
        __doc__=FinishAction.__doc__,
        **_ordered(fields, thought_first),
    )


def _describe(exc: ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors(include_url=False)[:_MAX_ERRORS_SHOWN]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - _MAX_ERRORS_SHOWN
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


@dataclass(frozen=True, eq=False)
class ActionSchema:
    """The action union one step offers the model, and the validator for its reply.

    Build it with :func:`compile_action_schema`. Adapters send :meth:`json_schema` (through
    their dialect compiler) or :attr:`root_type` (to libraries that take a type); every reply
    goes through :meth:`parse`, the one validation path for every provider.

    Attributes:
        tools: the tools a ``tool`` action may name.
        finish_only: only ``finish`` is allowed (the last step of a budget).
        allow_plan: whether ``plan`` is offered.
        form: ``typed`` or ``generic``.
        max_reply_bytes: replies larger than this are refused before parsing.
        thought_first: every variant lists ``thought`` before the ``type`` discriminator
            (the order a constrained decoder writes them in); by default ``type`` comes
            first. Parsing gives the same actions either way.
        output: the type of ``finish``'s ``answer`` (``None``: text).
        max_batch: the most calls a ``batch`` may hold (0: no batch); a batch is offered
            only when a read-only, idempotent tool is in the schema.
        tool_args: how the system text shows the tools' arguments (the contract
            document's :attr:`~agentcore.contracts.ContractDocument.tool_args`): with
            ``signature``, the generic form's wire schema carries a prompt with each tool's
            argument schema, which its ``args_json`` string does not.
        ask: ``ask`` (a question for the user) is offered; :func:`compile_action_schema`
            never sets it on a finish-only step (nor would :attr:`offered_types` offer it).
    """

    tools: tuple[ToolSpec, ...]
    finish_only: bool = False
    allow_plan: bool = True
    form: SchemaForm = "typed"
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    thought_first: bool = False
    output: OutputSpec | None = None
    max_batch: int = 0
    tool_args: ToolArgs = "json_schema"
    ask: bool = False
    _by_name: dict[str, ToolSpec] = field(init=False, repr=False)
    _forms: dict[str, ActionSchema] = field(
        init=False, repr=False, default_factory=dict[str, "ActionSchema"]
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {t.name: t for t in self.tools})
        if len(self._by_name) != len(self.tools):
            raise ConfigurationError("Two tools in one schema share a name.")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names a ``tool`` action may use, in order."""
        return tuple(self._by_name)

    @property
    def offered_types(self) -> tuple[str, ...]:
        """The action types this schema offers."""
        if self.finish_only:
            return ("finish",)
        kinds = ["plan"] if self.allow_plan else []
        if self.tools:
            kinds.append("tool")
        if self.batch_names:
            kinds.append("batch")
        if self.ask:
            kinds.append("ask")
        return (*kinds, "finish")

    @property
    def batch_names(self) -> tuple[str, ...]:
        """The tools a ``batch`` may call (empty: no batch is offered)."""
        if self.max_batch < 2 or self.finish_only:
            return ()
        return tuple(t.name for t in batch_tools(self.tools))

    @cached_property
    def root_type(self) -> Any:  # Any: a union type built at run time has no static type
        """The pydantic union type (annotated with its discriminator) of this schema."""
        variants: list[Any] = []
        first = self.thought_first
        if "plan" in self.offered_types:
            variants.append(_ThoughtFirstPlan if first else PlanAction)
        if "tool" in self.offered_types:
            if self.form == "generic":
                variants.append(_generic_variant(self.tool_names, first))
            else:
                tool_variants = [_typed_variant(t, first) for t in self.tools]
                if len(tool_variants) == 1:
                    variants.append(tool_variants[0])
                else:
                    union: Any = tool_variants[0]
                    for v in tool_variants[1:]:
                        union = union | v
                    variants.append(Annotated[union, Field(discriminator="tool")])
        if "batch" in self.offered_types:
            specs = [self._by_name[n] for n in self.batch_names]
            variants.append(_batch_variant(specs, self.form, self.max_batch, first))
        if "ask" in self.offered_types:
            variants.append(_ThoughtFirstAsk if first else AskAction)
        if self.output is not None and self.form == "generic":
            variants.append(_generic_finish(first))
        elif self.output is not None:
            variants.append(_typed_finish(self.output, first))
        else:
            variants.append(_ThoughtFirstFinish if first else FinishAction)
        if len(variants) == 1:
            return variants[0]
        union_all: Any = variants[0]
        for v in variants[1:]:
            union_all = union_all | v
        return Annotated[union_all, Field(discriminator="type")]

    @cached_property
    def _adapter(self) -> TypeAdapter[BaseModel]:
        adapter: TypeAdapter[BaseModel] = TypeAdapter(self.root_type)
        return adapter

    @cached_property
    def _schema(self) -> dict[str, Any]:
        return self._adapter.json_schema()

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the union (pydantic's form, before any dialect). Do not mutate."""
        return self._schema

    def with_form(self, form: SchemaForm) -> ActionSchema:
        """The same offer in another form (an adapter may need the generic form when the
        typed one exceeds a provider's schema limits). Parsing either gives the same actions."""
        if form == self.form:
            return self
        cache = self._forms
        if form not in cache:
            cache[form] = compile_action_schema(
                self.tools,
                finish_only=self.finish_only,
                allow_plan=self.allow_plan,
                form=form,
                max_reply_bytes=self.max_reply_bytes,
                thought_first=self.thought_first,
                output=self.output,
                max_batch=self.max_batch,
                tool_args=self.tool_args,
                ask=self.ask,
            )
        return cache[form]

    def spec(self, name: str) -> ToolSpec | None:
        """The tool named ``name`` if this schema offers it."""
        return self._by_name.get(name)

    def parse(self, reply: str | bytes) -> NextAction:
        """Validate a model's reply and normalise it into a :data:`NextAction`.

        Raises:
            UnknownToolError: a tool action names a tool this schema does not offer.
            InvalidActionError: anything else wrong; the message is written for the model.
        """
        size = len(reply) if isinstance(reply, bytes) else len(reply.encode("utf-8", "replace"))
        if size > self.max_reply_bytes:
            raise InvalidActionError(
                f"The reply is {size} bytes; the limit is {self.max_reply_bytes}. "
                "Reply with one short JSON object."
            )
        text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
        if not text.strip():
            raise InvalidActionError("The reply was empty. Reply with one JSON object.")
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
        try:
            try:
                parsed = self._adapter.validate_json(text)
            except ValidationError as exc:
                raise self._explain(text, exc) from exc
            action = self._normalise(parsed)
        except InvalidActionError:
            raise
        except Exception as exc:  # RecursionError, UnicodeError...: a reply never crashes a run
            raise InvalidActionError(
                f"The reply could not be read ({type(exc).__name__}: {str(exc)[:200]}). "
                "Reply with one short, flat JSON object."
            ) from exc
        # A tool action's arguments were checked in their Python form by _normalise (which
        # sees NaN that the JSON form hides); the texts of a plan or a finish are checked here.
        problem = None if isinstance(action, ToolAction | BatchAction) else action_problem(action)
        if problem is not None:
            raise InvalidActionError(
                f"The reply cannot be recorded: {problem}. Reply with one short, flat JSON "
                "object: finite numbers, integers within 64 bits, nesting at most "
                f"{MAX_DEPTH} levels."
            )
        return action

    def _normalise(self, parsed: BaseModel) -> NextAction:
        if isinstance(parsed, PlanAction | FinishAction | AskAction):
            return parsed
        if isinstance(parsed, _ThoughtFirstPlan | _ThoughtFirstFinish | _ThoughtFirstAsk):
            return _next_action().validate_python(parsed.model_dump())
        if self.output is not None and getattr(parsed, "type") == "finish":  # noqa: B009
            return self._typed_answer(parsed, self.output)
        if getattr(parsed, "type") == "batch":  # noqa: B009
            return self._batch(parsed)
        tool_name: str = getattr(parsed, "tool")  # noqa: B009  # variant classes are built at run time
        thought: str = getattr(parsed, "thought")  # noqa: B009
        if self.form == "generic":
            raw: str = getattr(parsed, "args_json")  # noqa: B009
            args_model = self._by_name[tool_name].args_model
            try:
                args = args_model.model_validate_json(raw)
            except ValidationError as exc:
                raise InvalidActionError(
                    f"args_json for tool {tool_name!r} is invalid: {_describe(exc)}"
                ) from exc
        else:
            args = getattr(parsed, "args")  # noqa: B009
        assert isinstance(args, BaseModel)
        # Before the JSON form: it turns NaN and Infinity in an ``Any`` field into null,
        # and the tool would then run with other arguments than the model sent.
        problem = json_problem(args.model_dump(), other_types=True)
        if problem is not None:
            raise InvalidActionError(
                f"args for tool {tool_name!r} cannot be recorded: {problem}. Use finite "
                f"numbers, integers within 64 bits, nesting at most {MAX_DEPTH} levels."
            )
        # Everything was validated by the per-tool variant; skip validating it again.
        return ToolAction.model_construct(
            type="tool", thought=thought, tool=tool_name, args=args.model_dump(mode="json")
        )

    def _batch(self, parsed: BaseModel) -> BatchAction:
        """The normalised ``batch``: each call's arguments checked as a tool action's."""
        thought: str = getattr(parsed, "thought")  # noqa: B009  # a variant built at run time
        calls: list[BatchCall] = []
        for item in getattr(parsed, "calls"):  # noqa: B009
            tool_name: str = item.tool
            if self.form == "generic":
                try:
                    args = self._by_name[tool_name].args_model.model_validate_json(item.args_json)
                except ValidationError as exc:
                    raise InvalidActionError(
                        f"args_json for tool {tool_name!r} in the batch is invalid: "
                        f"{_describe(exc)}"
                    ) from exc
            else:
                args = item.args
            assert isinstance(args, BaseModel)
            problem = json_problem(args.model_dump(), other_types=True)
            if problem is not None:
                raise InvalidActionError(
                    f"args for tool {tool_name!r} in the batch cannot be recorded: {problem}. "
                    f"Use finite numbers, integers within 64 bits, nesting at most "
                    f"{MAX_DEPTH} levels."
                )
            calls.append(BatchCall(tool=tool_name, args=args.model_dump(mode="json")))
        return BatchAction(thought=thought, calls=calls)

    def _typed_answer(self, parsed: BaseModel, output: OutputSpec) -> FinishAction:
        """The normalised ``finish`` of a typed answer: its canonical JSON as ``answer``."""
        thought: str = getattr(parsed, "thought")  # noqa: B009  # a variant built at run time
        if self.form == "generic":
            raw: str = getattr(parsed, "answer_json")  # noqa: B009
            try:
                value = output.validate_answer(raw)
            except ValidationError as exc:
                raise InvalidActionError(
                    f"answer_json is not a valid {output.name}: {_describe(exc)}"
                ) from exc
        else:
            value = getattr(parsed, "answer")  # noqa: B009
        try:
            data = output.to_json(value)
        except ValueError as exc:
            raise InvalidActionError(
                f"The answer cannot be recorded: {exc}. Use finite numbers, integers within "
                f"64 bits, nesting at most {MAX_DEPTH} levels."
            ) from exc
        return FinishAction(thought=thought, answer=canonical_json(data))

    def _explain(self, text: str, exc: ValidationError) -> InvalidActionError:
        """Turn a validation failure into a message the model can act on."""
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            return InvalidActionError(
                f"The reply is not valid JSON ({first['msg']}). Reply with exactly one JSON object."
            )
        loose: NextAction | None = parse_loose_tool_action(text)
        if loose is None:
            try:
                loose = _next_action().validate_json(text)
            except ValidationError:
                loose = None
        offered = ", ".join(self.offered_types)
        if isinstance(loose, ToolAction) and "tool" not in self.offered_types:
            return UnknownToolError(
                f"A tool action is not allowed at this step; allowed action types: {offered}.",
                tool=loose.tool,
            )
        if isinstance(loose, PlanAction) and "plan" not in self.offered_types:
            return InvalidActionError(
                f"A plan action is not allowed at this step; allowed action types: {offered}."
            )
        if isinstance(loose, AskAction) and "ask" not in self.offered_types:
            return InvalidActionError(
                "An ask action is not allowed at this step: find out with a tool or decide "
                f"yourself; allowed action types: {offered}."
            )
        if isinstance(loose, ToolAction) and loose.tool not in self._by_name:
            names = ", ".join(self.tool_names) or "(none)"
            return UnknownToolError(
                f"Unknown tool {loose.tool!r}. Tools you can call: {names}.", tool=loose.tool
            )
        return InvalidActionError(
            f"The reply does not match the action schema: {_describe(exc)}. "
            f"Allowed action types: {offered}."
        )


def compile_action_schema(
    tools: Sequence[ToolSpec],
    *,
    finish_only: bool = False,
    allow_plan: bool = True,
    form: SchemaForm = "typed",
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    thought_first: bool = False,
    output: OutputSpec | None = None,
    max_batch: int = 0,
    tool_args: ToolArgs = "json_schema",
    ask: bool = False,
) -> ActionSchema:
    """Compile the action union for one step.

    Args:
        tools: the tools in scope (order is kept, so the schema is stable across steps).
        finish_only: offer only ``finish`` (graceful end of a budget).
        allow_plan: offer ``plan``.
        form: ``typed`` (one variant per tool) or ``generic`` (``args_json`` string, and
            ``answer_json`` for a typed output).
        max_reply_bytes: size cap applied before parsing.
        thought_first: put ``thought`` before ``type`` in every variant (a contract
            document's :attr:`~agentcore.contracts.ContractDocument.thought_first`).
        output: the type of ``finish``'s ``answer`` (:func:`output_spec`; ``None``: text).
        max_batch: the most calls a ``batch`` action may hold (0, the default: no batch).
            A batch is offered only when one or more read-only, idempotent tools are
            among ``tools``.
        tool_args: how the system text shows the tools' arguments (see
            :attr:`ActionSchema.tool_args`).
        ask: offer ``ask``, a question for the user (never on a ``finish_only`` step).
            Give the system text :func:`ask_note` when a run allows it.

    Returns:
        An :class:`ActionSchema`; building its validator is lazy and happens once. The same
        tools (the same ToolSpec objects) and options give the same, shared schema object,
        so its validator is built once per process, not once per agent or run.
    """
    if form not in ("typed", "generic"):
        raise ConfigurationError(f"Invalid schema form {form!r}. Valid forms: 'typed', 'generic'.")
    return _compile(
        tuple(tools),
        finish_only,
        allow_plan,
        form,
        max_reply_bytes,
        thought_first,
        output,
        max_batch,
        tool_args,
        ask and not finish_only,
    )


@functools.lru_cache(maxsize=512)
def _compile(
    tools: tuple[ToolSpec, ...],
    finish_only: bool,
    allow_plan: bool,
    form: SchemaForm,
    max_reply_bytes: int,
    thought_first: bool = False,
    output: OutputSpec | None = None,
    max_batch: int = 0,
    tool_args: ToolArgs = "json_schema",
    ask: bool = False,
) -> ActionSchema:
    return ActionSchema(
        tools=tools,
        finish_only=finish_only,
        allow_plan=allow_plan,
        form=form,
        max_reply_bytes=max_reply_bytes,
        thought_first=thought_first,
        output=output,
        max_batch=max_batch,
        tool_args=tool_args,
        ask=ask,
    )


def parse_loose_tool_action(reply: str) -> ToolAction | None:
    """Read a reply as a tool action of any tool name, or ``None``.

    For classifying a reply the per-step schema refused: a real tool outside the offered set
    is a governance matter (refused with a reason), not a malformed reply.
    """
    try:
        data: object = json.loads(reply)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    obj = cast("dict[str, Any]", data)  # a JSON object
    if obj.get("type") != "tool":
        return None
    raw_args = obj.get("args_json")
    if isinstance(raw_args, str):  # the generic form
        try:
            args: object = json.loads(raw_args)
        except (ValueError, RecursionError):
            return None
        obj = {k: v for k, v in obj.items() if k != "args_json"} | {"args": args}
    try:
        action = ToolAction.model_validate(obj)
    except (ValidationError, RecursionError):
        return None
    return action if action_problem(action) is None else None


def parse_loose_batch(reply: str) -> BatchAction | None:
    """Read a reply as a ``batch`` of any tool names, or ``None`` (arguments not checked
    against any tool: for classifying a batch the per-step schema refused, such as one
    holding a write, which is refused whole with a reason rather than re-asked)."""
    try:
        data: object = json.loads(reply)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    obj = cast("dict[str, Any]", data)  # a JSON object
    if obj.get("type") != "batch" or not isinstance(obj.get("calls"), list):
        return None
    calls: list[Any] = []  # Any: JSON
    for item in cast("list[Any]", obj["calls"]):
        entry = cast("dict[str, Any]", item) if isinstance(item, dict) else {}
        if isinstance(entry.get("args_json"), str):  # the generic form
            try:
                args: object = json.loads(entry["args_json"])
            except (ValueError, RecursionError):
                return None
            calls.append({k: v for k, v in entry.items() if k != "args_json"} | {"args": args})
            continue
        calls.append(item)
    try:
        action = BatchAction.model_validate(obj | {"calls": calls})
    except (ValidationError, RecursionError):
        return None
    return action if action_problem(action) is None else None


def action_problem(action: NextAction) -> str | None:
    """Why an action cannot be recorded (see the limits), or ``None``.

    Checked for every parsed reply, whatever form it came in: a tool's arguments, a plan's
    steps and a finish's answer must all read back from every store.
    """
    match action:
        case ToolAction(args=args):
            return json_problem(args)
        case PlanAction(steps=steps, thought=thought):
            return json_problem([thought, *steps])
        case FinishAction(answer=answer, thought=thought):
            return json_problem([thought, answer])
        case BatchAction(calls=calls, thought=thought):
            return json_problem([thought, *(c.args for c in calls)])
        case AskAction(question=question, thought=thought):
            return json_problem([thought, question])


def dump_action(action: NextAction) -> str:
    """Canonical compact JSON of an action (as rendered back to models and hashed)."""
    return action.model_dump_json()


def load_action(text: str) -> NextAction:
    """The action :func:`dump_action` wrote (for history restored from a snapshot).

    Raises:
        ValueError: ``text`` is not such an action (pydantic's ``ValidationError``).
    """
    return _next_action().validate_json(text)
