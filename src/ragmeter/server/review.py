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

from ragmeter.errors import ConfigError, DatasetError

ASSETS = Path(__file__).parent / "assets"
LOOPBACK = {"127.0.0.1", "::1", "localhost", "testclient"}


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
        if origin and urlsplit(origin).netloc != request.headers.get("host", ""):
            return refuse(403, "cross-site request refused")
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return refuse(415, "send JSON")
        return None

    @app.get("/datasets", response_class=HTMLResponse, include_in_schema=False)
    def datasets_page() -> HTMLResponse:
        from ragmeter.golden.datasets import list_datasets

        return page("datasets.html.j2", title="ragmeter — datasets", datasets=list_datasets(store))

    @app.get("/datasets/{name}/review", response_class=HTMLResponse, include_in_schema=False)
    def review_page(name: str) -> HTMLResponse:
        from ragmeter.golden.datasets import resolve, samples_of
        from ragmeter.report.render import json_for_script

        try:
            v = resolve(store, name)
        except ConfigError as exc:
            return page("error.html.j2", status_code=404, title="ragmeter — review", message=str(exc))
        samples = samples_of(store, v.ref, include_rejected=True)
        data = {"dataset": name, "version": v.ref, "status": v.status, "corpus": v.info.get("corpus"),
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

    @app.post("/api/datasets/{name}/samples/{sample_id}/review", tags=["datasets"],
              summary="Accept, edit or reject a sample (loopback, anti-forgery token)")
    async def review_sample(name: str, sample_id: str, request: Request) -> Any:
        from fastapi.concurrency import run_in_threadpool

        from ragmeter.golden.datasets import review

        denied = write_allowed(request)
        if denied is not None:
            return denied
        try:
            body = await request.json()
        except ValueError:
            return refuse(400, "body is not JSON")
        if not isinstance(body, dict):
            return refuse(422, 'expected {"action": "accept" | "edit" | "reject", "changes": {...}}')
        try:
            return await run_in_threadpool(review, store, name, sample_id, str(body.get("action")),
                                           body.get("changes"))
        except ConfigError as exc:
            return refuse(404 if "no sample" in str(exc) or "no dataset" in str(exc) else 422, str(exc))
        except DatasetError as exc:
            return refuse(422, str(exc))
