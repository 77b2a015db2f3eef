"""Every error agentcore raises, in one tree.

The tree lives in the lowest layer (``agentcore.contracts`` imports only pydantic) so that
contracts, adapters and the core all raise from one root. ``agentcore.errors`` re-exports it.

::

    AgentcoreError
    ├── ConfigurationError          a setting, tool or argument the caller must fix
    │   ├── ToolDefinitionError     a decorated function cannot become a tool
    │   ├── ContractLintError       a worked example no longer validates
    │   └── LimitExceededError      a value that no transcript may hold (see limits)
    ├── InvalidActionError          model output that is not one valid next action
    │   └── UnknownToolError        an action naming a tool that is not offered
    ├── ModelError                  the model could not be asked (raised by adapters)
    │   ├── ModelRefusedError       the provider refused to answer
    │   ├── ModelTruncatedError     the reply was cut off (length / max tokens), twice
    │   ├── ScriptExhaustedError    a ScriptedModel ran out of scripted replies
    │   ├── ExtractionError         no extraction reply validated, re-asks included
    │   ├── CircuitOpenError        the provider failed repeatedly; calls are paused
    │   └── ProviderError           the provider answered with an error or not at all
    │       ├── RateLimitedError        429 (``retry_after`` when the provider said)
    │       ├── ProviderUnavailableError 5xx, 529 overloaded, timeouts, resets
    │       ├── AuthenticationError     401 / 403: fix the key          (not retryable)
    │       ├── BadRequestError         400 / 404 / 422: fix the request (not retryable)
    │       └── SpendLimitError         429 spend or quota limit reached (not retryable)
    ├── RunError                    an operation on a run that cannot be done
    │   ├── RunNotFoundError        no run with that id in the store
    │   ├── NotAwaitingConfirmationError   confirm() on a run that is not waiting
    │   ├── RunBusyError                   another worker is advancing the run right now
    │   ├── CallStillRunningError          a rerun of a lost call that may still be running
    │   ├── ConfirmationMismatchError      an approval bound to another step or arguments
    │   │   ├── ApprovalExpiredError       an approval after Policy.approval_ttl
    │   │   └── AlreadyApprovedError       the same person approving one call twice
    │   ├── NotAuthorizedError             Policy.authorize refused this person for this call
    │   ├── NotAcceptingRepliesError       reply() to a run that cannot take a message now
    │   ├── QuotaExceededError             an append that would pass a quota's limit
    │   ├── DuplicateReplyError            reply() with an idempotency key already recorded
    │   ├── ToolManifestChangedError       a tool the run used changed since it started
    │   └── OutputTypeChangedError         the agent's output type is not the run's
    ├── ToolOutcomeUnknownError     raised by a tool: its call may or may not have happened
    ├── RemoteToolError             a remote (MCP) tool answered with an error, or could not be
    │                               called (the call was not made, or was refused)
    └── StoreError                  the transcript store failed or holds bad data
        ├── SeqConflictError        another writer appended first (conditional append lost)
        ├── LeaseLostError          the run's lease is held by someone else now (fenced)
        └── StoreCorruptedError     an event or file that cannot be decoded

Every error carries a message that says what happened and what to do about it; wrappers
keep the underlying error as ``__cause__`` (``raise ... from exc``).
"""

from __future__ import annotations

__all__ = [
    "AgentcoreError",
    "AlreadyApprovedError",
    "ApprovalExpiredError",
    "AuthenticationError",
    "BadRequestError",
    "CallStillRunningError",
    "CircuitOpenError",
    "ConfigurationError",
    "ConfirmationMismatchError",
    "ContractLintError",
    "DuplicateReplyError",
    "ExtractionError",
    "InvalidActionError",
    "LeaseLostError",
    "LimitExceededError",
    "ModelError",
    "ModelRefusedError",
    "ModelTruncatedError",
    "NotAcceptingRepliesError",
    "NotAuthorizedError",
    "NotAwaitingConfirmationError",
    "OutputTypeChangedError",
    "ProviderError",
    "ProviderUnavailableError",
    "QuotaExceededError",
    "RateLimitedError",
    "RemoteToolError",
    "RunBusyError",
    "RunError",
    "RunNotFoundError",
    "ScriptExhaustedError",
    "SeqConflictError",
    "SpendLimitError",
    "StoreCorruptedError",
    "StoreError",
    "ToolDefinitionError",
    "ToolManifestChangedError",
    "ToolOutcomeUnknownError",
    "UnknownToolError",
]


