"""How far a judge metric can be trusted: its agreement with human labels compared with the
humans' agreement among themselves, its self-consistency over repeated runs, its agreement with a
second judge model, and how often it failed. Also: task agreement per scale, and human labels
stored back as metrics of the run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError, RagmeterError
from ragmeter.core.schema import Score
from ragmeter.human.tasks import (
    Scale,
    get_task,
    human_labels,
    labels,
    labels_as_ratings,
    list_tasks,
    no_scale,
    task_scales,
)
from ragmeter.stats.agreement import agreement, krippendorff_alpha
from ragmeter.store import Store

KV_NAMESPACE = "reliability"
#: which human scale a judge metric is compared with, by words in the metric's name
_SCALE_HINTS = (("faithful", "faithfulness"), ("halluc", "faithfulness"), ("ground", "faithfulness"),
                ("relevan", "relevance"), ("correct", "correctness"), ("accura", "correctness"))
N_BOOT_CARD = 300


def task_agreement(store: Store, task_ref: str, scales: Sequence[str] | None = None,
                   level: str | None = None, n_bootstrap: int = 1000) -> dict[str, list[dict[str, Any]]]:
    """Per scale: Krippendorff's alpha (ordinal for numeric scales, nominal for categorical, or
    ``level``), percent agreement, and Cohen's quadratic-weighted kappa when there are two raters."""
    task = get_task(store, task_ref)
    unknown = [s for s in scales or [] if s not in {sc.name for sc in task_scales(task)}]
    if unknown:
        raise ConfigError(no_scale(task, unknown[0]))
    out: dict[str, list[dict[str, Any]]] = {}
    for sc in task_scales(task):
        if scales and sc.name not in scales:
            continue
        try:
            r = labels_as_ratings(store, task.id, sc.name)
        except ConfigError:
            continue
        lvl = level or ("ordinal" if sc.kind == "ordinal" else "nominal")
        rows = [agreement(r, "alpha", level=lvl, n_bootstrap=n_bootstrap),
                agreement(r, "percent", n_bootstrap=n_bootstrap)]
        if len(r.raters) == 2:
            rows.append(agreement(r, "kappa", weights="quadratic" if sc.kind == "ordinal" else None,
                                  n_bootstrap=n_bootstrap))
        out[sc.name] = [x.to_dict() for x in rows]
    return out


def apply_human_scores(store: Store, task_ref: str, how: str = "mean") -> dict[str, int]:
    """Store each numeric scale's combined human label (normalised to [0, 1]) as metric
    ``human_<scale>`` of the task's run and add it to the run summary."""
    from ragmeter.stats.intervals import aggregate
    from ragmeter.store.records import MetricSummary, RunSummary

    task = get_task(store, task_ref)
    run = store.get_run(task.run_id)
    existing = store.score_table(run.id)
    done: dict[str, int] = {}
    summary = store.run_summary(run)
    added: dict[str, MetricSummary] = {}
    for sc in task_scales(task):
        if not sc.numeric:
            continue
        vals = human_labels(store, task.id, sc.name, how)
        if not vals:
            continue
        metric = f"human_{sc.name}"
        have = existing.get(metric, {})
        new = {sid: v for sid, v in vals.items() if sid not in have}
        changed = {sid: v for sid, v in vals.items() if sid in have and have[sid].value != v}
        if changed:
            from sqlalchemy import delete

            from ragmeter.store.models import ScoreRow

            with store.session() as s, s.begin():
                s.execute(delete(ScoreRow).where(ScoreRow.run_id == run.id, ScoreRow.metric == metric,
                                                 ScoreRow.sample_id.in_(list(changed))))
            new.update(changed)
        details = {"source": "human", "task": task.id, "how": how, "scale": sc.name}
        store.add_scores(run.id, metric, list(new), [Score(v, details=details) for v in new.values()])
        agg = aggregate([Score(v) for v in vals.values()], bounds=(0.0, 1.0))  # normalised labels
        added[metric] = MetricSummary.from_dict({**agg, "direction": "higher", "family": "human", "range": [0.0, 1.0]})
        done[metric] = len(vals)
    if not done:
        raise ConfigError(f"task {task.id} has no labels on a numeric scale yet")
    record = RunSummary({**summary.metrics, **added}, format_version=summary.format_version)
    store.update_run(run.id, summary=record.to_dict(), summary_format=record.format_version)
    return done


