"""Coverage and width of the human-calibrated estimate (prediction-powered inference) against the
judge alone and the human labels alone, and agreement with the reference implementation.

A simulated judge scores every sample: the true quality plus a bias of +0.15 and noise; people
label ``n`` of them with the true quality. Over ``REPS`` repetitions the true mean is known, so
each 95% interval's coverage is counted:

- ``ppi``: :func:`ragmeter.stats.ppi_mean_ci` (power-tuned PPI++) from the ``n`` labels and the
  judge on all ``n + N`` samples;
- ``judge_only``: the judge's own mean over the ``n + N`` samples and its CLT interval (what one
  reports without labels: biased, so it misses);
- ``human_only``: the ``n`` labels' mean and CLT interval (valid, wide).

``width_ratio`` = mean PPI width / mean human-only width. The same intervals from ``ppi_py``
(package ppi-python, the implementation a user would otherwise call) are computed in the same run:
``max_abs_difference`` and the time ratio.

    python benchmarks/ppi.py [--reps 2000] [--n 100] [--N 2000]

``--small-n`` measures instead how the coverage of the PPI interval depends on the number of labels
(the interval is a normal approximation, valid as that number grows: Angelopoulos et al. 2023), on
five judges (the one above; 0/1 labels with a 0/1 judge right 80% of the time at p = 0.5 and 0.9,
right 90% at p = 0.95; 0/1 labels with a judge score) at n = 2 ... 200 labels and 2,000 unlabelled
samples: the evidence for ``ragmeter.stats.ppi.MIN_LABELS``, below which ``ragmeter calibrate``
refuses. Its last line is one JSON object (per judge and n the coverage of PPI++ and of the labels'
own CLT interval, and ``min_coverage_from_min_labels`` over the judges whose labels are not rare).

    python benchmarks/ppi.py --small-n [--reps 10000]
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from typing import Any

import numpy as np

from ragmeter.stats import classical_mean_ci, ppi_mean_ci

LEVEL = 0.95
BIAS = 0.15
NOISE = 0.1
#: true quality ~ Beta(2, 3): mean 0.4
A, B = 2.0, 3.0


SMALL_N = (2, 3, 5, 10, 20, 30, 40, 50, 75, 100, 200)


def _small_n_judges() -> dict[str, Any]:
    """name -> (draw(rng, size) -> (truth, judge), true mean, labels rare?)"""
    def continuous(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        t = rng.beta(A, B, size)
        return t, np.clip(t + BIAS + rng.normal(0, NOISE, size), 0, 1)

    def flips(p: float, acc: float) -> Any:
        def draw(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
            t = (rng.random(size) < p).astype(float)
            return t, np.where(rng.random(size) < acc, t, 1 - t)
        return draw

    def scored(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        t = (rng.random(size) < 0.8).astype(float)
        return t, np.clip(0.3 + 0.4 * t + rng.normal(0, 0.2, size), 0, 1)

    return {"beta(2,3) + bias 0.15": (continuous, A / (A + B), False),
            "0/1 p=0.5, judge right 80%": (flips(0.5, 0.8), 0.5, False),
            "0/1 p=0.8, judge score": (scored, 0.8, False),
            "0/1 p=0.9, judge right 80%": (flips(0.9, 0.8), 0.9, True),
            "0/1 p=0.95, judge right 90%": (flips(0.95, 0.9), 0.95, True)}


def small_n(reps: int, big_n: int, seed: int) -> None:
    """Coverage of PPI++ (and of the labels' own CLT interval) against the number of labels."""
    from ragmeter.stats.ppi import MIN_LABELS

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"reps": reps, "n_unlabeled": big_n, "level": LEVEL, "min_labels": MIN_LABELS,
                           "judges": {}}
    print(f"coverage of the {LEVEL:.0%} PPI++ interval (labels-only CLT interval) by number of labels, "
          f"{reps} repetitions, {big_n} unlabelled samples")
    for name, (draw, truth_mean, rare) in _small_n_judges().items():
        row = {}
        for n in SMALL_N:
            hit = hit_classic = 0
            for _ in range(reps):
                truth, judge = draw(rng, n + big_n)
                y, yhat, unl = truth[:n], judge[:n], judge[n:]
                _, lo, hi = ppi_mean_ci(y, yhat, unl, level=LEVEL, min_labels=2)
                hit += lo <= truth_mean <= hi
                _, clo, chi = classical_mean_ci(y, level=LEVEL)
                hit_classic += clo <= truth_mean <= chi
            row[n] = {"ppi": hit / reps, "labels_only_clt": hit_classic / reps}
        out["judges"][name] = {"rare_labels": rare, "coverage": row}
        print(f"{name:<30}" + " ".join(f"{n}:{row[n]['ppi']:.3f}({row[n]['labels_only_clt']:.2f})"
                                          for n in SMALL_N), flush=True)
    out["min_coverage_from_min_labels"] = min(
        c["ppi"] for j in out["judges"].values() if not j["rare_labels"]
        for n, c in j["coverage"].items() if n >= MIN_LABELS)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--n", type=int, default=100, help="labelled samples")
    ap.add_argument("--N", type=int, default=2000, help="unlabelled samples (judge only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--small-n", action="store_true", help="coverage against the number of labels")
    args = ap.parse_args()
    if args.small_n:
        small_n(args.reps, args.N, args.seed)
        return
    import ppi_py

    tune = "lam" if "lam" in inspect.signature(ppi_py.ppi_mean_ci).parameters else "lhat"
    rng = np.random.default_rng(args.seed)
    truth_mean = A / (A + B)
    n, big_n = args.n, args.N
    hit = {"ppi": 0, "ppi_classic": 0, "judge_only": 0, "human_only": 0}
    width = {k: 0.0 for k in hit}
    t_ours = t_ref = 0.0
    max_diff = 0.0
    for _ in range(args.reps):
        truth = rng.beta(A, B, n + big_n)
        judge = np.clip(truth + BIAS + rng.normal(0, NOISE, n + big_n), 0, 1)
        y, yhat, unl = truth[:n], judge[:n], judge[n:]
        t0 = time.perf_counter()
        _, lo, hi = ppi_mean_ci(y, yhat, unl, level=LEVEL, min_labels=2)  # --n below MIN_LABELS: a study
        t_ours += time.perf_counter() - t0
        t0 = time.perf_counter()
        rlo, rhi = ppi_py.ppi_mean_ci(y, yhat, unl, alpha=1 - LEVEL)
        t_ref += time.perf_counter() - t0
        max_diff = max(max_diff, abs(lo - float(np.squeeze(rlo))), abs(hi - float(np.squeeze(rhi))))
        ref_classic = ppi_py.ppi_mean_ci(y, yhat, unl, alpha=1 - LEVEL, **{tune: 1.0})
        _, clo, chi = ppi_mean_ci(y, yhat, unl, level=LEVEL, lam=1.0, min_labels=2)
        max_diff = max(max_diff, abs(clo - float(np.squeeze(ref_classic[0]))), abs(chi - float(np.squeeze(ref_classic[1]))))
        intervals = {"ppi": (lo, hi), "ppi_classic": (clo, chi),
                     "judge_only": classical_mean_ci(judge, level=LEVEL)[1:],
                     "human_only": classical_mean_ci(y, level=LEVEL)[1:]}
        for k, (a, b) in intervals.items():
            hit[k] += a <= truth_mean <= b
            width[k] += b - a
    reps = args.reps
    cov = {k: v / reps for k, v in hit.items()}
    wid = {k: v / reps for k, v in width.items()}
    print(f"{'interval':<14}{'coverage':>10}{'mean width':>12}")
    for k in hit:
        print(f"{k:<14}{cov[k]:>10.3f}{wid[k]:>12.4f}")
    print(f"ragmeter vs ppi_py: max |difference| of the bounds {max_diff:.2e}; time {t_ours:.3f} s vs "
          f"{t_ref:.3f} s ({t_ref / t_ours:.1f}x)")
    print(json.dumps({
        "reps": reps, "n_labeled": n, "n_unlabeled": big_n, "judge_bias": BIAS, "judge_noise_sd": NOISE,
        "true_mean": truth_mean, "level": LEVEL,
        "ppi_coverage": cov["ppi"], "ppi_classic_coverage": cov["ppi_classic"],
        "judge_only_coverage": cov["judge_only"], "human_only_coverage": cov["human_only"],
        "ppi_width": wid["ppi"], "human_only_width": wid["human_only"], "judge_only_width": wid["judge_only"],
        "width_ratio": wid["ppi"] / wid["human_only"],
        "max_abs_difference_vs_ppi_py": max_diff,
        "seconds_ragmeter": round(t_ours, 3), "seconds_ppi_py": round(t_ref, 3),
        "speed_ratio_vs_ppi_py": round(t_ref / t_ours, 2),
    }))


if __name__ == "__main__":
    main()
