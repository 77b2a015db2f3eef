"""Model routes: which models drive a run's steps, gated by measured scorecards."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentcore.adapters import ModelAdapter, resolve_route
from agentcore.adapters._protocol import Mode
from agentcore.contracts.errors import ConfigurationError

__all__ = ["DEFAULT_SCORECARDS", "ModelSpec", "Route", "default_scorecards_dir"]

ModelSpec = str | ModelAdapter | Sequence[str | ModelAdapter]
"""A model (``"provider/model"`` or an adapter object) or a route: a list tried in order."""

DEFAULT_SCORECARDS = ".agentcore/scorecards"

ModelEntry = str | ModelAdapter


def default_scorecards_dir() -> str:
    """``$AGENTCORE_SCORECARDS`` or ``.agentcore/scorecards``."""
    return os.environ.get("AGENTCORE_SCORECARDS") or DEFAULT_SCORECARDS


@dataclass(frozen=True)
class Route:
    """The models of an agent, tried in order, optionally gated by a minimum eval score.

    Args:
        models: the act route: models tried in order for each step (a model failing after
            its retries hands the step to the next, with the same transcript).
        plan: models for the steps before a plan is approved (a run that needs no plan,
            such as a read-only one, runs on these throughout). ``None``: use ``models``.
        min_score: a model whose stored scorecard for ``mode`` is below this (or that has no
            scorecard) is refused for plan and act steps when the agent is built. The adapter
            object itself stays usable for other calls the application makes.
        scorecards: the directory of scorecards written by ``agentcore eval``
            (default ``$AGENTCORE_SCORECARDS`` or ``.agentcore/scorecards``).
        mode: which scorecard counts (``structured`` or ``native``) for adapters that do not
            say their own mode; an adapter with a ``mode`` attribute is judged on that one.
    """

    models: Sequence[ModelEntry]
    plan: Sequence[ModelEntry] | None = None
    min_score: float | None = None
    scorecards: str | Path | None = None
    mode: Mode = "structured"
    _act: tuple[ModelAdapter, ...] = field(init=False, repr=False)
    _plan: tuple[ModelAdapter, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_score is not None and not 0.0 <= self.min_score <= 1.0:
            raise ConfigurationError(f"min_score must be within 0..1, got {self.min_score}")
        act = resolve_route(list(self.models))
        plan = resolve_route(list(self.plan)) if self.plan else ()
        object.__setattr__(self, "_act", act)
        object.__setattr__(self, "_plan", plan)
        if self.min_score is not None:
            self._check_scores()

    @property
    def act_models(self) -> tuple[ModelAdapter, ...]:
        """Adapters for act steps, in order."""
        return self._act

    @property
    def plan_models(self) -> tuple[ModelAdapter, ...]:
        """Adapters for steps before a plan is approved (empty: use the act models)."""
        return self._plan

    def _check_scores(self) -> None:
        from .evals import load_scorecard  # the harness loads only when a route is gated

        bar = self.min_score
        assert bar is not None
        directory = Path(self.scorecards or default_scorecards_dir())
        refused: list[str] = []
        for adapter in (*self._plan, *self._act):
            # An adapter that says how it asks (structured or native) is judged on that
            # mode's scorecard; others on the route's mode.
            mode: Mode = getattr(adapter, "mode", self.mode)
            card = load_scorecard(directory, adapter.name, mode)
            if card is None:
                refused.append(f"{adapter.name} has no {mode} scorecard in {directory}")
            elif card.score < bar:
                refused.append(
                    f"{adapter.name} scored {card.score:.2f} ({mode}, dataset "
                    f"{card.dataset or card.dataset_hash}, contract {card.contract_hash})"
                )
        if refused:
            raise ConfigurationError(
                f"The route requires a {self.mode} score of at least {bar:.2f} for plan and act "
                f"steps: {'; '.join(refused)}. Evaluate with `agentcore eval DATASET --model M "
                f"--mode {self.mode}` or lower min_score."
            )