def _judge_metrics(run: Any) -> list[str]:
    from ragmeter.metrics.registry import get_spec

    out = []
    for m in run.metrics or []:
        try:
            if get_spec(m.get("name", m.get("key"))).needs_llm:
                out.append(m["key"])
        except (ConfigError, KeyError):
            continue
    return out


def _scale_for(metric: str, scales: dict[str, Scale]) -> Scale | None:
    if metric in scales:
        return scales[metric]
    for hint, name in _SCALE_HINTS:
        if hint in metric and name in scales and scales[name].numeric:
            return scales[name]
    overall = scales.get("overall")
    return overall if overall is not None and overall.numeric else None


def _discretise(v: float, sc: Scale, lower_is_better: bool) -> float:
    lo, hi = float(sc.values[0]), float(sc.values[-1])
    x = 1.0 - v if lower_is_better else v
    return float(np.clip(np.round(lo + x * (hi - lo)), lo, hi))


def _mean_pairwise_alpha(data: np.ndarray, pairs: list[tuple[int, int]], domain: list[float]) -> float:
    vals = [krippendorff_alpha(data[[a, b]], level_of_measurement="ordinal", value_domain=domain)
            for a, b in pairs]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def _alpha_runs(store: Store, run_ids: Sequence[str], metric: str) -> dict[str, Any] | None:
    """Interval alpha of one metric's values across runs of the same samples."""
    tables = [store.score_table(r).get(metric, {}) for r in run_ids]
    ids = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    if not ids:
        return None
    data = np.array([[t[s].value if t[s].value is not None else np.nan for s in ids] for t in tables])
    value = krippendorff_alpha(data, level_of_measurement="interval")
    both = (~np.isnan(data)).all(axis=0)
    same = float(np.mean(np.all(data[:, both] == data[0, both], axis=0))) if both.any() else None
    return {"runs": list(run_ids), "n_items": len(ids), "alpha_interval": None if math.isnan(value) else value,
            "identical_share": same,
            "undefined": "every value the same" if math.isnan(value) else None}


