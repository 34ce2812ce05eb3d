"""trec_eval's measures: their names, cutoffs and nicknames (``-m``), each query's values as numpy
reductions of a :class:`~ragmeter.metrics.retrieval.relevance.RelevanceMatrix`, and the averages
trec_eval prints on its ``all`` lines.

Only the scoring: reading TREC files is :mod:`ragmeter.io.trec`, the trec_eval drop-in (files in,
trec_eval's text out, a run evaluated block by block) is :mod:`ragmeter.apps.trec`. Conventions are
trec_eval 9.0.x's (see that module).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ragmeter.core.errors import ConfigError
from ragmeter.metrics.retrieval import measures as M
from ragmeter.metrics.retrieval.relevance import RelevanceMatrix

_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_IPREC = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

#: measures in trec_eval's print order; value: default cutoffs (None: not a cutoff measure)
MEASURES: dict[str, tuple[float, ...] | None] = {
    "runid": None, "num_q": None, "num_ret": None, "num_rel": None, "num_rel_ret": None,
    "map": None, "gm_map": None, "Rprec": None, "bpref": None, "recip_rank": None,
    "iprec_at_recall": _IPREC, "P": _CUTS, "recall": _CUTS, "ndcg": None, "ndcg_cut": _CUTS,
    "map_cut": _CUTS, "success": (1, 5, 10), "set_P": None, "set_recall": None, "set_F": None,
    "num_nonrel_judged_ret": None,
}
#: measures whose values are counts (printed as integers)
COUNTS = {"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"}
NICKNAMES = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec",
                 "bpref", "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "set_P", "set_recall", "set_F"),
}
#: trec_eval's floor of a query's AP in the geometric mean (``gm_map``)
MIN_GEO_MEAN = 0.00001


def parse_measures(specs: Iterable[str]) -> dict[str, tuple[float, ...] | None]:
    """Turn ``-m`` arguments into ``{measure: cutoffs}`` in trec_eval's print order.

    Accepts trec_eval's ``P.5,10`` form, the printed ``P_5`` form, a bare cutoff measure (its
    default cutoffs, unless cutoffs are given for it in another argument) and the nicknames
    ``official`` and ``set``. Cutoffs given in several arguments are merged (trec_eval keeps only
    the first ``-m`` with cutoffs of a measure).

    Raises:
        ConfigError: an unknown measure or a bad cutoff.
    """
    chosen: dict[str, set[float] | None] = {}
    for raw in specs:
        for spec in [s.strip() for s in str(raw).split() if s.strip()]:
            if spec in NICKNAMES:
                for name in NICKNAMES[spec]:
                    _add(chosen, name, None)
                continue
            name, params = spec, None
            if "." in spec and spec.split(".", 1)[0] in MEASURES:
                name, rest = spec.split(".", 1)
                params = [p for p in rest.split(",")]
            elif spec not in MEASURES:
                base = next((b for b in sorted(MEASURES, key=len, reverse=True)
                             if MEASURES[b] is not None and spec.startswith(b + "_")), None)
                if base is None:
                    raise ConfigError(f"unknown trec measure {spec!r}; supported: "
                                      f"{', '.join(MEASURES)} (cutoff forms like P_5 or P.5,10) "
                                      f"and the nicknames {', '.join(NICKNAMES)}")
                name, params = base, [spec[len(base) + 1:]]
            if params is not None and MEASURES[name] is None:
                raise ConfigError(f"trec measure {name!r} takes no cutoff (got {spec!r})")
            _add(chosen, name, None if params is None else [_cutoff(name, p, spec) for p in params])
    out: dict[str, tuple[float, ...] | None] = {}
    for name in MEASURES:
        if name in chosen:
            cuts = chosen[name]
            out[name] = None if MEASURES[name] is None else tuple(sorted(cuts or MEASURES[name] or ()))
    return out


def _add(chosen: dict[str, set[float] | None], name: str, cuts: list[float] | None) -> None:
    # a bare cutoff measure means its default cutoffs unless cutoffs are given for it somewhere
    if MEASURES[name] is None:
        chosen[name] = None
        return
    cur = chosen.setdefault(name, set())
    assert cur is not None
    if cuts is not None:
        cur.update(cuts)


def _cutoff(name: str, text: str, spec: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"bad cutoff {text!r} in trec measure {spec!r}") from None
    if name == "iprec_at_recall":
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"recall level must be in [0, 1], got {text!r} in {spec!r}")
        return v
    if v != int(v) or v < 1:
        raise ConfigError(f"cutoff must be a positive integer, got {text!r} in {spec!r}")
    return int(v)


def value_name(name: str, cut: float) -> str:
    """The printed name of a cutoff measure's value (``P_5``, ``iprec_at_recall_0.10``)."""
    return f"{name}_{cut:3.2f}" if name == "iprec_at_recall" else f"{name}_{int(cut)}"


