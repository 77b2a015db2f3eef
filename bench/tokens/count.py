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

Finer parts (``RequestRecord.parts``, :data:`PARTS`), each of the four above cut further and
adding up to it: schemas into ``tools`` and ``response_format``; framework text into
agentcore's sections, cut at the headings it writes (``rules and forms``: everything before
"Tools you can call:", with any heading of the operator's instructions and, for a peer, its
whole framework text; ``tool list``; ``worked examples``; ``native-mode note``); history into
``task`` (the first user message without its step note), ``step notes`` (agentcore's
"Step N of M." status line, with what follows it on its line), ``model replies`` (assistant
messages: content and calls), ``tool results`` (each scripted result's JSON text, found
verbatim) and ``observation framing`` (the rest of the later messages: role markers,
agentcore's "[c1] get_order returned: ", "plan approved"). Each finer part is counted on its
own text; the few tokens lost or gained at the cuts go to the last part of its group
(``response_format`` or ``tools``, ``rules and forms``, ``task``).

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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake import Turn

__all__ = [
    "PARTS",
    "RequestRecord",
    "cacheable",
    "encoder_name",
    "records",
    "request_parts",
    "serialize",
    "system_sections",
    "tokens",
]

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
    parts: dict[str, int] = field(default_factory=dict)  # PARTS: tokens, add up to input

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


PARTS: tuple[str, ...] = (
    "tools",
    "response_format",
    "rules and forms",
    "tool list",
    "worked examples",
    "native-mode note",
    "operator instructions",
    "task",
    "step notes",
    "model replies",
    "tool results",
    "observation framing",
)

MARKERS = (
    ("tool list", "Tools you can call:"),
    ("worked examples", "Example:"),
    ("operator instructions", "Instructions from the operator:"),
    ("native-mode note", "Native function calling is on"),
)
_STEP_NOTE = re.compile(r"\n*Step \d+(?: of \d+)?\.[^\n]*\Z")


def system_sections(system: str) -> dict[str, int]:
    """Tokens of agentcore's system text by section, cut at the headings it writes today
    (:data:`MARKERS`; a heading not found leaves its section in the one before; the first
    section is ``contract text``)."""
    cuts = [(0, "contract text")]
    for label, marker in MARKERS:
        at = system.find(marker, cuts[-1][0] + 1)
        if at != -1:
            cuts.append((at, label))
    out: dict[str, int] = {}
    for (start, label), (end, _) in zip(cuts, [*cuts[1:], (len(system), "")], strict=True):
        out[label] = out.get(label, 0) + tokens(system[start:end])
    return out


def request_parts(
    body: Mapping[str, Any],  # Any: JSON
    instructions: str,
    results: Sequence[str] = (),
) -> dict[str, int]:
    """The request's tokens by :data:`PARTS` (the module doc); they add up to its tokens."""
    out = dict.fromkeys(PARTS, 0)
    text, _, messages = serialize(body)
    tools = _compact(body["tools"]) + "\n" if body.get("tools") else ""
    fmt = _compact(body["response_format"]) + "\n" if body.get("response_format") else ""
    out["tools"], out["response_format"] = tokens(tools), tokens(fmt)
    system_total = 0
    known = sorted({r for r in results if r}, key=len, reverse=True)
    seen_task = False
    for role, mtext in messages:
        n = tokens(mtext)
        if role in ("system", "developer"):
            system_total += n
            rest = mtext
            if instructions and instructions in mtext:
                out["operator instructions"] += tokens(instructions)
                rest = mtext.replace(instructions, "", 1)
            for label, k in system_sections(rest).items():
                key = (
                    "rules and forms"
                    if label in ("contract text", "operator instructions")
                    else label
                )
                out[key] += k
            continue
        note = _STEP_NOTE.search(mtext) if role == "user" else None
        body_text = mtext[: note.start()] if note else mtext
        if note:
            out["step notes"] += tokens(note.group())
        if role == "assistant":
            out["model replies"] += tokens(body_text)
        elif role == "user" and not seen_task:
            seen_task = True
            out["task"] += tokens(body_text)
        else:
            payload = 0
            rest = body_text
            for r in known:
                while r in rest:
                    payload += tokens(r)
                    rest = rest.replace(r, "", 1)
            out["tool results"] += payload
            out["observation framing"] += tokens(body_text) - payload
    system_parts = ("rules and forms", "tool list", "worked examples", "native-mode note")
    framework = system_total - out["operator instructions"]
    out["rules and forms"] += framework - sum(out[k] for k in system_parts)
    schemas = tokens(tools + fmt)
    out["response_format" if fmt else "tools"] += schemas - out["tools"] - out["response_format"]
    out["task"] += tokens(text) - sum(out.values())
    return out


def output_tokens(turn: Turn) -> int:
    return tokens(turn.content or "") + sum(tokens(n) + tokens(a) for n, a in turn.calls)


def records(
    bodies: Sequence[Mapping[str, Any]],  # Any: JSON
    turns: Sequence[Turn],
    instructions: str,
    results: Sequence[str] = (),
) -> list[RequestRecord]:
    """Count each logged request (and the scripted reply it got); ``results``: the task's
    scripted tool results, to tell them from their framing (:func:`request_parts`)."""
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
                parts=request_parts(body, instructions, results),
            )
        )
        previous_text, previous_total = text, total
    return out
