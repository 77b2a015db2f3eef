"""Tokens of logged Chat Completions requests and scripted replies (tiktoken o200k_base).

Serialization rule (one rule for every framework, so the figures compare like for like):
a request is the text ``<tools JSON><response_format JSON>`` (compact JSON,
``separators=(",", ":")``, keys in the order the client sent them; each present part followed
by a newline) followed by each message in order as ``<|role|>`` + its text (a list of
content parts: their ``text`` joined) + per tool call ``\\n<name> <arguments>``. Tool-call
ids, ``model``, ``max_tokens``, ``tool_choice`` and other parameters are not counted. The
schemas come first because OpenAI's prompt cache reads the request as tools, then messages
(the cookbook below: "The entire request prefix is cacheable: messages, images, ... tools").
These counts are the serialized text's tokens, not OpenAI's billing (which adds a few
tokens per message and renders tools in its own format); they compare frameworks on the
same rule.

Parts of a request: ``schemas`` (the ``tools`` and ``response_format`` JSON), ``instructions``
(the operator's instructions, found verbatim in a system or developer message), ``framework``
(the rest of the system/developer messages' text, with their role markers) and ``history``
(every other message: the task, the tool calls, the results, the step notes), counted as
the request's tokens minus the other parts, so that the parts add up to the whole.

Prefix kept: the tokens of the longest common prefix (in characters) of this request's
serialization and the previous one's; "kept %" is that over the previous request's tokens
(100%: the whole previous request is this one's prefix).

Cacheable: OpenAI caches a prompt prefix "for prompts containing 1024 tokens or more, with
cache hits occurring in increments of 128 tokens" (OpenAI cookbook, Prompt Caching 201,
https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb, and
https://platform.openai.com/docs/guides/prompt-caching). So a request's cacheable tokens are
0 when its kept prefix is under 1024 tokens, else 1024 + 128 * floor((prefix - 1024) / 128);
the first request of a run has none (a cold cache).

Output tokens: the scripted reply's ``content`` plus each call's name and arguments.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake import Turn

__all__ = ["RequestRecord", "cacheable", "encoder_name", "records", "serialize", "tokens"]

ENCODING = "o200k_base"


@functools.cache
def _encode() -> Callable[[str], int]:
    """tiktoken's o200k_base, offline from the copy litellm's wheel ships (its cache files
    are named by the sha1 of the encoding's URL, which is how tiktoken looks them up)."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        spec = importlib.util.find_spec("litellm")
        if spec is not None and spec.origin is not None:
            bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            if bundled.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    import tiktoken

    enc = tiktoken.get_encoding(ENCODING)
    return lambda text: len(enc.encode(text, disallowed_special=()))


def tokens(text: str) -> int:
    return _encode()(text) if text else 0


def encoder_name() -> str:
    import tiktoken

    return f"tiktoken {tiktoken.__version__} {ENCODING}"


def cacheable(prefix: int) -> int:
    """OpenAI's cached tokens for a kept prefix of ``prefix`` tokens (see the module doc)."""
    return 0 if prefix < 1024 else 1024 + 128 * ((prefix - 1024) // 128)


@dataclass(frozen=True)
class RequestRecord:
    """One model request of a run, counted."""

    index: int  # from 0
    input_tokens: int
    schemas: int
    framework: int
    instructions: int
    history: int
    prefix_tokens: int  # shared with the previous request (0 for the first)
    kept_pct: float | None  # prefix_tokens / previous request's input tokens
    cacheable_tokens: int
    output_tokens: int
    stream: bool

    def as_json(self) -> dict[str, Any]:  # Any: JSON
        return dict(self.__dict__)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:  # pyright: ignore[reportUnknownVariableType]
            if isinstance(part, Mapping):
                text = part.get("text")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts)
    return ""


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _message_text(m: Mapping[str, Any]) -> str:  # Any: JSON
    out = f"<|{m.get('role', '')}|>" + _text(m.get("content"))
    for call in m.get("tool_calls") or ():
        fn = call.get("function") or {}
        out += f"\n{fn.get('name', '')} {fn.get('arguments', '')}"
    return out


def serialize(body: Mapping[str, Any]) -> tuple[str, str, list[tuple[str, str]]]:  # Any: JSON
    """``(whole text, schemas text, [(role, message text)])`` of a request (module doc)."""
    schemas = ""
    for key in ("tools", "response_format"):
        if body.get(key):
            schemas += _compact(body[key]) + "\n"
    messages = [(str(m.get("role", "")), _message_text(m)) for m in body.get("messages") or ()]
    return schemas + "".join(t for _, t in messages), schemas, messages


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def output_tokens(turn: Turn) -> int:
    return tokens(turn.content or "") + sum(tokens(n) + tokens(a) for n, a in turn.calls)


def records(
    bodies: Sequence[Mapping[str, Any]],  # Any: JSON
    turns: Sequence[Turn],
    instructions: str,
) -> list[RequestRecord]:
    """Count each logged request (and the scripted reply it got)."""
    out: list[RequestRecord] = []
    previous_text = ""
    previous_total = 0
    for i, body in enumerate(bodies):
        text, schemas, messages = serialize(body)
        framework = instr = 0
        for role, mtext in messages:
            if role in ("system", "developer"):
                n = tokens(mtext)
                if instructions and instructions in mtext:
                    k = tokens(instructions)
                    instr += k
                    framework += n - k
                else:
                    framework += n
        s = tokens(schemas)
        total = tokens(text)
        history = total - s - framework - instr  # the rest (parts are counted apart)
        prefix = min(total, tokens(text[: _common(text, previous_text)])) if i else 0
        out.append(
            RequestRecord(
                index=i,
                input_tokens=total,
                schemas=s,
                framework=framework,
                instructions=instr,
                history=history,
                prefix_tokens=prefix,
                kept_pct=(100.0 * prefix / previous_total) if i and previous_total else None,
                cacheable_tokens=cacheable(prefix) if i else 0,
                output_tokens=output_tokens(turns[i]) if i < len(turns) else 0,
                stream=bool(body.get("stream")),
            )
        )
        previous_text, previous_total = text, total
    return out
