"""What the user says about a remote tool: its effect, idempotency, timeout, reconcile hook.

A server's annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``) are hints
from whoever runs the server; they decide nothing unless the user trusts that server. The
order, first that answers:

1. the tool's :class:`ToolConfig` (``McpServer(tools={"name": ToolConfig(...)})``);
2. the server's own settings (``McpServer(effect=..., idempotent=...)``);
3. for a server marked ``trusted=True``, its annotations, read with the MCP specification's
   defaults (a tool that is not read-only is destructive unless it says otherwise, and not
   idempotent unless it says so);
4. otherwise a non-idempotent ``write``: it runs only after an approved plan when the policy
   asks for one, and a lost call stops the run for a person instead of being retried.

A read is idempotent unless the user says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentcore.contracts import Effect
from agentcore.contracts.errors import ConfigurationError
from agentcore.guards import ArgumentPolicy
from agentcore.tools import Reconcile, Requirement

__all__ = ["ToolConfig", "resolve_effect"]

_EFFECTS = ("read", "write", "destructive")


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """The user's settings for one remote tool (by its name on the server).

    Attributes:
        effect: ``read``, ``write`` or ``destructive``; ``None``: the server's setting, then
            (trusted servers only) the annotations, then ``write``.
        idempotent: whether a second call with the same arguments is harmless; ``None``:
            true for a read, else the server's setting, then (trusted) ``idempotentHint``,
            then false.
        timeout: seconds before the call is abandoned (``None``: the server's timeout).
        reconcile: ``reconcile(idempotency_key)`` for a non-idempotent tool whose outcome
            was lost (see :func:`agentcore.tool`).
        policies: argument policies the dispatcher checks before a call runs or a person is
            asked (:mod:`agentcore.guards`); a server's own checks are the server's.
        requires: ``"person_plan"``: the tool runs only after a person approved a plan in
            the run (see :func:`agentcore.tool`).
        trusted: the tool's results are trusted text (a server of your own that returns
            nothing a third party wrote); by default an MCP tool's output is untrusted.
    """

    effect: Effect | None = None
    idempotent: bool | None = None
    timeout: float | None = None
    reconcile: Reconcile | None = None
    policies: Sequence[ArgumentPolicy] = ()
    requires: Requirement | None = None
    trusted: bool = False

    def __post_init__(self) -> None:
        if self.effect is not None and self.effect not in _EFFECTS:
            raise ConfigurationError(
                f"ToolConfig(effect={self.effect!r}): valid effects are 'read', 'write', "
                "'destructive'."
            )
        if self.requires not in (None, "person_plan"):
            raise ConfigurationError(
                f"ToolConfig(requires={self.requires!r}): valid values are 'person_plan', None."
            )
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigurationError(f"ToolConfig(timeout={self.timeout!r}): must be > 0.")


def resolve_effect(
    config: ToolConfig | None,
    server_effect: Effect | None,
    server_idempotent: bool | None,
    trusted: bool,
    annotations: Mapping[str, Any] | None,  # Any: JSON values (the server's hints)
) -> tuple[Effect, bool]:
    """The effect and idempotency a remote tool runs with (see the module's order)."""
    hints: Mapping[str, Any] = annotations or {}  # Any: JSON values
    effect: Effect | None = config.effect if config is not None else None
    effect = effect or server_effect
    if effect is None and trusted:
        if hints.get("readOnlyHint") is True:
            effect = "read"
        elif hints.get("destructiveHint") is False:
            effect = "write"
        else:
            effect = "destructive"  # the specification's default for a tool that writes
    effect = effect or "write"
    idempotent = config.idempotent if config is not None else None
    if idempotent is None and effect == "read":
        idempotent = True
    if idempotent is None:
        idempotent = server_idempotent
    if idempotent is None:
        idempotent = trusted and hints.get("idempotentHint") is True
    return effect, idempotent
