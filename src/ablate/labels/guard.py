"""What keeps other web pages away from the labelling page (:mod:`ablate.labels.page`), served at
``http://127.0.0.1:PORT/``.

Listening on the loopback interface keeps other machines out, not other web pages: any page the user's browser opens
can send a form to ``http://127.0.0.1:PORT/judge`` (cross-site request forgery), and a page on a name the attacker
points at 127.0.0.1 after loading it (DNS rebinding) can even read the answers. So every request is checked before
its view runs (:func:`protect`):

* **Host**: the ``Host`` header must name this server, ``127.0.0.1:PORT`` or ``localhost:PORT`` (PORT is the port the
  request came in on, from the socket, not from the request) -- for every request, reads too: a rebound name
  arrives with its own ``Host``;
* for a request that changes something (any method but GET and HEAD):

  * **Origin** (when the browser sends one, else **Referer**) must be this server's own ``http://HOST:PORT``; a
    client that sends neither (a script, curl) is not a browser page another site could drive;
  * **the token**: a random value made when the server starts (:func:`secrets.token_urlsafe`), written into the
    page (each form's hidden field ``token``, and ``<meta name="ablate-token">`` for scripts), must come back in the
    form field ``token`` or the header ``X-Ablate-Token`` (compared with :func:`hmac.compare_digest`). Another
    origin cannot read the page, so it cannot know the token.

A request that fails is answered ``403`` with a one-line reason, before anything is read or written. Every answer
also says it may not be shown inside another site's frame (``X-Frame-Options: DENY``), so no page can lure clicks
or key presses onto it. The checks are :func:`refusal`, a plain function of the request's parts.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from flask import Flask, request
from werkzeug.wrappers import Response

#: The request header a script sends the token in (the page's forms send the field :data:`FIELD`).
HEADER = "X-Ablate-Token"
FIELD = "token"
#: The names this server answers to: the loopback address it listens on, and the name every system maps to it.
NAMES = ("127.0.0.1", "localhost")
SAFE_METHODS = frozenset({"GET", "HEAD"})
EXTENSION = "ablate.guard"


def new_token() -> str:
    """A fresh token: 256 random bits, URL-safe text."""
    return secrets.token_urlsafe(32)


def own_hosts(port: str) -> frozenset[str]:
    """The ``Host`` values that name this server on ``port``: ``127.0.0.1:PORT`` and ``localhost:PORT`` (and the
    bare names on port 80, where a browser leaves the port out)."""
    hosts = {f"{name}:{port}" for name in NAMES}
    if port == "80":
        hosts |= set(NAMES)
    return frozenset(hosts)


def _origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url`` (lower case), or None when it has none."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def refusal(
    method: str,
    port: str,
    headers: Mapping[str, str],
    sent_token: str | None,
    token: str,
) -> str | None:
    """Why a request must be refused, or None to let it through. ``port`` is the port the request came in on (the
    server's, from its socket); ``headers`` the request's (``Host``, ``Origin``, ``Referer``); ``sent_token`` the
    token the request carries (form field or header), ``token`` this server's."""
    hosts = own_hosts(port)
    host = (headers.get("Host") or "").strip().lower()
    if host not in hosts:
        return f"Host {host or '(none)'!r} is not this server; open the page at http://127.0.0.1:{port}/"
    if method.upper() in SAFE_METHODS:
        return None
    own = {f"http://{h}" for h in hosts}
    origin = headers.get("Origin")
    if origin is not None:
        if _origin_of(origin) not in own:
            return f"Origin {origin.strip()[:100]!r} is not this page's; judge on the page itself"
    else:
        referer = headers.get("Referer")
        if referer is not None and _origin_of(referer) not in own:
            return f"Referer {referer.strip()[:100]!r} is not this page's; judge on the page itself"
    if not sent_token:
        return "the request carries no token of this page; reload the page and judge there"
    if not hmac.compare_digest(sent_token.encode("utf-8"), token.encode("utf-8")):
        return "the request's token is not this page's (a server started since?); reload the page"
    return None


def protect(app: Flask, token: str | None = None) -> str:
    """Check every request of ``app`` as the module says; its templates get ``token`` (:func:`new_token` when not
    given). Returns the token."""
    value = token if token is not None else new_token()
    app.extensions[EXTENSION] = value

    @app.before_request
    def _check() -> Response | None:
        sent = request.headers.get(HEADER)
        if sent is None and request.method not in SAFE_METHODS:
            sent = request.form.get(FIELD)
        port = str(request.environ.get("SERVER_PORT", ""))
        headers = {k: v for k in ("Host", "Origin", "Referer") if (v := request.headers.get(k)) is not None}
        reason = refusal(request.method, port, headers, sent, value)
        if reason is None:
            return None
        return Response(f"refused: {reason}\n", status=403, mimetype="text/plain")

    @app.context_processor
    def _token() -> dict[str, str]:
        return {"token": value}

    @app.after_request
    def _no_frames(response: Response) -> Response:
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        return response

    return value


def token_of(app: Flask) -> str:
    """The token ``app``'s pages carry (:func:`protect`)."""
    return str(app.extensions[EXTENSION])
