"""``Console``: the web console as an ASGI application, with its token, CSRF and headers."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from runtime.console.actions import Action, parse_action
from runtime.console.chart import ages
from runtime.console.forms import confirm_page
from runtime.console.html import Html, run_href
from runtime.console.pages import (
    error_page,
    run_page,
    runs_page,
    session_page,
    sessions_page,
)
from runtime.console.schedules import schedules_page
from runtime.console.status import STATUSES
from runtime.console.stream import events_response
from runtime.errors import ConfigError, ConflictError, RunBusy
from runtime.journal import Journal
from runtime.logs import get_logger
from runtime.ownership import is_alive
from runtime.runs import Row, list_page, list_sessions, session_runs
from runtime.sessions import journal_id
from runtime.store.checks import check_run_id
from runtime.timeline import timeline
from runtime.tree import family

__all__ = ["CONTENT_SECURITY_POLICY", "Console"]

log = get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script or style, nothing from another origin, no framing."""

_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
_COOKIE = "bide_console"
_STATIC = {
    "console.js": "text/javascript",
    "console.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
_MIN_TOKEN = 16


class Console:
    """The web console, an ASGI app: ``uvicorn`` serves it, or a service mounts it.

    ``journal`` is a journal URL or path (opened on the first request, closed by ``aclose`` or
    the server's shutdown), or an open ``Journal`` the service owns. Every request must carry
    ``token`` (``?token=`` once, which sets a cookie; or ``Authorization: Bearer``); every
    change is a POST carrying the page's CSRF token. Who acted is ``operator``, or, behind a
    trusted proxy, the request header ``operator_header``; that name is journaled as ``by``.
    """

    def __init__(
        self,
        journal: str | os.PathLike[str] | Journal,
        *,
        token: str,
        operator: str | None = None,
        operator_header: str | None = None,
        page_size: int = 25,
    ):
        if not isinstance(token, str) or len(token) < _MIN_TOKEN:
            raise ConfigError(f"the console's token must be at least {_MIN_TOKEN} characters")
        if page_size < 1:
            raise ConfigError("page_size must be at least 1")
        self._owned = not isinstance(journal, Journal)
        self._journal: Journal | None = journal if isinstance(journal, Journal) else None
        self._url = None if isinstance(journal, Journal) else journal
        self._open_lock = asyncio.Lock()
        self._token = token.encode()
        self._csrf = hmac.new(self._token, b"bide-console-csrf", hashlib.sha256).hexdigest()
        self._operator = operator
        self._operator_header = operator_header.lower() if operator_header else None
        self._page_size = page_size
        self._app = Starlette(
            routes=[
                Route("/", self._runs, methods=["GET"]),
                Route("/run", self._run, methods=["GET"]),
                Route("/sessions", self._sessions, methods=["GET"]),
                Route("/schedules", self._schedules, methods=["GET"]),
                Route("/events", self._events, methods=["GET"]),
                Route("/confirm", self._confirm, methods=["POST"]),
                Route("/act", self._act, methods=["POST"]),
                Route("/static/{name}", self._static, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and request.method == "GET" and self._valid(given):
            # Trade the token in the address for a cookie, and drop it from the address bar.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            where = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response: Response = RedirectResponse(where, status_code=303)
            response.set_cookie(
                _COOKIE,
                given,
                httponly=True,
                samesite="strict",
                path=scope.get("root_path") or "/",
            )
            await response(scope, receive, with_headers)
            return
        if not self._authorized(request):
            await PlainTextResponse(
                "401: this console needs its token (open the address it printed at start, "
                "or send Authorization: Bearer TOKEN)",
                status_code=401,
            )(scope, receive, with_headers)
            return
        await self._app(scope, receive, with_headers)

    async def aclose(self) -> None:
        """Close the journal if the console opened it."""
        if self._owned and self._journal is not None:
            journal, self._journal = self._journal, None
            await journal.close()

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.aclose()

    # --- who may do what -------------------------------------------------------------------

    def _valid(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token)

    def _authorized(self, request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer ") and self._valid(auth[7:]):
            return True
        cookie = request.cookies.get(_COOKIE)
        return cookie is not None and self._valid(cookie)

    def _who(self, request: Request) -> str | None:
        if self._operator_header is not None:
            name = request.headers.get(self._operator_header, "").strip()
            return name or None
        return self._operator

    async def _form(self, request: Request) -> dict[str, str] | Response:
        """The POSTed form as text fields, or the response refusing it (no CSRF, cross-site)."""
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return PlainTextResponse("403: a change must come from this console", 403)
        async with request.form(max_files=1, max_fields=40, max_part_size=256 * 1024) as form:
            fields: dict[str, str] = {}
            for name, value in form.multi_items():
                if isinstance(value, UploadFile):
                    if name == "decision_file" and value.filename:
                        data = await value.read(256 * 1024)
                        fields["decision"] = data.decode("utf-8", errors="replace")
                elif not (name == "decision" and fields.get("decision")):
                    fields[name] = value
        if not hmac.compare_digest(fields.get("csrf", "").encode(), self._csrf.encode()):
            return PlainTextResponse("403: the form's CSRF token is missing or wrong", 403)
        if self._operator_header is not None and self._who(request) is None:
            return PlainTextResponse(
                f"403: the trusted proxy sent no {self._operator_header} header naming you", 403
            )
        return fields

    async def journal(self) -> Journal:
        """The journal the console reads and writes (opened on first use)."""
        async with self._open_lock:
            if self._journal is None:
                assert self._url is not None
                self._journal = await Journal(self._url, migrate=False).open()
            return self._journal

    # --- pages -----------------------------------------------------------------------------

    async def _runs(self, request: Request) -> Response:
        q = request.query_params
        status = q.get("status") or None
        if status is not None and status not in STATUSES:
            return _html(error_page("unknown status", f"no status {status!r}"), 400)
        prefix = q.get("prefix") or None
        before = q.get("before") or None
        journal = await self.journal()
        try:
            listing = await list_page(
                journal, status=status, prefix=prefix, limit=self._page_size, before=before
            )
        except ConfigError as exc:
            return _html(error_page("bad request", str(exc), links=[("./", "runs")]), 400)
        now = int(time.time() * 1000)
        counts = ages(await _stopped(journal), now)
        return _html(
            runs_page(
                listing, status=status, prefix=prefix, before=before, counts=counts, now_ms=now
            )
        )

    async def _sessions(self, request: Request) -> Response:
        """The sessions, or with ``?name=`` one session's runs in order."""
        name = request.query_params.get("name")
        journal = await self.journal()
        if name is None:
            return _html(sessions_page(await list_sessions(journal, limit=self._page_size)))
        try:
            journal_id(name)
        except ConfigError as exc:
            return _html(error_page("bad request", str(exc), links=[("./", "runs")]), 400)
        runs = await session_runs(journal, name)
        if not runs:
            return _html(
                error_page("no such session", f"no session {name!r}", links=[("./", "runs")]),
                404,
            )
        return _html(session_page(name, runs))

    async def _schedules(self, request: Request) -> Response:
        """The schedules with their last and next runs, and the queues with their limits."""
        journal = await self.journal()
        try:
            listed = await journal.schedules.list()
            queues = await journal.queues.list()
        except ConfigError as exc:  # a store that keeps none
            return _html(error_page("no schedules", str(exc), links=[("./", "runs")]), 400)
        statuses = {
            i.last_run: await journal.status(i.last_run) for i in listed if i.last_run is not None
        }
        return _html(schedules_page(listed, statuses, queues))

    async def _run(self, request: Request) -> Response:
        run_id = request.query_params.get("id", "")
        if (refused := _refused(run_id)) is not None:
            return refused
        said = request.query_params.get("said") or None
        return await self._run_response(request, run_id, message=said)

    async def _events(self, request: Request) -> Response:
        run_id = request.query_params.get("id", "")
        if (refused := _refused(run_id)) is not None:
            return refused
        return await events_response(request, await self.journal())

    async def _run_response(
        self,
        request: Request,
        run_id: str,
        *,
        message: str | None = None,
        error: str | None = None,
        code: int = 200,
    ) -> Response:
        journal = await self.journal()
        state = await journal.state(run_id)
        if state is None:
            return _html(
                error_page("no such run", f"no run {run_id!r}", links=[("./", "runs")]), 404
            )
        row = await journal.run_row(run_id)
        lease = row.lease if row is not None else None
        told = timeline(
            state,
            lease,
            driven=is_alive(lease),
            submitted=row is not None and row.status == "submitted",
        )
        body = run_page(
            told,
            csrf=self._csrf,
            operator=self._who(request),
            message=message,
            error=error,
            family=await family(journal, run_id),
        )
        return _html(body, code)

    async def _confirm(self, request: Request) -> Response:
        run_id = request.query_params.get("id", "")
        if (refused := _refused(run_id)) is not None:
            return refused
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        journal = await self.journal()
        state = await journal.state(run_id)
        if state is None:
            return _html(error_page("no such run", f"no run {run_id!r}"), 404)
        try:
            action = parse_action(run_id, form, by=self._who(request))
            preview = action.preview(state)
        except ConfigError as exc:
            return await self._run_response(request, run_id, error=str(exc), code=400)
        return _html(confirm_page(run_id, preview, form, csrf=self._csrf))

    async def _act(self, request: Request) -> Response:
        run_id = request.query_params.get("id", "")
        if (refused := _refused(run_id)) is not None:
            return refused
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        journal = await self.journal()
        try:
            action: Action = parse_action(run_id, form, by=self._who(request))
            said = await action.apply(journal)
        except (ConfigError, ConflictError, RunBusy) as exc:
            return await self._run_response(request, run_id, error=str(exc), code=409)
        log.info("console_action", run_id=run_id, action=form.get("action"), by=self._who(request))
        where = run_href(run_id) + "&" + urlencode({"said": said})
        return RedirectResponse(where, status_code=303)

    async def _static(self, request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC.get(name)
        if kind is None:
            return PlainTextResponse("404", 404)
        data = resources.files("runtime.console").joinpath("static", name).read_bytes()
        return Response(data, media_type=kind)


def _html(body: Html, code: int = 200) -> HTMLResponse:
    return HTMLResponse(str(body), status_code=code)


def _refused(run_id: str) -> Response | None:
    """A bad request for a run id that no run can have (empty, too long, a NUL), before any
    query: a database may refuse to even look it up."""
    try:
        check_run_id(run_id)
    except ConfigError as exc:
        return _html(error_page("bad request", str(exc), links=[("./", "runs")]), 400)
    return None


async def _stopped(journal: Journal, *, limit: int = 500) -> list[Row]:
    """The halted and waiting runs (at most ``limit`` of each), for the chart of ages."""
    out: list[Row] = []
    for status in ("halted", "waiting"):
        out.extend((await list_page(journal, status=status, limit=limit)).rows)
    return out
