"""``ragmeter trec`` on TREC files against pytrec_eval parsing and evaluating the same files.

50,000 queries x 100 retrieved documents (a 186 MB run, 5M lines) and their qrels (1-5 judged
documents per query, graded 1-3), written as benchmarks/retrieval.py writes them
(``make_data`` / ``build_dicts`` / ``write_trec``). Measures: ndcg_cut.10, recip_rank, P.5,
recall.100, map, success.10. Each side runs in its own child process so that peak memories
compare fairly (peak resident memory of the child, from ``os.wait4``):

* ragmeter: ``python -m ragmeter.apps.cli trec QRELS RUN -m ...`` end to end (interpreter start-up,
  imports, reading, evaluating, printing); also with ``-q`` (every query's lines);
* pytrec_eval: ``pytrec_eval.parse_qrel`` + ``parse_run`` + ``RelevanceEvaluator(...).evaluate``,
  timed inside the child from just before parsing to the end of evaluate (its start-up and
  imports are not counted, which favours pytrec_eval); its peak memory is the whole child's.

Runs alternate (pytrec_eval, ragmeter, ragmeter -q, ...) ``--repeat`` times; the best time of each
counts, and the ratios are taken between figures of this one run. Values: every query's value
of the 6 measures and of trec_eval's ``official`` measures, from ``ragmeter trec --json -q``,
are compared with pytrec_eval's, and the ``all`` averages with pytrec_eval's values added in
qid order (as trec_eval does); the counts of differing values are reported (0 = identical).

``--queries-stream N`` (default 0: off) also writes an N-query x 100 run (1,000,000: a 3.9 GB
file, 100M lines) and its qrels with a vectorised writer (same distribution) and reports
``ragmeter trec``'s time and peak memory on it, with the full qrels and with the judgements of
its first 60,000 queries only: the run is read and evaluated in blocks of whole queries, so its
size does not count in memory (the qrels and one value per query and measure do). pytrec_eval
is not run on it: it holds the whole run as dicts.

Usage: ``python benchmarks/trec_files.py [--queries 50000] [--repeat 5] [--queries-stream 1000000]``.
The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MEASURES = ("ndcg_cut.10", "recip_rank", "P.5", "recall.100", "map", "success.10")
OFFICIAL = ("map", "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "num_ret", "num_rel",
            "num_rel_ret")

PYTREC_CHILD = r"""
import json, sys, time
import pytrec_eval
qpath, rpath, out, measures = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
t = time.perf_counter()
with open(qpath) as fq, open(rpath) as fr:
    qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
res = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
elapsed = time.perf_counter() - t
if out != "-":
    with open(out, "w") as fh:
        json.dump(res, fh)
print(json.dumps({"seconds": elapsed}))
"""


def child(cmd: list[str], stdout_path: str | None = None) -> dict[str, Any]:
    """Run ``cmd``; its wall time, peak resident memory (MB) and stdout."""
    out = open(stdout_path, "wb") if stdout_path else tempfile.TemporaryFile()  # noqa: SIM115
    with out, tempfile.TemporaryFile() as errf:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=errf)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak resident memory
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read().decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}): {err[-2000:]}")
        text = ""
        if not stdout_path:
            out.seek(0)
            text = out.read().decode()
    return {"wall": wall, "peak_mb": usage.ru_maxrss / 1024, "stdout": text}


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def ragmeter_cmd(qpath: str, rpath: str, measures: tuple[str, ...], *extra: str) -> list[str]:
    return [sys.executable, "-m", "ragmeter.apps.cli", "trec", qpath, rpath,
            *[a for m in measures for a in ("-m", m)], *extra]


def pytrec(qpath: str, rpath: str, measures: tuple[str, ...], out: str = "-") -> dict[str, Any]:
    r = child([sys.executable, "-c", PYTREC_CHILD, qpath, rpath, out, ",".join(measures)])
    r["seconds"] = json.loads(r.pop("stdout").strip().splitlines()[-1])["seconds"]
    return r


def compare(ours: dict[str, Any], ref: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per-query values (all queries, every value name pytrec_eval returns) and the ``all``
    averages (pytrec_eval's values added in qid order, as trec_eval does)."""
    per_q = ours["per_query"]
    names = sorted({n for row in ref.values() for n in row} - {"gm_map"})
    per_query_names = sorted({n for row in ref.values() for n in row})  # gm_map: log(AP) in both
    differ, compared, max_abs = 0, 0, 0.0
    missing = sorted(set(ref) ^ set(per_q))
    for q, row in ref.items():
        mine = per_q.get(q, {})
        for n in per_query_names:
            compared += 1
            a, b = mine.get(n), row[n]
            if a is None or a != b:
                differ += 1
                if a is not None:
                    max_abs = max(max_abs, abs(a - b))
    summary_differ = []
    qids = sorted(ref)
    for n in names:
        total = 0.0
        for q in qids:
            total += ref[q][n]
        if n.startswith("num_"):
            expected: float = int(total)
        else:
            expected = total / len(qids)
        if ours["summary"].get(n) != expected:
            summary_differ.append(n)
    if "gm_map" in ours["summary"]:
        # per query, gm_map is log(max(AP, 1e-5)); the average is exp(their mean)
        total = 0.0
        for q in qids:
            total += ref[q]["gm_map"]
        if ours["summary"]["gm_map"] != math.exp(total / len(qids)):
            summary_differ.append("gm_map")
    return {"queries": len(ref), "values_compared": compared, "values_differ": differ,
            "max_abs_diff": max_abs, "queries_missing": len(missing), "summary_differ": summary_differ}


