"""Tools are decorated Python functions.

::

    @tool(effect="read")
    async def search_orders(customer_id: str, status: OrderStatus | None = None) -> list[Order]:
        \"\"\"Find a customer's orders. Use when the user asks about their orders.

        Args:
            customer_id: the customer's id, e.g. "C-17".
            status: only orders in this status.
        \"\"\"

The argument schema comes from the type hints (pydantic), the description from the
docstring's summary and each argument's from its ``Args:`` section (or NumPy's
``Parameters``, reST's ``:param x:``, Epydoc's ``@param x:``). A parameter annotated with
:class:`ToolContext` is not shown to the model; it receives the run id, step, idempotency
key and fencing token.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import json
import re
import time
import types
from collections.abc import (
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, replace
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Final,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from agentcore.contracts import Effect, ToolSpec, check_json, clean_text, json_problem
from agentcore.contracts.errors import (
    ConfigurationError,
    LimitExceededError,
    ToolDefinitionError,
    ToolOutcomeUnknownError,
)

from ._threads import in_thread
from ._tool_context import (
    FENCING_TOKEN_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    DepsFactory,
    DepsT,
    FromRun,
    RunIdentity,
    ToolContext,
    current_context,
)
from .guards import ArgumentPolicy
from .policy import DEFAULT_MAX_TOOL_RESULT_BYTES
from .secrets import Secret

if TYPE_CHECKING:
    from docstring_parser import Docstring

__all__ = [
    "FENCING_TOKEN_HEADER",
    "IDEMPOTENCY_KEY_HEADER",
    "CommittedCall",
    "Compensation",
    "DepsFactory",
    "DepsT",
    "FromRun",
    "Reconcile",
    "Requirement",
    "RunIdentity",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "current_context",
    "recordable_result",
    "tool",
]


Requirement = Literal["person_plan"]
"""What a tool requires before it runs, besides the policy (``@tool(requires=...)``)."""


def _check_requirement(requires: object, tool_name: str) -> Requirement | None:
    """``requires`` if it is a valid :data:`Requirement` (or ``None``).

    Raises:
        ToolDefinitionError: any other value.
    """
    if requires is None or requires == "person_plan":
        return requires  # pyright: ignore[reportReturnType]  # narrowed by the comparison
    raise ToolDefinitionError(
        f"Tool {tool_name!r}: requires={requires!r} is not valid. Valid: 'person_plan', None."
    )


@dataclass(frozen=True, slots=True)
class CommittedCall:
    """A call whose effect happened, as a compensation receives it.

    Attributes:
        run_id, step, call_id: where it stands in the transcript.
        tool: the tool's name.
        args: the arguments it ran with (as recorded).
        result: its recorded result (``None`` when a person said it happened without one).
        idempotency_key: the original call's key (the compensation's own key is
            ``ToolContext.current().idempotency_key``, this one plus ``:undo``).
    """

    run_id: str
    step: int
    call_id: str
    tool: str
    args: dict[str, Any]  # Any: JSON values
    result: Any  # Any: JSON value
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class Compensation:
    """How to undo a committed effect of a tool (``@tool(compensate=...)``).

    ``fn(call: CommittedCall)`` (sync or async) undoes it; :meth:`ToolContext.current`
    gives its own idempotency key (the call's plus ``:undo``) and fencing token, to forward
    to the system it calls. A compensation is an intent like a tool call: recorded before
    it runs; if its outcome is lost (a crash), it runs again only when ``idempotent``, or
    when ``reconcile(key)`` finds no record of it and no process can still be running it;
    otherwise a person settles it.

    Attributes:
        fn: the undo.
        idempotent: running it twice with the same key is harmless (say so when the
            system it calls deduplicates by the key); by default it is not, as for a write
            tool, so a lost outcome is reconciled or put to a person, never run again
            blindly.
        reconcile: ``reconcile(key)``: whether a compensation whose outcome was lost
            already happened (its result, or ``None``).
        timeout: seconds the undo is waited for (``None``: no limit). A sync undo runs
            in the tools' pool and keeps running in its thread past it; either way its
            outcome is then unknown, settled as a lost undo is (and, when it is not
            idempotent, no one runs it again before its thread returns).
    """

    fn: Callable[[CommittedCall], Any]
    idempotent: bool = False
    reconcile: Reconcile | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ToolDefinitionError(f"Compensation timeout must be > 0, got {self.timeout}")


Reconcile = Callable[[str], Any]
"""``reconcile(idempotency_key)`` of a non-idempotent tool: return the earlier call's result
if it already happened, or ``None`` if it did not (then it runs once). May be async."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What running a tool produced: a JSON-ready result or an error message."""

    ok: bool
    result: Any = None  # Any: a JSON-ready value (to_jsonable_python output)
    error: str | None = None
    duration_ms: float = 0.0
    result_bytes: int | None = None
    """When the result was truncated: the size of the full result's JSON."""
    result_sha256: str | None = None
    """When the result was truncated: the sha256 of the full result's JSON."""
    timed_out: bool = False
    """The call passed the tool's timeout: its outcome is unknown (a sync function keeps
    running in its thread). The runner records a non-idempotent tool's timeout as a lost
    call, never as a plain failure."""
    lost: bool = False
    """The call may or may not have happened (the tool raised
    :class:`~agentcore.errors.ToolOutcomeUnknownError`: a remote server's connection broke
    mid-call). Recorded like a timeout."""
    settled_elsewhere: bool = False
    """A lost outcome that something else settles (see
    :class:`~agentcore.errors.ToolOutcomeUnknownError`)."""
    still_running: asyncio.Future[Any] | None = None  # Any: the call's result, unused
    """A timed-out sync call whose thread is still running: done when the thread returns.
    Its call guard is held until then."""


_MAX_ERROR_CHARS = 8_000


_TIMED_OUT: Final = object()


async def _within(running: asyncio.Future[Any], seconds: float) -> Any:  # Any: the result
    """The outcome of ``running`` (a sync call in its thread), or :data:`_TIMED_OUT` after
    ``seconds``, leaving it to run; cancelling the wait cancels it (a call not yet
    started in its thread then never starts)."""
    try:
        finished, _ = await asyncio.wait((running,), timeout=seconds)
    except asyncio.CancelledError:
        running.cancel()
        raise
    return running.result() if finished else _TIMED_OUT


def recordable_result(
    value: object, max_bytes: int = DEFAULT_MAX_TOOL_RESULT_BYTES
) -> tuple[Any, int | None, str | None]:  # Any: a JSON-ready value
    """A tool's return value as it can be recorded: ``(result, full_bytes, sha256)``.

    The value becomes JSON-ready (pydantic models, dataclasses, dates...); a JSON text
    longer than ``max_bytes`` is cut to its first ``max_bytes`` bytes (kept as a string),
    with the full size and sha256 returned beside it (``None`` when nothing was cut).

    Raises:
        LimitExceededError: the value is not JSON (cyclic, bytes, custom objects), nests
            deeper than the limits, or holds NaN, huge integers or invalid text.
    """
    try:
        result = to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError, RecursionError) as exc:
        raise LimitExceededError(
            f"the tool returned a value that is not JSON-ready ({type(exc).__name__}: "
            f"{str(exc)[:300]}); return JSON values, pydantic models or dataclasses"
        ) from exc
    problem = json_problem(result, max_string_chars=None)
    if problem is not None:
        raise LimitExceededError(f"the tool returned a value that cannot be recorded: {problem}")
    # A scalar that fits whatever its encoding skips the measuring: a number's JSON is at
    # most 24 characters (64-bit ints, floats), a string's 6 per character (\u001f) + 2.
    small = len(result) * 6 + 2 <= max_bytes if isinstance(result, str) else max_bytes >= 24
    if small and (isinstance(result, str | int | float | bool) or result is None):
        return result, None, None
    if len(to_json(result)) * 2 <= max_bytes:
        # Fits: pydantic-core's compact JSON (~10x quicker to produce) differs from the
        # measured text below only in how it writes floats ("1e16" for "1e+16"), never by
        # half its length.
        return result, None, None
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    data = text.encode()
    if len(data) <= max_bytes:
        return result, None, None
    head = data[:max_bytes].decode("utf-8", "ignore")  # never half a character
    return head, len(data), hashlib.sha256(data).hexdigest()


