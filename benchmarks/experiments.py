"""Paired statistics speed: ragmeter vs scipy.stats on the same data, one process; plus the gate
and the pipeline cache end to end.

    .venv/bin/python benchmarks/experiments.py

1. Monte Carlo paired permutation test (10,000 sign flips) on 1,000 and 10,000 pairs of 0/1
   correctness scores: ``ragmeter.stats.paired.paired_permutation_test`` vs
   ``scipy.stats.permutation_test(permutation_type="samples", vectorized=True)``; the p-values
   must agree within Monte Carlo error.
2. Exact permutation test on 18 pairs (2^18 sign vectors): the same two; p-values equal.
3. Paired bootstrap CI of the mean difference (2,000 resamples, 10,000 pairs): ragmeter vs
   ``scipy.stats.bootstrap(paired=True, method="percentile")``; the intervals must agree within
   resampling error.
4. ``ragmeter gate`` on two stored runs of 20,000 samples x 3 metrics (load + paired tests).
5. The grid's pipeline cache: the bundled BM25 pipeline on the example's 56 questions, first run vs
   cached re-run (outputs served from the store).

Each timing is the best of three. The last line printed is one JSON object.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402


def best(fn, repeat=3):
    out, t_best = None, float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best, out


def scipy_perm(a, b, n_resamples):
    return sps.permutation_test((b, a), lambda x, y, axis: np.mean(x - y, axis=axis),
                                permutation_type="samples", vectorized=True, n_resamples=n_resamples,
                                random_state=0).pvalue


def main() -> None:
    from ragmeter.stats.paired import paired_bootstrap_ci, paired_permutation_test

    rng = np.random.default_rng(0)
    figures: dict[str, float] = {}
    for n in (1_000, 10_000):
        a = (rng.random(n) < 0.70).astype(float)
        b = np.where(rng.random(n) < 0.9, a, 1 - a)  # 10% of answers flip
        t_ours, p_ours = best(lambda a=a, b=b: paired_permutation_test(a, b, n_resamples=10_000).pvalue)
        t_sp, p_sp = best(lambda a=a, b=b: scipy_perm(a, b, 10_000))
        assert abs(p_ours - p_sp) < 0.03, (p_ours, p_sp)
        figures[f"perm_mc_{n}_ragmeter_s"] = round(t_ours, 4)
        figures[f"perm_mc_{n}_scipy_s"] = round(t_sp, 4)
        figures[f"perm_mc_{n}_speedup"] = round(t_sp / t_ours, 2)
        print(f"permutation test, {n} pairs, 10k flips: ragmeter {t_ours:.3f}s (p={p_ours:.4f}), "
              f"scipy {t_sp:.3f}s (p={p_sp:.4f}) -> {t_sp / t_ours:.1f}x")

    a18, b18 = rng.random(18), rng.random(18) + 0.1
    t_ours, p_ours = best(lambda: paired_permutation_test(a18, b18).pvalue)
    t_sp, p_sp = best(lambda: scipy_perm(a18, b18, np.inf))
    assert abs(p_ours - p_sp) < 1e-9, (p_ours, p_sp)
    figures.update(perm_exact18_ragmeter_s=round(t_ours, 4), perm_exact18_scipy_s=round(t_sp, 4),
                   perm_exact18_speedup=round(t_sp / t_ours, 2))
    print(f"exact permutation test, 18 pairs (262,144 sign vectors): ragmeter {t_ours:.3f}s, scipy {t_sp:.3f}s "
          f"-> {t_sp / t_ours:.1f}x (p = {p_ours:.6f} both)")

    n = 10_000
    a = (rng.random(n) < 0.6).astype(float)
    b = np.clip(a + rng.normal(0.02, 0.3, n), 0, 1)
    t_ours, ci = best(lambda: paired_bootstrap_ci(a, b, n_resamples=2000))
    t_sp, res = best(lambda: sps.bootstrap((a, b), lambda x, y, axis: np.mean(y - x, axis=axis), paired=True,
                                           vectorized=True, n_resamples=2000, method="percentile",
                                           random_state=0).confidence_interval)
    assert abs(ci[0] - res.low) < 0.005 and abs(ci[1] - res.high) < 0.005, (ci, res)
    figures.update(bootstrap_10k_ragmeter_s=round(t_ours, 4), bootstrap_10k_scipy_s=round(t_sp, 4),
                   bootstrap_10k_speedup=round(t_sp / t_ours, 2))
    print(f"paired bootstrap CI, 10k pairs, 2k resamples: ragmeter {t_ours:.3f}s [{ci[0]:.4f}, {ci[1]:.4f}], "
          f"scipy {t_sp:.3f}s [{res.low:.4f}, {res.high:.4f}] -> {t_sp / t_ours:.1f}x")

    import ragmeter
    from ragmeter.analysis.gate import gate
    from ragmeter.store import open_store

    tmp = Path(tempfile.mkdtemp(prefix="ragmeter-bench-exp-"))
    db = f"sqlite:///{tmp / 'b.db'}"
    m = 20_000
    rows = [{"id": f"s{i}", "answer": "paris" if i % 3 else "lyon", "reference": "paris"} for i in range(m)]
    worse = [dict(r, answer="lyon") if i % 50 == 1 else r for i, r in enumerate(rows)]
    metrics = ["correct_keyword", "exact_match", "token_f1"]
    ragmeter.evaluate(rows, metrics, db=db, name="base")
    ragmeter.evaluate(worse, metrics, db=db, name="cand")
    store = open_store(db)
    t_gate, res = best(lambda: gate("cand", "base", max_drop=0.005, store=store))
    figures.update(gate_20k_x3_s=round(t_gate, 3), gate_20k_failed=int(res.failed))
    print(f"gate, 20,000 samples x 3 metrics: {t_gate:.2f}s, failed={res.failed}")

    from ragmeter.analysis.grid import PipelineStats, questions_of, run_pipeline
    from ragmeter.pipeline import rag

    qs = questions_of(ragmeter.load("example").samples)
    t0 = time.perf_counter()
    s1 = PipelineStats()
    run_pipeline(rag, "ragmeter.pipeline:rag", {"top_k": 3}, qs, store=store, use_cache=True, workers=2, stats=s1)
    first = time.perf_counter() - t0
    t_cached, _ = best(lambda: run_pipeline(rag, "ragmeter.pipeline:rag", {"top_k": 3}, qs, store=store,
                                            use_cache=True, workers=2, stats=PipelineStats()))
    figures.update(pipeline_first_s=round(first, 3), pipeline_cached_s=round(t_cached, 4),
                   pipeline_cache_speedup=round(first / t_cached, 1))
    print(f"pipeline over {len(qs)} questions: first {first:.2f}s (incl. index build), cached {t_cached:.3f}s "
          f"-> {first / t_cached:.0f}x")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