class AgentcoreError(Exception):
    """Root of every error agentcore raises."""


class ConfigurationError(AgentcoreError):
    """A setting, tool or argument that the caller must fix before anything runs."""


class ToolDefinitionError(ConfigurationError):
    """A decorated function cannot be turned into a tool (bad signature or type hints)."""


class ContractLintError(ConfigurationError):
    """Worked examples of a contract document do not validate against the current schemas.

    Attributes:
        problems: one line per invalid example turn.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("The contract's worked examples are invalid: " + "; ".join(problems))
        self.problems = problems


class LimitExceededError(ConfigurationError):
    """A value that cannot be recorded: too deep, too large, not JSON, or not valid text.

    The message names where in the value the problem is and which limit it breaks (see
    ``agentcore.contracts`` limits). Nothing was recorded.
    """


class InvalidActionError(AgentcoreError):
    """Model output that is not exactly one valid next action.

    The message is written for the model: the runner sends it back in a re-ask.
    """


class UnknownToolError(InvalidActionError):
    """A tool action naming a tool that the compiled schema does not offer.

    Attributes:
        tool: the name the model used.
    """

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ModelError(AgentcoreError):
    """The model could not be asked or did not answer usefully.

    Attributes:
        retryable: whether asking the next model in the route (or again later) may help.
        model: the model route entry that failed.
        attempts: how many requests were made before giving up.
        input_tokens, output_tokens: tokens the failed attempts consumed (counted in budgets).
    """

    retryable: bool = True

    def __init__(self, message: str, *, model: str | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.model = model
        self.attempts = attempts
        self.input_tokens = 0
        self.output_tokens = 0


class ModelRefusedError(ModelError):
    """The provider refused to produce an answer (a safety refusal)."""


class ModelTruncatedError(ModelError):
    """The reply was cut off before the action was complete; nothing partial is executed."""


class ExtractionError(ModelError):
    """An extraction's replies never validated against the output model, re-asks included
    (another model may do better)."""


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was asked for more replies than it was given."""

    retryable = False


class CircuitOpenError(ModelError):
    """The provider failed repeatedly; calls to it are paused until the breaker half-opens."""


class ProviderError(ModelError):
    """The provider answered with an error status, or the connection failed.

    Attributes:
        status: the HTTP status, when there was a response.
        provider: the provider family (``openai``, ``anthropic``, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        attempts: int = 1,
        status: int | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message, model=model, attempts=attempts)
        self.status = status
        self.provider = provider


class RateLimitedError(ProviderError):
    """HTTP 429. ``retry_after`` holds the provider's Retry-After in seconds, when sent."""

    retry_after: float | None = None


class ProviderUnavailableError(ProviderError):
    """A 5xx, Anthropic's 529 overloaded, a timeout or a reset connection: try again later."""


class AuthenticationError(ProviderError):
    """401 or 403: the key is missing, wrong or lacks access. Fix the configuration."""

    retryable = False


class BadRequestError(ProviderError):
    """400, 404 or 422: the request (model name, schema, parameters) must change."""

    retryable = False


class SpendLimitError(ProviderError):
    """A 429 saying a spend or quota limit was reached: waiting will not help."""

    retryable = False


class RunError(AgentcoreError):
    """An operation on a run that cannot be done in the run's current state."""


class RunNotFoundError(RunError):
    """No run with that id exists in the store."""


class RunBusyError(RunError):
    """Another worker is advancing this run right now (it holds the run's claim)."""


class CallStillRunningError(RunError):
    """A person asked to run a lost call again while the call may still be running: the
    process that started it still holds its call guard (a timed-out sync tool's thread, a
    stalled worker). Nothing was recorded; try again once it has returned, or settle the
    call with its result or as failed."""