def reliability_card(store: Store, run_ref: str, metric: str, *, task: str | None = None,
                     repeats: Sequence[str] | None = None, other_judge: str | None = None,
                     n_bootstrap: int = N_BOOT_CARD, seed: int = 0) -> dict[str, Any]:
    """The reliability card of one judge metric of a run.

    Human agreement: the judge's score in [0, 1] is put on the human scale (``lo + v (hi - lo)``,
    rounded; reversed for lower-is-better metrics) and compared with each rater: the mean pairwise
    ordinal alpha judge-vs-rater is set against the mean pairwise alpha rater-vs-rater, with a
    bootstrap interval over items of the difference. Also Spearman's rho and the mean absolute
    error between the judge's score and the raters' mean (both in [0, 1]), and the confusion matrix
    judge (rows) vs raters' majority (columns). ``repeats``: other runs of the same metric (same
    judge, temperature > 0, no cache): self-consistency as interval alpha across the runs.
    ``other_judge``: a run of the same metric with another judge model.
    """
    from scipy.stats import spearmanr

    run = store.get_run(run_ref)
    summ = store.run_summary(run).get(metric)
    n_val, n_miss = (summ.n, summ.n_missing) if summ is not None else (0, 0)
    reasons = summ.missing_reasons if summ is not None else {}
    # the judge service's no-value reasons: "judge failure: ..." (and "judge <status>")
    failures = sum(c for r, c in reasons.items() if r.lower().startswith("judge"))
    card: dict[str, Any] = {"run_id": run.id, "metric": metric,
                            "judge": (run.config or {}).get("options", {}).get("judge")
                            if isinstance((run.config or {}).get("options"), dict) else None,
                            "failures": {"n": failures, "of": n_val + n_miss,
                                         "share": failures / (n_val + n_miss) if n_val + n_miss else None}}
    lower = summ is not None and summ.direction == "lower"
    tasks = [get_task(store, task)] if task else list_tasks(store, run.id)
    judge_scores = store.score_table(run.id).get(metric, {})
    human: dict[str, Any] | None = None
    for t in tasks:
        sc = _scale_for(metric, {s.name: s for s in task_scales(t)})
        if sc is None:
            continue
        labs = [lab for lab in labels(store, t.id) if lab.scale == sc.name and lab.value_num is not None]
        raters = sorted({lab.rater for lab in labs})
        items = sorted({lab.sample_id for lab in labs if lab.sample_id in judge_scores
                        and judge_scores[lab.sample_id].value is not None})
        if not items or not raters:
            continue
        col = {s: i for i, s in enumerate(items)}
        row = {r: i for i, r in enumerate(raters)}
        data = np.full((len(raters) + 1, len(items)), np.nan)
        for lab in labs:
            if lab.sample_id in col:
                data[row[lab.rater], col[lab.sample_id]] = lab.value_num
        data[-1] = [_discretise(judge_scores[s].value, sc, lower) for s in items]
        domain = [float(v) for v in sc.values]
        j = len(raters)
        hh_pairs = list(combinations(range(j), 2))
        jh_pairs = [(j, i) for i in range(j)]
        hh = _mean_pairwise_alpha(data, hh_pairs, domain) if hh_pairs else math.nan
        jh = _mean_pairwise_alpha(data, jh_pairs, domain)
        hmean = np.nanmean(data[:j], axis=0)
        hnorm = np.array([sc.normalise(v) for v in hmean])
        jraw = np.array([1.0 - judge_scores[s].value if lower else judge_scores[s].value for s in items])
        rho = float(spearmanr(jraw, hnorm).statistic) if len(items) >= 3 else math.nan
        mae = float(np.mean(np.abs(jraw - hnorm)))
        maj = human_labels(store, t.id, sc.name, "majority", normalise=False)
        cm = np.zeros((len(domain), len(domain)), dtype=int)
        for s, jv in zip(items, data[-1], strict=True):
            cm[domain.index(jv), domain.index(maj[s])] += 1
        diff_ci = None
        if hh_pairs and len(items) >= 5 and n_bootstrap:
            rng = np.random.default_rng(seed)
            diffs = []
            for _ in range(n_bootstrap):
                d = data[:, rng.integers(0, len(items), len(items))]
                a, b = _mean_pairwise_alpha(d, jh_pairs, domain), _mean_pairwise_alpha(d, hh_pairs, domain)
                if not (math.isnan(a) or math.isnan(b)):
                    diffs.append(a - b)
            if diffs:
                diff_ci = [float(x) for x in np.quantile(diffs, [0.025, 0.975])]
        human = {"task": t.id, "scale": sc.name, "n_items": len(items), "raters": raters,
                 "calibrated": _calibrated(judge_scores, items, hnorm, lower),
                 "alpha_judge_human": None if math.isnan(jh) else jh,
                 "alpha_human_human": None if math.isnan(hh) else hh,
                 "difference_ci95": diff_ci,
                 "spearman": None if math.isnan(rho) else rho, "mae": mae,
                 "confusion": {"values": sc.values, "rows": "judge", "columns": "raters' majority",
                               "matrix": cm.tolist()}}
        human["reading"] = _reading(human)
        break
    card["human"] = human
    rec = store.kv_get(KV_NAMESPACE, run.id) or {}
    repeats = list(repeats or rec.get(metric, {}).get("repeats") or [])
    other_judge = other_judge or rec.get(metric, {}).get("other_judge")
    card["self_consistency"] = _alpha_runs(store, [run.id, *[store.resolve_run(r) for r in repeats]],
                                           metric) if repeats else None
    card["cross_judge"] = _alpha_runs(store, [run.id, store.resolve_run(other_judge)], metric) \
        if other_judge else None
    return card


def _calibrated(judge_scores: dict[str, Score], items: list[str], hnorm: np.ndarray,
                lower: bool) -> dict[str, Any] | None:
    """The metric's mean over the run calibrated by the human labels (PPI++, :mod:`ragmeter.stats.ppi`):
    the labelled items' raters' mean (on [0, 1], ``1 -`` it for a lower-is-better metric) against
    the judge's score, and the judge's score alone on the other samples. With fewer labelled items
    than :data:`ragmeter.stats.ppi.MIN_LABELS`, no value and the reason (``reason``)."""
    from ragmeter.human.calibrated import calibrate_values
    from ragmeter.stats.ppi import MIN_LABELS, too_few_labels

    labelled = set(items)
    y = 1.0 - hnorm if lower else hnorm
    yhat = np.array([judge_scores[s].value for s in items], dtype=np.float64)
    unl = np.array([sc.value for sid, sc in judge_scores.items() if sid not in labelled and sc.value is not None],
                   dtype=np.float64)
    if y.size < 2:
        return None
    allv = np.concatenate([yhat, unl])
    if unl.size and y.size < MIN_LABELS:
        return {"value": None, "reason": too_few_labels(int(y.size)), "n_labeled": int(y.size),
                "n_unlabeled": int(unl.size), "metric_mean": float(allv.mean())}
    est = calibrate_values(y, yhat, unl)
    return {**est, "n_labeled": int(y.size), "n_unlabeled": int(unl.size), "metric_mean": float(allv.mean())}


