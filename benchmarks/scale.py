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


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    from ragmeter.store import open_store

    ta = open_store(f"sqlite:///{a['db']}").score_table(a["run_id"])
    tb = open_store(f"sqlite:///{b['db']}").score_table(b["run_id"])
    return {k: {s: (x.value, x.reason) for s, x in v.items()} for k, v in ta.items()} == \
        {k: {s: (x.value, x.reason) for s, x in v.items()} for k, v in tb.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated row counts")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray runtime")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    result: dict[str, Any] = {"metrics": METRICS.split(","), "cpus": args.cpus, "sizes": {}, "skipped": {}}
    for n in (100_000, 1_000_000):
        if n not in sizes:
            result["skipped"][str(n)] = f"not asked for (--sizes {args.sizes})"
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
    print(json.dumps(result))


if __name__ == "__main__":
    main()
