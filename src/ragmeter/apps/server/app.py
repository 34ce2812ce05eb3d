"""The local dashboard: a read-only FastAPI app over the results store.

Pages: the runs (pick some to compare), a run (the report's content, computed live from the store),
a comparison of runs, and one sample with its contexts, verdicts and scores. The same data is served
as JSON under ``/api`` and described by the app's OpenAPI schema (``/openapi.json``).
"""

# no ``from __future__ import annotations``: FastAPI reads the route signatures at run time
import functools
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match

from ragmeter._version import __version__
from ragmeter.apps.server.validate import MAX_OFFSET
from ragmeter.core.errors import StoreError
from ragmeter.store import Store, open_store

TEMPLATES = Path(__file__).parent / "templates"
#: pages load scripts and styles from this server only; plotly needs inline styles.
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; font-src 'self' data:; object-src 'none'; base-uri 'none'; "
            "frame-ancestors 'none'; form-action 'self'")
DEFAULT_PAGE_SAMPLES = 100
#: with ``create_app(defer_api=True)``: seconds after which the deferred routes are added even if
#: nothing has been asked for
DEFER_API_S = 5.0
#: Host header values served whatever ``--host`` says (anything else answers 400, which stops a web
#: page from reading the dashboard through DNS rebinding).
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: a longer request path cannot name anything here (ids are short): 414 before any lookup.
MAX_PATH_LENGTH = 4096
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><defs><linearGradient id="g" '
           'x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#4f46e5"/><stop offset=".55" '
           'stop-color="#06b6d4"/><stop offset="1" stop-color="#16a34a"/></linearGradient></defs>'
           '<rect width="16" height="16" rx="4" fill="url(#g)"/></svg>')
_STATIC_TYPES = {"report.css": "text/css; charset=utf-8",
                 "report.js": "text/javascript; charset=utf-8",
                 "plotly.min.js": "text/javascript; charset=utf-8"}


