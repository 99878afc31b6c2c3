"""The dashboard's Starlette application: routes, pages, the JSON API, and errors as pages, never tracebacks.

Every handler runs the library's blocking calls in a worker thread
(``asyncio.to_thread``), so one slow backend holds one thread, not the
server.  Two runners: one that only reads (its ``describe`` always comes
from what the scheduler kept, made safe at submit), and one that acts
(cancel, rerun), built only when actions are allowed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from torchspec.ui import detail, logs, security
from torchspec.ui.listing import Listing, error_text, sweeps

if TYPE_CHECKING:
    from torchspec.runner import Runner

Handler = Callable[[Request], Awaitable[Response]]

#: No inline script or style, nothing from elsewhere, no framing.
HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "same-origin",  # no-referrer would make a POST's Origin "null"
    "cache-control": "no-store",
}


def q(text: Any) -> str:
    """``text`` quoted for one path segment: a handle's ``://`` and ``/`` included."""
    return quote(str(text), safe="")


class Dashboard:
    """What the handlers share: the runners, the listing, the templates, the settings."""

    def __init__(self, runner_factory: Callable[[], "Runner"], schedulers: List[str], token: str,
                 allow_actions: bool, host: str) -> None:
        import jinja2

        self.runner_factory = runner_factory
        self.reader = runner_factory()
        self._actor: Optional["Runner"] = None
        self.schedulers = schedulers
        self.token, self.allow_actions, self.host = token, allow_actions, host
        self.listing = Listing(self.reader, schedulers)
        # the trackers' reads have threads of their own: a tracking server that hangs holds these, never the
        # threads status, logs and actions run in
        self.tracker_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2,
                                                                  thread_name_prefix="torchspec-ui-trackers")
        self.templates = jinja2.Environment(loader=jinja2.PackageLoader("torchspec.ui", "templates"),
                                            autoescape=True, undefined=jinja2.StrictUndefined)
        self.templates.filters["q"] = q

    @property
    def actor(self) -> "Runner":
        """The runner that cancels and reruns (its own: what it submits stays out of the reader's memory)."""
        if self._actor is None:
            self._actor = self.runner_factory()
        return self._actor

    def page(self, name: str, request: Request, status_code: int = 200, **context: Any) -> HTMLResponse:
        session = request.scope.get("state", {}).get("session", "")
        html = self.templates.get_template(name).render(
            allow_actions=self.allow_actions, csrf=security.csrf_token(self.token, session), **context)
        return HTMLResponse(html, status_code, headers=HEADERS)

    def close(self) -> None:
        self.listing.close()
        self.tracker_pool.shutdown(wait=False, cancel_futures=True)
        for runner in (self.reader, self._actor):
            if runner is not None:
                runner.close()


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")


def error_response(board: Dashboard, request: Request, e: BaseException) -> Response:
    """The page (or JSON) for a failure: 404 unknown app/role/replica, 400 a request that cannot be
    honoured, 502 a backend that failed, 500 anything else; the message, never a traceback."""
    from torchspec.errors import BackendError, UsageError
    from torchspec.specs import UnknownAppException

    if isinstance(e, (logs.NotFound, UnknownAppException)):
        code = 404
    elif isinstance(e, UsageError):
        code = 400
    elif isinstance(e, BackendError):
        code = 502
    else:
        code = 500
    message = error_text(e) if code != 500 else f"internal error ({type(e).__name__}); the server goes on"
    if wants_json(request):
        return JSONResponse({"error": message}, code, headers=HEADERS)
    return board.page("error.html", request, code, code=code, message=message)


def guarded(board: Dashboard, handler: Callable[[Dashboard, Request], Awaitable[Response]]) -> Handler:
    """``handler`` with every exception turned into :func:`error_response`."""
    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(board, request)
        except Exception as e:  # noqa: BLE001 - the server keeps serving whatever a request did
            from torchspec.errors import TorchSpecError

            if not isinstance(e, TorchSpecError):
                import logging

                logging.getLogger(__name__).exception("torchspec ui: %s failed", request.url.path)
            return error_response(board, request, e)
    return run


