"""Hand-written code replaced by the library that does its job: each test holds the new
code to the library's own answer (or to the property the hand-written code was meant to
have) over generated inputs."""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import hmac
import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from test_retention import listed, make_runs  # runs at chosen times, in a SQLite file
from test_telemetry import Otel, otel  # the SDK's in-memory exporters, configured
from typer.testing import CliRunner

from agentcore import Agent, PendingCall, RunStatus, configure_telemetry
from agentcore.adapters import (
    Completion,
    CompletionRequest,
    RetryPolicy,
    ScriptedModel,
    parse_retry_after,
)
from agentcore.adapters._errors import (  # the mapper itself, as tests/adapters do
    ErrorContext,
    json_object_in_text,
    translate_exception,
)
from agentcore.approvals import ApprovalRequest, new_secret, webhook
from agentcore.cli import app
from agentcore.errors import BadRequestError
from agentcore.secrets import MIN_SECRET_CHARS, Redactor
from agentcore.stores._chain import ChainKey  # the key itself: not exported
from agentcore.stores.postgres import redact_dsn
from agentcore.testing import finish

__all__ = ["otel"]  # a fixture, imported to be found here

# --- the chain key's HMAC -------------------------------------------------------------


@given(
    key=st.binary(min_size=1, max_size=200),  # shorter than, equal to and over a block (64)
    messages=st.lists(st.binary(max_size=600), min_size=1, max_size=5),
)
def test_chain_key_mac_is_hmac_sha256(key: bytes, messages: list[bytes]) -> None:
    """Every MAC from one key object equals a fresh ``hmac.new(key, msg, sha256)``: the
    pre-keyed state is copied per message, never updated in place."""
    chain_key = ChainKey(key)
    for message in messages:
        assert chain_key.mac(message) == hmac.new(key, message, hashlib.sha256).digest()


@given(secret=st.text(min_size=1, max_size=80))
def test_chain_key_text_secret_is_its_utf8(secret: str) -> None:
    expected = hmac.new(secret.encode("utf-8", "surrogatepass"), b"m", hashlib.sha256).digest()
    assert ChainKey(secret).mac(b"m") == expected


def test_chain_key_head_signature_is_hmac_over_the_documented_message() -> None:
    key = b"k" * 32
    digest = bytes(range(32))
    message = (
        b"agentcore.head.v1\x00"
        + len(b"run-1").to_bytes(8, "big")
        + b"run-1"
        + (0).to_bytes(8, "big", signed=True)
        + (2).to_bytes(8, "big", signed=True)
        + (7).to_bytes(8, "big", signed=True)
        + digest
    )
    expected = hmac.new(key, message, hashlib.sha256).digest()
    assert ChainKey(key).sign("run-1", 0, 2, 7, digest) == expected


# --- DSN redaction ------------------------------------------------------------------------

# (dsn, the secret, what must still show)
DSNS = [
    ("postgresql://ann:s3cr%40t@db.example:5433/app?sslmode=require", "s3cr", "db.example:5433"),
    ("postgresql://ann:s3cr@t@db.example/app", "s3cr", "db.example/app"),  # "@" not encoded
    ("postgresql://ann:s3/cr@db.example/app", "s3/cr", "db.example/app"),  # libpq: no password
    ("postgresql://ann:s3?c#r@db.example/app", "s3?c#r", "db.example/app"),
    ("postgres://ann:s3cret@h1:1,h2:2/app", "s3cret", "h1:1,h2:2/app"),
    ("postgresql://ann:pw-1@[::1]:5432/app", "pw-1", "[::1]:5432"),
    ("postgresql://db.example/app?sslmode=require&password=s3cret", "s3cret", "sslmode=require"),
    ("postgresql:///app?host=/run/pg&sslpassword=k3y", "k3y", "host=/run/pg"),
    ("postgresql://db.example/app?%70assword=s3cret", "s3cret", "postgresql://"),
    ("postgresql://postgres:postgres@localhost/app", "postgres:postgres", "postgres:***@localhost"),
    ("host=db.example password='s3 cr\\'et' dbname=app", "cr", "host=db.example"),
    ("host=db.example password=s3\\ cret dbname=app", "cret", "dbname=app"),
    ("host=db.example sslpassword=k3y dbname=app", "k3y", "dbname=app"),
    # psycopg cannot parse these: the shape hides them
    ("host=db.example password=s3\\ cret bogus_option=1", "cret", "bogus_option=1"),
    ("host=db.example password='s3 cret", "cret", "host=db.example"),
]