def query_values(m: RelevanceMatrix, parsed: dict[str, tuple[float, ...] | None]) -> dict[str, np.ndarray]:
    """Every value of every query of ``m`` for the measures ``parsed`` (:func:`parse_measures`);
    ``gm_map``: the log of each query's AP."""
    values: dict[str, np.ndarray] = {}

    def put(name: str, v: np.ndarray) -> None:
        values[name] = np.nan_to_num(v, nan=0.0)

    for meas, cuts in parsed.items():
        if meas in ("runid", "num_q"):
            continue
        if cuts is None:
            if meas == "num_ret":
                put(meas, M.num_ret(m))
            elif meas == "num_rel":
                put(meas, M.num_rel(m))
            elif meas == "num_rel_ret":
                put(meas, M.num_rel_ret(m))
            elif meas == "num_nonrel_judged_ret":
                put(meas, M.num_nonrel_judged_ret(m))
            elif meas == "map":
                put(meas, M.average_precision(m))
            elif meas == "gm_map":
                ap = np.maximum(np.nan_to_num(M.average_precision(m), nan=0.0), MIN_GEO_MEAN)
                # C's log, as trec_eval: numpy's vectorised log differs in the last bit at times
                values[meas] = np.fromiter(map(math.log, ap.tolist()), dtype=np.float64, count=len(ap))
            elif meas == "Rprec":
                put(meas, M.r_precision(m))
            elif meas == "bpref":
                put(meas, M.bpref(m))
            elif meas == "recip_rank":
                put(meas, M.reciprocal_rank(m))
            elif meas == "ndcg":
                put(meas, M.ndcg(m, None, "linear"))
            elif meas in ("set_P", "set_recall", "set_F"):
                rr, ret, rel = M.num_rel_ret(m), M.num_ret(m), M.num_rel(m)
                p = np.divide(rr, ret, out=np.zeros_like(rr), where=ret > 0)
                r = np.divide(rr, rel, out=np.zeros_like(rr), where=rel > 0)
                if meas == "set_P":
                    put(meas, p)
                elif meas == "set_recall":
                    put(meas, r)
                else:
                    put(meas, np.divide(2 * p * r, p + r, out=np.zeros_like(p), where=(p + r) > 0))
            continue
        names = [value_name(meas, c) for c in cuts]
        if meas == "iprec_at_recall":
            table = M.iprec_at_recall(m, cuts)
            for j, n in enumerate(names):
                values[n] = table[:, j]
            continue
        for c, n in zip(cuts, names, strict=True):
            k = int(c)
            if meas == "P":
                put(n, M.precision(m, k))
            elif meas == "recall":
                put(n, M.recall(m, k))
            elif meas == "ndcg_cut":
                put(n, M.ndcg(m, k, "linear"))
            elif meas == "map_cut":
                put(n, M.average_precision(m, k))
            elif meas == "success":
                put(n, M.hit_rate(m, k))
    return values


def averages(values: dict[str, np.ndarray], parsed: dict[str, tuple[float, ...] | None], *, n_eval: int,
             complete: bool, n_qrels_queries: int, rel_by_q: dict[str, int] | None,
             run_id: str | None) -> tuple[dict[str, list[str]], dict[str, float | int | str]]:
    """trec_eval's averages of per-query values (``values``: :func:`query_values` of the ``n_eval``
    evaluated queries, in trec_eval's order): ``({measure: its value names}, {value name: value over
    all queries})``, as trec_eval's ``all`` lines. ``complete`` (``-c``): averaged over the
    ``n_qrels_queries`` queries of the qrels, ``rel_by_q`` their documents graded >= 1."""
    names: dict[str, list[str]] = {}
    summary: dict[str, float | int | str] = {}
    denom = n_qrels_queries if complete else n_eval

    def mean(v: np.ndarray) -> float:
        # trec_eval adds query values one by one, then divides
        return float(np.cumsum(v)[-1] / denom) if len(v) and denom else 0.0

    for meas, cuts in parsed.items():
        if meas == "runid":
            if run_id is not None:
                names[meas] = ["runid"]
                summary["runid"] = run_id
            continue
        if meas == "num_q":
            names[meas] = ["num_q"]
            summary["num_q"] = n_qrels_queries if complete else n_eval
            continue
        names[meas] = [meas] if cuts is None else [value_name(meas, c) for c in cuts]
        for n in names[meas]:
            v = values[n]
            if meas == "gm_map":
                total = float(np.cumsum(v)[-1]) if len(v) else 0.0
                if complete:
                    total += (n_qrels_queries - n_eval) * math.log(MIN_GEO_MEAN)
                summary[n] = math.exp(total / denom) if denom else 0.0
            elif meas in COUNTS:
                summary[n] = int(v.sum())
                if meas == "num_rel" and complete and rel_by_q is not None:
                    # trec_eval 9.0 with -c: the total of every qrels query's documents graded
                    # >= 1, whatever -l says
                    summary[n] = int(sum(rel_by_q.values()))
            else:
                summary[n] = mean(v)
    return names, summary