def _split_refs(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


@functools.lru_cache(maxsize=4)
def _static_text(name: str) -> str:
    from ragmeter.apps.report.render import asset, plotly_js

    return plotly_js() if name == "plotly.min.js" else asset(name)


def host_name(value: str) -> str:
    """The host part of a ``Host`` header, lower-cased, without the port or IPv6 brackets.

    >>> host_name("[::1]:8765"), host_name("LocalHost:80"), host_name("127.0.0.1")
    ('::1', 'localhost', '127.0.0.1')
    """
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class GuardMiddleware:
    """Refuses, before any route runs, requests whose ``Host`` is not an allowed name (400) and
    request paths too long to name anything (414)."""

    def __init__(self, app: Any, allowed_hosts: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed_hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = host_name(headers.get(b"host", b"").decode("latin-1"))
        if host not in self.allowed:
            resp: Response = JSONResponse(
                {"detail": "this dashboard answers only requests addressed to "
                           + ", ".join(sorted(self.allowed)) + " (Host header not allowed)"},
                status_code=400)
        elif len(scope.get("raw_path") or scope.get("path", "")) > MAX_PATH_LENGTH:
            resp = JSONResponse({"detail": f"request path longer than {MAX_PATH_LENGTH} characters"},
                                status_code=414)
        else:
            await self.app(scope, receive, send)
            return
        await resp(scope, receive, send)


class _Once:
    """Calls ``fn`` the first time it is called, in one thread at a time; later calls return at
    once (after the first one has finished)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self.done = False

    def __call__(self) -> None:
        if self.done:
            return
        with self._lock:
            if not self.done:
                self._fn()
                self.done = True


class DeferredRoutes:
    """Before a request that none of the ``early`` routes answers in full (a path none of them
    matches, or another method), adds the app's deferred routes (``complete``, in a worker
    thread). The deferred routes come after the early ones in the complete app, so a request an
    early route answers meets the route it would have met there."""

    def __init__(self, app: Any, early: list[Any], complete: _Once) -> None:
        self.app = app
        self.early = early
        self.complete = complete

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.complete.done or scope["type"] not in {"http", "websocket"}:
            await self.app(scope, receive, send)
            return
        if not any(r.matches(scope)[0] == Match.FULL for r in self.early):
            await run_in_threadpool(self.complete)
        try:
            await self.app(scope, receive, send)
        finally:
            # the first answer has been sent: the rest are added now, while the page loads in the
            # browser, not in the middle of sending it
            _start(self.complete)


def _start(fn: Callable[[], None], after_s: float = 0.0) -> None:
    timer = threading.Timer(after_s, fn)
    timer.daemon = True
    timer.start()


def create_app(db: str | Store | None = None, *, allowed_hosts: Iterable[str] = (),
               defer_api: bool = False) -> FastAPI:
    """Build the dashboard app over a store (a :class:`Store`, a SQLAlchemy URL or SQLite path;
    default ``$RAGMETER_DB`` or ``.ragmeter/ragmeter.db``).

    Requests are answered only when their ``Host`` header names 127.0.0.1, localhost, ::1 or one
    of ``allowed_hosts`` (e.g. the ``--host`` the server listens on); others get 400.

    With ``defer_api`` (``ragmeter serve``) the app starts with its pages' routes; the JSON API,
    monitoring, review and annotation routes are added once the first answer has been sent (or
    after ``DEFER_API_S`` seconds), and before any request that the routes added so far do not
    answer, so every request meets the same routes, in the same order, as without it.
    """
    from ragmeter.apps.report import figures, metric_views, paged
    from ragmeter.apps.report.render import environment, render_page

    store = db if isinstance(db, Store) else open_store(db)
    env = environment(str(TEMPLATES))
    app = FastAPI(
        title="ragmeter dashboard", version=__version__,
        description="Read-only views of the runs in a ragmeter store: runs, a run's aggregates "
                    "and samples, one sample's verdicts, and comparisons of runs (paired by "
                    "sample id, with confidence intervals inside each metric's range).",
        openapi_tags=[{"name": "runs", "description": "Stored runs and their samples."},
                      {"name": "compare", "description": "Several runs side by side."},
                      {"name": "monitor", "description": "Production calls: ingest, aggregates, trends."}],
    )
    app.state.store = store
    hosts = LOCAL_HOSTS | {host_name(h) for h in allowed_hosts if h}
    # the annotation page's writes accept the same Host names (server/annotate.py)
    app.state.allowed_hosts = frozenset(hosts)

    def page(template: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
        html = render_page(template, mode="server", env=env, **ctx)
        return HTMLResponse(html, status_code=status_code,
                            headers={"Content-Security-Policy": PAGE_CSP,
                                     "X-Content-Type-Options": "nosniff",
                                     "Referrer-Policy": "no-referrer"})

    def error_page(exc: Exception, status_code: int = 404) -> HTMLResponse:
        return page("error.html.j2", status_code=status_code, title="ragmeter — not found",
                    message=str(exc))

    def compare(refs: list[str], limit: int) -> dict[str, Any]:
        return paged.compare(store, refs, limit=limit)

    # ---- HTML pages ----------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def runs_page() -> HTMLResponse:
        return page("runs.html.j2", title="ragmeter — runs", runs=metric_views.runs_list(store),
                    store_url=_public_url(store.url))

    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(run_id: str, limit: Annotated[int, Query(ge=1, le=MAX_OFFSET)] = DEFAULT_PAGE_SAMPLES,
                 offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> HTMLResponse:
        if limit > paged.MAX_PAGE:
            return page("error.html.j2", status_code=400, title="ragmeter — bad request",
                        message=f"limit is at most {paged.MAX_PAGE} samples per page; "
                                "use offset to see the next ones")
        with paged.answering():  # the warm-up waits for the whole page, not only its view
            try:
                view = paged.run_page(store, run_id, offset=offset, limit=limit)
            except StoreError as exc:
                return error_page(exc)
            view["prefix"] = "r0"
            from ragmeter.apps.report.conversations import conversations_for

            view["conversations"] = conversations_for(store, view["run"]["id"], limit=0)
            from ragmeter.apps.report.traces import traces_for

            view["traces"] = traces_for(store, view["run"]["id"], limit=0)
            refresh = 5 if view["run"]["status"] == "running" else None
            return page("run.html.j2", title=f"ragmeter — {view['run']['label']}", view=view,
                        figures=figures.run_figures(view, "r0"), refresh=refresh, limit=limit,
                        offset=offset, max_page=paged.MAX_PAGE)

    @app.get("/runs/{run_id}/samples/{sample_id:path}", response_class=HTMLResponse,
             include_in_schema=False)
    def sample_page(run_id: str, sample_id: str) -> HTMLResponse:
        try:
            view = paged.sample_view(store, run_id, sample_id)
        except StoreError as exc:
            return error_page(exc)
        return page("sample.html.j2", title=f"ragmeter — sample {sample_id}", view=view)

    @app.get("/runs/{run_id}/conversations/{conversation_id:path}", response_class=HTMLResponse,
             include_in_schema=False)
    def conversation_page(run_id: str, conversation_id: str) -> HTMLResponse:
        from ragmeter.apps.report.conversations import conversation_view

        try:
            view = conversation_view(store, run_id, conversation_id)
        except StoreError as exc:
            return error_page(exc)
        return page("conversation.html.j2", title=f"ragmeter — conversation {conversation_id}", view=view)

    @app.get("/runs/{run_id}/traces/{sample_id:path}", response_class=HTMLResponse, include_in_schema=False)
    def trace_page(run_id: str, sample_id: str) -> HTMLResponse:
        from ragmeter.apps.report.traces import trace_view

        try:
            view = trace_view(store, run_id, sample_id)
        except StoreError as exc:
            return error_page(exc)
        return page("trace.html.j2", title=f"ragmeter — trace {sample_id}", view=view)

    @app.get("/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(runs: Annotated[list[str] | None, Query()] = None) -> HTMLResponse:
        refs = _split_refs(runs)
        try:
            view = compare(refs, DEFAULT_PAGE_SAMPLES)
        except StoreError as exc:
            return error_page(exc, 404 if len(refs) >= 2 else 400)
        view["prefix"] = "cmp"
        labels = " vs ".join(r["label"] for r in view["runs"])
        return page("compare.html.j2", title=f"ragmeter — {labels}", compare=view,
                    figures=figures.compare_figures(view, "cmp"))

    # no store access: answered on the event loop, never waiting for a worker thread
    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(FAVICON, media_type="image/svg+xml",
                        headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name not in _STATIC_TYPES:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(_static_text(name), media_type=_STATIC_TYPES[name],
                        headers={"Cache-Control": "public, max-age=3600",
                                 "X-Content-Type-Options": "nosniff"})

    def add_api() -> None:
        from ragmeter.apps.server import models

        not_found = {404: {"model": models.ErrorBody, "description": "No such run or sample."}}

        # ---- JSON API ------------------------------------------------------------------------
        @app.get("/api/runs", response_model=list[models.RunListItem], tags=["runs"],
                 summary="List runs, newest first")
        def api_runs(limit: Annotated[int | None, Query(ge=1, le=MAX_OFFSET, description="At most this many.")] = None
                     ) -> list[dict[str, Any]]:
            return metric_views.runs_list(store, limit)

        @app.get("/api/runs/{run_id}", response_model=models.RunDetail, responses=not_found,
                 tags=["runs"], summary="A run's config, dataset summary, aggregates and plots' data")
        def api_run(run_id: str) -> Any:
            try:
                return paged.run_summary(store, run_id)[1]
            except StoreError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=404)

        @app.get("/api/runs/{run_id}/samples", response_model=models.SamplePage, responses=not_found,
                 tags=["runs"], summary="A run's per-sample values, worst first")
        def api_samples(
            run_id: str,
            offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
            limit: Annotated[int, Query(ge=1, le=paged.MAX_PAGE, description="Rows per page (at most "
                                                                       f"{paged.MAX_PAGE}).")] = 100,
            sort: Annotated[str, Query(pattern="^(worst|position)$",
                                       description="worst (lowest score first) or position")] = "worst",
            metric: Annotated[str | None, Query(max_length=300, description="With sort=worst: lowest on "
                                                "this metric (in its direction) first.")] = None,
            q: Annotated[str | None, Query(max_length=1000, description="Keep samples whose id, question, "
                                           "answer or reference contains this (case-insensitive).")] = None,
        ) -> Any:
            try:
                with paged.answering():
                    return paged.samples_page(store, run_id, offset=offset, limit=limit, sort=sort,
                                              metric=metric, q=q)
            except StoreError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=404)

        @app.get("/api/runs/{run_id}/samples/{sample_id:path}", response_model=models.SampleDetail,
                 responses=not_found, tags=["runs"],
                 summary="One sample with its contexts, verdicts and scores")
        def api_sample(run_id: str, sample_id: str) -> Any:
            try:
                return paged.sample_view(store, run_id, sample_id)
            except StoreError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=404)

        @app.get("/api/compare", response_model=models.Comparison, tags=["compare"],
                 responses={**not_found, 400: {"model": models.ErrorBody,
                                               "description": "Fewer than two runs."}},
                 summary="Compare runs: means with CIs and paired differences to the first run")
        def api_compare(
            runs: Annotated[list[str], Query(description="Run ids (or prefixes, names), comma-"
                                                         "separated or repeated; the first is the baseline.")],
            limit: Annotated[int, Query(ge=0, le=paged.MAX_PAGE, description="Rows of sample_changes.")] = 100,
        ) -> Any:
            refs = _split_refs(runs)
            if len(set(refs)) < 2:
                return JSONResponse({"detail": "give at least two runs, e.g. ?runs=A,B"}, status_code=400)
            try:
                return compare(refs, limit)
            except StoreError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=404)

        from ragmeter.apps.server.monitor import add_monitor_routes

        add_monitor_routes(app, store, page)
        from ragmeter.apps.server.review import add_review_routes

        add_review_routes(app, store, page)
        from ragmeter.apps.server.annotate import annotate_router

        app.include_router(annotate_router(store))

    if defer_api:
        # the JSON API, monitoring, review and annotation routes (most of the 60 parameter and
        # reply fields pydantic builds validators for) are added after the first answer, or
        # before any request that the pages' routes do not answer
        complete = _Once(add_api)
        # the OpenAPI schema describes every route: asked for, it waits for them all
        early = [r for r in app.router.routes if getattr(r, "path", None) != app.openapi_url]
        app.add_middleware(DeferredRoutes, early=early, complete=complete)
        _start(complete, DEFER_API_S)  # no request yet
    else:
        add_api()
    app.add_middleware(GuardMiddleware, allowed_hosts=frozenset(hosts))

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, exc: StoreError) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": str(exc)}, status_code=404)
        return error_page(exc)

    @app.exception_handler(OperationalError)
    async def _store_busy(request: Request, exc: OperationalError) -> Response:
        # SQLite's write lock held by another process past the busy timeout: the store is busy,
        # the request was fine (503 tells a client to retry later; nothing was written)
        if "locked" in str(exc.orig) or "busy" in str(exc.orig):
            return JSONResponse({"detail": "the store is busy: another process holds its write lock; "
                                           "retry later"}, status_code=503, headers={"Retry-After": "5"})
        raise exc

    return app


def _public_url(url: str) -> str:
    """The store URL without a password (never shown on a page)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - display only
        return url.split("@")[-1]
