"""Several processes writing scores into one SQLite file: WAL journal (what the store uses) against
SQLite's default rollback journal, both with a busy timeout, as the store's batches write them.

    python benchmarks/sqlite_writers.py --procs 4 --batches 200 --rows 100

Prints one JSON object as its last line: wall time and failed transactions per journal mode.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sqlite3
import tempfile
import time
from pathlib import Path

SCHEMA = ("CREATE TABLE scores (run_id TEXT, metric_id INTEGER, position INTEGER, value REAL, "
          "reason TEXT, details TEXT, PRIMARY KEY (run_id, metric_id, position)) WITHOUT ROWID")


def writer(path: str, mode: str, wid: int, batches: int, rows: int, out: mp.Queue) -> None:
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.execute("PRAGMA busy_timeout=60000")
    con.execute(f"PRAGMA journal_mode={mode}")
    con.execute("PRAGMA synchronous=NORMAL")
    failed = 0
    for b in range(batches):
        try:
            con.execute("BEGIN IMMEDIATE")
            con.executemany("INSERT INTO scores VALUES (?, ?, ?, ?, NULL, NULL) ON CONFLICT DO NOTHING",
                            [(f"run{wid}", 1, b * rows + i, 0.5) for i in range(rows)])
            con.execute("COMMIT")
        except sqlite3.OperationalError:
            failed += 1
            con.execute("ROLLBACK")
        # readers (progress, resume checks) interleave with the writes
        con.execute("SELECT count(*) FROM scores WHERE run_id = ?", (f"run{wid}",)).fetchone()
    con.close()
    out.put(failed)


def run(mode: str, procs: int, batches: int, rows: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "w.db")
        con = sqlite3.connect(path)
        con.execute(f"PRAGMA journal_mode={mode}")
        con.execute(SCHEMA)
        con.close()
        q: mp.Queue = mp.Queue()
        ps = [mp.Process(target=writer, args=(path, mode, w, batches, rows, q)) for w in range(procs)]
        t = time.perf_counter()
        for p in ps:
            p.start()
        for p in ps:
            p.join()
        wall = time.perf_counter() - t
        failed = sum(q.get() for _ in ps)
        n = sqlite3.connect(path).execute("SELECT count(*) FROM scores").fetchone()[0]
    return {"wall_s": round(wall, 3), "failed_batches": failed, "rows": n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--rows", type=int, default=100)
    a = ap.parse_args()
    wal = run("WAL", a.procs, a.batches, a.rows)
    delete = run("DELETE", a.procs, a.batches, a.rows)
    print(json.dumps({"procs": a.procs, "batches": a.batches, "rows_per_batch": a.rows, "wal": wal,
                      "rollback_journal": delete,
                      "wall_ratio_rollback_over_wal": round(delete["wall_s"] / wal["wall_s"], 2)}))


if __name__ == "__main__":
    main()
