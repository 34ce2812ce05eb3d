"""Coverage-and-width study of the 95% confidence interval of a mean (docs/statistics.md).

For each case (sample size n x distribution with a known mean and a declared range), draws data sets,
builds each interval and reports:

- the coverage of ragmeter's interval (``ragmeter.stats.mean_ci_rows``, the function behind every
  run summary, with the case's range as ``bounds``) on ``--reps`` data sets, how many of its
  intervals leave the range (``out``) or do not contain the sample mean, strictly when the values
  vary (``mean out``; their shares are these counts over ``--reps``), its median width, and which
  method it used on what share of the data sets;
- beside it, on the first ``min(--ref-reps, max(--ref-reps-min, --ref-values / n))`` data sets (2000
  up to n = 50, 1000 at n = 100, 500 from n = 200), the coverage and median width of the reference
  methods: the percentile bootstrap, BCa (Efron's bias-corrected
  and accelerated interval, vectorised; equal to ``scipy.stats.bootstrap(method="BCa")`` up to
  resampling noise), Student's t clipped to the range, and for 0/1 data Wilson's score interval and
  the Clopper-Pearson exact interval (``--boot`` resamples per bootstrap interval).

The last line is one JSON object: ``chosen_coverage`` (the lowest coverage of ragmeter's interval
over the cases with n >= 10), ``out_of_range`` and ``mean_outside`` (how many of its intervals, over
every case and n, n = 3 and 5 included, leave the range or miss the mean), ``width_ratio`` (the
largest, over the cases with n >= 10, of its median width over the narrowest median width among the
reference methods whose coverage in that case is at least 0.93), and the table.

    python benchmarks/intervals.py [--reps 20000] [--ref-reps 2000] [--ref-values 100000] [--boot 999]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from scipy import special
from scipy import stats as sst

from ragmeter.stats import mean_ci_rows

LEVEL = 0.95
A = (1 - LEVEL) / 2
SIZES = (3, 5, 10, 20, 50, 100, 200, 1000)
#: a reference method qualifies for the width comparison at this coverage
QUALIFY = 0.93
#: the rows of one block: the data set matrix and its bootstrap draws stay small
BLOCK_ELEMENTS = 4_000_000

Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]


def _inflated(at: float, share: float) -> Sampler:
    """``share`` of the values exactly ``at``, the rest uniform on [0, 1]."""
    def draw(r: np.random.Generator, s: tuple[int, int]) -> np.ndarray:
        return np.where(r.random(s) < share, at, r.random(s))
    return draw


def _discrete(values: tuple[float, ...], p: tuple[float, ...]) -> Sampler:
    def draw(r: np.random.Generator, s: tuple[int, int]) -> np.ndarray:
        return r.choice(np.array(values), size=s, p=p)
    return draw


def _bernoulli(p: float) -> Sampler:
    def draw(r: np.random.Generator, s: tuple[int, int]) -> np.ndarray:
        return (r.random(s) < p).astype(float)
    return draw


def _bimodal(r: np.random.Generator, s: tuple[int, int]) -> np.ndarray:
    return np.where(r.random(s) < 0.7, r.beta(18, 2, s), r.beta(2, 18, s))


#: name -> (sampler(rng, shape), true mean, declared range, 0/1 data)
DISTRIBUTIONS: dict[str, tuple[Sampler, float, tuple[float, float], bool]] = {
    "bernoulli(0.02)": (_bernoulli(0.02), 0.02, (0, 1), True),
    "bernoulli(0.5)": (_bernoulli(0.5), 0.5, (0, 1), True),
    "bernoulli(0.8)": (_bernoulli(0.8), 0.8, (0, 1), True),
    "bernoulli(0.95)": (_bernoulli(0.95), 0.95, (0, 1), True),
    "bernoulli(0.98)": (_bernoulli(0.98), 0.98, (0, 1), True),
    "beta(2,5)": (lambda r, s: r.beta(2, 5, s), 2 / 7, (0, 1), False),
    "beta(0.5,0.5)": (lambda r, s: r.beta(0.5, 0.5, s), 0.5, (0, 1), False),
    "beta(5,1)": (lambda r, s: r.beta(5, 1, s), 5 / 6, (0, 1), False),
    "0.7 beta(18,2) + 0.3 beta(2,18)": (_bimodal, 0.7 * 0.9 + 0.3 * 0.1, (0, 1), False),
    "70% exactly 1, 30% uniform": (_inflated(1.0, 0.7), 0.7 + 0.3 * 0.5, (0, 1), False),
    "90% exactly 0, 10% uniform": (_inflated(0.0, 0.9), 0.1 * 0.5, (0, 1), False),
    "{0, 0.5, 1} p=(0.2, 0.3, 0.5)": (_discrete((0.0, 0.5, 1.0), (0.2, 0.3, 0.5)), 0.65, (0, 1), False),
    "{0.25, 1} p=(0.3, 0.7)": (_discrete((0.25, 1.0), (0.3, 0.7)), 0.3 * 0.25 + 0.7, (0, 1), False),
    "100 x beta(2,5) on [0, 100]": (lambda r, s: 100 * r.beta(2, 5, s), 100 * 2 / 7, (0, 100), False),
    # paired differences of two 0-1 metrics (compare, gate): on [-1, 1]
    "difference {-1, 0, 1} p=(0.08, 0.8, 0.12)": (_discrete((-1.0, 0.0, 1.0), (0.08, 0.8, 0.12)), 0.04,
                                                 (-1, 1), False),
    "difference beta(5,2) - beta(4,2)": (lambda r, s: r.beta(5, 2, s) - r.beta(4, 2, s), 5 / 7 - 4 / 6,
                                         (-1, 1), False),
}


# ---- reference methods, vectorised over the rows of x ------------------------------------------
def boot_means(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` bootstrap means of every row of ``x`` (indices drawn with replacement)."""
    reps, n = x.shape
    out = np.empty((reps, n_boot))
    chunk = max(1, BLOCK_ELEMENTS // (n * n_boot))
    for i in range(0, reps, chunk):
        xs = np.ascontiguousarray(x[i:i + chunk])
        idx = rng.integers(0, n, size=(xs.shape[0], n_boot, n), dtype=np.int32)
        idx += (np.arange(xs.shape[0], dtype=np.int32) * n)[:, None, None]  # row offsets: one flat gather
        out[i:i + chunk] = xs.ravel()[idx].mean(axis=2)
    return out


def _row_quantiles(sorted_boot: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per row the ``p[row]`` quantile of the sorted row (numpy's default, linear interpolation)."""
    b = sorted_boot.shape[1]
    pos = np.clip(p, 0, 1) * (b - 1)
    i = np.floor(pos).astype(int)
    j = np.minimum(i + 1, b - 1)
    f = pos - i
    rows = np.arange(sorted_boot.shape[0])
    return sorted_boot[rows, i] * (1 - f) + sorted_boot[rows, j] * f


def percentile_ci(sorted_boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = sorted_boot.shape[0]
    return _row_quantiles(sorted_boot, np.full(r, A)), _row_quantiles(sorted_boot, np.full(r, 1 - A))


def bca_ci(x: np.ndarray, sorted_boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BCa of the mean of each row of ``x`` from its sorted bootstrap means (jackknife in closed form)."""
    n = x.shape[1]
    theta = x.mean(axis=1)
    prop = (sorted_boot < theta[:, None]).mean(axis=1)
    z0 = sst.norm.ppf(np.clip(prop, 1e-9, 1 - 1e-9))
    jack = (theta[:, None] * n - x) / (n - 1)
    u = jack.mean(axis=1, keepdims=True) - jack
    num = (u ** 3).sum(axis=1)
    den = 6 * ((u ** 2).sum(axis=1)) ** 1.5
    acc = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    out = []
    for q in (A, 1 - A):
        zq = sst.norm.ppf(q)
        out.append(_row_quantiles(sorted_boot, sst.norm.cdf(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))))
    return out[0], out[1]


def t_clipped_ci(x: np.ndarray, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[1]
    m, s = x.mean(axis=1), x.std(axis=1, ddof=1)
    h = sst.t.ppf(1 - A, n - 1) * s / np.sqrt(n)
    return np.clip(m - h, low, high), np.clip(m + h, low, high)


def wilson_ci(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[1]
    p = x.mean(axis=1)
    z = sst.norm.ppf(1 - A)
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


def clopper_pearson_ci(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[1]
    k = np.rint(x.sum(axis=1))
    lo = np.where(k > 0, special.betaincinv(np.maximum(k, 1), n - k + 1, A), 0.0)
    hi = np.where(k < n, special.betaincinv(k + 1, np.maximum(n - k, 1), 1 - A), 1.0)
    return lo, hi


# ---- the study ---------------------------------------------------------------------------------
def _chosen(x: np.ndarray, mu: float, bounds: tuple[float, float]) -> dict[str, float]:
    """ragmeter's interval on every row of ``x`` (blocks of rows)."""
    low, high = bounds
    tol = 1e-12 * (high - low)
    covered = out = miss = 0
    widths = []
    methods: dict[str, int] = {}
    block = max(1, BLOCK_ELEMENTS // (4 * x.shape[1]))
    for i in range(0, x.shape[0], block):
        xs = x[i:i + block]
        res = mean_ci_rows(xs, level=LEVEL, bounds=bounds)
        lo, hi, m = res.low, res.high, xs.mean(axis=1)
        vary = xs.min(axis=1) < xs.max(axis=1)
        covered += int(np.sum((lo <= mu + tol) & (mu - tol <= hi)))
        out += int(np.sum(~(lo >= low) | ~(hi <= high)))  # NaN counts as out
        strict = (lo < m) & (m < hi)
        miss += int(np.sum(~((lo <= m) & (m <= hi)) | (vary & ~strict)))
        widths.append(hi - lo)
        for name, count in zip(*np.unique(res.method.astype(str), return_counts=True), strict=True):
            methods[name] = methods.get(name, 0) + int(count)
    reps = x.shape[0]
    return {"coverage": covered / reps, "out_of_range": out, "mean_outside": miss,
            "median_width": float(np.median(np.concatenate(widths))),
            "methods": {k: round(v / reps, 4) for k, v in sorted(methods.items())}}


def _references(x: np.ndarray, mu: float, bounds: tuple[float, float], binary: bool, n_boot: int,
                rng: np.random.Generator) -> dict[str, dict[str, float]]:
    low, high = bounds
    tol = 1e-12 * (high - low)
    sb = np.sort(boot_means(x, n_boot, rng), axis=1)
    found = {"percentile": percentile_ci(sb), "bca": bca_ci(x, sb), "t_clipped": t_clipped_ci(x, low, high)}
    if binary:
        found["wilson"] = wilson_ci(x)
        found["clopper_pearson"] = clopper_pearson_ci(x)
    return {k: {"coverage": float(np.mean((lo <= mu + tol) & (mu - tol <= hi))),
                "median_width": float(np.median(hi - lo))} for k, (lo, hi) in found.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20_000, help="data sets per case for ragmeter's interval")
    ap.add_argument("--ref-reps", type=int, default=2000, help="at most this many data sets per case for the "
                    "reference methods ...")
    ap.add_argument("--ref-values", type=int, default=100_000, help="... and at most this many values in all "
                    "(the bootstrap draws --boot x values) ...")
    ap.add_argument("--ref-reps-min", type=int, default=500, help="... but at least this many data sets")
    ap.add_argument("--boot", type=int, default=999, help="bootstrap resamples per interval")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(20261123)
    t0 = time.perf_counter()
    table: dict[str, dict[str, object]] = {}
    refs_names = ("percentile", "bca", "t_clipped", "wilson", "clopper_pearson")
    print(f"{'case':<48}{'ragmeter':>9}{'out':>5}{'mean out':>9}{'width':>8}   "
          + "".join(f"{k:>17}" for k in refs_names) + "   (coverage/median width)")
    for name, (sampler, mu, bounds, binary) in DISTRIBUTIONS.items():
        for n in sizes:
            x = sampler(rng, (args.reps, n))
            chosen = _chosen(x, mu, bounds)
            n_ref = min(args.reps, args.ref_reps, max(args.ref_reps_min, args.ref_values // n))
            refs = _references(x[:n_ref], mu, bounds, binary, args.boot, rng)
            ok = [r["median_width"] for r in refs.values() if r["coverage"] >= QUALIFY]
            ratio = chosen["median_width"] / min(ok) if ok and min(ok) > 0 else None
            key = f"n={n} {name}"
            table[key] = {"n": n, **chosen, "references": refs, "width_ratio": ratio}
            cells = "".join(f"{refs[k]['coverage']:>9.3f}/{refs[k]['median_width']:<7.3g}" if k in refs
                            else f"{'—':>17}" for k in refs_names)
            print(f"{key:<48}{chosen['coverage']:>9.3f}{chosen['out_of_range']:>5}{chosen['mean_outside']:>9}"
                  f"{chosen['median_width']:>8.3g}   {cells}"
                  + (f"   ratio {ratio:.2f}" if ratio is not None else ""), flush=True)
    big = {k: v for k, v in table.items() if int(v["n"]) >= 10}  # type: ignore[call-overload]
    worst = min(big, key=lambda k: big[k]["coverage"]) if big else None  # type: ignore[arg-type, return-value]
    ratios = {k: v["width_ratio"] for k, v in big.items() if v["width_ratio"] is not None}
    widest = max(ratios, key=ratios.get) if ratios else None  # type: ignore[arg-type]
    print(json.dumps({
        "level": LEVEL, "reps": args.reps, "bootstrap_resamples": args.boot,
        "reference_reps": {n: min(args.reps, args.ref_reps, max(args.ref_reps_min, args.ref_values // n))
                           for n in sizes},
        "seconds": round(time.perf_counter() - t0, 1),
        "chosen_coverage": big[worst]["coverage"] if worst else None, "chosen_coverage_case": worst,
        "out_of_range": sum(int(v["out_of_range"]) for v in table.values()),  # type: ignore[call-overload]
        "mean_outside": sum(int(v["mean_outside"]) for v in table.values()),  # type: ignore[call-overload]
        "width_ratio": ratios[widest] if widest else None, "width_ratio_case": widest,
        "cases": table}))


if __name__ == "__main__":
    main()