Binding = FromRun | Secret
"""What fills a parameter instead of the model: the run's record, or a secret."""


def _binding_of(annotation: object, tool_name: str, pname: str) -> tuple[Binding | None, Any]:
    """The binding of a parameter and its type without it: ``(None, annotation)`` for a
    parameter the model fills.

    A binding applies to the whole parameter, in any annotation form that says so:
    ``Annotated[str, FromRun("k")]``, that in a union (``... | None``, ``Optional[...]``),
    or inside another ``Annotated``; the parameter's type is the annotation with the
    binding taken out (``str | None``).

    Raises:
        ToolDefinitionError: a binding that cannot bind the parameter: inside a container
            (``list[Annotated[str, FromRun("k")]]``), two different bindings, or one on a
            :class:`ToolContext` parameter. Never left silently unbound: an unbound
            parameter is one the model fills.
    """
    found, base = _take_bindings(annotation)
    if not found:
        if _holds_binding(annotation):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: parameter {pname!r} has a FromRun or Secret inside its "
                f"type ({_type_name(annotation)}), where it cannot bind it: a binding fills "
                f"the whole parameter. Write `{pname}: Annotated[T, FromRun(...)]` (or "
                "Secret(...)), optionally `| None`, with T the parameter's type."
            )
        return None, annotation
    distinct = list(dict.fromkeys(found))
    if len(distinct) > 1:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameter {pname!r} has {len(distinct)} bindings "
            f"({', '.join(map(repr, distinct))}); a parameter is filled from one place: "
            "keep one."
        )
    if _holds_binding(base):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameter {pname!r} is bound by {distinct[0]!r} and has "
            "another FromRun or Secret inside its type: a binding fills the whole parameter; "
            "keep the outer one."
        )
    return distinct[0], base