class ToolManifestChangedError(RunError):
    """A tool the run used changed (schema, description, effect) or is gone since it started."""


class OutputTypeChangedError(RunError):
    """The agent continuing a run has another output type (``Agent(output=...)``) than the
    agent that started it: its answer would be validated and decoded as another type."""


class ToolOutcomeUnknownError(AgentcoreError):
    """Raised by a tool whose call may or may not have happened: the connection to the system
    it called broke after the request was sent (an MCP server that died mid-call).

    The runner treats it like a timeout: an idempotent tool's call is an error the model
    sees; a non-idempotent tool's is a lost call (``reconcile`` is asked, otherwise the run
    stops as ``needs_attention`` for a person), never retried automatically.

    Args:
        message: what happened, and what settles it.
        settled_elsewhere: the outcome is being settled somewhere else (a sub-agent's run
            waiting for a person, or still running in another worker): the run stops saying
            so (``message``), without asking a person to resolve the call.
    """

    def __init__(self, message: str, *, settled_elsewhere: bool = False) -> None:
        super().__init__(message)
        self.settled_elsewhere = settled_elsewhere


class RemoteToolError(AgentcoreError):
    """A remote tool (an MCP server's) answered with an error (``isError``), the protocol
    failed (a JSON-RPC error), or the call could not be made (no connection, the tool's
    definition changed). Raised inside the tool: the model sees the text as the call's
    error observation."""


class NotAwaitingConfirmationError(RunError):
    """confirm() was called on a run that is not waiting for a person."""


class QuotaExceededError(RunError):
    """A store refused an append that would take a quota's counter past its limit (another
    worker spent it first); nothing was written.

    Attributes:
        quota: the quota's name.
        key: the counter.
        used: what the counter held.
        amount: what the append would have added.
        limit: the counter's limit.
    """

    def __init__(
        self, message: str, *, quota: str, key: str, used: float, amount: float, limit: float
    ) -> None:
        super().__init__(message)
        self.quota, self.key, self.used, self.amount, self.limit = quota, key, used, amount, limit


class NotAcceptingRepliesError(RunError):
    """``reply()`` to a run that cannot take the user's next message now: a person closed
    it (cancelled, compensated), it waits for an approver or an operator, it failed, or a
    turn is still in progress past the reply's wait. The message says which, and what
    continues the run; nothing was recorded."""


class DuplicateReplyError(RunError):
    """``reply(key=...)`` with an idempotency key the run already recorded a message for
    (a retried request): the message is not appended twice.

    Attributes:
        turn: the turn that key's message started.
    """

    def __init__(self, message: str, *, turn: int) -> None:
        super().__init__(message)
        self.turn = turn


class ConfirmationMismatchError(RunError):
    """An approval names a step, tool or arguments other than the ones waiting."""


class ApprovalExpiredError(ConfirmationMismatchError):
    """An approval that arrived after ``Policy.approval_ttl``; the run keeps waiting (a
    denial is still accepted)."""


class AlreadyApprovedError(ConfirmationMismatchError):
    """The same person approved this call before; a call that needs several approvers
    counts each person once."""


class NotAuthorizedError(RunError):
    """``Policy.authorize`` says this person may not approve or deny this call."""


class StoreError(AgentcoreError):
    """The transcript store failed, or holds data that cannot be used."""


class SeqConflictError(StoreError):
    """A conditional append lost: the run's transcript is not at the expected sequence number.

    Another writer advanced the run first. Nothing was written by this call.
    """


class LeaseLostError(StoreError):
    """The caller's lease on a run is no longer the run's lease: it was taken over.

    Someone else acquired the run (its epoch moved on), usually after this holder stalled
    or was cut off past its lease's expiry. Nothing was written by the call that raised it.
    Stop advancing the run: do not call another tool, do not retry the append.
    """


class StoreCorruptedError(StoreError):
    """A stored event or the store file cannot be decoded. Nothing is guessed or recreated."""
