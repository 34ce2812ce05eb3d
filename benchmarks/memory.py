"""Peak memory of ``ragmeter eval`` as the number of rows grows: is it flat?

For each size (default 1,000,000 and 4,000,000 rows; ``--rows 200000`` for a quick run) a
deterministic JSONL file of RAG-like rows (question, answer, reference, two contexts) is written to
a temporary directory, then ``ragmeter eval FILE --metrics token_f1,rouge1_fmeasure`` runs as a fresh
process with its own SQLite store in that directory. While it runs, the proportional set size (PSS:
a page shared by n processes counts 1/n in each) of the ``ragmeter`` process and of every process it
forked (its second scoring process) is read from ``/proc/PID/smaps_rollup`` every 0.2 s and summed;
the largest sum is the run's peak. The main process's own peak is reported beside it.

Run: ``python benchmarks/memory.py [--rows 1000000,4000000]``. The last line printed is one JSON
object: per size, ``peak_tree_mb`` (MiB), ``peak_main_mb``, ``wall_s``, the run's means and the
machine's 1-minute load average before and after (``load_avg``); and ``growth`` = the largest
size's peak over the smallest's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

METRICS = "token_f1,rouge1_fmeasure"
WORDS = ("the of and to in is was for on that with as by at from it an be this are or have refund policy "
         "days customer order shipping return warranty account password invoice payment card within "
         "our store you can request a full after receiving item please contact support team").split()


def write_dataset(path: Path, n: int, seed: int = 45) -> None:
    """``n`` RAG-like rows: a question, an answer and a reference of 8-30 words, two contexts."""
    rnd = random.Random(seed)
    choice, randint = rnd.choice, rnd.randint
    with path.open("w") as fh:
        for i in range(n):
            def sentence(lo: int, hi: int) -> str:
                return " ".join(choice(WORDS) for _ in range(randint(lo, hi))).capitalize() + "."
            fh.write(json.dumps({"id": f"q{i}", "question": sentence(5, 12)[:-1] + "?",
                                 "answer": sentence(8, 30), "reference": sentence(8, 30),
                                 "contexts": [sentence(10, 25) for _ in range(2)]}) + "\n")


def pss_kb(pid: int) -> int:
    """The PSS of one process in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (its forked worker and anything that started)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(x) for x in fh.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            kids = []
        out.extend(kids)
        todo.extend(kids)
    return out


def run_eval(data: Path, db: Path, every_s: float = 0.2) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "ragmeter.apps.cli", "eval", str(data), "--metrics", METRICS,
           "--db", f"sqlite:///{db}", "--json", "--no-progress"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    peak_tree, peak_main, stop = [0], [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            main = pss_kb(proc.pid)
            tree = main + sum(pss_kb(p) for p in descendants(proc.pid))
            peak_tree[0], peak_main[0] = max(peak_tree[0], tree), max(peak_main[0], main)
            stop.wait(every_s)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    if proc.returncode != 0:
        raise SystemExit(f"ragmeter eval failed with exit status {proc.returncode}:\n{err[-2000:]}")
    summary = json.loads(out.strip().splitlines()[-1])
    return {"peak_tree_mb": round(peak_tree[0] / 1024, 1), "peak_main_mb": round(peak_main[0] / 1024, 1),
            "wall_s": round(wall, 2), "run_id": summary["run_id"], "n_samples": summary["n_samples"],
            "means": {k: v["mean"] for k, v in summary["metrics"].items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1000000,4000000", help="comma-separated row counts")
    ap.add_argument("--keep", type=Path, default=None, help="write the data and stores here (kept)")
    args = ap.parse_args()
    sizes = [int(x.replace("_", "")) for x in args.rows.split(",") if x.strip()]
    out: dict[str, Any] = {"command": f"ragmeter eval DATA --metrics {METRICS}", "metrics": METRICS.split(","),
                           "sampled_every_s": 0.2, "memory": "PSS summed over the eval process and its children",
                           "sizes": {}, "peak_tree_mb": {}}
    with tempfile.TemporaryDirectory(prefix="ragmeter-memory-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            data = work / f"rows-{n}.jsonl"
            if not data.exists():
                write_dataset(data, n)
            db = work / f"memory-{n}.db"
            db.unlink(missing_ok=True)
            load_before = os.getloadavg()[0]
            res = run_eval(data, db)
            res["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # 1-minute, before / after
            res["data_mb"] = round(data.stat().st_size / 2**20, 1)
            print(f"{n:>10,} rows: peak {res['peak_tree_mb']:,.0f} MiB over the process tree "
                  f"(main {res['peak_main_mb']:,.0f} MiB), {res['wall_s']:.1f} s", flush=True)
            out["sizes"][str(n)] = res
            out["peak_tree_mb"][str(n)] = res["peak_tree_mb"]
            if args.keep is None:
                data.unlink()
                db.unlink(missing_ok=True)
    peaks = [out["peak_tree_mb"][str(n)] for n in sorted(sizes)]
    if len(peaks) > 1 and peaks[0]:
        out["growth"] = round(peaks[-1] / peaks[0], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
