"""The contract document: the system text and worked examples, versioned data.

The document's hash is recorded in every run, so a change of wording shows up in the
transcript and in per-contract statistics. :meth:`ContractDocument.lint` checks that every
worked example still validates against the action schema and the tools' current schemas.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, model_validator

from ._actions import Effect
from ._output import OutputSpec
from ._schema import ToolArgs, compile_action_schema
from ._tools import ToolSpec
from .errors import ConfigurationError, InvalidActionError, ToolDefinitionError

__all__ = [
    "ContractDocument",
    "ExampleTool",
    "ExampleTurn",
    "ToolArgs",
    "WorkedExample",
    "contract_for_run",
    "load_contract",
]

DEFAULT_CONTRACT_VERSION = "2"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ExampleTool(_Doc):
    """A tool used by a worked example, given as data (JSON Schema parameters)."""

    name: str
    description: str
    effect: Effect = "read"
    parameters: dict[str, JsonValue]

    def to_spec(self) -> ToolSpec:
        """The tool as the contract compiler sees it: one shared spec per definition, so
        the action schema compiled for an example is compiled once per process, not once
        per agent (``lint`` runs in every ``Agent()``)."""
        return _example_spec(self.model_dump_json())


@functools.lru_cache(maxsize=256)
def _example_spec(definition: str) -> ToolSpec:
    from ._jsonschema import model_from_json_schema  # on first use: not needed at import

    tool = ExampleTool.model_validate_json(definition)
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        args_model=model_from_json_schema(f"{tool.name}_args", tool.parameters),
        effect=tool.effect,
    )


class ExampleTurn(_Doc):
    """One turn of a worked example: the model's action, or the observation it got."""

    action: dict[str, JsonValue] | None = None
    observation: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> ExampleTurn:
        if (self.action is None) == (self.observation is None):
            raise ValueError("a turn has exactly one of 'action' or 'observation'")
        return self


class WorkedExample(_Doc):
    """A worked example: a task and the actions that solve it.

    ``tools`` defines the tools the example uses. An example may also name tools of the
    agent it is attached to without defining them; lint then checks it against those.
    """

    title: str
    task: str
    tools: list[ExampleTool] = []
    turns: list[ExampleTurn]


_DOCUMENTS = Path(__file__).parent / "documents"
"""The built-in contract documents, ``v<N>.json``."""

_OPTIONS = ("thought_first", "tool_args", "tool_examples", "closing")
"""Fields added after version 1; left out of :attr:`ContractDocument.hash` at their
defaults, so a document written before them keeps its hash."""


