"""Integrations with the services that run agentcore at scale.

Each lives in its own module and imports its library only there, so ``import agentcore``
never needs them: :mod:`agentcore.integrations.celery` (extra ``agentcore[celery]``).
"""

from __future__ import annotations

__all__: list[str] = []