def _handle(request: Request) -> str:
    """The app handle of the path, checked for shape (MalformedAppHandleException: 400)."""
    from torchspec.specs import parse_app_handle

    handle = str(request.path_params["handle"])
    parse_app_handle(handle)
    return handle


# --------------------------------------------------------------------------- pages and API


async def apps_page(board: Dashboard, request: Request) -> Response:
    found = await board.listing.all()
    states = sorted({row["state"] for entry in found for row in entry.apps})
    return board.page("apps.html", request, schedulers=found, states=states,
                      all_states=[s for s in _STATE_ORDER], sweeps=sweeps([r for entry in found for r in entry.apps]),
                      initial_filter=request.query_params.get("sweep", ""))


async def apps_api(board: Dashboard, request: Request) -> Response:
    found = await board.listing.all()
    return JSONResponse({"schedulers": [{"name": s.name, "error": s.error, "apps": s.apps} for s in found]},
                        headers=HEADERS)


async def app_api(board: Dashboard, request: Request) -> Response:
    handle = _handle(request)
    status = await asyncio.to_thread(board.reader.require_status, handle)
    return JSONResponse(detail.status_data(handle, status), headers=HEADERS)


async def app_page(board: Dashboard, request: Request) -> Response:
    handle = _handle(request)
    status = await asyncio.to_thread(board.reader.require_status, handle)
    spec, record = await asyncio.to_thread(detail.spec_and_provenance, board.reader, handle)
    changes = await asyncio.to_thread(detail.changes_since, record)
    from torchspec.runner.provenance import summary

    return board.page("app.html", request, handle=handle, status=detail.status_data(handle, status),
                      spec_yaml=detail.spec_yaml(spec), links=detail.links(spec), changes=changes,
                      provenance=summary(record) if record else "", tracked=await tracked(board, handle))


#: How long the app page waits for the trackers (a tracking server that does not answer must not hold it).
TRACKERS_WAIT_S = 15.0


async def tracked(board: Dashboard, handle: str) -> List[Dict[str, Any]]:
    try:
        read = asyncio.get_running_loop().run_in_executor(board.tracker_pool, detail.tracked, board.reader, handle)
        return await asyncio.wait_for(read, TRACKERS_WAIT_S)
    except asyncio.TimeoutError:
        return [{"tracker": "trackers", "metadata": {}, "artifacts": [], "sources": [],
                 "error": f"no answer within {TRACKERS_WAIT_S:.0f} s"}]


async def log_stream(board: Dashboard, request: Request) -> Response:
    handle = _handle(request)
    req = await asyncio.to_thread(logs.parse_request, board.reader, handle, str(request.path_params["role"]),
                                  int(request.path_params["k"]), dict(request.query_params))
    return StreamingResponse(logs.stream(board.reader, req), media_type="text/event-stream",
                             headers={**HEADERS, "x-accel-buffering": "no"})


async def log_older(board: Dashboard, request: Request) -> Response:
    from torchspec.errors import UsageError

    handle = _handle(request)
    query = dict(request.query_params)
    query["follow"] = "0"
    req = await asyncio.to_thread(logs.parse_request, board.reader, handle, str(request.path_params["role"]),
                                  int(request.path_params["k"]), query)
    try:
        before = int(query.get("before", ""))
    except ValueError:
        raise UsageError("before: give the number of a line (an integer)") from None
    start, lines = await asyncio.to_thread(logs.older, board.reader, req, max(0, before))
    return JSONResponse({"start": start, "lines": lines}, headers=HEADERS)


async def states_css(board: Dashboard, request: Request) -> Response:
    """The state colours the terminal uses (``terminal.STATE_STYLES``), as CSS: one source for both."""
    from torchspec.terminal import STATE_STYLES

    rules = []
    for state, style in STATE_STYLES.items():
        words = style.split()
        css = ["font-weight:bold" if w == "bold" else "opacity:.6" if w == "dim" else f"color:var(--{w})"
               for w in words]
        rules.append(f".state-{state}{{{';'.join(css)}}}")
    return Response("\n".join(rules) + "\n", media_type="text/css", headers=HEADERS)