@pytest.mark.parametrize(("dsn", "secret", "kept"), DSNS)
def test_redact_dsn_hides_the_password(dsn: str, secret: str, kept: str) -> None:
    shown = redact_dsn(dsn)
    assert secret not in shown and "***" in shown
    assert kept in shown


@pytest.mark.parametrize(("dsn", "secret", "kept"), DSNS)
def test_redact_dsn_without_psycopg_still_hides_it(
    dsn: str, secret: str, kept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg: ImportError
    monkeypatch.setitem(sys.modules, "psycopg.conninfo", None)
    shown = redact_dsn(dsn)
    assert secret not in shown and "***" in shown
    assert kept in shown


def test_redact_dsn_leaves_a_dsn_without_password_alone() -> None:
    for dsn in ("postgresql://ann@db.example/app", "host=db.example dbname=app"):
        assert redact_dsn(dsn) == dsn


_PASSWORDS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=24
).filter(lambda pw: pw != "***")


@given(password=_PASSWORDS)
def test_redact_dsn_url_hides_any_password_libpq_reads(password: str) -> None:
    """Whatever the password, libpq reads ``***`` (or nothing) from the shown URL, and the
    rest of the DSN is what it was."""
    dsn = f"postgresql://ann:{quote(password, safe='')}@db.example:5433/app?sslmode=require"
    shown = conninfo_to_dict(redact_dsn(dsn))
    assert shown.pop("password") == "***"
    assert shown == {"user": "ann", "host": "db.example", "port": "5433", "dbname": "app",
                     "sslmode": "require"}  # fmt: skip


@given(password=_PASSWORDS)
def test_redact_dsn_key_value_hides_any_password_libpq_reads(password: str) -> None:
    dsn = make_conninfo("", host="db.example", password=password, dbname="app", user="ann")
    shown = conninfo_to_dict(redact_dsn(dsn))
    assert shown == {"host": "db.example", "password": "***", "dbname": "app", "user": "ann"}


_URL_PIECES = st.sampled_from(
    ["ann", "s3cret", ":", "@", "/", "?", "&", "=", "#", "%40", "%3A", "%70", "assword",
     "password", "sslpassword", "h", "5432", ",", "[::1]", "app", "sslmode=require"]
)  # fmt: skip


@given(rest=st.lists(_URL_PIECES, max_size=14).map("".join))
def test_redact_dsn_url_shows_no_secret_libpq_would_read(rest: str) -> None:
    """Any URL libpq parses: what is shown holds no password libpq reads but ``***``."""
    dsn = "postgresql://" + rest
    try:
        conninfo_to_dict(dsn)
    except ProgrammingError:
        return
    shown = redact_dsn(dsn)
    for key in ("password", "sslpassword"):
        assert conninfo_to_dict(shown).get(key, "***") in ("", "***")


# --- one Retry-After reader, one JSON-in-error-text reader ------------------------------


class _LiteLLMError(Exception):
    """Shaped like a litellm exception: a status, and the body only in its message."""

    __module__ = "litellm.exceptions"

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


def test_json_in_error_text_skips_a_brace_in_the_prose() -> None:
    body = {"error": {"code": "model_not_found", "message": "The model does not exist"}}
    text = "BadRequestError: route {openai/x} failed - " + json.dumps(body)
    assert json_object_in_text(text) == body
    assert json_object_in_text("no body {here} at all") is None
    assert json_object_in_text("{" * 100_000) is None  # nested past the recursion limit


