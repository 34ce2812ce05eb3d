"""The dashboard app: pages, JSON API, OpenAPI schema, escaping, errors, and ``ragmeter serve``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient

from ragmeter.apps.report import data
from ragmeter.apps.server import create_app
from ragmeter.apps.server.app import PAGE_CSP, _public_url
from ragmeter.core.schema import Sample, Score
from ragmeter.store import Store
from test_report_support import METRICS, XSS_ANSWER, make_samples, make_store

API = ["/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/samples",
       "/api/runs/{run_id}/samples/{sample_id}", "/api/compare"]
#: monitoring routes (tests/test_monitor.py) and dataset review routes (tests/test_golden.py)
MONITOR_API = ["/api/v1/calls", "/v1/traces", "/api/v1/monitor/stats", "/api/v1/trend/{metric}",
               "/api/corpora/{corpus}/documents/{source}", "/api/datasets/{name}/samples/{sample_id}/review"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('srv') / 's.db'}"
    ids = make_store(url, runs=2)
    store = Store(url)
    # a sample id with a slash and one with non-ASCII characters
    samples = [Sample(id="doc/1", question="q?", answer="a"), Sample(id="ünï 2", answer="b")]
    rid = store.create_run(dataset_source="mem", fingerprint="f", samples=samples,
                           metrics=[{"name": "m", "params": {}, "key": "m"}], config={}, version="t",
                           name="odd-ids")
    store.add_scores(rid, "m", [s.id for s in samples], [Score(0.4), Score(0.8)])
    return TestClient(create_app(store), base_url="http://127.0.0.1"), store, ids, rid


def test_pages_respond(served):
    client, _store, ids, odd = served
    for path in ["/", f"/runs/{ids[0]}", f"/runs/{ids[0][:5]}", "/runs/latest", "/runs/run-b",
                 f"/runs/{ids[0]}/samples/xss", f"/runs/{ids[1]}/samples/q3",
                 f"/runs/{odd}/samples/{quote('doc/1', safe='')}",
                 f"/runs/{odd}/samples/{quote('ünï 2', safe='')}",
                 f"/compare?runs={ids[0]},{ids[1]}", f"/compare?runs={ids[0]}&runs={ids[1]}",
                 f"/runs/{ids[0]}?limit=3"]:
        r = client.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith("text/html")
        assert r.headers["content-security-policy"] == PAGE_CSP
        assert "<script>" not in r.text  # every script is a file of this server
    home = client.get("/").text
    assert "run-a" in home and "run-b" in home and 'name="runs"' in home
    assert "Showing the 3 worst samples" in client.get(f"/runs/{ids[0]}?limit=3").text


def test_page_contents(served):
    client, store, ids, _ = served
    run_page = client.get(f"/runs/{ids[0]}").text
    for key in METRICS:
        assert key in run_page
    assert 'id="r0-dist-0"' in run_page and 'id="rm-figures"' in run_page
    assert f'href="/runs/{ids[0]}/samples/xss"' in run_page
    cmp_page = client.get(f"/compare?runs={ids[0]},{ids[1]}").text
    assert 'id="cmp-bars"' in cmp_page and 'id="cmp-diffs"' in cmp_page and "worse" in cmp_page
    assert "make baseline" in cmp_page
    sample = client.get(f"/runs/{ids[0]}/samples/xss").text
    assert "Retrieved contexts (2)" in sample and "answer words are not in the contexts" in sample


def test_evaluated_text_is_escaped(served):
    client, _store, ids, _ = served
    for path in [f"/runs/{ids[0]}", f"/runs/{ids[0]}/samples/xss", f"/compare?runs={ids[0]},{ids[1]}"]:
        html = client.get(path).text
        assert XSS_ANSWER not in html and "<script>alert(4)" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(" in html


def test_errors(served):
    client, _store, ids, _ = served
    assert client.get("/runs/nope").status_code == 404
    assert "no run &#39;nope&#39;" in client.get("/runs/nope").text
    assert client.get(f"/runs/{ids[0]}/samples/nope").status_code == 404
    assert client.get(f"/compare?runs={ids[0]}").status_code == 400
    assert client.get("/compare").status_code == 400
    assert client.get(f"/compare?runs={ids[0]},nope").status_code == 404
    assert client.get("/api/runs/nope").json() == {"detail": "no run 'nope' in " + _store.url
                                                   + " (see `ragmeter runs`)"}
    assert client.get(f"/api/runs/{ids[0]}/samples/nope").status_code == 404
    assert client.get(f"/api/compare?runs={ids[0]}").status_code == 400
    assert client.get(f"/api/compare?runs={ids[0]},nope").status_code == 404
    assert client.get(f"/api/runs/{ids[0]}/samples?sort=bogus").status_code == 422
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/secret.txt").status_code == 404


def test_openapi_lists_json_endpoints(served):
    client = served[0]
    schema = client.get("/openapi.json").json()
    assert sorted(schema["paths"]) == sorted(API + MONITOR_API)
    refs = {p: schema["paths"][p]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            for p in API}
    assert refs["/api/runs/{run_id}"] == {"$ref": "#/components/schemas/RunDetail"}
    assert refs["/api/compare"] == {"$ref": "#/components/schemas/Comparison"}
    assert refs["/api/runs"]["items"] == {"$ref": "#/components/schemas/RunListItem"}
    assert {"RunDetail", "SamplePage", "SampleDetail", "Comparison", "PairedDifference"} <= set(
        schema["components"]["schemas"])


def test_api_runs_and_run(served):
    client, store, ids, odd = served
    runs = client.get("/api/runs").json()
    assert [r["id"] for r in runs] == [r.id for r in store.list_runs()]
    assert client.get("/api/runs?limit=1").json()[0]["id"] == runs[0]["id"]
    a = next(r for r in runs if r["id"] == ids[0])
    summary = store.get_run(ids[0]).summary
    assert a["means"] == {k: summary[k]["mean"] for k in METRICS}
    detail = client.get(f"/api/runs/{ids[0]}").json()
    assert detail["run"]["name"] == "run-a" and not detail["live"]
    assert [m["key"] for m in detail["metrics"]] == METRICS
    assert detail["metrics"][0]["mean"] == summary[METRICS[0]]["mean"]
    assert detail["samples_total"] == len(make_samples()) and "samples" not in detail
    assert client.get("/api/runs/latest").json()["run"]["id"] == runs[0]["id"]


def test_api_samples(served):
    client, store, ids, _ = served
    base = f"/api/runs/{ids[1]}/samples"
    everything = client.get(base, params={"limit": 1000}).json()
    expected = data.run_view(store, ids[1], max_samples=None)["samples"]
    assert [r["id"] for r in everything["items"]] == [r["id"] for r in expected]
    assert everything["total"] == len(make_samples())
    page = client.get(base, params={"offset": 2, "limit": 3}).json()
    assert [r["id"] for r in page["items"]] == [r["id"] for r in expected[2:5]]
    by_pos = client.get(base, params={"sort": "position", "limit": 4}).json()
    assert [r["position"] for r in by_pos["items"]] == [0, 1, 2, 3]
    found = client.get(base, params={"q": "EIFFEL"}).json()
    assert found["total"] == 1 and found["items"][0]["id"] == "unicode-é"
    one = client.get(f"{base}/xss").json()
    assert one["sample"]["answer"] == XSS_ANSWER and len(one["sample"]["contexts"]) == 2
    judge = next(s for s in one["scores"] if s["metric"] == "rmtest_judge")
    assert judge["value"] == 0.25 and "misses the reference" in judge["reasoning"]


def test_api_sample_odd_ids(served):
    client, _store, _ids, odd = served
    r = client.get(f"/api/runs/{odd}/samples/{quote('doc/1', safe='')}").json()
    assert r["sample"]["id"] == "doc/1" and r["next_id"] == "ünï 2"
    assert client.get(f"/api/runs/{odd}/samples/doc/1").json()["sample"]["id"] == "doc/1"
    assert client.get(f"/api/runs/{odd}/samples/{quote('ünï 2', safe='')}").json()["prev_id"] == "doc/1"


def test_api_compare(served):
    client, store, ids, _ = served
    one = client.get("/api/compare", params={"runs": f"{ids[0]},{ids[1]}"}).json()
    two = client.get("/api/compare", params=[("runs", ids[0]), ("runs", ids[1])]).json()
    assert one["differences"] == two["differences"]
    ref = data.compare_view(store, ids)
    assert one["differences"] == ref["differences"] and one["baseline"] == ids[0]
    assert len(one["sample_changes"]) <= 100 and one["sample_changes_total"] == ref["sample_changes_total"]
    swapped = client.get("/api/compare", params={"runs": f"{ids[1]},{ids[0]}"}).json()
    d1 = {d["metric"]: d["diff"] for d in one["differences"]}
    d2 = {d["metric"]: d["diff"] for d in swapped["differences"]}
    assert all(d2[k] == pytest.approx(-d1[k]) for k in d1)


def test_live_run_page_refreshes(db_url):
    store = Store(db_url)
    samples = [Sample(id=f"s{i}", answer="a") for i in range(3)]
    rid = store.create_run(dataset_source="mem", fingerprint="f", samples=samples,
                           metrics=[{"name": "m", "params": {}, "key": "m"}], config={}, version="t")
    store.add_scores(rid, "m", ["s0"], [Score(0.5)])
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    html = client.get(f"/runs/{rid}").text
    assert 'http-equiv="refresh"' in html and "2 pending" in html.replace("+", "")
    store.add_scores(rid, "m", ["s1", "s2"], [Score(0.7), Score(0.9)])
    store.finish_run(rid, status="completed", summary={}, timings={})
    detail = client.get(f"/api/runs/{rid}").json()
    assert detail["metrics"][0]["n"] == 3 and detail["metrics"][0]["mean"] == pytest.approx(0.7)


def test_static_assets(served):
    client = served[0]
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert len(js.content) > 1_000_000
    assert "sortTable" in client.get("/static/report.js").text
    assert client.get("/static/report.css").headers["content-type"].startswith("text/css")
    assert client.get("/favicon.ico").headers["content-type"] == "image/svg+xml"


def test_public_url_hides_password():
    assert _public_url("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert _public_url("sqlite:///x.db") == "sqlite:///x.db"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ragmeter_serve_command(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ids = make_store(url, runs=1, n=4)
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from ragmeter.apps.cli import main; main()", "serve",
                             "--port", str(port), "--db", url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"serve did not start: {proc.stdout.read()}") from None
                time.sleep(0.2)
        assert r.status_code == 200 and ids[0] in r.text
        assert httpx.get(f"http://127.0.0.1:{port}/runs/{ids[0]}").status_code == 200
        paths = httpx.get(f"http://127.0.0.1:{port}/openapi.json").json()["paths"]
        assert sorted(paths) == sorted(API + MONITOR_API)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        out = proc.stdout.read()
    assert f"http://127.0.0.1:{port}/" in out
