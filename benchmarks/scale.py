"""Scale-out: rows/s and peak memory of the local and the Ray engine, lexical + retrieval metrics.

For each size (default 100,000 and 1,000,000 rows; ``--sizes 100000`` for a quick run) a deterministic
JSONL dataset is written, then ``ragmeter eval DATA --metrics token_f1,rouge1_fmeasure,ndcg@10,mrr``
runs once per engine in a fresh subprocess with its own SQLite store (``--engine local`` and
``--engine ray`` on a local Ray runtime of ``--cpus`` CPUs). Figures per run: wall time from start to
stored summary (Ray start-up included), rows/s = rows / wall time, and peak memory = the largest
sum of proportional set sizes (PSS: a page shared by n processes counts 1/n in each) over the
process tree (the eval process and its forked worker, and for Ray its raylet, GCS and workers),
sampled every 0.2 s with psutil. The Ray run's values are checked equal to the local run's.

Run: ``python benchmarks/scale.py [--sizes 100000,1000000] [--cpus 2]``. The last line printed is one JSON
object with the figures; sizes not run are listed under ``skipped`` with the reason.

The heavy workloads (``--embeddings``, ``--judge``; given alone they replace the lexical sizes unless
``--sizes`` is given too):

- ``--embeddings``: ``--samples`` rows (default 200,000) scored with
  ``semantic_similarity,context_similarity`` (bundled all-MiniLM-L6-v2): every answer and reference
  distinct, three contexts per row drawn from a pool of passages; each engine starts from an empty
  store, so every distinct text is encoded once (locally on the driver, on Ray by the encoder
  actors). Values compared within 1e-6 (``values_identical``), the largest difference reported.
- ``--judge``: ``--judge-samples`` rows (default 20,000) scored with ``faithfulness`` against the
  fake OpenAI-compatible judge of tests/judge_server.py, run as its own process on 127.0.0.1 with
  ``--judge-latency`` seconds per reply (default 0.1), ``--concurrency`` requests in flight at most
  (default 16); values compared exactly, and the server's peak of requests in flight reported.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from _procmem import run_measured

METRICS = "token_f1,rouge1_fmeasure,ndcg@10,mrr"
WORDS = ("the of and to in is was for on that with as by at from it an be this are or have refund policy "
         "days customer order shipping return warranty account password invoice payment card").split()


def write_dataset(path: Path, n: int, seed: int = 11) -> None:
    rnd = random.Random(seed)
    with path.open("w") as fh:
        for i in range(n):
            ans = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 30)))
            ref = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 30)))
            fh.write(json.dumps({"id": f"q{i}", "question": "q", "answer": ans, "reference": ref,
                                 "retrieved_ids": rnd.sample(range(500), 10),
                                 "relevant_ids": rnd.sample(range(500), 3)}) + "\n")


def run_engine(data: Path, engine: str, workdir: Path, cpus: int) -> dict[str, Any]:
    db = workdir / f"{engine}.db"
    env = {**os.environ, "RAGMETER_RAY_NUM_CPUS": str(cpus), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "ragmeter.apps.cli", "eval", str(data), "--metrics", METRICS, "--engine", engine,
           "--db", f"sqlite:///{db}", "--json", "--no-progress"]
    proc, out, _err, wall, peak = run_measured(cmd, every_s=0.2, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{engine} eval failed with exit status {proc.returncode}")
    summary = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(peak / 2**20, 1),
            "run_id": summary["run_id"], "db": str(db),
            "means": {k: v["mean"] for k, v in summary["metrics"].items()}}


def write_semantic(path: Path, n: int, seed: int = 13) -> None:
    """Rows with a distinct answer and reference each, and three contexts from a pool of passages."""
    rnd = random.Random(seed)
    passages = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(30, 60))) + f" passage {i}."
                for i in range(max(50, n // 20))]
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "question": f"question {i}",
                                 "answer": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 24))) + f" {i}a",
                                 "reference": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 24))) + f" {i}r",
                                 "contexts": rnd.sample(passages, 3)}) + "\n")


def write_judged(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "question": "What is the capital of France?",
                                 "answer": f"Paris is the capital of France. Fact number {i} is invented.",
                                 "contexts": ["Paris is the capital of France.", f"Unrelated text {i}."]}) + "\n")


def run_heavy(data: Path, engine: str, workdir: Path, cpus: int, metrics: str, extra: list[str],
              tag: str) -> dict[str, Any]:
    db = workdir / f"{tag}-{engine}.db"
    env = {**os.environ, "RAGMETER_RAY_NUM_CPUS": str(cpus), "HF_HUB_OFFLINE": "1",
           "OPENAI_API_KEY": "sk-benchmark-not-a-real-key"}
    cmd = [sys.executable, "-m", "ragmeter", "eval", str(data), "--metrics", metrics, "--engine", engine,
           "--db", f"sqlite:///{db}", "--json", "--no-progress", *extra]
    proc, out, err, wall, peak = run_measured(cmd, every_s=0.2, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{tag} {engine} eval failed with exit status {proc.returncode}: {err[-2000:]}")
    summary = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(peak / 2**20, 1), "run_id": summary["run_id"],
            "db": str(db), "means": {k: v["mean"] for k, v in summary["metrics"].items()},
            "embeddings": summary.get("embeddings"), "judge": summary.get("judge")}


def close_values(a: dict[str, Any], b: dict[str, Any], tol: float) -> tuple[bool, float]:
    """Whether every value of run ``a`` is within ``tol`` of run ``b``'s (same reasons, same missing
    values); and the largest difference."""
    from ragmeter.store import open_store

    ta = open_store(f"sqlite:///{a['db']}").score_table(a["run_id"])
    tb = open_store(f"sqlite:///{b['db']}").score_table(b["run_id"])
    if set(ta) != set(tb):
        return False, float("inf")
    ok, worst = True, 0.0
    for k, per in ta.items():
        if set(per) != set(tb[k]):
            return False, float("inf")
        for sid, x in per.items():
            y = tb[k][sid]
            if x.reason != y.reason or (x.value is None) != (y.value is None):
                ok = False
            elif x.value is not None:
                worst = max(worst, abs(x.value - y.value))
    return ok and worst <= tol, worst


def heavy_row(n: int, row: dict[str, Any], same: bool, worst: float) -> dict[str, Any]:
    return {"samples": n,
            **{f"{e}_rows_per_s": round(n / row[e]["wall_s"], 1) for e in ("local", "ray")},
            **{f"{e}_peak_rss_mb": row[e]["peak_rss_mb"] for e in ("local", "ray")},
            **{f"{e}_wall_s": row[e]["wall_s"] for e in ("local", "ray")},
            "ray_over_local_speed": round(row["local"]["wall_s"] / row["ray"]["wall_s"], 3),
            "values_identical": same, "max_abs_diff": worst}


def bench_embeddings(n: int, work: Path, cpus: int) -> dict[str, Any]:
    data = work / f"semantic_{n}.jsonl"
    write_semantic(data, n)
    metrics = "semantic_similarity,context_similarity"
    row = {e: run_heavy(data, e, work, cpus, metrics, [], "emb") for e in ("local", "ray")}
    for e in ("local", "ray"):
        print(f"embeddings, {n} rows, {e}: {row[e]['wall_s']} s, {n / row[e]['wall_s']:.1f} rows/s, "
              f"peak {row[e]['peak_rss_mb']} MB, {row[e]['embeddings']}", flush=True)
    same, worst = close_values(row["local"], row["ray"], 1e-6)
    return {**heavy_row(n, row, same, worst), "metrics": metrics.split(","), "tolerance": 1e-6,
            "texts_encoded": {e: (row[e]["embeddings"] or {}).get("computed") for e in ("local", "ray")},
            "ray_encoders": (row["ray"]["embeddings"] or {}).get("ray")}


def bench_judge(n: int, work: Path, cpus: int, latency: float, concurrency: int) -> dict[str, Any]:
    import subprocess

    data = work / f"judged_{n}.jsonl"
    write_judged(data, n)
    server_py = Path(__file__).resolve().parent.parent / "tests" / "judge_server.py"
    row: dict[str, Any] = {}
    peaks: dict[str, int] = {}
    for e in ("local", "ray"):  # a fresh server per engine: its in-flight peak is that engine's
        srv = subprocess.Popen([sys.executable, str(server_py), "--port", "0", "--delay", str(latency)],
                               stdout=subprocess.PIPE, text=True)
        try:
            port = int((srv.stdout.readline() if srv.stdout else "").split()[1])
            extra = ["--judge", "openai:bench-model", "--judge-base-url", f"http://127.0.0.1:{port}/v1",
                     "--concurrency", str(concurrency)]
            row[e] = run_heavy(data, e, work, cpus, "faithfulness", extra, "judge")
            from urllib.request import urlopen

            with urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as resp:
                peaks[e] = int(json.loads(resp.read()).get("max_inflight", 0))
        finally:
            srv.terminate()
            srv.wait(10)
        print(f"judge, {n} rows, {e}: {row[e]['wall_s']} s, {n / row[e]['wall_s']:.1f} rows/s, "
              f"peak {row[e]['peak_rss_mb']} MB, server peak in flight {peaks[e]}", flush=True)
    same, worst = close_values(row["local"], row["ray"], 0.0)
    return {**heavy_row(n, row, same, worst), "metrics": ["faithfulness"], "latency_s": latency,
            "concurrency": concurrency, "server_max_in_flight": peaks,
            "judge_calls": {e: (row[e]["judge"] or {}).get("calls") for e in ("local", "ray")}}


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    from ragmeter.store import open_store

    ta = open_store(f"sqlite:///{a['db']}").score_table(a["run_id"])
    tb = open_store(f"sqlite:///{b['db']}").score_table(b["run_id"])
    return {k: {s: (x.value, x.reason) for s, x in v.items()} for k, v in ta.items()} == \
        {k: {s: (x.value, x.reason) for s, x in v.items()} for k, v in tb.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=None, help="comma-separated row counts (default 100000,1000000)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray runtime")
    ap.add_argument("--embeddings", action="store_true", help="semantic_similarity,context_similarity workload")
    ap.add_argument("--samples", type=int, default=200_000, help="rows of the --embeddings workload")
    ap.add_argument("--judge", action="store_true", help="faithfulness against a fake judge workload")
    ap.add_argument("--judge-samples", type=int, default=20_000, help="rows of the --judge workload")
    ap.add_argument("--judge-latency", type=float, default=0.1, help="seconds per fake judge reply")
    ap.add_argument("--concurrency", type=int, default=16, help="judge requests in flight at most")
    args = ap.parse_args()
    for name in ("samples", "judge_samples", "concurrency", "cpus"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    heavy = args.embeddings or args.judge
    sizes_arg = args.sizes if args.sizes is not None else ("" if heavy else "100000,1000000")
    try:
        sizes = [int(x) for x in sizes_arg.split(",") if x]
    except ValueError:
        ap.error(f"--sizes must be comma-separated row counts, got {sizes_arg!r}")
    result: dict[str, Any] = {"metrics": METRICS.split(","), "cpus": args.cpus, "sizes": {}, "skipped": {}}
    for n in (100_000, 1_000_000):
        if n not in sizes:
            result["skipped"][str(n)] = f"not asked for (--sizes {sizes_arg or 'none'})"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in sizes:
            data = work / f"rows_{n}.jsonl"
            write_dataset(data, n)
            row: dict[str, Any] = {}
            for engine in ("local", "ray"):
                r = run_engine(data, engine, work, args.cpus)
                row[engine] = r
                print(f"{n} rows, {engine}: {r['wall_s']} s, {n / r['wall_s']:.0f} rows/s, "
                      f"peak {r['peak_rss_mb']} MB", flush=True)
            same = same_values(row["local"], row["ray"])
            result["sizes"][str(n)] = {
                **{f"{e}_rows_per_s": round(n / row[e]["wall_s"], 1) for e in ("local", "ray")},
                **{f"{e}_peak_rss_mb": row[e]["peak_rss_mb"] for e in ("local", "ray")},
                **{f"{e}_wall_s": row[e]["wall_s"] for e in ("local", "ray")},
                "ray_over_local_speed": round(row["local"]["wall_s"] / row["ray"]["wall_s"], 3),
                "identical_values": same}
        checks = [v["identical_values"] for v in result["sizes"].values()]
        if args.embeddings:
            result["embeddings"] = bench_embeddings(args.samples, work, args.cpus)
            checks.append(result["embeddings"]["values_identical"])
        if args.judge:
            result["judge"] = bench_judge(args.judge_samples, work, args.cpus, args.judge_latency, args.concurrency)
            checks.append(result["judge"]["values_identical"])
    result["values_identical"] = all(checks)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
