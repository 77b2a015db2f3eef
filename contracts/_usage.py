"""Token and cost usage of model calls, shared by adapters and the core."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens (and cost, where known) of one or more model calls.

    Attributes:
        input_tokens: prompt tokens, cached ones included.
        output_tokens: completion tokens (reasoning tokens included where reported).
        cached_input_tokens: the part of ``input_tokens`` served from a prompt cache.
        cost: cost in US dollars, or ``None`` where unknown.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost is None and other.cost is None
            else (self.cost or 0.0) + (other.cost or 0.0)
        )
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            cost,
        )
