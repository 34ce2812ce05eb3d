"""After the run: compare, export, report and the dashboard on two runs of 100,000 samples.

    .venv/bin/python benchmarks/after_run.py [--samples 100000]

Two completed runs of ``--samples`` samples x ``token_f1`` + ``exact_match`` are written through the
Store API (no metric is evaluated: the values are drawn so that ``b`` is better on token_f1 and
indistinguishable on exact_match). Then, in this process:

1. ``compare_runs([a, b])`` (what ``ragmeter compare a b`` runs), uncached, and again from its
   cache; beside it the previous method, kept here to compare against: every score loaded as an
   object (``Store.score_table``), and the paired sign-flip permutation test drawn by Monte Carlo
   (10,000 sign vectors of 100,000 differences). ``verdicts_identical`` is true when both give
   every metric the same verdict, the same interval (to 1e-9: the interval is computed the same
   way) and p-values within four Monte Carlo standard errors of each other.
2. ``export_run`` to CSV and Parquet beside what a user could do instead: pandas reading the same
   rows from a JSON Lines file (``read_json(lines=True)``) and writing the same format
   (``to_csv`` / ``to_parquet``, lists and mappings as JSON text as ragmeter writes them); the ratios are pandas time / ragmeter time.
3. ``write_report(a, b)`` (``ragmeter report a b``): seconds and bytes.
4. The dashboard (``ragmeter.apps.server.app.create_app`` under uvicorn on 127.0.0.1 in a thread, no
   view cached in the store: the dashboard's kv records are deleted first): the first ``GET /runs/A``.

5. The same commands as a user types them, each a fresh ``ragmeter`` process (the installed console
   script, loading from bytecode as an installed copy does: ``benchmarks/_fresh.py``), timed from
   launch to exit: ``ragmeter compare A B`` with no comparison cached, and again cached;
   ``ragmeter report A B -o FILE`` with no view cached; ``ragmeter serve``: launch to the first
   byte of ``GET /runs/A`` (asked as soon as the port accepts), no view cached. The server listens
   before it builds its app (``ragmeter.apps.server.listen``), so ``dashboard_listening_s`` times
   the socket's opening; the request then waits for the app and the view. ``--reps`` rounds
   (default 5; the order of the commands alternates A/B/B/A between rounds), medians reported with
   every time and the load average; the in-process figures of 1-4 beside them. The targets are
   checked on the fresh-process medians (``fresh_process: true``).

The machine may be shared: 1-4 are wall-clock times of one run each, 5 medians of ``--reps``. The
last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from _fresh import (  # noqa: E402
    first_byte_after_launch,
    free_port,
    installed_env,
    load_avg,
    median,
    ragmeter_command,
    run_timed,
)

from ragmeter.core.schema import Chunk, Sample, ScoreColumn  # noqa: E402
from ragmeter.stats import aggregate_many  # noqa: E402
from ragmeter.store import Store  # noqa: E402

METRICS = ["token_f1", "exact_match"]


def build_runs(store: Store, n: int) -> tuple[str, str]:
    """Two completed runs on the same ``n`` samples: ``b`` adds 0.01 to token_f1 on average and
    flips exact_match both ways about equally."""
    rng = np.random.default_rng(7)
    samples = [Sample(id=f"s{i:06d}", question=f"What is item {i} about?",
                      answer=f"Item {i} is about topic {i % 97} and more.",
                      references=[f"Item {i} is about topic {i % 89}."],
                      contexts=[Chunk(id=f"c{i}-{j}", text=f"context {j} of item {i}") for j in range(2)])
               for i in range(n)]
    ids = [s.id for s in samples]
    f1_a = rng.beta(2.0, 1.5, n)
    f1_b = np.clip(f1_a + rng.normal(0.01, 0.1, n), 0.0, 1.0)
    em_a = (rng.random(n) < 0.3).astype(np.float64)
    flip = rng.random(n) < np.where(em_a > 0, 0.07, 0.03)  # as many 1 -> 0 as 0 -> 1 on average
    em_b = np.where(flip, 1.0 - em_a, em_a)
    out = []
    for name, f1, em in (("a", f1_a, em_a), ("b", f1_b, em_b)):
        rid = store.create_run(dataset_source="bench.jsonl", fingerprint="bench", samples=samples,
                               metrics=[{"name": m, "params": {}, "key": m} for m in METRICS],
                               config={"metrics": METRICS}, version="bench", name=name)
        cols = {"token_f1": ScoreColumn(np.round(f1, 4)), "exact_match": ScoreColumn(em)}
        for m, col in cols.items():
            store.add_scores(rid, m, ids, col)
        summary = aggregate_many({m: (c.values, [None] * n) for m, c in cols.items()},
                                 bounds={m: (0.0, 1.0) for m in METRICS})
        for m in METRICS:
            summary[m].update(direction="higher", family="lexical", range=[0.0, 1.0])
        store.finish_run(rid, status="completed", summary=summary, timings={"total_s": 1.0})
        out.append(rid)
    return out[0], out[1]


def previous_compare(store: Store, a: str, b: str) -> list[dict[str, Any]]:
    """The method ``compare`` used before: every score as an object, then per metric the paired
    interval, the Monte Carlo sign-flip permutation test (10,000 sign vectors), Wilcoxon and
    win/tie/loss; Holm over the metrics."""
    from ragmeter.analysis.runs import from_store, paired_arrays
    from ragmeter.stats.paired import (
        family_verdicts,
        paired_mean_ci,
        paired_permutation_test,
        wilcoxon_test,
    )

    va, vb = from_store(store, a), from_store(store, b)
    rows = []
    for m in va.metrics:
        xa, xb, _, _ = paired_arrays(va, vb, m)
        ci = paired_mean_ci(xa, xb, bounds=va.range_of(m))
        perm = paired_permutation_test(xa, xb, n_resamples=10_000, method="monte-carlo")
        wil = wilcoxon_test(xa, xb)
        rows.append({"metric": m, "diff": float((xb - xa).mean()), "ci_low": ci[0], "ci_high": ci[1],
                     "pvalue": perm.pvalue, "wilcoxon_pvalue": wil.pvalue, "n": int(xa.size)})
    for r, (p, v) in zip(rows, family_verdicts([(r["diff"], r["pvalue"], True) for r in rows]), strict=True):
        r.update(pvalue_adjusted=p, verdict=v)
    return rows


def same_verdicts(new: list[dict[str, Any]], old: list[dict[str, Any]], n_resamples: int = 10_000) -> bool:
    by = {r["metric"]: r for r in old}
    for r in new:
        o = by[r["metric"]]
        se = math.sqrt(max(o["pvalue"] * (1 - o["pvalue"]), 1 / n_resamples) / n_resamples)
        if (r["verdict"] != o["verdict"] or abs(r["ci_low"] - o["ci_low"]) > 1e-9
                or abs(r["ci_high"] - o["ci_high"]) > 1e-9 or abs(r["pvalue"] - o["pvalue"]) > 4 * se + 1e-12):
            return False
    return len(new) == len(old)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clear_cached_views(url: str) -> None:
    """Delete every cached comparison and dashboard/report view from the store: the next command
    computes them from the scores."""
    from sqlalchemy import delete

    from ragmeter.analysis import compare_cache
    from ragmeter.apps.report import paged
    from ragmeter.store.models import KeyValueRow

    store = Store(url)
    with store.session() as s, s.begin():
        s.execute(delete(KeyValueRow).where(KeyValueRow.namespace.in_(
            [paged.NAMESPACE, paged.COMPARE_NAMESPACE, compare_cache.NAMESPACE])))
    store.close()


def fresh_processes(url: str, a: str, b: str, tmp: Path, reps: int) -> dict[str, Any]:
    """Section 5: ``reps`` rounds of fresh ``ragmeter`` processes (compare uncached and cached,
    report, serve to the first byte), the order alternating A/B/B/A; every time and the medians."""
    env = installed_env(tmp / "pycache")
    db = ["--db", url]
    times: dict[str, list[float]] = {"compare_s": [], "compare_cached_s": [], "report_s": [],
                                     "dashboard_first_byte_s": [], "dashboard_listening_s": []}
    report_bytes, status = 0, 0
    out_html = tmp / "fresh-report.html"

    def compare() -> None:
        clear_cached_views(url)
        times["compare_s"].append(run_timed(["compare", a, b, *db], env)[0])
        times["compare_cached_s"].append(run_timed(["compare", a, b, *db], env)[0])

    def report() -> None:
        nonlocal report_bytes
        clear_cached_views(url)
        times["report_s"].append(run_timed(["report", a, b, "-o", str(out_html), *db], env)[0])
        report_bytes = out_html.stat().st_size

    def serve() -> None:
        nonlocal status
        clear_cached_views(url)
        port = free_port()
        r = first_byte_after_launch(["serve", "--port", str(port), *db], env, port, f"/runs/{a}")
        times["dashboard_first_byte_s"].append(r["first_byte_s"])
        times["dashboard_listening_s"].append(r["listening_s"])
        status = r["status"]

    # warm-up, not measured: the file system cache, and the bytecode an installed copy has
    run_timed(["--help"], env)
    compare()
    report()
    serve()
    for k in times:
        times[k].clear()
    loads = [load_avg()]
    order = [compare, report, serve]
    for i in range(reps):
        for step in (order if i % 4 in (0, 3) else order[::-1]):
            step()
        loads.append(load_avg())
    out: dict[str, Any] = {k: median(v) for k, v in times.items()}
    out.update(runs={k: [round(x, 3) for x in v] for k, v in times.items()}, reps=reps,
               report_bytes=report_bytes, dashboard_status=status, command=" ".join(ragmeter_command()),
               load_avg_1_5_15=loads, bytecode="compiled by an unmeasured warm-up run, as pip does at install")
    return out


def dashboard_first_view(url: str, rid: str) -> tuple[float, int]:
    """A dashboard started in this process (uvicorn in a thread, 127.0.0.1), with no view of the
    run cached in the store: seconds and status of the first ``GET /runs/RID``."""
    import httpx
    import uvicorn
    from sqlalchemy import delete

    from ragmeter.apps.report import paged
    from ragmeter.apps.server.app import create_app
    from ragmeter.store.models import KeyValueRow

    store = Store(url)
    with store.session() as s, s.begin():  # no view cached: the first view is built from the store
        s.execute(delete(KeyValueRow).where(KeyValueRow.namespace.in_([paged.NAMESPACE, paged.COMPARE_NAMESPACE])))
    paged.clear_memory_cache()
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        while not server.started:
            time.sleep(0.02)
        t = time.perf_counter()
        r = httpx.get(f"{base}/runs/{rid}", timeout=600)
        return time.perf_counter() - t, r.status_code
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5, help="rounds of fresh processes (medians reported)")
    args = ap.parse_args()
    n = args.samples
    out: dict[str, Any] = {"samples": n, "metrics": METRICS, "cpu_count": os.cpu_count(),
                           "load_avg_1m": round(os.getloadavg()[0], 2)}
    import pandas as pd

    from ragmeter.analysis.compare import compare_runs
    from ragmeter.apps.export.files import export_run, run_rows
    from ragmeter.apps.report import write_report

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        url = f"sqlite:///{tmp / 'bench.db'}"
        store = Store(url)
        t = time.perf_counter()
        a, b = build_runs(store, n)
        print(f"built two runs of {n:,} samples x {len(METRICS)} metrics in {time.perf_counter() - t:.1f} s")

        # -- 1. compare ---------------------------------------------------------------------------
        t = time.perf_counter()
        res = compare_runs([a, b], store=store)
        out["compare_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        res2 = compare_runs([a, b], store=store)
        out["compare_cached_s"] = round(time.perf_counter() - t, 4)
        t = time.perf_counter()
        old = previous_compare(store, a, b)
        out["compare_previous_method_s"] = round(time.perf_counter() - t, 3)
        new = [r.to_dict() for r in res.rows]
        out["compare"] = {r["metric"]: {k: r[k] for k in ("diff", "ci_low", "ci_high", "pvalue", "verdict")}
                          for r in new}
        out["compare_previous_method"] = {r["metric"]: {k: r[k] for k in ("diff", "ci_low", "ci_high", "pvalue", "verdict")}
                                          for r in old}
        out["cached_equal"] = [r.to_dict() for r in res2.rows] == new
        out["verdicts_identical"] = same_verdicts(new, old)
        out["compare_speedup"] = round(out["compare_previous_method_s"] / out["compare_s"], 1)
        print(f"compare: {out['compare_s']} s ({out['compare_cached_s']} s cached); previous method "
              f"{out['compare_previous_method_s']} s; same verdicts: {out['verdicts_identical']}")

        # -- 2. export ----------------------------------------------------------------------------
        _, rows = run_rows(store, a)
        jsonl = tmp / "rows.jsonl"
        with jsonl.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        del rows
        for fmt, write in (("csv", lambda df, p: df.to_csv(p, index=False)),
                           ("parquet", lambda df, p: df.to_parquet(p, index=False))):
            t = time.perf_counter()
            path = export_run(store, a, fmt, tmp / f"a.{fmt}")
            ours = time.perf_counter() - t
            t = time.perf_counter()
            df = pd.read_json(jsonl, lines=True, dtype=False)
            for col in df.columns:  # lists and objects as JSON text, as ragmeter writes them
                if col in {"references", "contexts", "relevant", "metadata", "no_value_reasons", "judge"}:
                    df[col] = [None if v is None else json.dumps(v, ensure_ascii=False) for v in df[col]]
            write(df, tmp / f"pandas.{fmt}")
            theirs = time.perf_counter() - t
            out[f"export_{fmt}_s"] = round(ours, 3)
            out[f"pandas_{fmt}_s"] = round(theirs, 3)
            out[f"export_{fmt}_ratio"] = round(theirs / ours, 2)
            out[f"export_{fmt}_bytes"] = path.stat().st_size
            print(f"export {fmt}: ragmeter {ours:.2f} s, pandas read_json + write {theirs:.2f} s "
                  f"(ratio {theirs / ours:.2f}), {path.stat().st_size / 1e6:.1f} MB")
            del df

        # -- 3. report ----------------------------------------------------------------------------
        t = time.perf_counter()
        rpath = write_report(store, [a, b], tmp / "report.html")
        out["report_s"] = round(time.perf_counter() - t, 3)
        out["report_bytes"] = rpath.stat().st_size
        print(f"report: {out['report_s']} s, {out['report_bytes'] / 1e6:.2f} MB")
        store.close()

        # -- 4. dashboard -------------------------------------------------------------------------
        dt, status = dashboard_first_view(url, a)
        out["dashboard_first_view_s"] = round(dt, 3)
        out["dashboard_first_view_status"] = status
        print(f"dashboard: first /runs/RUN {dt:.2f} s (HTTP {status})")

        # -- 5. the commands a user types, fresh processes -----------------------------------------
        print(f"fresh processes ({args.reps} rounds, medians; load average {load_avg()}):", flush=True)
        fresh = fresh_processes(url, a, b, tmp, args.reps)
    out["fresh"] = fresh
    out["fresh_process"] = True
    for k in ("compare_s", "compare_cached_s", "report_s", "dashboard_first_byte_s", "dashboard_listening_s"):
        out[f"{k.removesuffix('_s')}_fresh_s"] = fresh[k]
    print(f"  ragmeter compare A B: {fresh['compare_s']:.2f} s ({fresh['compare_cached_s']:.2f} s cached); "
          f"in-process {out['compare_s']:.2f} s ({out['compare_cached_s']:.2f} s cached)")
    print(f"  ragmeter report A B: {fresh['report_s']:.2f} s, {fresh['report_bytes'] / 1e6:.2f} MB; "
          f"in-process {out['report_s']:.2f} s")
    print(f"  ragmeter serve: first byte of /runs/A {fresh['dashboard_first_byte_s']:.2f} s after launch "
          f"(listening after {fresh['dashboard_listening_s']:.2f} s, HTTP {fresh['dashboard_status']}); "
          f"in-process first view {out['dashboard_first_view_s']:.2f} s")
    print(f"  load average (1, 5, 15 min) after each round: {fresh['load_avg_1_5_15']}")

    out["targets"] = {"compare_fresh_s_lt_1.5": fresh["compare_s"] < 1.5,
                      "export_csv_ratio_ge_1": out["export_csv_ratio"] >= 1.0,
                      "report_fresh_s_lt_3": fresh["report_s"] < 3,
                      "report_bytes_lt_3MB": fresh["report_bytes"] < 3_000_000,
                      "dashboard_first_byte_fresh_s_lt_1.5": fresh["dashboard_first_byte_s"] < 1.5,
                      "verdicts_identical": out["verdicts_identical"]}
    print("; ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in out["targets"].items()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
