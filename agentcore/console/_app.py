"""The console's ASGI app: a JSON API under ``/api`` and server-rendered pages beside it."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shlex
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentcore import Agent, PendingCall, RunState, RunStatus, RunUsage, check_transcript
from agentcore.approvals import person_key
from agentcore.contracts.errors import (
    LimitExceededError,
    RunNotFoundError,
    StoreCorruptedError,
    StoreError,
)
from agentcore.events import Event, RunFinished, RunStarted, dump_event
from agentcore.stores import RunSummary, TranscriptStore, open_store

from ._approvals import (
    Answer,
    Approvals,
    ConsoleError,
    compensable,
    json_object,
    pending_of,
    undo_approved_by,
)
from ._auth import SESSION_COOKIE, Authenticate, Csrf, TokenLogin, foreign_origin, identify
from ._health import METRICS, Health, health
from ._quotas import by_tenant, limits_of, quota_usage
from ._timeline import TurnView, conversation, family, pretty, timeline

__all__ = ["create_app"]

PAGE_SIZE = 50
MAX_PAGE = 500
MAX_FORM_BYTES = 1 << 20
LIST_POLL_S = 1.0
"""The least pause between two reads of a live runs list (a listing costs more than a run)."""
Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")


class Console:
    """The app's state and handlers (one per :func:`create_app`)."""

    def __init__(
        self,
        store: TranscriptStore | str | None,
        agents: Mapping[str, Agent] | Sequence[Agent],
        authenticate: Authenticate | None,
        login: TokenLogin | None,
        poll_s: float,
    ) -> None:
        self._store_arg = store
        self._store: TranscriptStore | None = None if isinstance(store, str | None) else store
        self.approvals = Approvals(agents)
        self.authenticate = authenticate
        self.login = login if authenticate is None else None
        if self.authenticate is None and self.login is None:
            self.login = TokenLogin()
        self.csrf = Csrf()
        self.poll_s = poll_s
        self._reads: set[asyncio.Task[Any]] = set()  # Any: each read's own result
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("agentcore.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        # jinja2 types its filter table loosely (values: Callable[..., Any])
        self.templates.filters.update(pretty=pretty, when=_when, shell=shlex.quote)  # pyright: ignore[reportUnknownMemberType]

    @property
    def store(self) -> TranscriptStore:
        if self._store is None:
            self._store = open_store(self._store_arg if isinstance(self._store_arg, str) else None)
        return self._store

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            await asyncio.gather(*self._reads, return_exceptions=True)
            await self.approvals.aclose()
            if self._store is not None and isinstance(self._store_arg, str | None):
                await self._store.close()

    # -- plumbing -------------------------------------------------------------------------

    def guarded(self, handler: Handler, *, api: bool, changes: bool = False) -> Handler:
        """``handler`` for known users only; a state-changing one also needs a CSRF token."""

        async def endpoint(request: Request) -> Response:
            user = await identify(request, self.authenticate, self.login)
            if user is None:
                if api:
                    return _problem(401, "Not signed in: authenticate first.")
                if self.login is not None:
                    return self.page(
                        request, "login.html", status=401, token="", error=None, next=""
                    )
                return HTMLResponse("Not signed in.", status_code=401)
            request.state.user = user
            if changes:
                if (foreign := foreign_origin(request)) is not None:
                    return _problem(403, foreign) if api else HTMLResponse(foreign, status_code=403)
                form = await _form(request)
                token = request.headers.get("x-csrf-token") or form.get("csrf")
                if not self.csrf.check(user, token):
                    msg = "Missing or invalid CSRF token: reload the page and try again."
                    return _problem(403, msg) if api else HTMLResponse(msg, status_code=403)
            try:
                return await handler(request)
            except ConsoleError as exc:
                if api:
                    return _problem(exc.status, str(exc))
                return self.page(
                    request, "error.html", status=exc.status, message=str(exc), code=exc.status
                )
            except StoreError as exc:  # StoreCorruptedError included: say so, keep serving
                what = "corrupted" if isinstance(exc, StoreCorruptedError) else "unavailable"
                msg = f"The store is {what}: {exc}"
                return _problem(503, msg) if api else HTMLResponse(msg, status_code=503)

        return endpoint

    def page(
        self, request: Request, name: str, *, status: int = 200, **context: Any
    ) -> Response:  # Any: template values
        user: str | None = getattr(request.state, "user", None)

        def url(route: str, /, **params: Any) -> str:  # Any: path parameters
            query = params.pop("query", None)
            path = _path(request, route, **params)
            return f"{path}?{urlencode(query)}" if query else path

        html = self.templates.get_template(name).render(
            url=url,
            user=user,
            csrf=self.csrf.token(user) if user else "",
            statuses=[s.value for s in RunStatus],
            **context,
        )
        return HTMLResponse(html, status_code=status)

    async def events_of(self, run_id: str) -> list[Event]:
        try:
            return await self.store.load(run_id)
        except (RunNotFoundError, LimitExceededError) as exc:
            raise ConsoleError(404, f"No run {run_id!r} in this store.") from exc

    async def detached(self, read: Coroutine[Any, Any, T]) -> T:  # Any: coroutine send/throw
        """A live stream's store read, in a task of its own: a client that leaves cancels
        its stream, not a query half-way (on PostgreSQL that closes the connection and
        logs warnings; someone closing a tab is no problem)."""
        task = asyncio.ensure_future(read)
        self._reads.add(task)
        task.add_done_callback(self._read_done)
        return await asyncio.shield(task)

    def _read_done(self, read: asyncio.Task[Any]) -> None:  # Any: the read's result
        self._reads.discard(read)
        if not read.cancelled():
            read.exception()  # retrieved: the stream raises it, or has left and needs none

    async def listing(
        self, request: Request
    ) -> tuple[list[RunSummary], str | None, dict[str, str]]:
        q = request.query_params
        status = q.get("status") or None
        tenant = q.get("tenant") or None
        search = (q.get("q") or "").strip() or None
        if status is not None and status not in {s.value for s in RunStatus}:
            raise ConsoleError(
                422, f"Unknown status {status!r}; one of {', '.join(s.value for s in RunStatus)}."
            )
        try:
            limit = min(int(q.get("limit") or PAGE_SIZE), MAX_PAGE)
        except ValueError as exc:
            raise ConsoleError(422, "limit must be a whole number.") from exc
        after = _cursor(q.get("after"))
        try:
            rows = await self.store.list_runs(
                status=status, tenant=tenant, limit=limit + 1, search=search, after=after
            )
        except StoreError as exc:
            if "tenant" in str(exc):
                raise ConsoleError(422, str(exc)) from exc
            raise
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = f"{rows[-1].updated_at!r}:{rows[-1].run_id}" if more and rows else None
        filters = {k: v for k, v in (("status", status), ("tenant", tenant), ("q", search)) if v}
        return rows, cursor, filters

    # -- API --------------------------------------------------------------------------------

    async def api_runs(self, request: Request) -> Response:
        rows, cursor, _ = await self.listing(request)
        return JSONResponse({"runs": [_summary(r) for r in rows], "next": cursor})

    async def api_run(self, request: Request) -> Response:
        events = await self.events_of(request.path_params["run_id"])
        return JSONResponse(_run_json(events))

    async def api_confirm(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        fields = json_object(await request.body(), "The request body")
        approve, step, args_hash = (
            fields.get("approve"),
            fields.get("step"),
            fields.get("args_hash"),
        )
        args, reason = fields.get("args"), fields.get("reason")
        if not isinstance(approve, bool):
            raise ConsoleError(422, "approve must be true or false.")
        if not isinstance(step, int) or isinstance(step, bool):
            raise ConsoleError(422, "step must be the waiting call's step number.")
        if not isinstance(args_hash, str | None) or not isinstance(reason, str | None):
            raise ConsoleError(422, "args_hash and reason must be strings.")
        if args is not None and not isinstance(args, dict):
            raise ConsoleError(422, "args must be a JSON object of the tool's arguments.")
        answer = Answer(
            approve, step, args_hash, None if args is None else json.dumps(args), reason
        )
        events = await self.events_of(run_id)
        result = await self.approvals.decide(events, answer, request.state.user)
        return JSONResponse(
            {
                "run_id": result.run_id,
                "status": result.status.value,
                "answer": result.answer,
                "reason": result.reason,
                "pending": _pending(result.pending),
            }
        )

    async def api_stream(self, request: Request) -> Response:
        """Server-sent events: each transcript event after ``after`` (or ``Last-Event-ID``)
        as it is stored (``event: transcript``, ``id``: its seq), for up to ``max_seconds``
        (default 300; the browser reconnects where it left off). Once the run is
        completed or cancelled an ``end`` event closes the stream: nothing follows."""
        run_id = request.path_params["run_id"]
        q = request.query_params
        try:
            after = int(request.headers.get("last-event-id") or q.get("after") or -1)
            max_s = float(q.get("max_seconds") or 300)
        except ValueError as exc:
            raise ConsoleError(422, "after and max_seconds must be numbers.") from exc
        known = await self.events_of(run_id)  # 404 before the stream starts

        async def events() -> AsyncIterator[str]:
            last = after
            final = _final(known[-1])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + max_s
            pinged = loop.time()
            yield "retry: 1000\n\n"
            while True:
                for ev in await self.detached(self.store.load(run_id, after=last)):
                    data = json.dumps(dump_event(ev), ensure_ascii=False)
                    yield f"id: {ev.seq}\nevent: transcript\ndata: {data}\n\n"
                    last, final = ev.seq, _final(ev)
                if final and last >= known[-1].seq:
                    yield "event: end\ndata: {}\n\n"
                    return
                now = loop.time()
                if now >= deadline or await request.is_disconnected():
                    return
                if now - pinged > 15:
                    pinged = now
                    yield ": ping\n\n"
                await asyncio.sleep(self.poll_s)

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def api_runs_stream(self, request: Request) -> Response:
        """Server-sent events: the first page of the listing (the filters of ``/api/runs``)
        as ``event: runs`` each time it changes, its ``id`` a version of it; a client that
        shows a version passes it as ``version`` (or ``Last-Event-ID``) and hears only of
        the next. Lasts up to ``max_seconds`` (default 300; the browser reconnects)."""
        q = request.query_params
        try:
            max_s = float(q.get("max_seconds") or 300)
        except ValueError as exc:
            raise ConsoleError(422, "max_seconds must be a number.") from exc
        rows, _, _ = await self.listing(request)  # 422 before the stream starts
        shown = request.headers.get("last-event-id") or q.get("version")

        async def events() -> AsyncIterator[str]:
            version, found = shown, rows
            loop = asyncio.get_running_loop()
            deadline = loop.time() + max_s
            yield "retry: 1000\n\n"
            while True:
                summaries = [_summary(r) for r in found]
                if (now := _version(summaries)) != version:
                    version = now
                    data = json.dumps({"runs": summaries}, ensure_ascii=False)
                    yield f"id: {version}\nevent: runs\ndata: {data}\n\n"
                if loop.time() >= deadline or await request.is_disconnected():
                    return
                await asyncio.sleep(max(self.poll_s, LIST_POLL_S))
                found, _, _ = await self.detached(self.listing(request))

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def api_health(self, request: Request) -> Response:
        found = await self._health(request)
        return JSONResponse(
            {
                "runs": found.runs,
                "bucket_seconds": found.bucket_s,
                "contracts": found.contract_dates,
                "series": [
                    {
                        "contract": s.contract,
                        "model": s.model,
                        "points": [
                            {"at": at, "runs": st.runs}
                            | {key: value(st) for key, _, value, _ in METRICS}
                            for at, st in s.points
                        ],
                    }
                    for s in found.series
                ],
            }
        )

    async def api_quotas(self, request: Request) -> Response:
        rows, _ = await self._quotas(request)
        return JSONResponse({"counters": rows})

    async def _quotas(
        self, request: Request
    ) -> tuple[list[dict[str, Any]], dict[str, str]]:  # Any: JSON values
        q = request.query_params
        filters = {k: v for k in ("tenant", "quota") if (v := (q.get(k) or "").strip())}
        rows = await quota_usage(
            self.store,
            limits_of(self.approvals.agents.values()),
            tenant=filters.get("tenant"),
            quota=filters.get("quota"),
        )
        return rows, filters

    async def api_csrf(self, request: Request) -> Response:
        return JSONResponse(
            {"user": request.state.user, "csrf": self.csrf.token(request.state.user)}
        )

    async def _health(self, request: Request) -> Health:
        q = request.query_params
        tenant = q.get("tenant") or None
        try:
            limit = min(int(q.get("runs") or 1000), 20_000)
            days = float(q.get("days") or 30)
        except ValueError as exc:
            raise ConsoleError(422, "runs and days must be numbers.") from exc
        since = time.time() - days * 86400
        transcripts: list[list[Event]] = []
        for summary in await self.store.list_runs(tenant=tenant, limit=limit):
            if summary.updated_at < since:
                break  # newest first: the rest are older
            with contextlib.suppress(RunNotFoundError):  # pruned meanwhile
                transcripts.append(await self.store.load(summary.run_id))
        return health(transcripts)

    # -- pages ------------------------------------------------------------------------------

    async def runs_page(self, request: Request) -> Response:
        return await self._runs(request, "runs.html")

    async def runs_body(self, request: Request) -> Response:
        return await self._runs(request, "_runs_body.html")

    async def _runs(self, request: Request, template: str) -> Response:
        rows, cursor, filters = await self.listing(request)
        waiting = filters.get("status") == RunStatus.AWAITING_CONFIRMATION.value
        user: str | None = getattr(request.state, "user", None)
        waits: dict[str, dict[str, Any]] = {}  # Any: template values
        for row in rows if waiting else ():
            with contextlib.suppress(RunNotFoundError):  # pruned meanwhile
                pending = pending_of(await self.store.load(row.run_id))
                if pending is not None:
                    waits[row.run_id] = _waiting_on(pending, user)
        return self.page(
            request,
            template,
            runs=rows,
            next=cursor,
            filters=filters,
            paged=bool(request.query_params.get("after")),
            version=_version([_summary(r) for r in rows]),
            waiting=waiting,
            waits=waits,
        )

    async def run_page(self, request: Request) -> Response:
        return self._run(request, await self.events_of(request.path_params["run_id"]))

    async def run_body(self, request: Request) -> Response:
        events = await self.events_of(request.path_params["run_id"])
        return self._run(request, events, template="_run_body.html")

    def _run(
        self,
        request: Request,
        events: list[Event],
        *,
        template: str = "run.html",
        status: int = 200,
        error: str | None = None,
    ) -> Response:
        view = _run_json(events)
        pending = pending_of(events)
        undo = compensable(events)
        kept = undo and view["status"] == RunStatus.COMPLETED.value and not self._may_undo(events)
        user: str | None = getattr(request.state, "user", None)
        return self.page(
            request,
            template,
            status=status,
            run=view,
            first=events[0],
            pending=pending,
            you_approved=pending is not None and user is not None and approved_by(pending, user),
            compensable=undo and not kept,
            undo_approved=undo and user is not None and undo_approved_by(events, user),
            completed_kept=kept,
            blocks=timeline(events),
            family=family(events),
            last_seq=events[-1].seq,
            error=error,
        )

    def _may_undo(self, events: Sequence[Event]) -> bool:
        """Whether the agent that owns a completed run may undo it
        (``Policy.compensate_completed``)."""
        first = events[0]
        assert isinstance(first, RunStarted)
        try:
            _, agent = self.approvals.agent_for(first)
        except ConsoleError:
            return False
        return agent.policy.compensate_completed

    async def confirm_form(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        form = await _form(request)
        events = await self.events_of(run_id)
        try:
            step = int(form.get("step", ""))
        except ValueError:
            step = None
        answer = Answer(
            approve=form.get("decision") == "approve",
            step=step,
            args_hash=form.get("args_hash") or None,
            args=form.get("args"),
            reason=form.get("reason"),
        )
        decided = self.approvals.decide(events, answer, request.state.user)
        return await self._decided(request, events, decided)

    async def compensate_form(self, request: Request) -> Response:
        events = await self.events_of(request.path_params["run_id"])
        decided = self.approvals.compensate(events, request.state.user)
        return await self._decided(request, events, decided)

    async def _decided(
        self, request: Request, events: list[Event], decided: Awaitable[object]
    ) -> Response:
        """The run page after a person's decision on ``events``: at the first event the
        decision recorded (the browser scrolls there, CSS marks it), or with why it was
        refused."""
        run_id = events[0].run_id
        try:
            await decided
        except ConsoleError as exc:
            return self._run(
                request, await self.events_of(run_id), status=exc.status, error=str(exc)
            )
        at = f"{_path(request, 'run', run_id=run_id)}#seq-{events[-1].seq + 1}"
        return RedirectResponse(at, status_code=303)

    async def health_page(self, request: Request) -> Response:
        found = await self._health(request)
        return self.page(
            request, "health.html", health=found, tenant=request.query_params.get("tenant", "")
        )

    async def quotas_page(self, request: Request) -> Response:
        rows, filters = await self._quotas(request)
        return self.page(
            request, "quotas.html", groups=by_tenant(rows), filters=filters, now=time.time()
        )

    async def login_page(self, request: Request) -> Response:
        if self.login is None:
            return HTMLResponse("This console signs people in through its application.", 404)
        if request.method == "GET":
            token = request.query_params.get("token", "")
            return self.page(request, "login.html", token=token, error=None, next="")
        form = await _form(request)
        name = " ".join(form.get("name", "").split())
        session = self.login.login(form.get("token", ""), name) if name else None
        if session is None:
            error = "Give your name." if not name else "This login link was used or is wrong."
            return self.page(
                request, "login.html", status=403, token=form.get("token", ""), error=error, next=""
            )
        response = RedirectResponse(_path(request, "runs"), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            session,
            httponly=True,
            samesite="strict",
            path=request.scope.get("root_path") or "/",
        )
        return response


def create_app(
    store: TranscriptStore | str | None = None,
    *,
    agents: Mapping[str, Agent] | Sequence[Agent] = (),
    authenticate: Authenticate | None = None,
    login: TokenLogin | None = None,
    poll_s: float = 0.25,
) -> Starlette:
    """The console as an ASGI app, to serve (``agentcore serve``) or mount in a service.

    Args:
        store: the store object or URL (default: ``$AGENTCORE_STORE``, else
            ``sqlite:///agentcore.db``). A URL is opened on first use and closed on shutdown.
        agents: the agents whose runs can be approved or denied here (they own the tools),
            by name or as a list; without one the console is read-only for confirmations.
            An agent with a queue gets approved runs enqueued; otherwise this process
            advances them in background tasks.
        authenticate: ``request -> user name or None`` (sync or async); the name is recorded
            as the approver. Without it the console signs people in with ``login``.
        login: the one-time login token used without ``authenticate`` (default: a new
            random one; its ``token`` goes in ``/login?token=...``).
        poll_s: how often a live page's stream looks for new events.

    Example:
        >>> app = create_app("sqlite:///runs.db", agents=[agent], authenticate=current_user)
        >>> service.mount("/agents", app)
    """
    console = Console(store, agents, authenticate, login, poll_s)
    g = console.guarded

    def post(path: str, handler: Handler, name: str, *, api: bool) -> Route:
        """A state-changing route: POST only, for known users with a CSRF token."""
        return Route(path, g(handler, api=api, changes=True), methods=["POST"], name=name)

    routes = [
        Route("/", g(_to_runs, api=False), name="home"),
        Route("/runs", g(console.runs_page, api=False), name="runs"),
        Route("/fragments/runs", g(console.runs_body, api=False), name="runs_body"),
        Route("/runs/{run_id:path}/body", g(console.run_body, api=False), name="run_body"),
        post("/runs/{run_id:path}/confirm", console.confirm_form, "run_confirm", api=False),
        post(
            "/runs/{run_id:path}/compensate", console.compensate_form, "run_compensate", api=False
        ),
        Route("/runs/{run_id:path}", g(console.run_page, api=False), name="run"),
        Route("/health", g(console.health_page, api=False), name="health"),
        Route("/quotas", g(console.quotas_page, api=False), name="quotas"),
        Route("/login", console.login_page, methods=["GET", "POST"], name="login"),
        Route("/api/runs", g(console.api_runs, api=True), name="api_runs"),
        Route("/api/csrf", g(console.api_csrf, api=True), name="api_csrf"),
        Route("/api/health", g(console.api_health, api=True), name="api_health"),
        Route("/api/quotas", g(console.api_quotas, api=True), name="api_quotas"),
        Route("/api/stream/runs", g(console.api_runs_stream, api=True), name="api_runs_stream"),
        Route("/api/runs/{run_id:path}/stream", g(console.api_stream, api=True), name="api_stream"),
        post("/api/runs/{run_id:path}/confirm", console.api_confirm, "api_confirm", api=True),
        Route("/api/runs/{run_id:path}", g(console.api_run, api=True), name="api_run"),
        # follow_symlink: an editable install links the package's files (strict mode), and
        # Starlette refuses a link that resolves outside the directory it serves.
        Mount(
            "/static",
            StaticFiles(packages=[("agentcore.console", "static")], follow_symlink=True),
            name="static",
        ),
    ]
    app = Starlette(routes=routes, lifespan=console.lifespan)
    app.state.console = console
    return app


async def _to_runs(request: Request) -> Response:
    return RedirectResponse(_path(request, "runs"), status_code=303)


def _path(request: Request, route: str, **params: str) -> str:
    """The path of a route of this app (under its mount point), each parameter percent-
    encoded: a run id may hold ``/``, ``?``, ``#``, spaces or ``%``."""
    quoted = {k: quote(v, safe="") for k, v in params.items()}
    return request.url_for(route, **quoted).path


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form body (first value of each field); read once per request."""
    cached: dict[str, str] | None = getattr(request.state, "form", None)
    if cached is not None:
        return cached
    form: dict[str, str] = {}
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise ConsoleError(413, "The form is too large.")
        parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        form = {k: v[0] for k, v in parsed.items()}
    request.state.form = form
    return form


def _cursor(text: str | None) -> tuple[float, str] | None:
    if not text:
        return None
    at, _, run_id = text.partition(":")
    try:
        when = float(at)
    except ValueError:
        when = None
    if when is None or not run_id:
        raise ConsoleError(422, f"Bad page cursor {text!r}: follow the listing's next link.")
    return when, run_id


FINAL = frozenset({RunStatus.COMPLETED.value, RunStatus.CANCELLED.value})


def _final(event: Event) -> bool:
    """Whether ``event`` ends its run for good (completed or cancelled)."""
    return isinstance(event, RunFinished) and event.status in FINAL


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def _summary(r: RunSummary) -> dict[str, Any]:  # Any: JSON values
    return {
        "run_id": r.run_id,
        "status": r.status,
        "task": r.task,
        "tenant": r.tenant,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "events": r.events,
    }


def _version(summaries: list[dict[str, Any]]) -> str:  # Any: JSON values
    """A short digest of a listing: two listings that show the same have the same one."""
    text = json.dumps(summaries, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def approved_by(p: PendingCall, user: str) -> bool:
    """Whether ``user`` is among the people who approved ``p`` so far (names compared as
    ``confirm`` compares them)."""
    me = person_key(user)
    return any(person_key(name) == me for name in p.approvals)


def _waiting_on(p: PendingCall, user: str | None) -> dict[str, Any]:  # Any: template values
    """What the "Waiting for you" list shows of a waiting call: the tool (or plan) and its
    step, the approvals so far of those needed, and whether ``user`` gave one of them."""
    what = f"{p.tool or 'plan'} (step {p.step})" if p.kind == "tool" else f"plan (step {p.step})"
    if p.run_id is not None:
        what += f" in sub-agent run {p.run_id}"
    return {
        "what": what,
        "approvals": len(p.approvals),
        "needed": p.approvals_needed,
        "who": list(p.approvals),
        "you": user is not None and approved_by(p, user),
    }


def _pending(p: PendingCall | None) -> dict[str, Any] | None:  # Any: JSON values
    if p is None:
        return None
    return {
        "step": p.step,
        "call_id": p.call_id,
        "kind": p.kind,
        "thought": p.thought,
        "tool": p.tool,
        "args": p.args,
        "effect": p.effect,
        "args_hash": p.args_hash,
        "plan_steps": list(p.plan_steps),
        "approvals": list(p.approvals),
        "approvals_needed": p.approvals_needed,
        "expires_at": p.expires_at,
        "reason": p.reason,
        "provenance": dict(p.provenance),
    }


def _usage(u: RunUsage) -> dict[str, Any]:  # Any: JSON values
    return {
        "steps": u.steps,
        "tool_calls": u.tool_calls,
        "model_calls": u.model_calls,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cost": u.cost,
    }


def _turn(t: TurnView) -> dict[str, Any]:  # Any: JSON values
    return {
        "turn": t.number,
        "status": t.status,
        "message": t.message,
        "answer": t.answer,
        "question": t.question,
        "reason": t.reason,
        "seq": t.seq,
        "decisions": [{"seq": seq, "text": text} for seq, text in t.people],
    }


def _run_json(events: list[Event]) -> dict[str, Any]:  # Any: JSON values
    state = RunState.of(events)
    result = state.result()
    first = events[0]
    problems = check_transcript(events)
    return {
        "run_id": state.run_id,
        "status": state.status.value,
        "task": state.task,
        "tenant": first.tenant if isinstance(first, RunStarted) else None,
        "metadata": first.metadata if isinstance(first, RunStarted) else {},
        "contract": state.contract,
        "route": list(state.route),
        "answer": state.answer,
        "reason": state.reason,
        "question": result.question,
        "turns": [_turn(t) for t in conversation(events)],
        "created_at": state.started_at,
        "updated_at": state.updated_at,
        "usage": _usage(state.run_usage()),
        "pending": _pending(state.pending()),
        "verification": {"verified": not problems, "problems": problems},
        "events": [dump_event(ev) for ev in events],
    }
