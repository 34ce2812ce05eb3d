"""End to end, from a user's seat: each ragmeter command beside the code a user would otherwise run.

Every row runs in this one invocation, each side in a fresh child process (so start-up, reading and
writing count; peak memory is the child's own high-water mark, ``VmHWM`` of ``/proc/self/status``):

* ``eval``: ``ragmeter eval PAIRS.jsonl --metrics rouge1_fmeasure,rougeL_fmeasure,bleu,token_f1,
  exact_match`` from the JSONL file to the stored run (SQLite), against a plain loop over
  rouge-score (``RougeScorer(["rouge1", "rougeL"], use_stemmer=True)``) and sacrebleu's sentence
  BLEU on the same pairs; the store's bytes per stored score (file size / scores) beside it;
* ``export``: ``ragmeter export RUN -f csv|parquet|jsonl`` of that run (rows with the texts and five
  metric columns) against pandas reading the JSONL and writing the same columns with ``to_csv`` /
  ``to_parquet`` / ``to_json``;
* ``report``: ``ragmeter report RUN`` (one HTML file) on that run;
* ``api``: ``ragmeter.evaluate`` of pairs on the string metrics and on ``bleu`` against a per-pair
  rapidfuzz/textdistance loop and a reused ``sacrebleu.BLEU().sentence_score`` loop;
* ``trec``: ``ragmeter trec`` on TREC qrels/run files (``--trec-queries`` x 100 documents, six
  measures) against pytrec_eval parsing and evaluating the same files;
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
import sys
import tempfile
import textwrap
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


def python_child(code: str, *args: str, tree: bool = False) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter: wall seconds and its own peak RSS (``VmHWM``, printed by
    the child as its last line); with ``tree``, also the peak PSS of its process tree (a forked
    worker included, shared pages counted once), sampled every 0.1 s. Reading a tree's PSS costs
    CPU (smaps) that a two-process run on two CPUs feels, so timings come from runs without it."""
    from _procmem import run_measured

    wrapper = code + textwrap.dedent("""
        import re as _re
        with open("/proc/self/status") as _f:
            print("VMHWM", _re.search(r"VmHWM:\\s+(\\d+)", _f.read()).group(1))
    """)
    proc, out, err, wall, peak = run_measured([sys.executable, "-c", wrapper, *args],
                                              every_s=0.1 if tree else None)
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{err[-2000:]}")
    lines = out.strip().splitlines()
    hwm = int(lines[-1].split()[1]) / 1024
    return {"s": round(wall, 3), "peak_mb": round(hwm, 1), "tree_pss_mb": round(peak / 2**20, 1),
            "stdout": "\n".join(lines[:-1])}


def ragmeter_cmd(*args: str, tree: bool = False) -> dict[str, Any]:
    """``ragmeter ARGS`` in a fresh interpreter that reports its own peak memory."""
    # the console script's own entry (it ends with a quick exit after the atexit handlers, so the
    # peak memory line is printed by one)
    code = ("import atexit, re, sys\n"
            "def _hwm():\n"
            "    with open('/proc/self/status') as f:\n"
            "        print('VMHWM', re.search(r'VmHWM:\\s+(\\d+)', f.read()).group(1), flush=True)\n"
            "atexit.register(_hwm)\n"
            "from ragmeter.apps.cli import entry\nsys.argv = ['ragmeter', *sys.argv[1:]]\nentry()\n")
    return python_child(code, *args, tree=tree)


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
    # the process tree's memory (the forked worker included) in a run of its own, into another store
    pss = ragmeter_cmd("eval", str(data), "--metrics", METRICS, "--db", f"sqlite:///{work / 'pss.db'}", "--json",
                       "--no-progress", tree=True)["tree_pss_mb"]
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
    import sqlite3

    con = sqlite3.connect(db)
    try:  # the scores table alone (SQLite's dbstat table, where the build has it)
        score_bytes = con.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'scores'").fetchone()[0]
    except sqlite3.OperationalError:
        score_bytes = None
    con.close()
    return {"pairs": n, "ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"],
            "ragmeter_tree_pss_mb": pss, "anchor_s": anchor["s"], "anchor_peak_mb": anchor["peak_mb"],
            "speedup": round(anchor["s"] / ours["s"], 2), "max_abs_diff": worst,
            "bytes_per_score": round(db.stat().st_size / n_scores, 1),
            "score_table_bytes_per_score": round(score_bytes / n_scores, 1) if score_bytes else None, "run_id": run_id, "db": str(db),
            "data": str(data)}


