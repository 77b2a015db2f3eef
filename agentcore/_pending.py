"""A call waiting for a person, as a run's result shows it.

A leaf below the policy, the fold and the approvals: the policy's hooks
(``Policy.authorize``, ``Policy.on_pending``) are typed with it, the fold builds it and
:mod:`agentcore.approvals` tells people about it. Public as ``agentcore.PendingCall``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PendingCall"]


@dataclass(frozen=True, slots=True)
class PendingCall:
    """An action waiting for a person (``RunResult.pending``).

    Attributes:
        step, call_id: where it stands in the transcript; an approval is bound to them.
        kind: ``tool`` or ``plan``; ``undo`` for the undo of a committed call that
            ``Policy.authorize`` is asked about (``Agent.compensate``).
        tool, args, effect: the call that will run exactly as shown when approved.
        args_hash: hash of tool and arguments; pass it to ``confirm`` to bind the approval.
        thought: the model's stated reason.
        plan_steps: the proposed steps, for a plan.
        approvals: who approved it so far, when it needs more than one person.
        approvals_needed: how many distinct people must approve it (``Policy.approvals``).
        expires_at: when an approval stops being accepted (``Policy.approval_ttl``; Unix
            seconds), or ``None``.
        run_id: the run the call waits in, when it is not the run asked about: a
            sub-agent's run whose call its parent waits on (confirm it from the parent, with
            this step and args hash); ``None`` for the run's own call.
        reason: why it waits (the dispatcher's words: a destructive tool, an argument from
            the result of a named untrusted tool call, a write no approved plan covers).
        provenance: where each argument came from (``trusted``, ``untrusted``, ``model``),
            by path, once the run has read untrusted output.
    """

    step: int
    call_id: str
    kind: str
    thought: str
    tool: str | None = None
    args: dict[str, Any] | None = None  # Any: JSON values
    effect: str | None = None
    args_hash: str | None = None
    plan_steps: tuple[str, ...] = ()
    approvals: tuple[str, ...] = ()
    approvals_needed: int = 1
    expires_at: float | None = None
    run_id: str | None = None
    reason: str | None = None
    provenance: Mapping[str, str] = field(default_factory=dict[str, str])