def test_provider_error_reads_the_code_after_a_brace_in_the_prose() -> None:
    body = {"error": {"code": "model_not_found", "message": "The model does not exist"}}
    exc = _LiteLLMError(f"OpenAIException - route {{openai/x}}: {json.dumps(body)}", 404)
    mapped = translate_exception(exc, ErrorContext(model="openai/x", provider="openai"))
    assert isinstance(mapped, BadRequestError)
    assert "(HTTP 404, model_not_found): The model does not exist" in str(mapped)


@dataclass
class _Receiver:
    url: str
    answers: list[tuple[int, dict[str, str]]]
    posts: int = 0


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    """A loopback HTTP server answering POSTs from ``answers`` in turn (the last repeats)."""
    state = _Receiver(url="", answers=[(200, {})])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.posts += 1
            status, headers = state.answers.pop(0) if len(state.answers) > 1 else state.answers[0]
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # quiet
            del format, args

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield state
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("retry_after", "least"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "2.5"}, 2.5),  # seconds with a fraction: once read as 0
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "HTTP-DATE+20"}, 20.0),  # an HTTP-date: once ignored
        ({"Retry-After": "soon"}, 0.0),
        ({"Retry-After": "-5"}, 0.0),
    ],
)
async def test_webhook_reads_retry_after_as_the_adapters_do(
    receiver: _Receiver, retry_after: dict[str, str], least: float
) -> None:
    if retry_after.get("Retry-After") == "HTTP-DATE+20":
        retry_after = {"Retry-After": email.utils.formatdate(time.time() + 20, usegmt=True)}
    receiver.answers = [(429, retry_after), (200, {})]
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(max_attempts=2, base_delay=0.0, max_retry_after=30.0, sleep=record)
    outcome = webhook(receiver.url, new_secret(), retry=policy)(_approval_request())
    assert outcome is not None
    await outcome
    assert receiver.posts == 2
    assert waits == [pytest.approx(least, abs=1.5)]  # an HTTP-date is whole seconds


def test_parse_retry_after_is_public_and_reads_any_mapping() -> None:
    assert parse_retry_after({"RETRY-AFTER": "3"}, now=0.0) == 3.0
    assert parse_retry_after({}, now=0.0) is None


def _approval_request() -> ApprovalRequest:
    pending = PendingCall(
        step=2,
        call_id="c2",
        kind="tool",
        thought="pay the invoice",
        tool="pay",
        args={"to": "acme", "amount": 120},
        effect="destructive",
        args_hash="h",
    )
    return ApprovalRequest("r1", "waiting", pending)


# --- one reader of --since and --older-than ----------------------------------------------

_COMMANDS = [("prune", "--older-than", "--dry-run"), ("stats", "--since", "--by=contract")]
_BAD_TIMES = ["soon", "5x", "30", "d", "", "\uff15d", "9" * 5000 + "d", "1.5h"]  # \uff15: a "5"


