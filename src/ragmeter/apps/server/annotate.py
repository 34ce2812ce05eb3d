"""The annotation page of the dashboard: a rater opens their personal link
``/annotate#TOKEN`` and labels the task's items, blind (no metric values, no other rater's labels),
in their own shuffled order, with progress, keyboard entry and autosave (so they can stop and come
back).

The token sits in the URL fragment, which browsers never send to the server, so it never appears
in an access log; the page's script sends it in the ``X-Annotate-Token`` header. Writes are
accepted only from a loopback client, from a page of this same server (``Origin``, else
``Referer``, must name the request's own host, and that host must be allowed), and as JSON (a
cross-site form cannot send that without a preflight, which this server does not grant).
"""

# no ``from __future__ import annotations``: FastAPI reads the route signatures at run time
import ipaddress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from ragmeter.apps.server.validate import (
    Rejected,
    expect_object,
    in_thread,
    json_body,
    require_json_content,
    text_field,
)
from ragmeter.store import Store

HERE = Path(__file__).parent
TOKEN_HEADER = "X-Annotate-Token"
#: a label is a few short fields; sample ids are at most this long
MAX_LABEL_BYTES = 64 * 1024
MAX_ID_CHARS = 1000
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
_HEADERS = {"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _allowed_hosts(request: Request) -> set[str]:
    extra = getattr(request.app.state, "allowed_hosts", None) or ()
    return LOCAL_HOSTS | {h.lower() for h in extra}


def _netloc(url: str) -> str | None:
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return None


def same_origin(request: Request) -> str | None:
    """None when the request comes from a page of this server, else why not."""
    host = (request.headers.get("host") or "").lower()
    if not host:
        return "no Host header"
    try:
        hostname = urlsplit(f"//{host}").hostname or ""
    except ValueError:
        return "malformed Host header"
    if hostname not in _allowed_hosts(request) and f"[{hostname}]" not in _allowed_hosts(request):
        return f"host {hostname!r} is not allowed"
    site = request.headers.get("sec-fetch-site")
    if site and site not in ("same-origin", "none"):
        return f"cross-site request ({site})"
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return "no Origin or Referer header"
    if _netloc(source) != host:
        return "request from another origin"
    return None


def _deny(message: str, status: int = 403) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status, headers={"Cache-Control": "no-store"})


def annotate_router(store: Store) -> APIRouter:
    """Routes of the annotation page, over ``store``."""
    from ragmeter.human import tasks as T

    router = APIRouter(tags=["annotate"])

    def session_of(request: Request) -> Any:
        token = request.headers.get(TOKEN_HEADER, "")
        return T.rater_by_token(store, token)

    @router.get("/annotate", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse((HERE / "templates" / "annotate.html").read_text(encoding="utf-8"),
                            headers=_HEADERS)

    @router.get("/annotate/static/annotate.js", include_in_schema=False)
    def script() -> Response:
        return Response((HERE / "templates" / "annotate.js").read_text(encoding="utf-8"),
                        media_type="text/javascript; charset=utf-8",
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})

    # the page's own endpoints: kept out of the public OpenAPI schema (they need a rater's token)
    @router.get("/annotate/api/session", include_in_schema=False, summary="The rater's task: rubric, scales, items in the "
                "rater's order with the rater's own labels (token in the X-Annotate-Token header)")
    def api_session(request: Request) -> Any:
        found = session_of(request)
        if found is None:
            return _deny("unknown or expired link: ask for a new one (`ragmeter annotate links`)", 401)
        task, rater = found
        samples = {s.id: s for s in store.run_samples(task.run_id)}
        mine: dict[str, dict[str, str]] = {}
        for lab in T.labels(store, task.id, rater.name):
            mine.setdefault(lab.sample_id, {})[lab.scale] = lab.value
        show = set((task.config or {}).get("show") or ("question", "contexts", "answer", "reference"))
        items = []
        for sid in T.rater_order(store, task.id, rater):
            s = samples.get(sid)
            if s is None:
                continue
            items.append({
                "sample_id": sid,
                "question": s.question if "question" in show else None,
                "contexts": [c.text for c in (s.contexts or []) if c.text] if "contexts" in show else [],
                "answer": s.answer if "answer" in show else None,
                "reference": s.reference if "reference" in show else None,
                "labels": mine.get(sid, {}),
            })
        return JSONResponse({"task": task.id, "name": task.name, "version": task.version,
                             "rater": rater.name, "rubric": task.rubric, "scales": task.scales,
                             "items": items}, headers={"Cache-Control": "no-store"})

    @router.post("/annotate/api/labels", include_in_schema=False, summary="Store one label of the rater (JSON body: "
                 "sample_id, scale, value); loopback clients and same-origin pages only")
    async def api_label(request: Request) -> Any:
        if not _is_loopback(request.client.host if request.client else None):
            return _deny("labels are accepted from this machine only")
        why = same_origin(request)
        if why:
            return _deny(f"refused: {why}")
        try:
            require_json_content(request)
            found = await in_thread(session_of, request)
            if found is None:
                raise Rejected(401, "unknown or expired link")
            task, rater = found
            body = expect_object(await json_body(request, MAX_LABEL_BYTES),
                                 '{"sample_id": ..., "scale": ..., "value": ...}')
            sid = text_field(body, "sample_id", max_chars=MAX_ID_CHARS, numbers=True)
            scale = text_field(body, "scale", max_chars=200)
            value = text_field(body, "value", max_chars=200, numbers=True)
        except Rejected as exc:
            return exc.response()
        try:
            await in_thread(T.save_label, store, task, rater.name, sid, scale, value, "web", write=True)
        except ValueError as exc:
            return _deny(str(exc), 400)
        return JSONResponse({"ok": True}, headers={"Cache-Control": "no-store"})

    return router
