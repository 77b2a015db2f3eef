"""The litellm adapters' constructors: one set of options, declared by each adapter.

``LiteLLMAdapter.__init__`` checks and keeps the options every litellm-backed adapter
takes; an adapter with an option of its own (``OpenAIAdapter``'s ``api``,
``LocalAdapter``'s ``server``) declares its whole keyword signature again, so that
``help()``, ``inspect.signature`` and pyright show every option, and hands the shared ones
on. These tests catch an option added to the base and forgotten by an adapter, or one
handed on wrongly.
"""

from __future__ import annotations

import inspect

import pytest

from agentcore.adapters import BreakerPolicy, RetryPolicy
from agentcore.adapters._litellm import LiteLLMAdapter
from agentcore.adapters.anthropic import AnthropicAdapter
from agentcore.adapters.deepseek import DeepSeekAdapter
from agentcore.adapters.gemini import GeminiAdapter
from agentcore.adapters.local import LocalAdapter
from agentcore.adapters.openai import OpenAIAdapter

ADAPTERS: list[type[LiteLLMAdapter]] = [
    OpenAIAdapter,
    AnthropicAdapter,
    GeminiAdapter,
    DeepSeekAdapter,
    LocalAdapter,
]

OWN_DEFAULTS = {(LocalAdapter, "timeout"): 300.0}
"""Where an adapter's default differs from the base's on purpose (local generation is
slow)."""


def _options(cls: type[LiteLLMAdapter]) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(cls.__init__).parameters)


def test_every_litellm_adapter_is_listed() -> None:
    ours = {c for c in LiteLLMAdapter.__subclasses__() if c.__module__.startswith("agentcore.")}
    assert ours <= set(ADAPTERS)


@pytest.mark.parametrize("cls", ADAPTERS, ids=lambda c: c.__name__)
def test_each_adapter_declares_every_option_of_the_base(cls: type[LiteLLMAdapter]) -> None:
    own = _options(cls)
    for name, base in _options(LiteLLMAdapter).items():
        assert name in own, f"{cls.__name__} does not take {name}"
        mine = own[name]
        assert (mine.kind, mine.annotation) == (base.kind, base.annotation), name
        assert mine.default == OWN_DEFAULTS.get((cls, name), base.default), name


@pytest.mark.parametrize("cls", ADAPTERS, ids=lambda c: c.__name__)
def test_each_adapter_hands_every_option_to_the_base(cls: type[LiteLLMAdapter]) -> None:
    retry = RetryPolicy(max_attempts=2)
    breaker = BreakerPolicy(failure_threshold=9)
    adapter = cls(
        "some-model",
        api_base="http://127.0.0.1:9/v1",
        api_key="k-test",
        timeout=7.5,
        extra_headers={"X-Test": "1"},
        max_output_tokens=321,
        retry=retry,
        breaker=breaker,
        mode="native",
    )
    assert adapter.name.endswith("/some-model")
    assert (adapter.api_base, adapter.api_key, adapter.timeout) == (
        "http://127.0.0.1:9/v1",
        "k-test",
        7.5,
    )
    assert adapter.extra_headers == {"X-Test": "1"}
    assert adapter.max_output_tokens == 321
    assert adapter.retry is retry
    assert adapter.breaker.policy is breaker
    assert adapter.mode == "native"