class ContractDocument(_Doc):
    """System text plus worked examples; identified by ``version`` and :attr:`hash`.

    Attributes:
        thought_first: the action schema lists ``thought`` before the ``type``
            discriminator (see :func:`compile_action_schema`) and the examples are shown
            in that order.
        tool_args: how the system text shows each tool's arguments (see :data:`ToolArgs`).
        tool_examples: besides the fixed examples, one example call of each tool in scope
            (its required arguments, each value a placeholder naming the argument).
        closing: text after the tools and examples, the last thing before the conversation.
    """

    version: str
    system: str
    examples: list[WorkedExample] = []
    thought_first: bool = False
    tool_args: ToolArgs = "json_schema"
    tool_examples: bool = False
    closing: str | None = None

    @property
    def hash(self) -> str:
        """sha256 (16 hex digits) of the canonical JSON of the document."""
        data = self.model_dump(mode="json")
        defaults = ContractDocument.model_fields
        for name in _OPTIONS:
            if data[name] == defaults[name].default:
                del data[name]
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def _action_text(self, action: dict[str, JsonValue]) -> str:
        if self.thought_first and "thought" in action:
            action = {"thought": action["thought"]} | {
                k: v for k, v in action.items() if k != "thought"
            }
        return json.dumps(action, separators=(",", ":"))

    def with_examples(self, examples: Sequence[WorkedExample]) -> ContractDocument:
        """A copy with ``examples`` appended (an agent's own examples)."""
        if not examples:
            return self
        return self.model_copy(update={"examples": [*self.examples, *examples]})

    def lint(self, tools: Sequence[ToolSpec] = ()) -> list[str]:
        """Problems with the worked examples; an empty list means the document is sound.

        Every action of every example must validate against the action schema compiled from
        the example's tools, where a tool of the same name in ``tools`` (the real, current
        one) takes precedence over the example's own definition.
        """
        real = {t.name: t for t in tools}
        problems: list[str] = []
        for ex in self.examples:
            specs: dict[str, ToolSpec] = {}
            for et in ex.tools:
                if et.name in real:
                    continue
                try:
                    specs[et.name] = et.to_spec()
                except (ToolDefinitionError, ConfigurationError) as exc:
                    problems.append(f"example {ex.title!r}: tool {et.name!r}: {exc}")
            specs.update(real)
            schema = compile_action_schema(list(specs.values()))
            for i, turn in enumerate(ex.turns):
                if turn.action is None:
                    continue
                try:
                    schema.parse(json.dumps(turn.action))
                except InvalidActionError as exc:
                    problems.append(f"example {ex.title!r}, turn {i}: {exc}")
        return problems

    def render_system(
        self,
        tools: Sequence[ToolSpec],
        output: OutputSpec | None = None,
        *,
        native: bool = False,
    ) -> str:
        """The system text a model sees: rules, the answer's type when it is not text, the
        tools in scope, worked examples.

        With ``native`` (native tool calling, where each tool is offered as a function with
        its description and parameters), the tools are not listed again: the text names the
        ones that change things and their effect, which a function definition does not
        carry, and leaves out the example call of each tool."""
        lines = [self.system]
        if output is not None:
            schema = json.dumps(output.json_schema, sort_keys=True, separators=(",", ":"))
            lines += [
                "",
                "The answer of finish is not text in this task: it is a JSON value that "
                f"matches this schema: {schema}",
            ]
        lines += ["", "Tools you can call:"]
        if not tools:
            lines.append("(none: plan or finish)")
        elif native:
            lines.append("the functions offered, besides plan and finish.")
            changing = [f"{t.name} ({t.effect})" for t in tools if t.effect != "read"]
            if changing:
                lines.append("Effects: " + ", ".join(changing) + "; every other tool reads.")
        for t in () if native else tools:
            if self.tool_args == "signature":
                lines.append(f"- {t.name}({_signature(t.args_schema)}) (effect: {t.effect}): ")
                lines[-1] += t.description
                continue
            schema = json.dumps(t.args_schema, sort_keys=True, separators=(",", ":"))
            lines.append(f"- {t.name} (effect: {t.effect}): {t.description}")
            lines.append(f"  args schema: {schema}")
        for ex in self.examples:
            lines += ["", f"Example: {ex.title}", f"Task: {ex.task}"]
            if ex.tools:
                lines.append("Tools: " + ", ".join(t.name for t in ex.tools))
            for turn in ex.turns:
                if turn.action is not None:
                    lines.append("Reply: " + self._action_text(turn.action))
                else:
                    lines.append(f"Observation: {turn.observation}")
        if self.tool_examples and tools and not native:
            lines += ["", "How to call each of the tools above:"]
            for t in tools:
                call: dict[str, JsonValue] = {
                    "type": "tool",
                    "thought": f"The request needs {t.name}.",
                    "tool": t.name,
                    "args": _placeholders(t.args_schema),
                }
                lines.append("Reply: " + self._action_text(call))
        if self.closing:
            lines += ["", self.closing]
        return "\n".join(lines)


def _type_name(node: Any) -> str:  # Any: JSON Schema
    if not isinstance(node, dict):
        return "any"
    schema = cast("dict[str, Any]", node)  # Any: JSON Schema
    kind = schema.get("type")
    if kind == "array":
        return f"list[{_type_name(schema.get('items'))}]"
    if isinstance(kind, str):
        return {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}.get(
            kind, "object" if kind == "object" else kind
        )
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        names = [_type_name(o) for o in cast("list[Any]", options)]
        return " | ".join(n for n in names if n != "null") or "null"
    if "$ref" in schema or "properties" in schema:
        return "object"
    if "enum" in schema:
        return "str"
    return "any"


