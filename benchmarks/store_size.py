"""Bytes a stored score costs: file size / number of scores of a SQLite store after one run of the
five lexical metrics (rouge1_fmeasure, rougeL_fmeasure, bleu, token_f1, exact_match).

    python benchmarks/store_size.py --n 30000

The sample texts are the bundled example's, repeated with new ids (size depends on the data, not
on time). Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from pathlib import Path

from ragmeter.io.readers import load
from ragmeter.run.runner import evaluate

METRICS = ["rouge1_fmeasure", "rougeL_fmeasure", "bleu", "token_f1", "exact_match"]


def rows(n: int) -> list[dict]:
    base = load("example").samples
    out = []
    for i in range(n):
        s = base[i % len(base)]
        out.append({"id": f"q{i:06d}", "question": s.question, "answer": s.answer, "reference": s.reference})
    return out


def measure(n: int, folder: Path) -> dict:
    db = folder / "size.db"
    res = evaluate(rows(n), METRICS, db=f"sqlite:///{db}")
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    n_scores = con.execute("SELECT count(*) FROM scores").fetchone()[0]
    tables = {}
    try:
        for name, size in con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            tables[name] = size
    except sqlite3.OperationalError:  # SQLite built without dbstat
        pass
    con.close()
    size = db.stat().st_size
    return {"n_samples": len(res.samples), "n_scores": n_scores, "file_bytes": size,
            "bytes_per_score": round(size / n_scores, 1),
            "scores_table_bytes_per_score": round(tables.get("scores", 0) / n_scores, 1) if tables else None,
            "tables": tables}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(measure(args.n, Path(d))))


if __name__ == "__main__":
    main()