def _take_bindings(annotation: object) -> tuple[list[Binding], Any]:
    """The bindings on ``annotation`` itself or on a member of its union, and the
    annotation without them (other metadata kept: ``Field`` constraints still apply)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *meta = get_args(annotation)
        found: list[Binding] = [m for m in meta if isinstance(m, FromRun | Secret)]
        rest = [m for m in meta if not isinstance(m, FromRun | Secret)]
        inside, base = _take_bindings(inner)
        return found + inside, Annotated[(base, *rest)] if rest else base  # pyright: ignore[reportInvalidTypeArguments]  # built at run time
    if origin in (Union, types.UnionType):
        found = []
        members: list[Any] = []  # Any: the union's member types
        for member in get_args(annotation):
            inside, base = _take_bindings(member)
            found.extend(inside)
            members.append(base)
        return found, Union[tuple(members)] if found else annotation  # pyright: ignore[reportInvalidTypeArguments]  # noqa: UP007  # built at run time
    return [], annotation


def _holds_binding(annotation: object, depth: int = 0) -> bool:
    """Whether a FromRun or Secret appears anywhere in ``annotation``."""
    if depth > _MAX_TYPE_DEPTH:
        return False
    if get_origin(annotation) is Annotated:
        inner, *meta = get_args(annotation)
        if any(isinstance(m, FromRun | Secret) for m in meta):
            return True
        return _holds_binding(inner, depth + 1)
    return any(_holds_binding(arg, depth + 1) for arg in get_args(annotation))


_MAX_TYPE_DEPTH = 32  # a type nested deeper than this is not a tool parameter's


def _type_name(annotation: object) -> str:
    if get_args(annotation):  # list[...] also has a __name__: "list"
        return repr(annotation).replace("typing.", "")
    return getattr(annotation, "__name__", None) or repr(annotation)


def _is_context(annotation: object) -> bool:
    """``ToolContext``, ``ToolContext[D]``, or either in an ``Optional``/union."""
    found = (annotation, *get_args(annotation))
    return any(a is ToolContext or get_origin(a) is ToolContext for a in found)


def _parse_docstring(doc: str | None, tool_name: str) -> tuple[str, dict[str, str]]:
    """Read a tool's docstring: the summary and each argument's description, nothing else.

    Google, NumPy, reST (Sphinx ``:param x:``) and Epydoc (``@param x:``) docstrings are read
    with docstring_parser; the style that finds the most sections wins (Google on a tie). The
    summary is the text before the first section, as written; an argument's description has
    its lines joined (paragraphs kept; ``""`` for an argument listed without one). Returns,
    Raises, Examples, Yields and every other section stay out: the model reads the
    description on every request.

    Raises:
        ToolDefinitionError: a section that no style can read (an argument line without a
            colon, a section header with nothing indented under it, ``:param`` without a name).
    """
    if not doc or not doc.strip():
        return "", {}
    from docstring_parser import DocstringMeta, ParseError  # ~25 ms, on the first tool

    text = inspect.cleandoc(doc.replace("\r\n", "\n").replace("\r", "\n"))
    readings: list[tuple[int, Docstring]] = []
    problems: list[str] = []
    for style, parse, fields in _docstring_readers():
        try:  # each reader cleans the text again: a first line of its own keeps it as it is
            reading = parse("\n" + text)
        except ParseError as exc:
            # Google and NumPy fail only under a section header they know; a line of prose
            # that starts with ':' or '@' is no field list unless it names a field.
            if fields is None or re.search(f"^{fields}{_FIELD_NAMES}", text, re.MULTILINE):
                problems.append(f"as {style} style: {exc}")
            continue
        # reST and Epydoc take any ':word:' or '@word:' line for a field: count only the
        # fields they know, so a line opening with a role (':class:`Order`') stays prose.
        known = [m for m in reading.meta if fields is None or type(m) is not DocstringMeta]
        readings.append((len(known), reading))
    if problems:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: its docstring cannot be read ({'; '.join(problems)}). "
            "Start with what the tool does, then write each argument as 'name: what it is' "
            "on its own line, indented under its section header (Google 'Args:', NumPy "
            "'Parameters' over dashes, reST ':param name:', Epydoc '@param name:')."
        )
    count, best = max(readings, key=lambda counted: counted[0])
    if not count:  # no section at all: the whole docstring is the summary
        return text.strip(), {}
    summary = best.short_description or ""
    if best.long_description:
        gap = "\n\n" if best.blank_after_short_description else "\n"
        summary = f"{summary}{gap}{best.long_description}"
    args: dict[str, str] = {}
    for param in best.params:
        if param.args[0] in ("attribute", "receives"):  # NumPy: not the function's arguments
            continue
        paragraphs = re.split(r"\n\s*\n", (param.description or "").strip())
        described = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
        names = (n.strip().lstrip("*") for n in param.arg_name.split(","))  # NumPy: "x, y : int"
        args.update((name, described) for name in names if name)
    return summary.strip(), args


_FIELD_NAMES = r"(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|yields?)\b"
"""The reST and Epydoc fields a tool's docstring uses (``:param x:``, ``@return:``)."""


