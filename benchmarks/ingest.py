"""Ingest throughput of `ragmeter serve`: N production calls sent to ``POST /api/v1/calls`` on
127.0.0.1 by a bounded load script (fixed number of requests, a few client threads, a time
limit), then counted in the store (none may be lost). The anchor is the floor any HTTP ingest
pays on top of: the same rows inserted straight into a SQLite file by SQLAlchemy executemany in
this process. Prints calls/s, request latency percentiles and the ratio; the last line is JSON.

    python benchmarks/ingest.py --calls 100000 [--batch 1000] [--clients 4] [--db sqlite:///x.db]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from monitor_support import Served  # noqa: E402
from ragmeter.monitor.calls import count_calls, insert_calls, normalise_call  # noqa: E402
from ragmeter.store import Store  # noqa: E402

TIME_LIMIT_S = 600


def make_calls(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    lat = rng.lognormal(6.0, 0.6, n)
    return [{"query": f"How late does ferry {i % 97} run on Sundays?",
             "answer": "The last ferry leaves at 22:40 on Sundays.",
             "contexts": ["Sunday timetable: last departure 22:40.", "Fares are listed per zone."],
             "latency_ms": round(float(lat[i]), 3), "cost_usd": 0.0012,
             "error": "timeout" if i % 97 == 0 else None,
             "timestamp": f"2026-11-23T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z",
             "metadata": {"route": "faq" if i % 3 else "chat"}} for i in range(n)]


def send(url: str, token: str, calls: list[dict], batch: int, clients: int) -> dict:
    batches = [calls[i:i + batch] for i in range(0, len(calls), batch)]
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + TIME_LIMIT_S
    local = threading.local()

    def post(chunk: list[dict]) -> None:
        if time.monotonic() > deadline:
            with lock:
                failures.append("time limit")
            return
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(timeout=60, headers={"Authorization": f"Bearer {token}"})
        t0 = time.perf_counter()
        try:
            r = client.post(url + "/api/v1/calls", json={"calls": chunk})
            ok = r.status_code == 200 and r.json().get("accepted") == len(chunk)
            detail = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            ok, detail = False, type(exc).__name__
        with lock:
            latencies.append((time.perf_counter() - t0) * 1000)
            if not ok:
                failures.append(detail)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(post, batches))
    wall = time.perf_counter() - t0
    lat = np.asarray(latencies)
    return {"wall_s": wall, "requests": len(batches), "failed_requests": len(failures),
            "p50_request_ms": float(np.percentile(lat, 50)), "p99_request_ms": float(np.percentile(lat, 99))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--db", default=None, help="store of the server (default: a temporary SQLite file)")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    db = args.db or f"sqlite:///{Path(tmp.name) / 'ingest.db'}"
    calls = make_calls(args.calls)

    served = Served(db, token="bench-token")
    try:
        unauthorised = httpx.post(served.url + "/api/v1/calls", json={"calls": calls[:1]}).status_code
        before = count_calls(Store(db))
        res = send(served.url, served.token, calls, args.batch, args.clients)
        stored = count_calls(Store(db)) - before
        rss = served.peak_rss_mb()
    finally:
        served.close()

    # anchor: the same rows straight into a SQLite file, one process, no HTTP
    direct_db = f"sqlite:///{Path(tmp.name) / 'direct.db'}"
    store = Store(direct_db)
    t0 = time.perf_counter()
    for i in range(0, len(calls), args.batch):
        insert_calls(store, [normalise_call(c) for c in calls[i:i + args.batch]])
    direct_s = time.perf_counter() - t0

    http_rate = args.calls / res["wall_s"]
    direct_rate = args.calls / direct_s
    print(f"HTTP ingest: {args.calls} calls in {res['wall_s']:.2f} s = {http_rate:,.0f} calls/s "
          f"({res['requests']} requests of {args.batch}, {args.clients} clients); request p50 "
          f"{res['p50_request_ms']:.1f} ms, p99 {res['p99_request_ms']:.1f} ms; server peak RSS {rss:.0f} MB")
    print(f"stored {stored} of {args.calls} sent; {res['failed_requests']} failed requests; "
          f"request without token -> HTTP {unauthorised}")
    print(f"direct SQLAlchemy insert (no HTTP): {direct_rate:,.0f} calls/s; HTTP ingest keeps "
          f"{http_rate / direct_rate:.2f}x of it")
    print(json.dumps({"benchmark": "ingest", "sent": args.calls, "stored": stored,
                      "failed_requests": res["failed_requests"], "unauthorised_status": unauthorised,
                      "batch": args.batch, "clients": args.clients, "calls_per_s": round(http_rate, 1),
                      "p50_request_ms": round(res["p50_request_ms"], 2),
                      "p99_request_ms": round(res["p99_request_ms"], 2),
                      "server_peak_rss_mb": round(rss, 1), "direct_insert_calls_per_s": round(direct_rate, 1),
                      "ratio_http_vs_direct": round(http_rate / direct_rate, 3)}))
    tmp.cleanup()
    if stored != args.calls or res["failed_requests"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