def _signature(args_schema: dict[str, Any]) -> str:  # Any: JSON Schema
    """``name: type, other?: type`` (``?``: optional) from an argument schema."""
    props: Any = args_schema.get("properties") or {}  # Any: JSON Schema
    required: Any = args_schema.get("required") or []  # Any: JSON Schema
    if not isinstance(props, dict):
        return ""
    parts: list[str] = []
    for name, node in cast("dict[str, Any]", props).items():
        mark = "" if name in required else "?"
        parts.append(f"{name}{mark}: {_type_name(node)}")
    return ", ".join(parts)


def _placeholders(args_schema: dict[str, Any]) -> dict[str, JsonValue]:  # Any: JSON Schema
    """The required arguments, each with a placeholder of its type naming it."""
    props: Any = args_schema.get("properties") or {}  # Any: JSON Schema
    required: Any = args_schema.get("required") or []  # Any: JSON Schema
    out: dict[str, JsonValue] = {}
    if not isinstance(props, dict) or not isinstance(required, list):
        return out
    for name in cast("list[Any]", required):
        node: Any = cast("dict[str, Any]", props).get(name)  # Any: JSON Schema
        kind = _type_name(node)
        enum: Any = cast("dict[str, Any]", node).get("enum") if isinstance(node, dict) else None
        if isinstance(enum, list) and enum:
            out[str(name)] = cast("list[JsonValue]", enum)[0]
        elif kind == "int":
            out[str(name)] = 1
        elif kind == "float":
            out[str(name)] = 1.5
        elif kind == "bool":
            out[str(name)] = True
        elif kind.startswith("list["):
            out[str(name)] = []
        elif kind == "object":
            out[str(name)] = {}
        else:
            out[str(name)] = f"<{name}>"
    return out


def contract_for_run(current: ContractDocument, recorded: Mapping[str, str]) -> ContractDocument:
    """The document a run is driven with: the one it recorded at its start when that can be
    rebuilt, so a run begun under an earlier built-in version (before an upgrade changed the
    default) resumes showing its model the same system text, byte for byte.

    Args:
        current: the agent's document (a built-in version, plus the agent's own examples).
        recorded: ``run_started.contract`` (``version`` and ``hash``).

    Returns:
        ``current`` when its hash is the recorded one, or when the recorded document is not
        a built-in version with ``current``'s own examples (a document the operator changed
        on purpose: that change applies); otherwise that built-in version with the examples
        ``current`` adds to its own built-in version.
    """
    version, digest = recorded.get("version", ""), recorded.get("hash", "")
    if not digest or digest == current.hash or not version.isdigit():
        return current
    try:
        base, then = _builtin(current.version), _builtin(version)
    except ConfigurationError:
        return current
    extra = (
        current.examples[len(base.examples) :]
        if current.examples[: len(base.examples)] == (base.examples)
        else None
    )
    if extra is None:
        return current
    pinned = then.with_examples(extra)
    return pinned if pinned.hash == digest else current


def load_contract(source: str | Path | None = None) -> ContractDocument:
    """Load a contract document.

    Args:
        source: ``None`` for the built-in current version, a version such as ``"1"`` or
            ``"v1"`` (as ``agentcore contract lint`` and ``stats`` print it) for a built-in
            one, or a path to a JSON document (read again on every call). A built-in
            version is read once per process and shared (the document is frozen).

    Raises:
        ConfigurationError: no such version, or the file is not a valid contract document.
    """
    if isinstance(source, Path) or (isinstance(source, str) and source.endswith(".json")):
        return _read(Path(source), f"contract document {source!r}")
    version = source or DEFAULT_CONTRACT_VERSION
    if version[:1] in ("v", "V") and version[1:].isdigit():
        version = version[1:]  # "v1", as the contract's name is printed
    return _builtin(version)


@functools.lru_cache(maxsize=8)
def _builtin(version: str) -> ContractDocument:
    # beside this module (a wheel, the link tree, a checkout alike); not through
    # importlib.resources, whose import costs ~10% of ``import agentcore``
    res = _DOCUMENTS / f"v{version}.json"
    if not version.isdigit() or not res.is_file():
        raise ConfigurationError(f"No built-in contract version {version!r}.")
    return _read(res, f"built-in contract v{version}")


def _read(path: Path, what: str) -> ContractDocument:
    """The contract document in ``path``.

    Raises:
        ConfigurationError: it cannot be read, or is not a valid contract document.
    """
    try:
        return ContractDocument.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise ConfigurationError(f"Cannot load {what}: {exc}") from exc