_STATE_ORDER = ("UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN")


# --------------------------------------------------------------------------- actions


async def _check_action(board: Dashboard, request: Request) -> Optional[Response]:
    """A refusal, or None: actions allowed, the POST from this dashboard, the session's CSRF token."""
    import hmac

    if not board.allow_actions:
        return error_page(board, request, 403, "actions are off: start the dashboard with "
                                               "`torchspec ui --allow-actions` to cancel and rerun from it")
    if not security.same_origin(request.scope, board.host):
        return error_page(board, request, 403, "refused: this request did not come from a page of this dashboard "
                                               "(its Origin or Host is another site's)")
    from urllib.parse import parse_qs

    # the forms are urlencoded and hold one field: parsed here, so python-multipart is not needed
    body = (await request.body())[:4096].decode("latin-1")
    given = (parse_qs(body).get("csrf") or [""])[0]
    session = request.scope.get("state", {}).get("session", "")
    if not session or not hmac.compare_digest(given, security.csrf_token(board.token, session)):
        return error_page(board, request, 403, "refused: the form's CSRF token is missing or wrong; reload the "
                                               "app's page and try again")
    return None


def error_page(board: Dashboard, request: Request, code: int, message: str) -> Response:
    if wants_json(request):
        return JSONResponse({"error": message}, code, headers=HEADERS)
    return board.page("error.html", request, code, code=code, message=message)


async def cancel_action(board: Dashboard, request: Request) -> Response:
    refused = await _check_action(board, request)
    if refused is not None:
        return refused
    handle = _handle(request)
    await asyncio.to_thread(board.actor.require_status, handle)
    await asyncio.to_thread(board.actor.cancel, handle)
    return RedirectResponse(f"/app/{q(handle)}", 303)


async def rerun_action(board: Dashboard, request: Request) -> Response:
    refused = await _check_action(board, request)
    if refused is not None:
        return refused
    handle = _handle(request)
    new = await asyncio.to_thread(_rerun, board.actor, handle)
    return RedirectResponse(f"/app/{q(new)}", 303)


def _rerun(runner: "Runner", handle: str) -> str:
    """``torchspec rerun HANDLE``; the variables the recorded spec read with ``env()`` are marked as read here
    too, so the new app's record and kept spec hide their values as the first's did."""
    from torchspec.redaction import ENV_READ
    from torchspec.runner import provenance
    from torchspec.runner.rerun import rerun

    ENV_READ.update((provenance.load(handle) or {}).get("env_read") or [])
    return rerun(runner, handle).handle


# --------------------------------------------------------------------------- the application


def create_app(runner_factory: Callable[[], "Runner"], schedulers: List[str], token: str,
               allow_actions: bool = False, host: str = "127.0.0.1") -> Starlette:
    """The dashboard as an ASGI app; ``runner_factory()`` makes each runner it needs (it closes them)."""
    import os

    board = Dashboard(runner_factory, list(schedulers), token, allow_actions, host)

    def route(path: str, handler: Callable[[Dashboard, Request], Awaitable[Response]],
              methods: Optional[List[str]] = None) -> Route:
        return Route(path, guarded(board, handler), methods=methods or ["GET"])

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Dict[str, Any]]:
        try:
            yield {}
        finally:
            board.close()

    routes = [
        route("/", apps_page), route("/api/apps", apps_api), route("/states.css", states_css),
        route("/app/{handle:path}/logs/{role}/{k:int}", log_stream),
        route("/api/app/{handle:path}/logs/{role}/{k:int}", log_older),
        route("/app/{handle:path}/cancel", cancel_action, ["POST"]),
        route("/app/{handle:path}/rerun", rerun_action, ["POST"]),
        route("/api/app/{handle:path}", app_api), route("/app/{handle:path}", app_page),
        Mount("/static", StaticFiles(directory=os.path.join(os.path.dirname(__file__), "static")), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.board = board
    app.add_middleware(security.TokenGate, token=token)
    return app
