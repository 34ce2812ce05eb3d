"""The dashboard on large runs and against hostile requests: cached run views (kv ``run_view``),
paged sample reads, page-size limits, the Host allow-list, exact run lookups, long paths; and a
100k-sample run served by ``ragmeter serve`` within a memory bound (slow)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ragmeter.apps.report import data, paged, sections
from ragmeter.apps.server import create_app
from ragmeter.apps.server.app import host_name
from ragmeter.core.schema import Sample, Score
from ragmeter.stats import aggregate
from ragmeter.store import Store
from test_report_support import make_store


def build_run(store: Store, n: int, *, finish: bool = True, seed: int = 0) -> str:
    """A run of ``n`` samples x 3 metrics written straight through the Store API (no evaluation)."""
    rng = random.Random(seed)
    samples = [Sample(id=f"s{i:06d}", question=f"question {i}", answer=f"answer {i % 97}",
                      references=[f"reference {i}"]) for i in range(n)]
    metrics = ["m_up", "m_down", "m_raw"]
    rid = store.create_run(dataset_source="big.jsonl", fingerprint="f", samples=samples,
                           metrics=[{"name": m, "params": {}, "key": m} for m in metrics],
                           config={}, version="t", name=f"big-{seed}")
    ids = [s.id for s in samples]
    summary = {}
    for m in metrics:
        scores = [Score(None, "no reference") if rng.random() < 0.02
                  else Score(rng.random() * (10 if m == "m_raw" else 1)) for _ in ids]
        store.add_scores(rid, m, ids, scores)
        summary[m] = {**aggregate(scores), "direction": "lower" if m == "m_down" else "higher"}
    if finish:
        store.finish_run(rid, status="completed", summary=summary, timings={})
    return rid


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('scale') / 's.db'}"
    ids = make_store(url, runs=2)
    store = Store(url)
    rid = build_run(store, 300)
    paged.clear_memory_cache()
    return store, ids, rid


def client_for(store: Store, host: str = "127.0.0.1", **kw) -> TestClient:
    return TestClient(create_app(store, **kw), base_url=f"http://{host}")


def test_paged_rows_match_whole_run_view(small):
    store, ids, rid = small
    for ref in (ids[0], ids[1], rid):
        whole = data.run_view(store, ref, max_samples=None)
        worst = paged.samples_page(store, ref, limit=paged.MAX_PAGE)
        assert worst["total"] == whole["samples_total"]
        assert worst["items"] == whole["samples"][:paged.MAX_PAGE]
        summary = paged.run_summary(store, ref)[1]
        for key in ("metrics", "dataset", "composites", "hints", "config", "live", "grids"):
            assert summary[key] == sections.jsonable(whole[key]) if key != "grids" else True, key
        mid = paged.samples_page(store, ref, offset=7, limit=5, sort="position")
        assert [r["position"] for r in mid["items"]] == [7, 8, 9, 10, 11][:len(mid["items"])]


def test_metric_order_and_search(small):
    store, _ids, rid = small
    down = paged.samples_page(store, rid, limit=50, metric="m_down")["items"]
    vals = [r["values"]["m_down"] for r in down]
    assert all(v is not None for v in vals) and vals == sorted(vals, reverse=True)  # lower is better
    raw = paged.samples_page(store, rid, limit=50, metric="m_raw")["items"]
    assert [r["values"]["m_raw"] for r in raw] == sorted(r["values"]["m_raw"] for r in raw)
    found = paged.samples_page(store, rid, q="QUESTION 12", sort="position", limit=100)
    assert [r["id"] for r in found["items"]] == ["s000012"] + [f"s{i:06d}" for i in range(120, 130)]
    with pytest.raises(ValueError):
        paged.samples_page(store, rid, limit=paged.MAX_PAGE + 1)


def test_view_cached_in_store_and_invalidated(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    rid = build_run(store, 50, finish=False)
    first = paged.run_summary(store, rid)[1]
    rec = store.kv_get(paged.NAMESPACE, rid)
    assert rec is not None and rec["version"].endswith("|150") and first["live"]
    paged.clear_memory_cache()
    assert paged.run_summary(store, rid)[1]["metrics"] == first["metrics"]  # read back from kv
    # a new score changes the version: the view is rebuilt with it
    store.add_scores(rid, "m_new", ["s000000"], [Score(1.0)])
    after = paged.run_summary(store, rid)[1]
    assert store.kv_get(paged.NAMESPACE, rid)["version"].endswith("|151")
    new = next(m for m in after["metrics"] if m["key"] == "m_new")
    assert new["n"] == 1 and new["n_pending"] == 49 and "m_new" not in [m["key"] for m in first["metrics"]]
    store.finish_run(rid, status="completed", summary={}, timings={})
    assert paged.run_summary(store, rid)[1]["run"]["status"] == "completed"


def test_host_allow_list(small):
    store, ids, _ = small
    assert client_for(store).get("/api/runs").status_code == 200
    for host in ("localhost:8765", "[::1]:8765", "LOCALHOST"):
        assert client_for(store, host).get("/api/runs").status_code == 200, host
    for host in ("evil.example.com", "evil.example.com:8765", "127.0.0.1.evil.example.com", "testserver"):
        r = client_for(store, host).get(f"/runs/{ids[0]}")
        assert r.status_code == 400 and "Host" in r.json()["detail"], host
    served = client_for(store, "dash.internal:8765", allowed_hosts=["dash.internal"])
    assert served.get("/api/runs").status_code == 200
    assert host_name("[::1]:80") == "::1" and host_name("::1") == "::1"


def test_run_ids_are_not_patterns(small):
    store, ids, _ = small
    client = client_for(store)
    for ref in ("%", "_" * 12, ids[0][:3] + "%", "%25"):
        assert client.get(f"/api/runs/{ref}").status_code == 404, ref
        assert client.get(f"/runs/{ref}").status_code == 404, ref
    assert client.get(f"/api/runs/{ids[0][:6]}").json()["run"]["id"] == ids[0]
    assert client.get("/api/compare", params={"runs": f"{ids[0]},%"}).status_code == 404
    with pytest.raises(Exception, match="no run"):
        store.find_run("%")


def test_odd_paths_and_limits(small):
    store, ids, rid = small
    client = client_for(store)
    long = "x" * 65_000
    for path in (f"/runs/{long}", f"/api/runs/{long}", f"/api/runs/{rid}/samples/{long}", f"/{long}"):
        assert client.get(path).status_code in (404, 414), path[:30]
    assert client.get(f"/runs/{'y' * 1000}").status_code == 404
    assert client.get(f"/api/runs/{rid}/samples/{'y' * 1000}").status_code == 404
    assert client.get(f"/api/runs/{rid}/samples", params={"limit": 100_000}).status_code == 422
    assert client.get(f"/api/runs/{rid}/samples", params={"limit": paged.MAX_PAGE}).status_code == 200
    assert client.get(f"/api/compare?runs={ids[0]},{ids[1]}&limit=100000").status_code == 422
    page = client.get(f"/runs/{rid}", params={"limit": 100_000})
    assert page.status_code == 400 and "at most" in page.text
    assert client.get(f"/api/runs/{rid}/samples", params={"metric": "nope"}).status_code == 404
    nxt = client.get(f"/runs/{rid}", params={"limit": 10, "offset": 10}).text
    assert "Showing samples 11–20" in nxt and "offset=20&amp;limit=10" in nxt
    one = client.get(f"/api/runs/{rid}/samples/s000005").json()
    assert (one["prev_id"], one["next_id"], one["position"], one["n_samples"]) == ("s000004", "s000006", 5, 300)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vm_hwm_mb(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


@pytest.mark.slow
def test_100k_run_served_within_memory(tmp_path):
    url = f"sqlite:///{tmp_path / 'big.db'}"
    rid = build_run(Store(url), 100_000)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from ragmeter.apps.cli import main; main()", "serve",
                             "--port", str(port), "--db", url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{base}/favicon.ico", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
        paths = [f"/api/runs/{rid}/samples?limit=10", f"/runs/{rid}", f"/api/runs/{rid}",
                 f"/api/runs/{rid}/samples?limit=100&offset=50000", f"/runs/{rid}/samples/s050000",
                 f"/api/runs/{rid}/samples?sort=position&limit=500", "/", "/api/runs",
                 f"/api/runs/{rid}/samples?metric=m_down&limit=50", f"/api/runs/{rid}/samples/s099999"]
        # ten concurrent requests on a cold server: one builds the run's view, the others wait
        with ThreadPoolExecutor(len(paths)) as ex:
            responses = list(ex.map(lambda p: httpx.get(base + p, timeout=900), paths))
        assert [r.status_code for r in responses] == [200] * len(paths)
        first = responses[0].json()
        assert first["total"] == 100_000 and len(first["items"]) == 10
        assert responses[3].json()["offset"] == 50_000 and len(responses[3].json()["items"]) == 100
        # and ten more, served from the cached view
        with ThreadPoolExecutor(len(paths)) as ex:
            assert all(r.status_code == 200 for r in ex.map(lambda p: httpx.get(base + p, timeout=900), paths))
        assert _vm_hwm_mb(proc.pid) < 1500
        assert httpx.get(f"{base}/api/runs", headers={"Host": "evil.example.com"}).status_code == 400
        assert httpx.get(f"{base}/api/runs/{rid}/samples?limit=100000").status_code == 422
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_report_all_rows_is_capped_with_a_warning(small, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ragmeter.apps.cli import app
    from ragmeter.apps.report import render

    store, _ids, rid = small
    monkeypatch.setattr(render, "MAX_ALL_ROWS", 40)
    runner = CliRunner()
    out = tmp_path / "capped.html"
    res = runner.invoke(app, ["report", rid, "-o", str(out), "--db", store.url, "--max-samples", "0"])
    assert res.exit_code == 0, res.output
    assert "300 samples" in res.output and "--all-rows" in res.output
    assert "Showing the 40 worst of 300 samples" in out.read_text(encoding="utf-8")
    res = runner.invoke(app, ["report", rid, "-o", str(out), "--db", store.url, "--max-samples", "0",
                              "--all-rows"])
    assert res.exit_code == 0 and "warning" not in res.output
    assert "Showing the" not in out.read_text(encoding="utf-8")


def test_comparison_kept_in_store(small):
    store, ids, _ = small
    paged.clear_memory_cache()
    first = paged.compare(store, [ids[0], ids[1]], limit=2)
    rec = store.kv_get(paged.COMPARE_NAMESPACE, f"{ids[0]},{ids[1]}")
    assert rec is not None and len(first["sample_changes"]) == min(2, first["sample_changes_total"])
    paged.clear_memory_cache()
    again = paged.compare(store, [ids[0], ids[1], ids[0]], limit=paged.MAX_PAGE)
    assert again["differences"] == first["differences"]
    assert again["sample_changes"][:2] == first["sample_changes"]
    assert again["differences"] == sections.jsonable(data.compare_view(store, ids)["differences"])
    with pytest.raises(Exception, match="two distinct runs"):
        paged.compare(store, [ids[0], ids[0]])
