"""Comparing two runs of conversations: the turn-by-turn paired test against the per-conversation one.

The assistant turns of one conversation share their assistant, user and history, so when run B
changes something, a whole conversation tends to move together. ``ragmeter compare`` and ``gate``
therefore test a per-turn metric per conversation (``ragmeter.stats.paired.compare_paired`` with
``clusters=``: the CR1 cluster-robust interval of the mean difference and the sign-flip test that
flips whole conversations). This study measures what that buys, and what it costs, against the
turn-by-turn test (the same function without ``clusters``), on simulated pairs of runs:

- ``G`` conversations of 1 to 8 assistant turns; run A's turn values ``0.5 + u_g + e_i`` (u_g ~
  N(0, 0.1), e_i ~ N(0, 0.05)), run B's ``A + delta + v_g + e'_i`` where ``v_g ~ N(0, sd_conv)``
  moves conversation g's turns together and ``e'_i ~ N(0, 0.05)`` each turn alone; values clipped
  to [0, 1] (rarely reached);
- ``delta = 0`` (no real difference): the share of comparisons called significant at alpha 0.05
  (the false-alarm rate, nominal 0.05) and the share of 95% intervals of the mean difference that
  contain 0 (coverage, nominal 0.95);
- ``delta = 0.05`` (a real difference): the share called significant (power) for both tests;
- ``sd_conv = 0`` too: turns independent, where both tests should hold their level and the
  clustered one loses little power.

- whole conversations unchanged: a 0/1-like per-turn metric where each conversation changes with
  probability 0.2 (then every turn by +1, with probability 0.6, or -1), so the true mean difference
  is 0.04 and, with few conversations, many comparisons see no change at all (every difference
  0). The clustered interval's coverage, the share of such all-zero comparisons, and the coverage a
  zero-width ``[0, 0]`` for them would give (what per-turn metrics compared per conversation got
  before all-zero differences had the interval of docs/statistics.md).

The last line printed is one JSON object: per case the rates of both tests, and
``worst_clustered_false_alarms`` / ``worst_turnwise_false_alarms`` (the largest false-alarm rate over
the cases with G >= 8), ``worst_clustered_coverage``, and ``unchanged`` (the last case, per G) with
``worst_unchanged_coverage`` (G >= 8).

    python benchmarks/clustered.py [--reps 1000] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ragmeter.stats.paired import compare_paired


def draw(rng: np.random.Generator, g: int, sd_conv: float, delta: float) -> tuple[np.ndarray, np.ndarray, list[str]]:
    sizes = rng.integers(1, 9, g)
    labels = np.repeat(np.arange(g), sizes)
    n = labels.size
    a = 0.5 + rng.normal(0, 0.1, g)[labels] + rng.normal(0, 0.05, n)
    b = a + delta + rng.normal(0, sd_conv, g)[labels] + rng.normal(0, 0.05, n)
    return np.clip(a, 0, 1), np.clip(b, 0, 1), [f"c{x}" for x in labels.tolist()]


def case(g: int, sd_conv: float, delta: float, reps: int, resamples: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    sig = {"turnwise": 0, "clustered": 0}
    cover = {"turnwise": 0, "clustered": 0}
    for _ in range(reps):
        a, b, labels = draw(rng, g, sd_conv, delta)
        true = delta  # the mean difference the runs were drawn around (clipping is symmetric and rare)
        for name, clusters in (("turnwise", None), ("clustered", labels)):
            c = compare_paired(a, b, bounds=(0.0, 1.0), n_resamples=resamples, clusters=clusters)
            sig[name] += c.pvalue < 0.05
            if c.ci_low is not None and c.ci_low <= true <= c.ci_high:
                cover[name] += 1
    rate = "false_alarms" if delta == 0 else "power"
    return {"G": g, "sd_conv": sd_conv, "delta": delta,
            **{f"{k}_{rate}": round(v / reps, 4) for k, v in sig.items()},
            **{f"{k}_coverage": round(v / reps, 4) for k, v in cover.items()}}


def unchanged(g: int, reps: int, seed: int, p_change: float = 0.2, p_up: float = 0.6) -> dict[str, float]:
    """The clustered interval when whole conversations are unchanged (module docstring)."""
    rng = np.random.default_rng(seed)
    true = p_change * (2 * p_up - 1)
    covered = zero = covered_if_point = 0
    for _ in range(reps):
        labels = np.repeat(np.arange(g), rng.integers(1, 9, g))
        changed = rng.random(g) < p_change
        sign = np.where(rng.random(g) < p_up, 1.0, -1.0)
        d = np.where(changed[labels], sign[labels], 0.0)
        c = compare_paired(np.zeros(d.size), d, bounds=(0.0, 1.0), n_resamples=200,
                           clusters=[f"c{x}" for x in labels.tolist()])
        hit = c.ci_low is not None and c.ci_low <= true <= c.ci_high
        covered += hit
        if d.any():
            covered_if_point += hit
        else:
            zero += 1  # a zero-width [0, 0] misses the true 0.04
    return {"G": g, "true_difference": true, "all_zero_share": round(zero / reps, 4),
            "clustered_coverage": round(covered / reps, 4),
            "coverage_with_zero_width_for_all_zero": round(covered_if_point / reps, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    seed = 0
    for sd_conv in (0.1, 0.0):
        for delta in (0.0, 0.05):
            for g in (3, 8, 25, 100):
                seed += 1
                r = case(g, sd_conv, delta, args.reps, args.resamples, seed)
                rows.append(r)
                rate = "false_alarms" if delta == 0 else "power"
                print(f"G={g:>3} sd_conv={sd_conv:<4} delta={delta:<5} {rate:>12}: turn by turn "
                      f"{r[f'turnwise_{rate}']:.3f}, per conversation {r[f'clustered_{rate}']:.3f}; "
                      f"coverage {r['turnwise_coverage']:.3f} / {r['clustered_coverage']:.3f}", flush=True)
    same = []
    for g in (3, 5, 8, 12, 25):
        seed += 1
        u = unchanged(g, args.reps, seed)
        same.append(u)
        print(f"G={g:>3} whole conversations unchanged ({u['all_zero_share']:.1%} of comparisons all 0): "
              f"coverage {u['clustered_coverage']:.3f} (a zero-width [0, 0] for those: "
              f"{u['coverage_with_zero_width_for_all_zero']:.3f})", flush=True)
    null = [r for r in rows if r["delta"] == 0 and r["G"] >= 8]
    out = {"reps": args.reps, "resamples": args.resamples,
           "worst_clustered_false_alarms": max(r["clustered_false_alarms"] for r in null),
           "worst_turnwise_false_alarms": max(r["turnwise_false_alarms"] for r in null),
           "worst_clustered_coverage": min(r["clustered_coverage"] for r in rows if r["G"] >= 8),
           "worst_turnwise_coverage": min(r["turnwise_coverage"] for r in rows if r["G"] >= 8),
           "worst_unchanged_coverage": min(u["clustered_coverage"] for u in same if u["G"] >= 8),
           "seconds": round(time.perf_counter() - t0, 1), "cases": rows, "unchanged": same}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