@pytest.mark.parametrize(("command", "option", "extra"), _COMMANDS)
@pytest.mark.parametrize("value", _BAD_TIMES)
def test_time_options_refuse_the_same_values(
    tmp_path: Path, command: str, option: str, extra: str, value: str
) -> None:
    db = tmp_path / "runs.db"
    make_runs(db, {"done": ("completed", 1_000_000_000.0, None)})
    result = CliRunner().invoke(app, [command, option, value, extra, "--store", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert f"{option} {value!r}: use 30d, 12h, 90m or an ISO date" in result.output
    assert listed(db) == {"done"}


@pytest.mark.parametrize(("command", "option", "extra"), _COMMANDS)
@pytest.mark.parametrize("value", ["30d", "12h", "90m", "2020-01-01", "2020-01-01T10:00+02:00"])
def test_time_options_accept_the_same_values(
    tmp_path: Path, command: str, option: str, extra: str, value: str
) -> None:
    db = tmp_path / "runs.db"
    make_runs(db, {"done": ("completed", 1_000_000_000.0, None)})
    result = CliRunner().invoke(app, [command, option, value, extra, "--store", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("value", "pruned"),
    [
        ("90m", {"two-hours-ago"}),
        ("3h", set()),
        ("1d", set()),
        ("60m", {"two-hours-ago", "eighty-minutes-ago"}),
    ],
)
def test_older_than_counts_back_from_now(tmp_path: Path, value: str, pruned: set[str]) -> None:
    db = tmp_path / "runs.db"
    now = time.time()
    make_runs(
        db,
        {
            "two-hours-ago": ("completed", now - 2 * 3600, None),
            "eighty-minutes-ago": ("completed", now - 80 * 60, None),
            "a-minute-ago": ("completed", now - 60, None),
        },
    )
    result = CliRunner().invoke(app, ["prune", "--older-than", value, "--store", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    assert listed(db) == {"two-hours-ago", "eighty-minutes-ago", "a-minute-ago"} - pruned


# --- Redactor.text: overlapping secrets in one pass ---------------------------------------

_AB = st.text(alphabet="ab", min_size=MIN_SECRET_CHARS, max_size=10)


@st.composite
def _overlapping(draw: st.DrawFn) -> tuple[list[tuple[str, str]], str]:
    """Secrets over "ab" (some nested in others) in a random order, and a text made of them
    only, joined where one's end is the next one's start: every character is a secret's."""
    base = draw(st.lists(_AB, min_size=1, max_size=4))
    nested = [
        draw(st.text("ab", max_size=3)) + inner + draw(st.text("ab", max_size=3))
        for inner in draw(st.lists(st.sampled_from(base), max_size=2))
    ]
    secrets = base + nested
    pieces = draw(st.lists(st.sampled_from(secrets), min_size=1, max_size=6))
    text = pieces[0]
    for piece in pieces[1:]:
        shared = [k for k in range(min(len(text), len(piece))) if text.endswith(piece[:k])]
        text += piece[draw(st.sampled_from(shared)) :]
    named = [(f"K{i}", value) for i, value in enumerate(secrets)]  # no "a" or "b" in a label
    return draw(st.permutations(named)), text


@given(case=_overlapping())
def test_redactor_leaves_no_part_of_overlapping_secrets(
    case: tuple[list[tuple[str, str]], str],
) -> None:
    listed, text = case
    shown = Redactor(dict(listed)).text(f"<{text}>")
    assert "a" not in shown and "b" not in shown, shown  # every character was a secret's
    assert shown.startswith("<[secret:K") and shown.endswith("]>")
    assert shown == Redactor(dict(sorted(listed))).text(f"<{text}>")  # whatever the order


def test_redactor_labels_a_stretch_by_its_longest_secret() -> None:
    redactor = Redactor(
        {"INNER": "s3cret-core", "OUTER": "xx-s3cret-core-yy", "TAIL": "core-yy-zz"}
    )
    assert redactor.text("a xx-s3cret-core-yy-zz b") == "a [secret:OUTER] b"
    assert redactor.text("s3cret-core then core-yy-zz") == "[secret:INNER] then [secret:TAIL]"
    assert redactor.text("s3cret-cores3cret-core") == "[secret:INNER][secret:INNER]"  # adjacent
    itself = Redactor.listed(["abcdefabc"])  # "abcdefabcdefabc" holds it twice, overlapping
    assert itself.text("abcdefabcdefabc") == "[secret:redacted]"


# --- the GenAI metrics' bucket boundaries ----------------------------------------------

# As the GenAI semantic conventions give them (docs/gen-ai/gen-ai-metrics.md: "This metric
# SHOULD be specified with ExplicitBucketBoundaries of [...]"), written out here.
SEMCONV_TOKEN_BOUNDS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
                        4194304, 16777216, 67108864]  # fmt: skip
SEMCONV_DURATION_BOUNDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                           10.24, 20.48, 40.96, 81.92]  # fmt: skip


class _Large:
    """A scripted model whose calls report 20,000 input tokens, 300 output and 12 s."""

    name = "acme/large"

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner

    async def complete_structured(self, request: CompletionRequest) -> Completion:
        done = await self.inner.complete_structured(request)
        usage = dataclasses.replace(done.usage, input_tokens=20_000, output_tokens=300)
        return dataclasses.replace(done, usage=usage, latency_ms=12_000.0, model=self.name)


async def test_genai_histograms_use_the_semantic_conventions_buckets(otel: Otel) -> None:
    agent = Agent(tools=[], model=_Large(ScriptedModel([finish()])), store="memory://")
    assert (await agent.run("Say done.")).status is RunStatus.COMPLETED

    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert list(duration.explicit_bounds) == SEMCONV_DURATION_BOUNDS
    assert duration.bucket_counts[SEMCONV_DURATION_BOUNDS.index(20.48)] == 1  # 12 s
    tokens = {
        p.attributes["gen_ai.token.type"]: p for p in otel.points("gen_ai.client.token.usage")
    }
    for point in tokens.values():
        assert list(point.explicit_bounds) == SEMCONV_TOKEN_BOUNDS
    assert tokens["input"].bucket_counts[SEMCONV_TOKEN_BOUNDS.index(65536)] == 1  # 20,000
    assert tokens["output"].bucket_counts[SEMCONV_TOKEN_BOUNDS.index(1024)] == 1  # 300


async def test_an_applications_view_still_decides_the_buckets() -> None:
    reader = InMemoryMetricReader()
    view = View(
        instrument_name="gen_ai.client.operation.duration",
        aggregation=ExplicitBucketHistogramAggregation([1.0, 60.0]),
    )
    provider = MeterProvider(metric_readers=[reader], views=[view])
    configure_telemetry(meter_provider=provider)
    try:
        agent = Agent(tools=[], model=_Large(ScriptedModel([finish()])), store="memory://")
        await agent.run("Say done.")
    finally:
        configure_telemetry()
        provider.shutdown()
    data = reader.get_metrics_data()
    assert data is not None
    bounds = [
        list(point.explicit_bounds)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "gen_ai.client.operation.duration"
        for point in m.data.data_points
        if isinstance(point, HistogramDataPoint)
    ]
    assert bounds == [[1.0, 60.0]]


# --- agentcore.stores where fcntl is missing --------------------------------------------

_NO_FCNTL = """
import asyncio, importlib.abc, sys

class NoFcntl(importlib.abc.MetaPathFinder):  # what a platform without fcntl (Windows) has
    def find_spec(self, name, path, target=None):
        if name == "fcntl":
            raise ModuleNotFoundError("No module named 'fcntl'", name="fcntl")
        return None

sys.modules.pop("fcntl", None)
sys.meta_path.insert(0, NoFcntl())

import agentcore.stores
from agentcore import Agent
from agentcore.adapters import ScriptedModel
from agentcore.errors import ConfigurationError
from agentcore.stores import SQLiteStore, open_store
from agentcore.testing import finish

async def main():
    done = await Agent([], ScriptedModel([finish("ok")]), store="memory://").run("Say ok.")
    print("memory run:", done.status.value)
    path = sys.argv[1]
    for open_it in (lambda: SQLiteStore(path), lambda: open_store("sqlite:///" + path)):
        try:
            open_it()
        except ConfigurationError as exc:
            print("sqlite refused:", exc)
    store = SQLiteStore(sys.argv[2], read_only=True)
    print("read-only runs:", [s.run_id for s in await store.list_runs()])
    await store.close()
    print("fcntl imported:", "fcntl" in sys.modules)

asyncio.run(main())
"""


def test_stores_import_and_refuse_sqlite_clearly_without_fcntl(tmp_path: Path) -> None:
    existing = tmp_path / "written.db"
    make_runs(existing, {"done": ("completed", 1_000_000_000.0, None)})
    new = tmp_path / "new.db"
    result = subprocess.run(
        [sys.executable, "-c", _NO_FCNTL, str(new), str(existing)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "memory run: completed"
    for refused in lines[1:3]:
        assert refused.startswith(f"sqlite refused: SQLite store {new}: this platform has no flock")
        assert "use PostgresStore, or MemoryStore" in refused
    assert lines[3:] == ["read-only runs: ['done']", "fcntl imported: False"]
    assert not new.exists()  # refused before anything was created
