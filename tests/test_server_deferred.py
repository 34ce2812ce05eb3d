"""``create_app(defer_api=True)`` (what ``ragmeter serve`` builds): the app starts with its pages'
routes and adds the JSON API, monitoring, review and annotation routes later; every request meets
the same routes, in the same order, with the same answers as in the app built whole."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from ragmeter.apps.server import create_app
from ragmeter.store import Store
from test_report_support import make_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('deferred') / 's.db'}"
    ids = make_store(url, runs=2)
    return Store(url), ids


def _routes(app):
    return [(getattr(r, "path", None), sorted(getattr(r, "methods", None) or ())) for r in app.router.routes]


def _deferred(store):
    app = create_app(store, defer_api=True)
    whole = create_app(store)
    return app, whole


def test_page_routes_answer_before_the_rest_are_added(store):
    st, ids = store
    app, whole = _deferred(st)
    assert len(app.router.routes) < len(whole.router.routes)
    with TestClient(app, base_url="http://127.0.0.1") as c, TestClient(whole, base_url="http://127.0.0.1") as w:
        for path in ["/", f"/runs/{ids[0]}", f"/runs/{ids[1]}?limit=3", "/favicon.ico"]:
            r, e = c.get(path), w.get(path)
            assert (r.status_code, r.headers["content-type"]) == (e.status_code, e.headers["content-type"]), path
        assert "run-a" in c.get("/").text
    # the rest are added once a run's page is answered (or before any request needing them)
    for _ in range(200):
        if len(app.router.routes) == len(whole.router.routes):
            break
        time.sleep(0.05)
    assert _routes(app) == _routes(whole)


@pytest.mark.parametrize("method,path", [
    ("GET", "/api/runs"),
    ("GET", "/api/runs/{0}"),
    ("GET", "/api/runs/{0}/samples?limit=2"),
    ("GET", "/api/compare?runs={0},{1}"),
    ("GET", "/openapi.json"),
    ("GET", "/api/v1/monitor/stats"),
    ("POST", "/runs/{0}"),  # a page's path with another method: 405 as in the whole app
    ("GET", "/no/such/page"),
])
def test_a_first_request_for_a_later_route_waits_for_it(store, method, path):
    st, ids = store
    app, whole = _deferred(st)
    url = path.format(*ids)
    with TestClient(app, base_url="http://127.0.0.1") as c, TestClient(whole, base_url="http://127.0.0.1") as w:
        r = c.request(method, url)  # the first request this app answers
        e = w.request(method, url)
    assert r.status_code == e.status_code, url
    if r.headers.get("content-type", "").startswith("application/json"):
        got, expected = r.json(), e.json()
        if isinstance(got, dict):  # the monitor's statistics say when they were read
            got.pop("window", None)
            expected.pop("window", None)
        assert got == expected
    assert _routes(app) == _routes(whole)


def test_wrong_host_is_refused_before_any_route_is_added(store):
    st, _ids = store
    app, _whole = _deferred(st)
    with TestClient(app, base_url="http://evil.example") as c:
        assert c.get("/api/runs").status_code == 400
