"""Dashboard at scale: a run of 100,000 samples x 3 metrics served by ``ragmeter serve``.

    .venv/bin/python benchmarks/dashboard.py [--samples 100000] [--reps 3]

1. Builds the run quickly by writing rows straight through the Store API (``create_run`` and
   bulk ``add_scores``; no metric is evaluated), and finishes it with a stored summary.
2. In this process: one page of 10 sample rows read the way the dashboard reads it now
   (``ragmeter.apps.report.paged.samples_page``, aggregates cached in the store) against the way it
   used to (``ragmeter.apps.report.data.run_view``: every sample and score loaded, aggregated and
   sorted on each request): the whole-run rebuild is what a user would otherwise get.
3. ``ragmeter serve`` as a subprocess on 127.0.0.1: the first request (builds the cached view),
   then ``GET /api/runs/RUN/samples?limit=10`` (best of 5), the run page, one sample, and ten
   concurrent dashboard requests; the server's peak resident memory (``VmHWM`` of
   ``/proc/PID/status``) after all of them; and a request with ``Host: evil.example.com``.
4. A fresh server with the cached view removed from the store: ten concurrent requests at once
   (one builds the view, the others wait for it), their wall time and the server's peak memory.
5. The command a user types, as a fresh process (the installed console script, loading from
   bytecode as an installed copy does: ``benchmarks/_fresh.py``): ``ragmeter serve`` launched with
   no view cached in the store, timed from the launch to the first byte of the run page
   (``GET /runs/RUN``, asked as soon as the port accepts a connection), and, in a launch of its
   own, to the first byte of ``GET /api/runs/RUN/samples?limit=10``. ``--reps`` rounds (default 3;
   the order alternates A/B/B/A between rounds, an unmeasured warm-up round first), medians with
   every time and the load average; beside them the in-process figures of 2 (the first page,
   which builds the view: ``new_first_page_s``).
6. A second run of the same size, and the comparison of the two (``/api/compare``, then the
   compare page): times and the server's peak memory.

The last line printed is one JSON object (``fresh_process: true``; the fresh medians under
``fresh`` and as ``run_page_first_byte_fresh_s`` / ``samples_first_byte_fresh_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
from _fresh import first_byte_after_launch, free_port, installed_env, load_avg, median, ragmeter_command  # noqa: E402

from ragmeter.core.schema import Chunk, Sample, Score  # noqa: E402
from ragmeter.stats import aggregate  # noqa: E402
from ragmeter.store import Store  # noqa: E402

METRICS = ["token_f1", "rouge1_fmeasure", "hallucination"]


def build_run(store: Store, n: int, seed: int = 0) -> str:
    """A completed run of ``n`` samples x 3 metrics written through the Store API in bulk."""
    rng = random.Random(seed)
    samples = [Sample(id=f"s{i:06d}", question=f"What is item {i} about?",
                      answer=f"Item {i} is about topic {i % 97} and more.",
                      references=[f"Item {i} is about topic {i % 89}."],
                      contexts=[Chunk(id=f"c{i}-{j}", text=f"context {j} of item {i}") for j in range(2)])
               for i in range(n)]
    rid = store.create_run(dataset_source="bench.jsonl", fingerprint="bench", samples=samples,
                           metrics=[{"name": m, "params": {}, "key": m} for m in METRICS],
                           config={"metrics": METRICS}, version="bench", name="big")
    ids = [s.id for s in samples]
    del samples
    summary = {}
    for k, m in enumerate(METRICS):
        scores = [Score(None, "judge failure: reply did not parse") if rng.random() < 0.01
                  else Score(round(rng.random(), 4),
                             details={"reasoning": f"because {k}"} if m == "hallucination" else None)
                  for _ in ids]
        store.add_scores(rid, m, ids, scores)
        summary[m] = {**aggregate(scores), "direction": "lower" if m == "hallucination" else "higher",
                      "family": "bench"}
    store.finish_run(rid, status="completed", summary=summary, timings={"total_s": 1.0})
    return rid


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_mb(pid: int) -> float:
    """Peak resident set size of a process, from ``/proc/PID/status`` (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM line")


def serve(url: str) -> tuple[subprocess.Popen, str]:
    """``ragmeter serve`` on 127.0.0.1 and a free port, started and answering."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from ragmeter.apps.cli import main; main()", "serve",
                             "--port", str(port), "--db", url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{base}/favicon.ico", timeout=2)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {proc.stdout.read() if proc.stdout else ''}") from None
            time.sleep(0.2)


def timed_get(url: str, **kw) -> tuple[float, httpx.Response]:
    t = time.perf_counter()
    r = httpx.get(url, timeout=600, **kw)
    return time.perf_counter() - t, r


def concurrent_paths(rid: str, n: int) -> list[str]:
    """Ten dashboard requests of different kinds (the samples asked for exist in a run of ``n``)."""
    mid, last = n // 2, n - 1
    return [f"/api/runs/{rid}/samples?limit=10", f"/runs/{rid}", f"/api/runs/{rid}",
            f"/api/runs/{rid}/samples?limit=100&offset={mid}", f"/runs/{rid}/samples/s{mid:06d}",
            f"/api/runs/{rid}/samples?sort=position&limit=500", "/", "/api/runs",
            f"/api/runs/{rid}/samples?metric=hallucination&limit=50", f"/api/runs/{rid}/samples/s{last:06d}"]


def clear_views(url: str) -> None:
    """Delete the dashboard's cached views from the store: the next server builds them again."""
    from sqlalchemy import delete

    from ragmeter.apps.report import paged
    from ragmeter.store.models import KeyValueRow

    store = Store(url)
    with store.session() as s, s.begin():
        s.execute(delete(KeyValueRow).where(KeyValueRow.namespace.in_([paged.NAMESPACE, paged.COMPARE_NAMESPACE])))
    store.close()


def fresh_processes(url: str, rid: str, tmp: Path, reps: int) -> dict[str, Any]:
    """Section 5: ``reps`` rounds of fresh ``ragmeter serve`` processes, each launched with no view
    cached and timed to the first byte of one page (the run page, then the first ten samples; the
    order alternating A/B/B/A between rounds); every time and the medians."""
    env = installed_env(tmp / "pycache")
    pages = {"run_page": f"/runs/{rid}", "samples": f"/api/runs/{rid}/samples?limit=10"}
    times: dict[str, list[float]] = {f"{k}_{m}": [] for k in pages for m in ("first_byte_s", "listening_s")}
    sizes: dict[str, int] = {}

    def launch(name: str) -> None:
        clear_views(url)
        port = free_port()
        r = first_byte_after_launch(["serve", "--port", str(port), "--db", url], env, port, pages[name])
        if r["status"] != 200:
            raise RuntimeError(f"ragmeter serve answered {pages[name]} with HTTP {r['status']}")
        times[f"{name}_first_byte_s"].append(r["first_byte_s"])
        times[f"{name}_listening_s"].append(r["listening_s"])
        sizes[f"{name}_bytes"] = r["bytes"]

    for name in pages:  # warm-up, not measured: the file system cache, and the bytecode an installed copy has
        launch(name)
    for v in times.values():
        v.clear()
    loads = [load_avg()]
    order = list(pages)
    for i in range(reps):
        for name in (order if i % 4 in (0, 3) else order[::-1]):
            launch(name)
        loads.append(load_avg())
    out: dict[str, Any] = {k: median(v) for k, v in times.items()}
    out.update(sizes)
    out.update(runs={k: [round(x, 3) for x in v] for k, v in times.items()}, reps=reps,
               command=" ".join([*ragmeter_command(), "serve", "--port", "PORT", "--db", "DB"]),
               paths={k: p.replace(rid, "RUN") for k, p in pages.items()}, load_avg_1_5_15=loads,
               bytecode="compiled by an unmeasured warm-up run, as pip does at install")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3, help="rounds of fresh `ragmeter serve` processes (medians)")
    args = ap.parse_args()
    out: dict = {"samples": args.samples, "metrics": len(METRICS)}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        store = Store(url)
        t = time.perf_counter()
        rid = build_run(store, args.samples)
        out["build_run_s"] = round(time.perf_counter() - t, 2)
        print(f"built run {rid}: {args.samples} samples x {len(METRICS)} metrics in {out['build_run_s']} s")

        # -- in process: old whole-run rebuild vs cached view + paged read ---------------------
        from ragmeter.apps.report import data, paged

        t = time.perf_counter()
        old = data.run_view(store, rid, max_samples=None)["samples"][:10]
        out["old_rebuild_page_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        paged.samples_page(store, rid, limit=10)
        out["new_first_page_s"] = round(time.perf_counter() - t, 3)  # builds and stores the cache
        paged.clear_memory_cache()
        t = time.perf_counter()
        new = paged.samples_page(store, rid, limit=10)["items"]
        out["new_page_from_store_cache_s"] = round(time.perf_counter() - t, 4)
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            paged.samples_page(store, rid, limit=10)
            best = min(best, time.perf_counter() - t)
        out["new_page_warm_s"] = round(best, 4)
        out["same_rows_as_old"] = [r["id"] for r in old] == [r["id"] for r in new]
        out["speedup_vs_rebuild"] = round(out["old_rebuild_page_s"] / max(best, 1e-9), 1)
        print(f"in process: old rebuild {out['old_rebuild_page_s']} s/page, new "
              f"{out['new_page_warm_s']} s/page (first build {out['new_first_page_s']} s)")
        store.close()
        del old, new

        # -- ragmeter serve as a subprocess -----------------------------------------------------
        proc, base = serve(url)
        try:
            # the view was built above and kept in the store: a fresh server reads it from there
            dt, r = timed_get(f"{base}/api/runs/{rid}/samples?limit=10")
            assert r.status_code == 200 and len(r.json()["items"]) == 10, r.text[:300]
            out["server_first_samples_s"] = round(dt, 3)
            times = []
            for _ in range(5):
                dt, r = timed_get(f"{base}/api/runs/{rid}/samples?limit=10")
                times.append(dt)
            out["server_samples_limit10_s"] = round(min(times), 4)
            out["server_samples_limit10_max_s"] = round(max(times), 4)
            for name, path in [("run_page", f"/runs/{rid}"), ("sample_page", f"/runs/{rid}/samples/s{12345 % args.samples:06d}"),
                               ("api_run", f"/api/runs/{rid}"), ("runs_page", "/")]:
                dt, r = timed_get(base + path)
                assert r.status_code == 200, (path, r.status_code)
                out[f"server_{name}_s"] = round(dt, 3)
            out["server_rss_before_concurrent_mb"] = round(vm_hwm_mb(proc.pid), 1)
            paths = concurrent_paths(rid, args.samples)
            t = time.perf_counter()
            with ThreadPoolExecutor(len(paths)) as ex:
                codes = list(ex.map(lambda p: timed_get(base + p)[1].status_code, paths))
            out["concurrent_10_wall_s"] = round(time.perf_counter() - t, 3)
            out["concurrent_10_all_200"] = all(c == 200 for c in codes)
            out["server_peak_rss_mb"] = round(vm_hwm_mb(proc.pid), 1)
            out["evil_host_status"] = httpx.get(f"{base}/api/runs", headers={"Host": "evil.example.com"}).status_code
            out["oversized_limit_status"] = httpx.get(f"{base}/api/runs/{rid}/samples?limit=100000").status_code
            out["long_path_status"] = httpx.get(f"{base}/runs/{'x' * 65_000}").status_code
            out["like_pattern_run_status"] = httpx.get(f"{base}/api/runs/%25").status_code
        finally:
            proc.terminate()
            proc.wait(timeout=30)

        # -- a cold server: no cached view in the store; ten concurrent requests at once ------
        from sqlalchemy import delete

        from ragmeter.store.models import KeyValueRow

        store = Store(url)
        with store.session() as s, s.begin():
            s.execute(delete(KeyValueRow).where(KeyValueRow.namespace == paged.NAMESPACE))
        store.close()
        proc, base = serve(url)
        try:
            paths = concurrent_paths(rid, args.samples)
            t = time.perf_counter()
            with ThreadPoolExecutor(len(paths)) as ex:
                codes = list(ex.map(lambda p: timed_get(base + p)[1].status_code, paths))
            out["cold_concurrent_10_wall_s"] = round(time.perf_counter() - t, 3)
            out["cold_concurrent_10_all_200"] = all(c == 200 for c in codes)
            out["cold_server_peak_rss_mb"] = round(vm_hwm_mb(proc.pid), 1)
            dt, r = timed_get(f"{base}/api/runs/{rid}/samples?limit=10")
            out["cold_server_then_limit10_s"] = round(dt, 4)
        finally:
            proc.terminate()
            proc.wait(timeout=30)

        # -- 5. the command a user types: fresh `ragmeter serve` processes, no view cached ----------
        print(f"fresh processes ({args.reps} rounds, medians; load average {load_avg()}):", flush=True)
        fresh = fresh_processes(url, rid, Path(tmp), args.reps)
        out["fresh"] = fresh
        out["fresh_process"] = True
        out["run_page_first_byte_fresh_s"] = fresh["run_page_first_byte_s"]
        out["samples_first_byte_fresh_s"] = fresh["samples_first_byte_s"]
        print(f"  ragmeter serve, no view cached: first byte of the run page {fresh['run_page_first_byte_s']:.2f} s "
              f"after launch (listening after {fresh['run_page_listening_s']:.2f} s), of the first ten samples "
              f"{fresh['samples_first_byte_s']:.2f} s (listening after {fresh['samples_listening_s']:.2f} s); "
              f"in process: the first page {out['new_first_page_s']} s (building the view), "
              f"{out['new_page_warm_s']} s warm")
        print(f"  load average (1, 5, 15 min) after each round: {fresh['load_avg_1_5_15']}", flush=True)

        # -- 6. comparing two such runs (paired by sample id) ---------------------------------
        store = Store(url)
        rid2 = build_run(store, args.samples, seed=1)
        store.close()
        proc, base = serve(url)
        try:
            dt, r = timed_get(f"{base}/api/compare?runs={rid},{rid2}")
            assert r.status_code == 200, r.text[:300]
            out["server_compare_first_s"] = round(dt, 3)
            dt, r = timed_get(f"{base}/compare?runs={rid},{rid2}")
            assert r.status_code == 200
            out["server_compare_page_again_s"] = round(dt, 3)
            out["server_compare_peak_rss_mb"] = round(vm_hwm_mb(proc.pid), 1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    out["limit10_under_1s"] = out["server_samples_limit10_s"] < 1.0
    out["peak_rss_under_1500mb"] = max(out["server_peak_rss_mb"], out["cold_server_peak_rss_mb"]) < 1500
    out["run_page_first_byte_fresh_under_1_5s"] = out["run_page_first_byte_fresh_s"] < 1.5
    print(json.dumps(out))


if __name__ == "__main__":
    main()
