"""Retrieval metrics at scale: ragmeter against ranx, pytrec_eval and a naive Python loop.

100,000 queries x 100 retrieved documents, 1-5 relevant documents each (binary and graded
relevance); metrics nDCG@10, MRR, P@5, Recall@100, MAP and Hit@10. Everything runs in this one
process on the same data:

* ragmeter: (a) from prebuilt numpy arrays (ranked doc ids + flat qrels: matching included), and
  the reductions alone on a built relevance matrix; (b) end to end from ``{qid: {docid: score}}``
  dicts; (c) end to end from TREC qrels/run files (reading included);
* ranx: its numba kernels on prebuilt typed lists (its numpy path; the one-time JIT compile is
  timed separately), and end to end from its ``Qrels``/``Run`` objects built from the dicts;
* pytrec_eval: from the dicts, and from the TREC files through its own parsers;
* a naive per-query Python loop in the style of seed 004.

Values are compared query by query (max absolute difference) and the last line printed is one
JSON object with every figure and ratio. Usage: ``python benchmarks/retrieval.py [--queries N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

METRICS = ("ndcg@10", "mrr", "p@5", "recall@100", "map", "hit@10")
TREC = {"ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "p@5": "P_5", "recall@100": "recall_100",
        "map": "map", "hit@10": "success_10"}
PYTREC = {"ndcg_cut.10", "recip_rank", "P.5", "recall.100", "map", "success.10"}


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs, and the last result."""
    best, out = math.inf, None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def make_data(nq: int, depth: int, seed: int) -> dict[str, Any]:
    """Ranked doc ids, distinct descending scores, and 1-5 judged relevant docs per query (each
    retrieved with probability 1/2, at a uniform rank), graded 1-3."""
    rng = np.random.default_rng(seed)
    corpus = 50 * nq
    ranked = (rng.integers(0, corpus // depth, size=(nq, depth)) * depth + np.arange(depth)).astype(np.int64)
    scores = np.round(depth - np.arange(depth) - rng.random((nq, depth)) * 0.9, 6)
    n_rel = rng.integers(1, 6, size=nq)
    qq = np.repeat(np.arange(nq), n_rel)
    slot = np.concatenate([rng.permutation(2 * depth)[:k] for k in n_rel])  # distinct within a query
    retrieved = slot < depth
    qd = np.where(retrieved, ranked[qq, np.minimum(slot, depth - 1)], corpus + qq * 2 * depth + slot)
    grades = rng.integers(1, 4, size=len(qq))
    return {"ranked": ranked, "scores": scores, "qq": qq, "qd": qd, "graded": grades,
            "binary": np.ones_like(grades), "nq": nq, "depth": depth}


def build_dicts(d: dict[str, Any], grades: np.ndarray) -> tuple[dict, dict, list[str]]:
    qids = [f"q{i}" for i in range(d["nq"])]
    run = {}
    ranked = d["ranked"].tolist()
    scores = d["scores"].tolist()
    for i, q in enumerate(qids):
        run[q] = dict(zip([f"d{x}" for x in ranked[i]], scores[i], strict=True))
    qrels: dict[str, dict[str, int]] = {}
    for q, doc, g in zip(d["qq"].tolist(), d["qd"].tolist(), grades.tolist(), strict=True):
        qrels.setdefault(qids[q], {})[f"d{doc}"] = int(g)
    return qrels, run, qids


def write_trec(qrels: dict, run: dict, folder: str) -> tuple[str, str]:
    qpath, rpath = os.path.join(folder, "qrels.txt"), os.path.join(folder, "run.txt")
    with open(qpath, "w") as fh:
        for q, docs in qrels.items():
            fh.write("".join(f"{q} 0 {doc} {g}\n" for doc, g in docs.items()))
    with open(rpath, "w") as fh:
        for q, docs in run.items():
            fh.write("".join(f"{q} Q0 {doc} {r} {s:.6f} bench\n" for r, (doc, s) in enumerate(docs.items(), 1)))
    return qpath, rpath


# ------------------------------------------------------------------------------ ragmeter
def ragmeter_from_matrix(m: Any, gain: str) -> dict[str, np.ndarray]:
    from ragmeter.metrics.retrieval import measures as M

    return {"ndcg@10": M.ndcg(m, 10, gain), "mrr": M.reciprocal_rank(m), "p@5": M.precision(m, 5),
            "recall@100": M.recall(m, 100), "map": M.average_precision(m), "hit@10": M.hit_rate(m, 10)}


def ragmeter_arrays(d: dict[str, Any], grades: np.ndarray, gain: str) -> dict[str, np.ndarray]:
    from ragmeter.apps.trec import RelevanceMatrix

    m = RelevanceMatrix.from_arrays(d["ranked"], d["qq"], d["qd"], grades)
    return ragmeter_from_matrix(m, gain)


def ragmeter_trec(qrels: Any, run: Any) -> dict[str, np.ndarray]:
    from ragmeter.apps.trec import evaluate

    r = evaluate(qrels, run, list(TREC.values()))
    return {name: r.values[TREC[name]] for name in METRICS} | {"qids": r.qids}


def in_order(res: dict[str, Any], qids: list[str]) -> dict[str, np.ndarray]:
    """Rows of a trec-style result (queries in qid string order) put in ``qids`` order."""
    pos = {q: i for i, q in enumerate(res["qids"])}
    idx = np.array([pos[q] for q in qids])
    return {m: res[m][idx] for m in METRICS}


# ------------------------------------------------------------------------------ ranx
def ranx_lists(d: dict[str, Any], grades: np.ndarray) -> tuple[Any, Any]:
    from numba.typed import List

    run = List()
    for ids, sc in zip(d["ranked"], d["scores"], strict=True):
        run.append(np.column_stack([ids.astype(np.float64), sc]))
    qrels = List()
    starts = np.concatenate([[0], np.cumsum(np.bincount(d["qq"], minlength=d["nq"]))])
    for i in range(d["nq"]):
        a, b = starts[i], starts[i + 1]
        g = grades[a:b].astype(np.float64)
        order = np.argsort(-g, kind="stable")  # ranx expects qrels sorted by relevance
        qrels.append(np.column_stack([d["qd"][a:b].astype(np.float64)[order], g[order]]))
    return qrels, run


def ranx_numpy(qrels: Any, run: Any) -> dict[str, np.ndarray]:
    from ranx import metrics as rm

    return {"ndcg@10": rm.ndcg(qrels, run, k=10), "mrr": rm.reciprocal_rank(qrels, run),
            "p@5": rm.precision(qrels, run, k=5), "recall@100": rm.recall(qrels, run, k=100),
            "map": rm.average_precision(qrels, run), "hit@10": rm.hit_rate(qrels, run, k=10)}


RANX_NAMES = ["ndcg@10", "mrr", "precision@5", "recall@100", "map", "hit_rate@10"]


def ranx_warm_up() -> float:
    """Compile every numba function both ranx paths use, on tiny data: its one-time JIT cost."""
    from numba.typed import List
    from ranx import Qrels, Run, evaluate

    t = time.perf_counter()
    evaluate(Qrels({"q": {"a": 1, "b": 2}}), Run({"q": {"a": 0.5, "c": 0.2}}), RANX_NAMES)
    tiny = List([np.array([[1.0, 2.0], [2.0, 1.0]])])
    ranx_numpy(tiny, List([np.array([[1.0, 0.9], [3.0, 0.5]])]))
    return time.perf_counter() - t


def ranx_objects(qrels: dict, run: dict, qids: list[str]) -> tuple[dict[str, np.ndarray], float]:
    from ranx import Qrels, Run, evaluate

    t = time.perf_counter()
    rq, rr = Qrels(qrels), Run(run)
    build = time.perf_counter() - t
    evaluate(rq, rr, RANX_NAMES)
    names = {"ndcg@10": "ndcg@10", "mrr": "mrr", "p@5": "precision@5", "recall@100": "recall@100",
             "map": "map", "hit@10": "hit_rate@10"}
    return {k: np.array([rr.scores[v][q] for q in qids]) for k, v in names.items()}, build


# ------------------------------------------------------------------------------ pytrec_eval
def pytrec_dicts(qrels: dict, run: dict, qids: list[str]) -> dict[str, np.ndarray]:
    import pytrec_eval

    res = pytrec_eval.RelevanceEvaluator(qrels, PYTREC).evaluate(run)
    return {k: np.array([res[q][TREC[k]] for q in qids]) for k in METRICS}


def pytrec_files(qpath: str, rpath: str, qids: list[str]) -> dict[str, np.ndarray]:
    import pytrec_eval

    with open(qpath) as fq, open(rpath) as fr:
        qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
    return pytrec_dicts(qrels, run, qids)


# ------------------------------------------------------------------------------ naive loop
def naive_inputs(d: dict[str, Any], grades: np.ndarray) -> list[tuple[list[int], dict[int, int]]]:
    starts = np.concatenate([[0], np.cumsum(np.bincount(d["qq"], minlength=d["nq"]))])
    qd, g = d["qd"].tolist(), grades.tolist()
    return [(row, {qd[j]: g[j] for j in range(starts[i], starts[i + 1])})
            for i, row in enumerate(d["ranked"].tolist())]


def naive(queries: list[tuple[list[int], dict[int, int]]], exponential: bool) -> dict[str, np.ndarray]:
    """Per query, as seed 004 writes it: a Python function per metric over the ranked list."""

    def precision_at_k(ret, rel, k):
        return sum(1 for doc in ret[:k] if doc in rel) / k

    def recall_at_k(ret, rel, k):
        return sum(1 for doc in ret[:k] if doc in rel) / len(rel)

    def reciprocal_rank(ret, rel):
        for i, doc in enumerate(ret, start=1):
            if doc in rel:
                return 1.0 / i
        return 0.0

    def average_precision(ret, rel):
        hits, total = 0, 0.0
        for i, doc in enumerate(ret, start=1):
            if doc in rel:
                hits += 1
                total += hits / i
        return total / len(rel)

    def dcg(rels, k):
        return sum(((2 ** r - 1) if exponential else r) / math.log2(i + 2) for i, r in enumerate(rels[:k]))

    def ndcg_at_k(ret, rel, k):
        ideal = dcg(sorted(rel.values(), reverse=True), k)
        return dcg([rel.get(doc, 0) for doc in ret[:k]], k) / ideal if ideal > 0 else 0.0

    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for ret, rel in queries:
        out["ndcg@10"].append(ndcg_at_k(ret, rel, 10))
        out["mrr"].append(reciprocal_rank(ret, rel))
        out["p@5"].append(precision_at_k(ret, rel, 5))
        out["recall@100"].append(recall_at_k(ret, rel, 100))
        out["map"].append(average_precision(ret, rel))
        out["hit@10"].append(1.0 if any(doc in rel for doc in ret[:10]) else 0.0)
    return {k: np.array(v) for k, v in out.items()}


def max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return float(max(np.max(np.abs(a[m] - b[m])) for m in METRICS))


def run_kind(kind: str, data: dict[str, Any], args: argparse.Namespace, out: dict[str, Any], tmp: str) -> None:
    """Time and compare every library on one relevance flavour (``graded`` or ``binary``)."""
    grades = data[kind]
    res: dict[str, Any] = {}
    print(f"\n== {kind} relevance ==")
    qrels, run, qids = build_dicts(data, grades)

    from ragmeter.apps.trec import RelevanceMatrix

    t_build, m = timed(lambda: RelevanceMatrix.from_arrays(data["ranked"], data["qq"], data["qd"], grades),
                       args.repeat)
    # nDCG with linear gains: what trec_eval, pytrec_eval and ranx's ndcg compute
    t_reduce, ours_lin = timed(lambda: ragmeter_from_matrix(m, "linear"), args.repeat)
    t_arrays, _ = timed(lambda: ragmeter_arrays(data, grades, "linear"), args.repeat)
    t_dicts, ours_dicts = timed(lambda: ragmeter_trec(qrels, run), args.repeat)
    ours_dicts = in_order(ours_dicts, qids)
    res["ragmeter_arrays_s"] = round(t_arrays, 4)
    res["ragmeter_matrix_build_s"] = round(t_build, 4)
    res["ragmeter_reductions_s"] = round(t_reduce, 4)
    res["ragmeter_dicts_s"] = round(t_dicts, 4)
    print(f"ragmeter  prebuilt arrays (match + 6 metrics) {t_arrays:8.3f} s"
          f"   [matrix {t_build:.3f} s + reductions {t_reduce:.3f} s]")
    print(f"ragmeter  end to end from dicts              {t_dicts:8.3f} s")
    diffs = {"ragmeter_dicts_vs_arrays": max_diff(ours_dicts, ours_lin)}

    if kind == "graded":
        qpath, rpath = write_trec(qrels, run, tmp)
        t_files, ours_files = timed(lambda: ragmeter_trec(qpath, rpath), max(1, args.repeat - 1))
        ours_files = in_order(ours_files, qids)
        res["ragmeter_files_s"] = round(t_files, 4)
        diffs["ragmeter_files_vs_arrays"] = max_diff(ours_files, ours_lin)
        print(f"ragmeter  end to end from TREC files         {t_files:8.3f} s")

    t_py, py = timed(lambda: pytrec_dicts(qrels, run, qids))
    res["pytrec_eval_dicts_s"] = round(t_py, 4)
    diffs["pytrec_eval_vs_ragmeter"] = max_diff(py, ours_lin)
    print(f"pytrec_eval from dicts                       {t_py:8.3f} s")
    if kind == "graded":
        t_pyf, pyf = timed(lambda: pytrec_files(qpath, rpath, qids))
        res["pytrec_eval_files_s"] = round(t_pyf, 4)
        diffs["pytrec_eval_files_vs_ragmeter"] = max_diff(pyf, ours_lin)
        print(f"pytrec_eval from TREC files (its parsers)    {t_pyf:8.3f} s")

    nav_in = naive_inputs(data, grades)
    t_nv, nv = timed(lambda: naive(nav_in, exponential=False))
    res["naive_loop_s"] = round(t_nv, 4)
    diffs["naive_vs_ragmeter"] = max_diff(nv, ours_lin)
    print(f"naive per-query Python loop                  {t_nv:8.3f} s")

    if not args.no_ranx:
        rq, rr = ranx_lists(data, grades)
        if "ranx_jit_compile_s" not in out:
            t_jit = ranx_warm_up()
            out["ranx_jit_compile_s"] = round(t_jit, 3)
            print(f"ranx      one-time JIT compile (or load of its on-disk cache) {t_jit:.3f} s")
        t_rx, rx = timed(lambda: ranx_numpy(rq, rr), args.repeat)
        res["ranx_numpy_s"] = round(t_rx, 4)
        diffs["ranx_vs_ragmeter"] = max_diff(rx, ours_lin)
        print(f"ranx      prebuilt typed lists (numba)       {t_rx:8.3f} s")
        if kind == "graded":
            t_rxo, (rxo, t_rx_build) = timed(lambda: ranx_objects(qrels, run, qids))
            res["ranx_objects_s"] = round(t_rxo, 4)
            res["ranx_objects_build_s"] = round(t_rx_build, 4)
            diffs["ranx_objects_vs_ragmeter"] = max_diff(rxo, ours_lin)
            print(f"ranx      from Qrels/Run objects (build {t_rx_build:.2f} s) {t_rxo:8.3f} s")

    ratios = {
        "pytrec_eval_dicts_over_ragmeter_dicts": res["pytrec_eval_dicts_s"] / res["ragmeter_dicts_s"],
        "naive_over_ragmeter_arrays": res["naive_loop_s"] / res["ragmeter_arrays_s"],
    }
    if "ragmeter_files_s" in res:
        ratios["pytrec_eval_files_over_ragmeter_files"] = res["pytrec_eval_files_s"] / res["ragmeter_files_s"]
        ratios["pytrec_eval_dicts_over_ragmeter_files"] = res["pytrec_eval_dicts_s"] / res["ragmeter_files_s"]
    if "ranx_numpy_s" in res:
        ratios["ranx_numpy_over_ragmeter_arrays"] = res["ranx_numpy_s"] / res["ragmeter_arrays_s"]
    if "ranx_objects_s" in res:
        ratios["ranx_objects_over_ragmeter_dicts"] = res["ranx_objects_s"] / res["ragmeter_dicts_s"]
    ratios = {k: round(v, 2) for k, v in ratios.items()}
    res["ratios"] = ratios
    res["max_abs_diff"] = {k: float(f"{v:.3g}") for k, v in diffs.items()}
    print("ratios (other / ragmeter): " + ", ".join(f"{k} {v}x" for k, v in ratios.items()))
    print("max |difference| per query: " + ", ".join(f"{k} {v:.3g}" for k, v in diffs.items()))
    out[kind] = res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for the fast measurements")
    ap.add_argument("--no-ranx", action="store_true")
    args = ap.parse_args()
    nq, depth = args.queries, args.depth
    out: dict[str, Any] = {"benchmark": "retrieval", "queries": nq, "depth": depth,
                           "metrics": list(METRICS)}
    print(f"{nq:,} queries x {depth} retrieved docs, 1-5 relevant each; metrics {', '.join(METRICS)}")
    data = make_data(nq, depth, args.seed)
    tmp = tempfile.mkdtemp(prefix="ragmeter-bench-")
    try:
        for kind in ("graded", "binary"):
            run_kind(kind, data, args, out, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    g = out["graded"]
    out["targets"] = {
        "beats_ranx_numpy": ("ranx_numpy_s" in g and g["ragmeter_arrays_s"] < g["ranx_numpy_s"]
                             and out["binary"]["ragmeter_arrays_s"] < out["binary"]["ranx_numpy_s"]),
        "dicts_5x_faster_than_pytrec_eval": min(out[k]["ratios"]["pytrec_eval_dicts_over_ragmeter_dicts"]
                                                for k in ("graded", "binary")) >= 5,
        "files_5x_faster_than_pytrec_eval": g["ratios"].get("pytrec_eval_files_over_ragmeter_files", 0) >= 5,
        "identical_to_pytrec_eval_1e-12": all(out[k]["max_abs_diff"]["pytrec_eval_vs_ragmeter"] <= 1e-12
                                              for k in ("graded", "binary")),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
