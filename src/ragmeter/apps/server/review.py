"""Human review of a golden dataset in the dashboard: accept, edit or reject each sample, and edit
its spans by selecting text in the document view.

Writes go to the dataset's draft version (see :mod:`ragmeter.golden.datasets`). They are
accepted only from the loopback interface, only as JSON with the page's anti-forgery token in
the ``X-Ragmeter-Token`` header, and only when the ``Origin`` (if any) is this server: a page on
another site can neither read the token nor send such a request without a CORS preflight, which
this server never grants.
"""

# no ``from __future__ import annotations``: FastAPI reads the route signatures at run time
import hmac
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from ragmeter.apps.server.validate import Rejected, expect_object, in_thread, json_body, text_field
from ragmeter.core.errors import ConfigError, DatasetError

ASSETS = Path(__file__).parent / "assets"
LOOPBACK = {"127.0.0.1", "::1", "localhost", "testclient"}
ACTIONS = ("accept", "edit", "reject", "reset")
#: a review edit carries one sample's fields
MAX_REVIEW_BYTES = 4 * 1024 * 1024


def add_review_routes(app: FastAPI, store: Any, page: Callable[..., HTMLResponse]) -> None:
    """Add the review pages and their write endpoint to the dashboard ``app``."""
    token = secrets.token_urlsafe(24)

    def refuse(status: int, detail: str) -> JSONResponse:
        return JSONResponse({"detail": detail}, status_code=status)

    def write_allowed(request: Request) -> JSONResponse | None:
        client = request.client.host if request.client else ""
        if client not in LOOPBACK:
            return refuse(403, "review writes are accepted from this machine only")
        given = request.headers.get("x-ragmeter-token", "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return refuse(403, "missing or wrong anti-forgery token: reload the review page")
        origin = request.headers.get("origin")
        if origin and _netloc(origin) != request.headers.get("host", ""):
            return refuse(403, "cross-site request refused")
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return refuse(415, "send JSON")
        return None

    @app.get("/datasets", response_class=HTMLResponse, include_in_schema=False)
    def datasets_page() -> HTMLResponse:
        from ragmeter.io.stored import list_datasets

        return page("datasets.html.j2", title="ragmeter — datasets", datasets=list_datasets(store))

    @app.get("/datasets/{name}/review", response_class=HTMLResponse, include_in_schema=False)
    def review_page(name: str) -> HTMLResponse:
        from ragmeter.apps.report.render import json_for_script
        from ragmeter.io.stored import resolve, samples_of

        try:
            v = resolve(store, name)
        except ConfigError as exc:
            return page("error.html.j2", status_code=404, title="ragmeter — review", message=str(exc))
        samples = samples_of(store, v.ref, include_rejected=True)
        data = {"dataset": v.name, "version": v.ref, "status": v.status, "corpus": v.info.get("corpus"),
                "samples": samples}
        return page("review.html.j2", title=f"ragmeter — review {v.ref}", version=v, n=len(samples),
                    token=token, review_json=json_for_script(data))

    @app.get("/assets/review.js", include_in_schema=False)
    def review_js() -> Response:
        return Response((ASSETS / "review.js").read_text(encoding="utf-8"),
                        media_type="text/javascript; charset=utf-8",
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

    @app.get("/api/corpora/{corpus}/documents/{source:path}", tags=["datasets"],
             summary="The text of a corpus document (offsets of spans refer to it)")
    def document(corpus: str, source: str) -> Any:
        from ragmeter.golden.datasets import document_text

        try:
            return {"corpus": corpus, "source": source, "text": document_text(store, corpus, source)}
        except (ConfigError, DatasetError) as exc:
            return refuse(404, str(exc))

    @app.post("/api/datasets/{name}/samples/{sample_id:path}/review", tags=["datasets"],
              summary="Accept, edit or reject a sample (loopback, anti-forgery token)",
              responses={400: {"description": "The body is not JSON."},
                         413: {"description": "The body is too large."},
                         422: {"description": "A field of the body is wrong (the detail names it)."}})
    async def review_sample(name: str, sample_id: str, request: Request) -> Any:
        """Body: ``{"action": "accept" | "edit" | "reject" | "reset", "changes": {...}}``; ``changes``
        (with ``edit``) holds new values of question, references, negative_references, relevant
        or metadata. A sample id may contain ``/``."""
        from ragmeter.golden.datasets import EDITABLE, review

        denied = write_allowed(request)
        if denied is not None:
            return denied
        try:
            body = expect_object(await json_body(request, MAX_REVIEW_BYTES),
                                 '{"action": "accept" | "edit" | "reject" | "reset", "changes": {...}}')
            action = text_field(body, "action", max_chars=20)
            if action not in ACTIONS:
                raise Rejected(422, f"field 'action' must be one of {', '.join(ACTIONS)}, got {action!r}")
            changes = body.get("changes")
            if changes is not None and not isinstance(changes, dict):
                raise Rejected(422, "field 'changes' must be an object of new field values")
            unknown = sorted(set(changes or {}) - set(EDITABLE))
            if unknown:
                raise Rejected(422, f"field 'changes': cannot edit {unknown}; editable: {', '.join(EDITABLE)}")
            if "@" in name or len(name) > 200:
                raise Rejected(422, f"review writes go to the draft of a dataset: give its name without "
                                    f"@VERSION, got {name[:60]!r}")
        except Rejected as exc:
            return exc.response()
        try:
            return await in_thread(review, store, name, sample_id, action, changes, write=True)
        except ConfigError as exc:
            return refuse(404 if "no sample" in str(exc) or "no dataset" in str(exc) else 422, str(exc))
        except DatasetError as exc:
            return refuse(422, str(exc))


def _netloc(url: str) -> str | None:
    try:
        return urlsplit(url).netloc
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return None