def _reading(h: dict[str, Any]) -> str:
    jh, hh, ci = h["alpha_judge_human"], h["alpha_human_human"], h["difference_ci95"]
    if jh is None:
        return "judge-human agreement is undefined (one category only)"
    if hh is None:
        return (f"judge-human alpha {jh:.2f}; with one rater (or raters on one category) there is no "
                "human-human agreement to compare with")
    base = f"judge-human alpha {jh:.2f} vs human-human alpha {hh:.2f}"
    if ci is None:
        return base + ": too few items to tell the two apart"
    if ci[1] < 0:
        return (f"judge agrees with humans less than humans agree with each other ({base}; "
                f"difference 95% CI [{ci[0]:.2f}, {ci[1]:.2f}]): read its scores with caution")
    if ci[0] > 0:
        return f"judge agrees with humans better than humans agree with each other ({base})"
    return (f"judge agrees with humans about as well as humans agree with each other ({base}; "
            f"difference 95% CI [{ci[0]:.2f}, {ci[1]:.2f}])")


def reliability_cards(store: Store, run_ref: str, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """Cards of every judge metric of a run that has human labels, repeats or a second judge."""
    run = store.get_run(run_ref)
    rec = store.kv_get(KV_NAMESPACE, run.id) or {}
    if not list_tasks(store, run.id) and not rec:
        return {}
    out = {}
    for m in _judge_metrics(run):
        card = reliability_card(store, run.id, m, **kwargs)
        if card["human"] or card["self_consistency"] or card["cross_judge"]:
            out[m] = card
    return out


def card_lines(card: dict[str, Any]) -> list[str]:
    """The card as plain text lines (``ragmeter show``)."""
    f = card["failures"]
    lines = []
    h = card["human"]
    if h:
        lines.append(f"human labels: task {h['task']}, scale {h['scale']}, {h['n_items']} items, "
                     f"raters {', '.join(h['raters'])}")
        lines.append(f"  {h['reading']}")
        sp = f"{h['spearman']:.2f}" if h["spearman"] is not None else "—"
        lines.append(f"  Spearman rho {sp}, mean absolute error {h['mae']:.3f} (on [0, 1])")
        cal = h.get("calibrated")
        if cal and cal.get("value") is None:
            lines.append(f"  calibrated mean: not given ({cal['reason']})")
        elif cal:
            lines.append(f"  calibrated mean {cal['value']:.3f} [{cal['ci_low']:.3f}, {cal['ci_high']:.3f}] "
                         f"({cal['method']}: {cal['n_labeled']} labelled + {cal['n_unlabeled']} judge-only samples) "
                         f"vs the judge's own mean {cal['metric_mean']:.3f}")
            lines += [f"  WARNING: {w}" for w in cal.get("warnings") or []]
        vals = h["confusion"]["values"]
        lines.append("  confusion (rows judge, columns raters' majority): " + " | ".join(
            f"{v}: {row}" for v, row in zip(vals, h["confusion"]["matrix"], strict=True)))
    else:
        lines.append("human labels: none on a matching scale (`ragmeter annotate create`)")
    sc = card["self_consistency"]
    if sc:
        a = sc["alpha_interval"]
        lines.append(f"self-consistency over {len(sc['runs'])} runs: alpha "
                     + (f"{a:.2f}" if a is not None else f"undefined ({sc['undefined']})")
                     + f", identical on {sc['identical_share']:.0%} of {sc['n_items']} items")
    cj = card["cross_judge"]
    if cj:
        a = cj["alpha_interval"]
        lines.append("agreement with a second judge model: alpha "
                     + (f"{a:.2f}" if a is not None else f"undefined ({cj['undefined']})")
                     + f" on {cj['n_items']} items")
    share = f"{f['share']:.0%}" if f["share"] is not None else "—"
    lines.append(f"judge failures: {f['n']} of {f['of']} samples ({share})")
    return lines


def show_sections(store: Store, run: Any) -> dict[str, Any]:
    """``ragmeter show`` sections: one card per judge metric with something to show."""
    try:
        cards = reliability_cards(store, run.id)
    except (RagmeterError, ImportError, ValueError) as exc:
        return {"judge reliability": f"not available: {exc}"}
    return {f"judge reliability: {m}": "\n".join(card_lines(c)) for m, c in cards.items()}
