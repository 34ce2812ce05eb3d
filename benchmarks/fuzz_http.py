"""Malformed requests against a running `ragmeter serve`: none may answer 5xx or stop the server.

Starts ``ragmeter serve`` (a subprocess on 127.0.0.1, a free port, an ingest token, a store holding
a run, an annotation task and a golden dataset), then sends every probe of ``tests/http_fuzz.py``
(bodies that are not JSON or not the expected shape, 400- and 5,000-digit numbers, huge and
negative timestamps, lone surrogates, NUL characters, nesting 100,000 levels deep, spans without a
trace id, oversized ids and bodies, queries such as ``/monitor?window=1000000d``,
``/api/runs?limit=`` with 23 digits or a dataset version ``@²``) to ``/api/v1/calls``,
``/v1/traces`` (JSON and protobuf), the annotation label and dataset review writes and the
dashboard GETs, plus raw-socket requests (a ``Content-Length`` of a terabyte, a malformed one, a
foreign ``Host``). Then checks the server still answers and still stores a valid call and trace,
and kills it. The anchor is the same probes answered in process by the app (FastAPI's
``TestClient``, no sockets): the ratio says what the real server's HTTP parsing adds.

    python benchmarks/fuzz_http.py [--db sqlite:///x.db]

The last line printed is one JSON object: ``{"requests": N, "status_5xx": 0, "server_alive": true, ...}``.
Exit status 0 when no probe got a 5xx (or an unexpected 2xx) and the server is alive, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import http_fuzz  # noqa: E402
from monitor_support import Served  # noqa: E402

TOKEN = "fuzz-token"


def _raw(port: int, request: bytes, timeout: float = 20.0) -> int | None:
    """Send raw bytes; the status code of the reply (None when the server closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            return None
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def raw_probes(port: int) -> list[tuple[str, bytes]]:
    host = f"127.0.0.1:{port}".encode()
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    return [
        ("calls: Content-Length of a terabyte", b"POST /api/v1/calls HTTP/1.1\r\nHost: " + host + b"\r\n" + auth
         + b"Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n{}"),
        ("traces: Content-Length of a terabyte", b"POST /v1/traces HTTP/1.1\r\nHost: " + host + b"\r\n" + auth
         + b"Content-Type: application/x-protobuf\r\nContent-Length: 1000000000000\r\n\r\n\x0a"),
        ("calls: Content-Length not a number", b"POST /api/v1/calls HTTP/1.1\r\nHost: " + host + b"\r\n" + auth
         + b"Content-Length: abc\r\n\r\n{}"),
        ("a foreign Host header", b"GET /api/runs HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
        ("an unclosed IPv6 Host header", b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"),
        ("a Host header of 8,000 characters", b"GET / HTTP/1.1\r\nHost: " + b"h" * 8000 + b"\r\n\r\n"),
        ("latin-1 bytes in the token header", b"POST /api/v1/calls HTTP/1.1\r\nHost: " + host
         + b"\r\nAuthorization: Bearer \xff\xfe\r\nContent-Length: 2\r\n\r\n{}"),
        ("a request target that is not a path", b"GET http://evil.example/ HTTP/1.1\r\nHost: " + host + b"\r\n\r\n"),
    ]


def _in_process(db: str, targets: http_fuzz.Targets, probes: list[http_fuzz.Probe]) -> float:
    """Seconds to answer ``probes`` in process (the anchor)."""
    from fastapi.testclient import TestClient

    from ragmeter.apps.server import create_app
    from ragmeter.store import open_store

    os.environ["RAGMETER_INGEST_TOKEN"] = TOKEN
    client = TestClient(create_app(open_store(db)), base_url="http://127.0.0.1",
                        client=("127.0.0.1", 5555), raise_server_exceptions=False)
    token = http_fuzz.review_token(client, targets.dataset)
    local = [http_fuzz.Probe(p.kind, p.what, p.method, p.path, p.body,
                             {**p.headers, **({"X-Ragmeter-Token": token} if p.kind == "review" else {}),
                              **({"Origin": "http://127.0.0.1"} if "Origin" in p.headers else {})})
             for p in probes]
    t0 = time.perf_counter()
    for p in local:
        http_fuzz.send(client, p)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=None, help="store of the server (default: a temporary SQLite file)")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    db = args.db or f"sqlite:///{Path(tmp.name) / 'fuzz.db'}"
    seed = http_fuzz.seed_store(db)

    served = Served(db, token=TOKEN)
    statuses: Counter[int] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    fivexx: list[str] = []
    unexpected_2xx: list[str] = []
    refused_valid: list[str] = []
    no_answer: list[str] = []
    try:
        client = httpx.Client(base_url=served.url, timeout=60)
        targets = http_fuzz.Targets(
            ingest_token=TOKEN, run_id=seed["run_id"], sample_id=seed["sample_id"],
            annotate_token=seed["annotate_token"], review_token=http_fuzz.review_token(client, seed["dataset"]),
            dataset=seed["dataset"], review_sample=seed["review_sample"], origin=served.url)
        probes = http_fuzz.probes(targets)
        t0 = time.perf_counter()
        for p in probes:
            try:
                status: int | None = http_fuzz.send(client, p)
            except httpx.HTTPError as exc:
                status = None
                no_answer.append(f"{p.kind}: {p.what} ({type(exc).__name__})")
            kind = by_kind.setdefault(p.kind, Counter())
            kind["requests"] += 1
            if status is None:
                continue
            statuses[status] += 1
            kind[f"{status // 100}xx"] += 1
            if status >= 500:
                fivexx.append(f"{p.kind}: {p.what} -> {status}")
            elif status < 400 and not p.accept:
                unexpected_2xx.append(f"{p.kind}: {p.what} -> {status}")
            elif status >= 400 and p.accept:
                refused_valid.append(f"{p.kind}: {p.what} -> {status}")
        for what, raw in raw_probes(served.port):
            kind = by_kind.setdefault("raw", Counter())
            kind["requests"] += 1
            try:
                status = _raw(served.port, raw)
            except OSError as exc:
                status = None
                no_answer.append(f"raw: {what} ({type(exc).__name__})")
            if status is None:
                continue
            statuses[status] += 1
            kind[f"{status // 100}xx"] += 1
            if status >= 500:
                fivexx.append(f"raw: {what} -> {status}")
            elif status < 400:
                unexpected_2xx.append(f"raw: {what} -> {status}")
        wall = time.perf_counter() - t0
        # alive: still serving pages and still storing a valid call and a valid trace
        alive = served.proc.poll() is None
        try:
            alive = alive and client.get("/openapi.json").status_code == 200
            ok_call = client.post("/api/v1/calls", json={"calls": [{"query": "q", "answer": "a", "latency_ms": 5}]},
                                  headers={"Authorization": f"Bearer {TOKEN}"})
            trace = http_fuzz._export(http_fuzz._span(traceId="0af7651916cd43dd8448eb211c80319c"))
            ok_trace = client.post("/v1/traces", json=trace, headers={"Authorization": f"Bearer {TOKEN}"})
            stored = client.get("/api/v1/monitor/stats", params={"window": "36500d"}).json()["calls"]
            alive = alive and ok_call.status_code == 200 and ok_trace.status_code == 200
        except httpx.HTTPError:
            alive, stored = False, 0
        client.close()
    finally:
        served.kill()
    total = sum(c["requests"] for c in by_kind.values())
    in_process_s = _in_process(db, targets, probes)

    for line in fivexx + unexpected_2xx + refused_valid + no_answer:
        print("  " + line)
    counts = ", ".join(f"{k}: {v['requests']}" for k, v in by_kind.items())
    print(f"{total} malformed requests ({counts}) "
          f"in {wall:.1f} s: {sum(v for s, v in statuses.items() if 400 <= s < 500)} answered 4xx, "
          f"{len(fivexx)} answered 5xx, {len(unexpected_2xx)} accepted although malformed, "
          f"{len(no_answer)} without an answer; server alive afterwards: {alive} ({stored} calls stored)")
    print(f"the same {len(probes)} probes in process (TestClient, no sockets): {in_process_s:.1f} s; "
          f"the real server takes {wall / max(in_process_s, 1e-9):.2f}x that")
    print(json.dumps({"benchmark": "fuzz_http", "requests": total, "status_5xx": len(fivexx),
                      "server_alive": alive, "status_4xx": sum(v for s, v in statuses.items() if 400 <= s < 500),
                      "unexpected_2xx": len(unexpected_2xx), "valid_refused": len(refused_valid),
                      "no_answer": len(no_answer), "statuses": {str(k): v for k, v in sorted(statuses.items())},
                      "by_endpoint": {k: dict(v) for k, v in by_kind.items()}, "seconds": round(wall, 2),
                      "in_process_seconds": round(in_process_s, 2),
                      "ratio_server_vs_in_process": round(wall / max(in_process_s, 1e-9), 3)}))
    tmp.cleanup()
    if fivexx or unexpected_2xx or refused_valid or no_answer or not alive:
        sys.exit(1)


if __name__ == "__main__":
    main()
