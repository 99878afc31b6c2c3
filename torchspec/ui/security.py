"""Who may use the dashboard: a secret token, a cookie, and checks that a POST came from the dashboard itself.

The server binds 127.0.0.1, but every local user and every web page the
browser opens can reach 127.0.0.1 too.  So, as Jupyter does, each start makes
a random token (:func:`new_token`), printed in the URL: the first request
carries it as ``?token=``, is answered with an HttpOnly, SameSite=Strict
cookie and redirected to the same URL without it (the token leaves the
address bar and the history); every later request carries the cookie.  A
request with neither gets 403 and a page saying where the URL is printed.

Actions (cancel, rerun) are POSTs, which a hostile page could also send with
the browser's cookie were it not SameSite=Strict; on top of that each form
holds a CSRF token tied to the session (an HMAC of the session id, set with
the cookie), and the request's Origin (or Referer) must be the dashboard's
own address on a loopback or bound host name (a DNS-rebinding page has
another Host).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any, Awaitable, Callable, Mapping, MutableMapping, Optional
from urllib.parse import parse_qsl, urlencode, urlsplit

COOKIE = "torchspec_ui_token"
SESSION_COOKIE = "torchspec_ui_session"
#: Host names a browser on this machine uses for the dashboard (plus the host it was bound to).
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REFUSED_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>torchspec ui: token needed</title></head>
<body style="font-family:sans-serif;max-width:40em;margin:3em auto"><h1>403: this dashboard needs its token</h1>
<p>Open the URL that <code>torchspec ui</code> printed when it started, the one ending in
<code>?token=...</code>. The token is new at every start: if the server was restarted, use the new URL.</p>
</body></html>"""


def new_token() -> str:
    """A token nobody can guess (256 bits), new at every start of the server."""
    return secrets.token_urlsafe(32)


def csrf_token(token: str, session: str) -> str:
    """The CSRF token for a session's forms: an HMAC, so the server keeps no table of sessions."""
    return hmac.new(token.encode(), b"csrf:" + session.encode(), hashlib.sha256).hexdigest()


def cookies(scope: Scope) -> dict[str, str]:
    """The request's cookies by name (the last one of a name wins)."""
    found: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name, _, text = part.strip().partition("=")
                if name:
                    found[name] = text
    return found


def header(scope: Scope, name: bytes) -> Optional[str]:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def same_origin(scope: Scope, bound_host: str) -> bool:
    """Whether a POST comes from a page of this dashboard: its Origin (else Referer) is ``http://HOST`` of the
    request, and HOST is a loopback name or the bound host (a rebinding attacker's name is neither)."""
    host = header(scope, b"host") or ""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name not in LOOPBACK_NAMES and name != bound_host:
        return False
    origin = header(scope, b"origin")
    if origin is None or origin == "null":
        referer = header(scope, b"referer")
        if not referer:
            return False
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    return hmac.compare_digest(origin, f"http://{host}")


class TokenGate:
    """ASGI middleware: the token (query once, then the cookie) on every request, before any route runs."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        given = query.get("token")
        jar = cookies(scope)
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            await self._login(scope, send, query, jar.get(SESSION_COOKIE))
            return
        if hmac.compare_digest(jar.get(COOKIE, "").encode(), self.token.encode()):
            scope.setdefault("state", {})["session"] = jar.get(SESSION_COOKIE, "")
            await self.app(scope, receive, send)
            return
        await refuse(scope, send)

    async def _login(self, scope: Scope, send: Send, query: Mapping[str, str], session: Optional[str]) -> None:
        """303 to the same URL without the token, setting the cookies."""
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
        session = session or secrets.token_urlsafe(16)
        attrs = "; Path=/; HttpOnly; SameSite=Strict"
        headers = [(b"location", location.encode("latin-1", "replace")),
                   (b"set-cookie", f"{COOKIE}={self.token}{attrs}".encode()),
                   (b"set-cookie", f"{SESSION_COOKIE}={session}{attrs}".encode()),
                   (b"cache-control", b"no-store"), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


async def refuse(scope: Scope, send: Send) -> None:
    """403: JSON for ``/api/*`` (scripts), a page saying where the URL is for people."""
    if scope["path"].startswith("/api/"):
        body = json.dumps({"error": "this dashboard needs its token: open the URL `torchspec ui` printed "
                                    "(it ends in ?token=...)"}).encode()
        kind = b"application/json"
    else:
        body, kind = REFUSED_PAGE.encode(), b"text/html; charset=utf-8"
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
