"""The tool manifest a run records, and what changed in a tool since the run pinned it.

``run_started.tools[name]`` holds each tool's full definition as the run saw it:
``hash`` (of everything below), ``description``, ``schema`` (the arguments' JSON Schema),
``effect``, ``idempotent``, ``bindings`` (the parameters the model neither sees nor sets,
and what fills each: ``{"customer_id": "metadata:customer_id"}``; see
:attr:`ToolSpec.bindings`), and for a tool defined elsewhere ``source`` (an MCP server's
listing of it: server, remote name, title, description, input schema, annotations; see
:attr:`ToolSpec.source`). A continuation (resume, confirm, resolve) compares the tools
it is about to use with it; a person or a console can validate edited arguments against
the schema the run started with. Transcripts written before ``description`` and
``schema`` were recorded are compared by hash (and by effect and idempotency, which were).
An entry recorded before ``bindings`` were (it has no such key) is compared as it was
then: by :attr:`ToolSpec.unbound_hash`, the bindings left out, so a run paused before
an upgrade still continues; a binding changed since cannot be seen in such a run.

``run_started.output_hash`` pins the run's output type the same way
(:func:`output_change`): a run is continued only by an agent with the same output type.

The rule "a tool whose definition changed since the run pinned it does not run in that
run" is decided here, once (:func:`changed_since_pinned`, :func:`tool_changes`); its
callers only choose the reaction that fits where they stand: a person continuing the run
is refused (or accepts the change, which re-pins it), a queue worker whose tools differ
stops the run as ``needs_attention``, and between steps the dispatcher denies the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentcore.contracts import ToolAction, ToolSpec

if TYPE_CHECKING:
    from ._state import RunState
    from .tools import Tool

__all__ = [
    "changed_since_pinned",
    "manifest_change",
    "manifest_differences",
    "manifest_entry",
    "output_change",
    "tool_changes",
]


def manifest_entry(spec: ToolSpec) -> dict[str, Any]:  # Any: JSON values
    """What ``run_started`` records about one tool."""
    entry: dict[str, Any] = {  # Any: JSON values
        "hash": spec.manifest_hash,
        "description": spec.description,
        "schema": spec.args_schema,
        "effect": spec.effect,
        "idempotent": spec.idempotent,
        "bindings": dict(spec.bindings),
    }
    if spec.source is not None:
        entry["source"] = spec.source
    return entry


def manifest_change(
    name: str,
    recorded: Mapping[str, Any] | None,  # Any: JSON values from run_started
    current: ToolSpec | None,
) -> str | None:
    """``None`` when tool ``name`` is as the run recorded it; otherwise what changed, in
    words (``"pay (description changed; effect changed from write to destructive)"``)."""
    if current is None:
        return f"{name} (gone: no longer a tool of this agent)"
    parts = manifest_differences(recorded, current)
    return None if not parts else f"{name} ({'; '.join(parts)})"


def manifest_differences(
    recorded: Mapping[str, Any] | None,  # Any: JSON values from run_started
    current: ToolSpec,
) -> list[str]:
    """What changed in a tool since the run recorded ``recorded``, one phrase per change;
    empty when nothing did (or the tool was not recorded: outside the run's scope)."""
    if recorded is None or recorded.get("hash") in (None, _hash_as_recorded(recorded, current)):
        return []  # not recorded (a tool outside the run's scope), or unchanged
    parts: list[str] = []
    if "description" in recorded and recorded["description"] != current.description:
        parts.append("description changed")
    if "schema" in recorded and recorded["schema"] != current.args_schema:
        parts.append("argument schema changed")
    for key, label, now in (
        ("effect", "effect", current.effect),
        ("idempotent", "idempotency", current.idempotent),
    ):
        if key in recorded and recorded[key] != now:
            before = _word(recorded[key])
            parts.append(f"{label} changed from {before} to {_word(now)}")
    parts.extend(_binding_changes(recorded.get("bindings"), current.bindings))
    parts.extend(_source_changes(recorded.get("source"), current.source))
    if not parts:
        # An older transcript without description and schema: only the hash tells.
        parts.append("description or argument schema changed")
    return parts


def _hash_as_recorded(
    recorded: Mapping[str, Any],  # Any: JSON values from run_started
    current: ToolSpec,
) -> str:
    """The hash of ``current`` by the rule ``recorded`` was written under: with the
    bindings, or, for an entry recorded before they were part of the manifest, without."""
    return current.manifest_hash if "bindings" in recorded else current.unbound_hash


def _binding_changes(before: object, now: Mapping[str, str]) -> list[str]:
    """What changed in what fills the parameters the model does not set, parameter by
    parameter (``customer_id bound to metadata:referrer_id, was metadata:customer_id``);
    nothing for an entry recorded before bindings were (``before`` is ``None``)."""
    if before is None:
        return []
    old: Mapping[str, Any] = before if isinstance(before, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]  # JSON data
    parts: list[str] = []
    for param in sorted(set(old) | set(now)):
        was, is_now = old.get(param), now.get(param)
        if was == is_now:
            continue
        if was is None:
            parts.append(f"{param} now bound to {is_now}")
        elif is_now is None:
            parts.append(f"{param} no longer bound (was {was})")
        else:
            parts.append(f"{param} bound to {is_now}, was {was}")
    return parts


def _source_changes(
    before: object,
    now: Mapping[str, Any] | None,  # Any: JSON values
) -> list[str]:
    """What changed in a remote tool's listed definition, key by key (``annotations``
    hint by hint), so a person reads what a rug pull changed."""
    if before is None and now is None:
        return []
    if not isinstance(before, Mapping) or now is None:
        return ["its source changed"]
    old: Mapping[str, Any] = before  # pyright: ignore[reportUnknownVariableType]  # JSON data
    parts: list[str] = []
    for key in sorted(set(old) | set(now)):
        if key in ("description", "input_schema") and key in old and old[key] != now.get(key):
            parts.append(f"the server's {key.replace('_', ' ')} changed")
        elif key == "annotations" and old.get(key) != now.get(key):
            was: Mapping[str, Any] = old.get(key) or {}  # Any: JSON values
            new: Mapping[str, Any] = now.get(key) or {}  # Any: JSON values
            hints = [
                f"{hint} {was.get(hint)!r} -> {new.get(hint)!r}"
                for hint in sorted(set(was) | set(new))
                if was.get(hint) != new.get(hint)
            ]
            parts.append(f"the server's annotations changed ({', '.join(hints)})")
        elif key == "unusable" and now.get(key):
            parts.append(f"refused: {now[key]}")
        elif key not in ("description", "input_schema") and old.get(key) != now.get(key):
            parts.append(f"the server's {key.replace('_', ' ')} changed")
    return parts


def _word(value: object) -> str:
    if isinstance(value, bool):
        return "idempotent" if value else "non-idempotent"
    return str(value)


def changed_since_pinned(state: RunState, tool: Tool) -> str | None:
    """What changed in ``tool`` since the run pinned its definition (``run_started``'s
    manifest, updated by accepted changes), in words; ``None`` when nothing did.

    A local tool changes only between deploys; a remote one (an MCP server's) can change
    between two steps: its server relisted it differently (a rug pull).
    """
    recorded = state.tools.get(tool.name)
    if recorded is None or recorded.get("hash") == tool.spec.manifest_hash:
        return None  # the usual case, one comparison
    if recorded.get("hash") == _hash_as_recorded(recorded, tool.spec):
        return None  # recorded before bindings were part of the manifest, and unchanged
    return "; ".join(manifest_differences(recorded, tool.spec)) or None


def tool_changes(
    state: RunState, tools: Mapping[str, Tool], *, whole_scope: bool = False
) -> dict[str, str]:
    """What changed, in words, in each tool the run used or is about to run (with
    ``whole_scope``: in every tool of its scope), by tool name; a tool that is gone
    counts as changed."""
    used = {name for name, n in state.per_tool.items() if n > 0}
    if state.call is not None and isinstance(state.call.action, ToolAction):
        used.add(state.call.action.tool)
    if whole_scope:
        used.update(state.scope)
    changed: dict[str, str] = {}
    for name in sorted(used):
        current = tools.get(name)
        change = manifest_change(
            name, state.tools.get(name), None if current is None else current.spec
        )
        if change is not None:
            changed[name] = change
    return changed


def output_change(state: RunState, output_hash: str | None) -> str | None:
    """``None`` when an agent whose output type hashes to ``output_hash`` (``None``: text)
    may continue the run; otherwise the difference, in words."""
    if state.output_hash == output_hash:
        return None

    def named(h: str | None) -> str:
        return "a text answer" if h is None else f"a typed answer (output schema hash {h})"

    return (
        f"run {state.run_id} was started for {named(state.output_hash)}, and this agent "
        f"expects {named(output_hash)}"
    )