@functools.cache
def _docstring_readers() -> tuple[tuple[str, Callable[[str], Docstring], str | None], ...]:
    """docstring_parser's readers, in tie-break order: a style's name, its parser, and the
    character its fields start with (``None``: it has section headers instead). Google's
    also reads the sections Napoleon reads as arguments (``Keyword Args:``, ...)."""
    from docstring_parser import epydoc, rest
    from docstring_parser.google import DEFAULT_SECTIONS, GoogleParser, Section, SectionType
    from docstring_parser.numpydoc import NumpydocParser

    extra = ("Keyword Args", "Keyword Arguments", "Other Parameters")
    google = GoogleParser(
        [*DEFAULT_SECTIONS, *(Section(t, "param", SectionType.MULTIPLE) for t in extra)]
    )
    return (
        ("Google", google.parse, None),
        ("NumPy", NumpydocParser().parse, None),
        ("reST", rest.parse, ":"),
        ("Epydoc", epydoc.parse, "@"),
    )


async def _inline(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:  # Any: the result
    return fn(**kwargs)


class _ToolArgs(BaseModel):
    # NaN and Infinity are not JSON: refused, so the arguments that run are the ones stored.
    # defer_build: no schema is built at `import agentcore` (each tool's is, when made).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)


class Tool:
    """A function the model can call, with its contract and governance flags.

    Made by :func:`tool`; calling the object calls the function unchanged.

    Attributes:
        spec: name, description, argument model, effect and idempotency.
        timeout: seconds before the wait for the call is abandoned (``None``: no limit); see
            :func:`tool` for what a timeout means for an idempotent and a non-idempotent tool.
        reconcile: for non-idempotent tools, how to tell whether a call already happened.
        labels: names of groups this tool belongs to; a run's scope may name a label.
        policies: argument policies the dispatcher checks before the call runs or a person
            is asked (see :mod:`agentcore.guards`).
        requires: ``"person_plan"``: the tool runs only after a person approved a plan in
            the run (``None``: the policy's plan rules).
        secret_params: parameters annotated :class:`~agentcore.secrets.Secret`, by name:
            left out of the schema, filled from the agent's resolver when the tool runs.
        inline: a sync function runs on the event loop itself, not in a worker thread
            (see :func:`tool`).
        compensation: how to undo a committed call (``@tool(compensate=...)``), or ``None``.
        output: ``untrusted`` when the tool returns third-party content (see :func:`tool`).
    """

    runs_agent: ClassVar[bool] = False
    """Whether a call runs another agent's run (a sub-agent's tool, ``Agent.as_tool``): a
    run of an agent with one can wait on a child run."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        effect: Effect,
        idempotent: bool | None,
        timeout: float | None,
        reconcile: Reconcile | None,
        name: str | None,
        description: str | None,
        labels: Sequence[str] = (),
        policies: Sequence[ArgumentPolicy] = (),
        requires: Requirement | None = None,
        inline: bool = False,
        compensate: Compensation | Callable[[CommittedCall], Any] | None = None,
        output: Literal["trusted", "untrusted"] = "trusted",
    ) -> None:
        self.fn = fn
        if output not in ("trusted", "untrusted"):
            raise ToolDefinitionError(
                f"Tool {fn.__name__!r}: output={output!r}; valid: 'trusted', 'untrusted'."
            )
        self.output: Literal["trusted", "untrusted"] = output
        self.labels = frozenset(labels)
        self.policies: tuple[ArgumentPolicy, ...] = tuple(policies)
        self.requires: Requirement | None = _check_requirement(requires, fn.__name__)
        self.timeout = timeout
        self.reconcile = reconcile
        self._is_async = inspect.iscoroutinefunction(fn)
        tool_name = fn.__name__ if name is None else name
        doc_desc, documented = _parse_docstring(fn.__doc__, tool_name)
        params = inspect.signature(fn).parameters
        if unknown := sorted(set(documented) - set(params)):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: its docstring describes {', '.join(map(repr, unknown))}, "
                f"not among its parameters ({', '.join(params) or 'none'}): rename the "
                "description to the parameter it is for, or remove it."
            )
        arg_docs = {arg: text for arg, text in documented.items() if text}
        desc = description or doc_desc
        if not desc:
            raise ToolDefinitionError(
                f"Tool {tool_name!r} has no description: add a docstring saying what it does "
                "and when to use it, or pass description=..."
            )
        if timeout is not None and timeout <= 0:
            raise ToolDefinitionError(f"Tool {tool_name!r}: timeout must be > 0, got {timeout}")
        if inline and self._is_async:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: inline=True is for sync functions; an async one already "
                "runs on the event loop."
            )
        if inline and timeout is not None:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: inline=True cannot take a timeout: a call on the event "
                "loop cannot be abandoned. Drop inline to run it in a worker thread."
            )
        self.inline = inline
        if compensate is not None and effect == "read":
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: compensate= undoes an effect, and a read has none."
            )
        if compensate is not None and not isinstance(compensate, Compensation):
            if not callable(compensate):
                raise ToolDefinitionError(
                    f"Tool {tool_name!r}: compensate= must be a function or a Compensation."
                )
            compensate = Compensation(compensate)
        self.compensation: Compensation | None = compensate
        self._ctx_param: str | None = None
        self.secret_params: dict[str, str] = {}
        """Parameters marked :class:`~agentcore.secrets.Secret`: parameter -> secret name."""
        self.run_params: dict[str, tuple[FromRun, TypeAdapter[Any]]] = {}
        """Parameters bound to the run (:class:`FromRun`): parameter -> (where from, its
        type's validator)."""
        args_model = self._args_model(tool_name, arg_docs)  # fills the two tables above
        self.spec = ToolSpec(
            name=tool_name,
            description=desc,
            args_model=args_model,
            effect=effect,
            idempotent=(effect == "read") if idempotent is None else idempotent,
            bindings={
                **{p: bound.pinned for p, (bound, _) in self.run_params.items()},
                **{p: f"secret:{name}" for p, name in self.secret_params.items()},
            },
        )
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.spec.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # Any: the wrapped function's own types
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.spec.name} effect={self.spec.effect}>"

    def _args_model(self, tool_name: str, arg_docs: dict[str, str]) -> type[BaseModel]:
        try:
            hints = get_type_hints(self.fn, include_extras=True)
        except Exception as exc:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: cannot resolve type hints: {exc}"
            ) from exc
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(self.fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(
                    f"Tool {tool_name!r}: *args and **kwargs cannot be described to a model; "
                    "declare each argument."
                )
            if pname not in hints:
                raise ToolDefinitionError(
                    f"Tool {tool_name!r}: argument {pname!r} has no type hint; the model needs "
                    "one to know what to send."
                )
            annotation = hints[pname]
            binding, base = _binding_of(annotation, tool_name, pname)
            if _is_context(annotation):
                if binding is not None:
                    raise ToolDefinitionError(
                        f"Tool {tool_name!r}: parameter {pname!r} is a ToolContext and cannot "
                        f"also be bound by {binding!r}."
                    )
                self._ctx_param = pname
                continue
            if isinstance(binding, FromRun):  # from the run's record, never shown to the model
                self.run_params[pname] = (binding, TypeAdapter(base))
                continue
            if isinstance(binding, Secret):  # filled at execution, never shown to the model
                self.secret_params[pname] = binding.name
                continue
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        model_name = "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]", tool_name)) + "Args"
        try:
            return create_model(model_name, __base__=_ToolArgs, **fields)
        except Exception as exc:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: its type hints cannot become a schema: {exc}"
            ) from exc

    def _call(
        self, args: BaseModel, ctx: ToolContext, secrets: Mapping[str, Any] | None = None
    ) -> Awaitable[Any]:  # Any: the result; secrets' values: strings and run-bound values
        """Start the call with validated arguments, resolved secrets and the values bound to
        the run (a sync function in a
        worker thread, in a copy of the caller's context so the tool-call span and extraction
        collector stay current; on the loop if ``inline``). A tool that calls elsewhere (an
        MCP server's) overrides this."""
        kwargs = {k: getattr(args, k) for k in type(args).model_fields}
        kwargs.update(secrets or {})
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        if self._is_async:
            return self.fn(**kwargs)
        if self.inline:
            return _inline(self.fn, kwargs)
        context = contextvars.copy_context()
        return in_thread(functools.partial(context.run, self.fn, **kwargs))

    @property
    def runs_in_thread(self) -> bool:
        """Whether a call runs in a worker thread (a sync function, not ``inline``): a
        cancelled wait for it does not stop the call."""
        return not self._is_async and not self.inline

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validate and normalise arguments; returns them as JSON-ready values.

        Raises:
            LimitExceededError: the arguments break the limits (NaN, deep nesting, ...).
            pydantic.ValidationError: the arguments do not match the schema.
        """
        check_json(args, "arguments")
        valid = self.spec.args_model.model_validate(args).model_dump(mode="json")
        check_json(valid, "arguments")
        return valid

    def bound_args(
        self, tenant: str | None, metadata: Mapping[str, Any]
    ) -> dict[str, Any]:  # Any: JSON values from the run's record
        """The values of the parameters bound to the run (:class:`FromRun`), from its
        recorded ``tenant`` and ``metadata``, validated against each parameter's type.

        Raises:
            ConfigurationError: a value is missing or not of the parameter's type.
        """
        values: dict[str, Any] = {}  # Any: JSON values
        for pname, (source, adapter) in self.run_params.items():
            present = tenant is not None if source.source == "tenant" else source.key in metadata
            if not present:
                raise ConfigurationError(
                    f"Tool {self.name!r} takes {pname!r} from {source.describe()}, and this run "
                    "has none: pass it when the run starts "
                    + (
                        "(agent.run(..., tenant=...))."
                        if source.source == "tenant"
                        else f"(agent.run(..., metadata={{{source.key!r}: ...}}))."
                    )
                )
            raw = tenant if source.source == "tenant" else metadata[source.key]
            try:
                values[pname] = adapter.validate_python(raw)
            except ValidationError as exc:
                raise ConfigurationError(
                    f"Tool {self.name!r} takes {pname!r} from {source.describe()}, and this "
                    f"run's value {raw!r} does not fit its type: {exc.errors()[0]['msg']}"
                ) from exc
        return values

    async def run(
        self,
        args: dict[str, Any],
        ctx: ToolContext,
        *,
        max_result_bytes: int = DEFAULT_MAX_TOOL_RESULT_BYTES,
    ) -> ToolOutcome:
        """Validate ``args``, call the function (with a timeout) and capture the outcome.

        Never raises for the tool's own failures: a bad argument, an exception, a timeout
        or a result that cannot be recorded (see :func:`recordable_result`) becomes
        ``ToolOutcome(ok=False, error=...)``; a result over ``max_result_bytes`` is kept
        truncated.
        """
        started = time.perf_counter()

        def done(ok: bool, result: Any = None, error: str | None = None) -> ToolOutcome:
            if error is not None:  # an exception's text is anything a tool put in it
                error = clean_text(error, _MAX_ERROR_CHARS)
            return ToolOutcome(ok, result, error, (time.perf_counter() - started) * 1000)

        try:
            model = self.spec.args_model.model_validate(args)
        except ValidationError as exc:
            return done(False, error=f"invalid arguments: {exc.error_count()} error(s): {exc}")
        secrets: dict[str, Any] = {}  # Any: secret strings, and values bound to the run
        for pname, secret in self.secret_params.items():
            if ctx.secrets is None:
                return done(
                    False,
                    error=f"the tool needs the secret {secret!r} and the agent has no secret "
                    "resolver (Agent(secrets=...))",
                )
            try:
                secrets[pname] = await ctx.secrets(secret)
            except Exception as exc:  # its message could hold a value: the type only
                return done(
                    False,
                    error=f"the secret {secret!r} could not be resolved ({type(exc).__name__})",
                )
        if self.run_params:  # checked when the run started: a failure here is a changed tool
            try:
                secrets.update(self.bound_args(ctx.tenant, ctx.metadata))
            except ConfigurationError as exc:
                return done(False, error=str(exc))
        try:
            with current_context(ctx):  # seen by agentcore.net's clients inside the call
                call = self._call(model, ctx, secrets) if secrets else self._call(model, ctx)
                if self.timeout is None:
                    value = await call
                elif self.runs_in_thread:
                    running = asyncio.ensure_future(call)
                    value = await _within(running, self.timeout)
                    if value is _TIMED_OUT:
                        # The thread cannot be stopped: whoever guards the call is told when
                        # it returns.
                        timed_out = done(False, error=f"timed out after {self.timeout:g}s")
                        return replace(timed_out, timed_out=True, still_running=running)
                else:
                    value = await asyncio.wait_for(call, self.timeout)
        except TimeoutError:
            return replace(done(False, error=f"timed out after {self.timeout:g}s"), timed_out=True)
        except ToolOutcomeUnknownError as exc:
            lost = done(False, error=str(exc))
            return replace(lost, lost=True, settled_elsewhere=exc.settled_elsewhere)
        except Exception as exc:
            return done(False, error=f"{type(exc).__name__}: {exc}")
        try:
            result, full, digest = recordable_result(value, max_result_bytes)
        except LimitExceededError as exc:
            return done(False, error=str(exc))
        ok = done(True, result=result)
        if full is None:
            return ok  # nothing was cut (nearly always): no copy of the outcome
        return replace(ok, result_bytes=full, result_sha256=digest)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    effect: Effect = "read",
    idempotent: bool | None = None,
    timeout: float | None = None,
    reconcile: Reconcile | None = None,
    name: str | None = None,
    description: str | None = None,
    labels: Sequence[str] = (),
    policies: Sequence[ArgumentPolicy] = (),
    requires: Requirement | None = None,
    inline: bool = False,
    compensate: Compensation | Callable[[CommittedCall], Any] | None = None,
    output: Literal["trusted", "untrusted"] = "trusted",
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    effect: Effect = "read",
    idempotent: bool | None = None,
    timeout: float | None = None,
    reconcile: Reconcile | None = None,
    name: str | None = None,
    description: str | None = None,
    labels: Sequence[str] = (),
    policies: Sequence[ArgumentPolicy] = (),
    requires: Requirement | None = None,
    inline: bool = False,
    compensate: Compensation | Callable[[CommittedCall], Any] | None = None,
    output: Literal["trusted", "untrusted"] = "trusted",
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function (sync or async) into a :class:`Tool`.

    Args:
        effect: ``read`` (no side effect), ``write`` (runs only after an approved plan when
            the policy asks for one) or ``destructive`` (always waits for a person).
        idempotent: whether re-running with the same arguments is harmless. Default: true
            for reads, false otherwise. Non-idempotent tools are never re-run blindly.
        timeout: seconds before the wait for the call is abandoned. A sync function keeps
            running in its worker thread. An idempotent tool's timeout is an error the model
            sees; a non-idempotent tool's is a lost call (its outcome is unknown):
            ``reconcile`` is asked, and unless it finds the call, the run stops as
            ``needs_attention`` for a person; it is never retried automatically.
        reconcile: ``reconcile(idempotency_key)`` tells whether a non-idempotent call whose
            outcome was lost (a crash) already happened.
        name: the name the model sees (default: the function's name).
        description: overrides the docstring's description.
        labels: groups the tool belongs to (``scope=["billing"]`` selects every tool
            labelled ``billing``).
        policies: argument policies (:mod:`agentcore.guards`: ``path_within``,
            ``host_allowed`` or your own callables), checked by the dispatcher before the
            call runs and before a person is asked; a refusal is a ``deny`` decision the
            model reads.
        requires: ``"person_plan"``: the tool runs only after a person approved a plan in
            the run, whatever ``Policy.plan_before_writes`` says; while no person has, any
            plan the model proposes in a run whose scope holds this tool waits for one. Use
            it for tools whose arguments can carry data out or change what matters (see the
            README's "Security model"): the model's own plan, possibly injected, never
            unlocks them.
        inline: run a sync function on the event loop instead of in a worker thread: only
            for a quick function that never blocks (no I/O, no lock, no sleep), since while
            it runs no other run, stream or timer on the loop moves. It saves the hand-off
            to a thread and back (tens of microseconds a call). Refused with ``timeout``
            (a call on the loop cannot be abandoned) and for async functions.
        compensate: how to undo a committed call: a function of the
            :class:`CommittedCall` (sync or async; not idempotent), or a
            :class:`Compensation` that says it is, or how to reconcile it.
            ``agent.compensate(run_id, by=...)`` undoes a stopped run's committed effects
            newest first; see the README's "Compensation".
        output: ``"untrusted"`` for a tool that returns third-party content (mail, web
            pages, files, tickets): an argument of a later write that could only have come
            from its results is put to a person (``Policy.untrusted_arguments``).

    Raises:
        ToolDefinitionError: no description, an argument without a type hint, ``*args``,
            ``inline`` with ``timeout`` or with an async function.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            effect=effect,
            idempotent=idempotent,
            timeout=timeout,
            reconcile=reconcile,
            name=name,
            description=description,
            labels=labels,
            policies=policies,
            requires=requires,
            inline=inline,
            compensate=compensate,
            output=output,
        )

    return wrap(fn) if fn is not None else wrap