def write_files(folder: Path, nq: int, depth: int) -> None:
    """The qrels and run files as benchmarks/retrieval.py writes them (run in a child process:
    the dicts take a few GB, which must not count in the children measured later)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from retrieval import build_dicts, make_data, write_trec

    d = make_data(nq, depth, 5)
    qrels, run, _ = build_dicts(d, d["graded"])
    write_trec(qrels, run, str(folder))


def write_stream(folder: Path, nq: int, depth: int = 100, seed: int = 5, chunk: int = 20_000,
                 head: int = 60_000) -> tuple[str, str]:
    """An ``nq``-query run and its qrels with make_data's distribution, written chunk by chunk
    with pyarrow string kernels (no per-line Python); ``qrels_head.txt`` holds the judgements of
    the first ``head`` queries only."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def strs(x: Any, prefix: str = "") -> Any:
        s = pa.array(x).cast(pa.string())
        return pc.binary_join_element_wise(pa.scalar(prefix), s, "") if prefix else s

    def lines(*cols: Any) -> bytes:
        joined = pc.binary_join_element_wise(pc.binary_join_element_wise(*cols, " "), pa.scalar("\n"), "")
        off = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=len(joined) + 1)
        return joined.buffers()[2].to_pybytes()[off[0]:off[-1]]

    qpath, rpath = folder / "qrels.txt", folder / "run.txt"
    corpus = 50 * nq
    with qpath.open("wb") as fq, rpath.open("wb") as fr, (folder / "qrels_head.txt").open("wb") as fh:
        for start in range(0, nq, chunk):
            n = min(chunk, nq - start)
            rng = np.random.default_rng([seed, start])
            ranked = rng.integers(0, corpus // depth, size=(n, depth)) * depth + np.arange(depth)
            scores = np.round(depth - np.arange(depth) - rng.random((n, depth)) * 0.9, 6)
            n_rel = rng.integers(1, 6, size=n)
            slots = np.argsort(rng.random((n, 2 * depth)), axis=1)[:, :5]  # distinct within a query
            qq = np.repeat(np.arange(n), n_rel)
            slot = slots[qq, np.arange(len(qq)) - np.repeat(np.cumsum(n_rel) - n_rel, n_rel)]
            qd = np.where(slot < depth, ranked[qq, np.minimum(slot, depth - 1)],
                          corpus + (start + qq) * 2 * depth + slot)
            grades = rng.integers(1, 4, size=len(qq))
            judged = lines(strs(start + qq, "q"), pa.scalar("0"), strs(qd, "d"), strs(grades))
            fq.write(judged)
            if start < head:  # the judgements of the first queries only
                fh.write(judged)
            rq = np.repeat(np.arange(start, start + n), depth)
            rank = np.tile(np.arange(1, depth + 1), n)
            fr.write(lines(strs(rq, "q"), pa.scalar("Q0"), strs(ranked.reshape(-1), "d"), strs(rank),
                           strs(scores.reshape(-1)), pa.scalar("bench")))
    return str(qpath), str(rpath)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=50_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--queries-stream", type=int, default=0,
                    help="also evaluate a run of this many queries (1000000: a 3.9 GB file); 0: off")
    ap.add_argument("--keep", help="write the files here and keep them (default: a temporary folder)")
    ap.add_argument("--write-only", nargs=2, metavar=("KIND", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:  # the child process writing the files
        kind, where = args.write_only
        if kind == "files":
            write_files(Path(where), args.queries, args.depth)
        else:
            write_stream(Path(where), args.queries_stream, args.depth)
        return
    # this process stays small (no numpy, no data): a child's peak memory counts what its
    # parent held when it was started
    out: dict[str, Any] = {"queries": args.queries, "depth": args.depth, "measures": list(MEASURES),
                           "cpus": len(os.sched_getaffinity(0)), "load_before": os.getloadavg()[0]}
    tmp = tempfile.TemporaryDirectory(prefix="trec_files_")
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    me = [sys.executable, str(Path(__file__).resolve()), "--queries", str(args.queries), "--depth", str(args.depth)]
    subprocess.run([*me, "--write-only", "files", str(folder)], check=True)
    qpath, rpath = str(folder / "qrels.txt"), str(folder / "run.txt")
    out["parent_rss_mb"] = round(_rss_mb(), 1)
    out["run_file_mb"] = round(os.path.getsize(rpath) / 1e6, 1)
    print(f"wrote {rpath} ({out['run_file_mb']} MB) in {time.perf_counter() - t:.1f} s", flush=True)

    best: dict[str, dict[str, Any]] = {}
    peak: dict[str, float] = {}
    for i in range(args.repeat):
        runs = {"pytrec_eval": lambda: pytrec(qpath, rpath, MEASURES),
                "ragmeter": lambda: child(ragmeter_cmd(qpath, rpath, MEASURES)),
                "ragmeter_q": lambda: child(ragmeter_cmd(qpath, rpath, MEASURES, "-q"),
                                            str(folder / "per_query.txt"))}
        for name, fn in runs.items():
            r = fn()
            r["seconds"] = r.get("seconds", r["wall"])
            print(f"[{i + 1}/{args.repeat}] {name:12s} {r['seconds']:6.2f} s  peak {r['peak_mb']:6.0f} MB"
                  + (f"  (child wall {r['wall']:.2f} s)" if name == "pytrec_eval" else ""), flush=True)
            if name not in best or r["seconds"] < best[name]["seconds"]:
                best[name] = r
            peak[name] = max(peak.get(name, 0.0), r["peak_mb"])  # the largest of the repeats
    for name, r in best.items():
        out[name] = {"seconds": round(r["seconds"], 3), "peak_mb": round(peak[name], 1)}
    out["pytrec_eval"]["child_wall_seconds"] = round(best["pytrec_eval"]["wall"], 3)
    out["speedup_vs_pytrec_eval"] = round(best["pytrec_eval"]["seconds"] / best["ragmeter"]["seconds"], 2)
    out["speedup_q_vs_pytrec_eval"] = round(best["pytrec_eval"]["seconds"] / best["ragmeter_q"]["seconds"], 2)
    out["peak_memory_ratio_pytrec_over_ragmeter"] = round(peak["pytrec_eval"] / peak["ragmeter"], 2)

    if args.queries_stream:
        sfolder = folder / f"stream{args.queries_stream}"
        sfolder.mkdir(exist_ok=True)
        t = time.perf_counter()
        subprocess.run([*me, "--queries-stream", str(args.queries_stream), "--write-only", "stream", str(sfolder)],
                       check=True)
        sq, sr = str(sfolder / "qrels.txt"), str(sfolder / "run.txt")
        size = os.path.getsize(sr)
        print(f"wrote {sr} ({size / 1e9:.2f} GB) in {time.perf_counter() - t:.1f} s", flush=True)
        r = child(ragmeter_cmd(sq, sr, MEASURES))
        print(f"stream: ragmeter {r['wall']:.2f} s  peak {r['peak_mb']:.0f} MB", flush=True)
        # the same run against the judgements of its first 60,000 queries only: what memory the
        # run itself costs, the qrels and the per-query values being those of a 50k-query job
        head = child(ragmeter_cmd(str(sfolder / "qrels_head.txt"), sr, MEASURES))
        print(f"stream, qrels of the first 60,000 queries: ragmeter {head['wall']:.2f} s  "
              f"peak {head['peak_mb']:.0f} MB", flush=True)
        out["stream"] = {"queries": args.queries_stream, "run_file_gb": round(size / 1e9, 2),
                         "seconds": round(r["wall"], 2), "peak_mb": round(r["peak_mb"], 1),
                         "qrels_first_60k_queries": {"seconds": round(head["wall"], 2),
                                                     "peak_mb": round(head["peak_mb"], 1)},
                         "peak_mb_50k_run": out["ragmeter"]["peak_mb"],
                         "summary": r["stdout"].strip().splitlines()}
        if not args.keep:
            for f in (sr, sq, str(sfolder / "qrels_head.txt")):
                os.remove(f)
    # values: the 6 measures and the official ones, every query
    checks = {}
    for label, measures in (("six_measures", MEASURES), ("official", OFFICIAL)):
        ref_path = str(folder / f"pytrec_{label}.json")
        pytrec(qpath, rpath, measures, ref_path)
        with open(ref_path) as fh:
            ref = json.load(fh)
        nick = ("official",) if label == "official" else measures
        ours = json.loads(child(ragmeter_cmd(qpath, rpath, nick, "--json", "-q"))["stdout"])
        checks[label] = compare(ours, ref)
        del ref, ours
        gc.collect()
        print(f"values {label}: {checks[label]}", flush=True)
    out["values"] = checks
    out["identical"] = all(c["values_differ"] == 0 and not c["summary_differ"] and c["queries_missing"] == 0
                           for c in checks.values())

    out["load_after"] = os.getloadavg()[0]
    tmp.cleanup()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