ANCHOR_EXPORT = """
import json, sys
import pandas as pd
df = pd.read_json(sys.argv[1], lines=True)
for m in sys.argv[3].split(","):
    df[m] = 0.5
fmt, out = sys.argv[2], sys.argv[4]
if fmt == "csv":
    df.to_csv(out, index=False)
elif fmt == "parquet":
    df.to_parquet(out, index=False)
else:
    df.to_json(out, orient="records", lines=True, force_ascii=False)
"""


def bench_export(work: Path, ev: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fmt in ("csv", "parquet", "jsonl"):
        ours = ragmeter_cmd("export", ev["run_id"], "-f", fmt, "-o", str(work / f"run.{fmt}"),
                            "--db", f"sqlite:///{ev['db']}")
        anchor = python_child(ANCHOR_EXPORT, ev["data"], fmt, METRICS, str(work / f"pandas.{fmt}"))
        out[fmt] = {"ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"], "pandas_s": anchor["s"],
                    "pandas_peak_mb": anchor["peak_mb"], "ratio": round(anchor["s"] / ours["s"], 2)}
    return out


def bench_report(work: Path, ev: dict[str, Any]) -> dict[str, Any]:
    r = ragmeter_cmd("report", ev["run_id"], "-o", str(work / "report.html"), "--db", f"sqlite:///{ev['db']}")
    return {"s": r["s"], "peak_mb": r["peak_mb"], "bytes": (work / "report.html").stat().st_size}


ANCHOR_API = """
import json, sys, time
import sacrebleu
from rapidfuzz.distance import JaroWinkler, Levenshtein
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
lev = [Levenshtein.normalized_similarity(r["answer"], r["reference"]) for r in rows]
jw = [JaroWinkler.similarity(r["answer"], r["reference"]) for r in rows]
bleu = sacrebleu.BLEU(effective_order=True)
b = [bleu.sentence_score(r["answer"], [r["reference"]]).score for r in rows]
"""

OURS_API = """
import json, sys
import ragmeter
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
res = ragmeter.evaluate(rows, ["levenshtein", "jaro_winkler", "bleu"], db=sys.argv[3])
"""


def bench_api(work: Path, ev: dict[str, Any], n: int) -> dict[str, Any]:
    ours = python_child(OURS_API, ev["data"], str(n), f"sqlite:///{work / 'api.db'}")
    anchor = python_child(ANCHOR_API, ev["data"], str(n))
    return {"pairs": n, "ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"], "loop_s": anchor["s"],
            "loop_peak_mb": anchor["peak_mb"], "ratio": round(anchor["s"] / ours["s"], 2)}


ANCHOR_TREC = """
import sys, pytrec_eval
with open(sys.argv[1]) as fq, open(sys.argv[2]) as fr:
    qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank", "P.5", "recall.100", "map",
                                             "success.10"}).evaluate(run)
"""


def bench_trec(work: Path, n_queries: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from retrieval import build_dicts, make_data, write_trec

    d = make_data(n_queries, 100, 5)
    qrels, run, _ = build_dicts(d, d["graded"])
    folder = work / "trec"
    folder.mkdir()
    qpath, rpath = write_trec(qrels, run, str(folder))
    del qrels, run, d
    ours = ragmeter_cmd("trec", qpath, rpath, "-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "P.5",
                        "-m", "recall.100", "-m", "map", "-m", "success.10")
    anchor = python_child(ANCHOR_TREC, qpath, rpath)
    return {"queries": n_queries, "docs_per_query": 100, "ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"],
            "pytrec_eval_s": anchor["s"], "pytrec_eval_peak_mb": anchor["peak_mb"],
            "ratio": round(anchor["s"] / ours["s"], 2)}


def bench_startup() -> dict[str, Any]:
    runs = [ragmeter_cmd("--help")["s"] for _ in range(3)]
    return {"help_s": min(runs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=30_000)
    ap.add_argument("--only", default="eval,export,report,api,trec,startup", help="comma-separated rows to run")
    ap.add_argument("--api-pairs", type=int, default=10_000)
    ap.add_argument("--trec-queries", type=int, default=50_000)
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
            if "export" in only:
                result["export"] = bench_export(work, r)
                print("export:", json.dumps(result["export"]), flush=True)
            if "report" in only:
                result["report"] = bench_report(work, r)
                print("report:", json.dumps(result["report"]), flush=True)
            if "api" in only:
                result["api"] = bench_api(work, r, args.api_pairs)
                print("api:", json.dumps(result["api"]), flush=True)
        if "trec" in only:
            result["trec"] = bench_trec(work, args.trec_queries)
            print("trec:", json.dumps(result["trec"]), flush=True)
        if "startup" in only:
            result["startup"] = bench_startup()
            print("startup:", json.dumps(result["startup"]), flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
