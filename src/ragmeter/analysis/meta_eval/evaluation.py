"""Meta-evaluation: score human-labelled items with metrics (through the runner, so judge metrics use
the usual judge client, cache and budget), measure each metric's agreement with the labels next
to the raters' own agreement, store the result with the run, and compare two stored results.

The result is kept in the run it scored (``Run.extra["meta_eval"]``, the run tagged ``meta-eval``),
so no table of its own is needed and ``ragmeter report RUN`` can draw it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.analysis.meta_eval.reader import HumanLabels, read_labels
from ragmeter.analysis.meta_eval.records import (
    FORMAT,
    Difference,
    MetaComparison,
    MetaEvaluation,
    MetricAgreement,
    Statistic,
)
from ragmeter.analysis.meta_eval.statistics import (
    CORRELATIONS,
    N_BOOTSTRAP,
    SEED,
    Resamples,
    agreement,
    boot_correlations,
    correlations,
    human_ceiling,
    interval,
)
from ragmeter.core.errors import ConfigError, StoreError
from ragmeter.core.schema import FIELD_PRESENT, Sample
from ragmeter.store.records import MetricSummary

EXTRA_KEY = "meta_eval"
TAG = "meta-eval"
#: statistics the table can be sorted by
SORT_KEYS = ("kendall", "spearman", "pearson", "pairwise_accuracy", "auroc", "f1")
CI_METHOD = "percentile bootstrap over items (one set of resamples shared by every metric and the ceiling)"


def offline_metrics(samples: Sequence[Sample]) -> list[str]:
    """Every registered metric that runs here, by its name alone, without a judge or a download and
    whose fields some sample has: the lexical family, the bundled embedding model's semantic
    metrics, the non-judge correctness methods (what ``--metrics offline`` means). A metric that
    needs more than its name (an OpenAI grader metric needs its grader object, an agent metric its
    configuration) or whose own check says it cannot run here is left out, so every listed metric
    runs; so is a metric computed on the spot that gives no value on the first
    :data:`PROBE_SAMPLES` samples having its fields (``evals_json_match`` on references that are
    not JSON), so every listed metric has values."""
    from ragmeter.core.context import ScoringContext
    from ragmeter.embed.models import resolve_model
    from ragmeter.metrics.registry import all_metrics, resolve_all

    present = {f for f, has in FIELD_PRESENT.items() if any(has(s) for s in samples)}
    ctx = ScoringContext()  # no judge, no store: what a bare metric list gives a run
    out = []
    for spec in all_metrics():
        if spec.needs_llm or not set(spec.requires) <= present:
            continue
        if spec.name == "correct_semantic_dynamic" and "label" not in present:
            continue  # it calibrates its threshold on the samples' 0/1 labels; without them, on itself
        if spec.needs_embeddings:
            fn_model = getattr(spec.fn, "keywords", {}).get("model")
            if not resolve_model(fn_model or spec.defaults.get("model")).local:
                continue
        try:
            requests = resolve_all([spec.name])
        except ConfigError:  # a metric whose parameter has no default (name@value only)
            continue
        if any(r.spec.check is not None and r.spec.check(ctx, **r.params) for r in requests):
            continue
        if not all(_gives_values(r, samples, ctx) for r in requests):
            continue
        out.append(spec.name)
    return out


#: samples a metric of the ``offline`` preset is tried on before it is listed
PROBE_SAMPLES = 50


def _gives_values(request: Any, samples: Sequence[Sample], ctx: Any) -> bool:
    """Whether a metric scored on the spot (no embeddings, no preparation) gives a value to any of
    the first :data:`PROBE_SAMPLES` samples that have its fields; other metrics are not tried."""
    from ragmeter.metrics.registry import missing_fields

    spec = request.spec
    if spec.needs_embeddings or spec.prepare is not None:
        return True
    probe = [s for s in samples if not missing_fields(s, spec.requires)][:PROBE_SAMPLES]
    try:
        scores = spec.fn(probe, ctx, **request.params)
    except Exception:  # noqa: BLE001 - the run itself reports what goes wrong; the probe only filters
        return True
    return any(s.value is not None for s in scores)


def expand_metrics(metrics: Iterable[str], samples: Sequence[Sample]) -> list[str]:
    """Metric names with ``offline`` expanded (:func:`offline_metrics`), duplicates dropped."""
    out: list[str] = []
    for m in metrics:
        for name in (offline_metrics(samples) if m == "offline" else [m]):
            if name not in out:
                out.append(name)
    return out


def item_values(labels: HumanLabels, values: Mapping[str, float | None]) -> np.ndarray:
    """A metric's value per item from its value per sample id: the sample's (pointwise) or the
    difference B - A (pairwise); NaN where there is none."""
    def get(sid: str) -> float:
        v = values.get(sid)
        return np.nan if v is None else float(v)

    if labels.kind == "pairwise":
        return np.array([get(b) - get(a) for a, b in map(labels.side_ids, labels.items)], dtype=np.float64)
    return np.array([get(i) for i in labels.items], dtype=np.float64)


def _oriented(stat: Statistic | None, sort: str, higher: bool) -> float | None:
    v = stat.value if stat is not None else None
    if v is None:
        return None
    if sort == "auroc":
        return (v - 0.5) if higher else (0.5 - v)
    if sort in ("pairwise_accuracy", "f1"):
        return v
    return v if higher else -v


def analyse(labels: HumanLabels, per_sample: Mapping[str, Mapping[str, float | None]],
            info: Mapping[str, MetricSummary], *, n_bootstrap: int = N_BOOTSTRAP, level: float = 0.95,
            seed: int = SEED, sort: str = "kendall") -> MetaEvaluation:
    """The meta-evaluation of scored items.

    Args:
        labels: the human-labelled items.
        per_sample: ``{metric: {sample id: value or None}}``.
        info: the run's summary (``{metric: MetricSummary}``: each metric's direction and family).
        n_bootstrap: resamples of the intervals (0: none).
        level: the intervals' confidence level.
        seed: the resamples' seed.
        sort: the statistic the ranking orders by (:data:`SORT_KEYS`; sign flipped for
            lower-is-better metrics).
    """
    if sort not in SORT_KEYS:
        raise ConfigError(f"unknown sort statistic {sort!r}: use one of {', '.join(SORT_KEYS)}")
    if not 0 < level < 1:
        raise ConfigError(f"level must be between 0 and 1, got {level!r}")
    pairwise = labels.kind == "pairwise"
    human = labels.human
    n = len(labels.items)
    counts = Resamples.draw(n, n_bootstrap, seed=seed, level=level).counts
    binary = labels.majority() if labels.binary else None
    ceiling_all = human_ceiling(labels.ratings, labels.raters, counts, level=level, pairwise=pairwise)
    ceilings: dict[bytes, Any] = {}
    metrics: dict[str, MetricAgreement] = {}
    for key, vals in per_sample.items():
        summary = info.get(key)
        higher = summary is None or summary.direction != "lower"
        v = item_values(labels, vals)
        keep = np.isfinite(v)
        idx = np.flatnonzero(keep)
        stats = agreement(v[idx], human[idx], counts[:, idx], level=level, pairwise=pairwise,
                          binary=binary[idx] if binary is not None else None, higher_is_better=higher)
        if idx.size == n:
            ceiling = ceiling_all
        else:
            sig = keep.tobytes()
            if sig not in ceilings:
                ceilings[sig] = human_ceiling(labels.ratings[idx], labels.raters, counts[:, idx], level=level,
                                              pairwise=pairwise)
            ceiling = ceilings[sig]
        entry = MetricAgreement.from_dict({"direction": "higher" if higher else "lower",
                                           "family": summary.family if summary is not None else None,
                                           **stats, "n_missing": int(n - idx.size), "human_ceiling": ceiling})
        entry.agreement = _oriented(entry.stat(sort), sort, higher)
        metrics[key] = entry
    ranking = sorted(metrics, key=lambda k: (metrics[k].agreement is None, -(metrics[k].agreement or 0.0)))
    return MetaEvaluation(
        format=FORMAT, kind=labels.kind, dataset=labels.source, label=labels.label, n_items=n,
        n_ratings=int((~np.isnan(labels.ratings)).sum()), raters=labels.raters,
        rater_layout=labels.rater_layout, binary=labels.binary, level=level,
        n_bootstrap=int(counts.shape[0]), seed=seed, ci_method=CI_METHOD, sort=sort,
        metrics=metrics, ranking=ranking, human_ceiling=ceiling_all,
        items={"ids": labels.items, "human": [float(x) for x in human]})


def meta_evaluate(data: Any, metrics: Sequence[str], *, pairwise: bool = False,
                  label: str | Sequence[str] | None = None, rater: str | None = None,
                  mapping: Mapping[str, str] | Iterable[str] | None = None, fmt: str | None = None,
                  db: Any = None, options: dict[str, Any] | None = None, name: str | None = None,
                  n_bootstrap: int = N_BOOTSTRAP, level: float = 0.95, seed: int = SEED, sort: str = "kendall",
                  progress: bool = False, skip_unavailable: bool = False) -> MetaEvaluation:
    """Score human-labelled data with ``metrics`` and measure how well each agrees with people.

    The metrics run through :func:`ragmeter.evaluate` (a stored run tagged ``meta-eval``; judge
    metrics use the configured judge with its cache and budget, ``options`` as in ``ragmeter
    eval``); the :class:`~ragmeter.analysis.meta_eval.records.MetaEvaluation` of :func:`analyse` is
    stored in the run and returned with its ``run_id``, ``status`` and ``incomplete`` (why a metric
    has no value, as ``ragmeter eval`` says).

    Args:
        data: what :func:`~ragmeter.analysis.meta_eval.reader.read_labels` reads.
        metrics: metric names; ``offline`` adds every metric that runs without a judge or a download.
        pairwise, label, rater, mapping, fmt: passed to :func:`~ragmeter.analysis.meta_eval.reader.read_labels`.
        db: a store or its URL.
        options: run options (``judge``, ``judge_max_cost`` ...).
        name: the run's name.
        n_bootstrap, level, seed, sort: passed to :func:`analyse`.
        progress: progress bars on stderr.
        skip_unavailable: metrics that cannot run here get no value instead of stopping the run.
    """
    from ragmeter.io.readers import Dataset
    from ragmeter.run.runner import evaluate
    from ragmeter.store import Store, open_store

    if sort not in SORT_KEYS:
        raise ConfigError(f"unknown sort statistic {sort!r}: use one of {', '.join(SORT_KEYS)}")
    labels = read_labels(data, pairwise=pairwise, label=label, rater=rater, mapping=mapping, fmt=fmt)
    entries = expand_metrics(metrics, labels.samples)
    if not entries:
        raise ConfigError("no metrics given: pass --metrics (e.g. token_f1,semantic_similarity, or offline)")
    store = db if isinstance(db, Store) else open_store(db)
    ds = Dataset(labels.samples, source=labels.source)
    result = evaluate(ds, entries, db=store, options=options, name=name or f"meta-eval {labels.source}",
                      progress=progress, skip_unavailable=skip_unavailable)
    per_sample = {k: dict(zip((s.id for s in result.samples), result.scores.column(k).value_list(), strict=True))
                  for k in result.scores}
    cross_validated = _cross_validate_learned(labels, result.scores)
    per_sample.update({k: values for k, (values, _) in cross_validated.items()})
    record = analyse(labels, per_sample, result.summary, n_bootstrap=n_bootstrap, level=level, seed=seed,
                     sort=sort)
    for k, (_, how) in cross_validated.items():
        record.metrics[k].cross_validation = how
    if result.extra.get("judge"):
        record.judge = result.extra["judge"]
    run = store.get_run(result.run_id)
    store.update_run(result.run_id, extra={**(run.extra or {}), EXTRA_KEY: record.to_record()})
    store.tag_run(result.run_id, add=[TAG])
    record.run_id, record.status, record.incomplete = result.run_id, result.status, list(result.incomplete)
    return record


def _cross_validate_learned(labels: HumanLabels, scores: Mapping[str, Sequence[Any]]
                            ) -> dict[str, tuple[dict[str, float | None], dict[str, Any]]]:
    """The values a metric fitted to human labels (its scores carry their ``features`` and ``model``:
    ``quality_offline``) has when fitted on these labels by grouped cross-validation, so its
    agreement is never measured on an item its model saw (:mod:`ragmeter.analysis.quality_fit`)."""
    from ragmeter.analysis.quality_fit import cross_validate_scores

    out = {}
    for key, column in scores.items():
        first = next((s for s in column if s.value is not None), None)
        details = first.details if first is not None else None
        if isinstance(details, Mapping) and "features" in details and "model" in details:
            cv = cross_validate_scores(labels, scores, key)
            if cv is not None:
                out[key] = cv
    return out


def stored_meta_eval(run: Any) -> MetaEvaluation | None:
    """The meta-evaluation kept in a stored run, or ``None`` when the run is not one."""
    rec = (run.extra or {}).get(EXTRA_KEY)
    if not isinstance(rec, Mapping) or not rec.get("metrics"):
        return None
    return MetaEvaluation.from_record(rec, run_id=run.id, status=run.status,
                                      incomplete=(run.extra or {}).get("incomplete", []))


def load_meta_eval(store: Any, ref: str) -> MetaEvaluation:
    """The stored meta-evaluation of a run (id, prefix, name or ``latest``).

    Raises:
        StoreError: no such run, or the run is not a meta-evaluation.
    """
    run = store.get_run(ref)
    rec = (run.extra or {}).get(EXTRA_KEY)
    if not isinstance(rec, dict):
        raise StoreError(f"run {run.id} is not a meta-evaluation (`ragmeter runs --tag {TAG}` lists them)")
    return MetaEvaluation.from_record(rec, run_id=run.id, status=run.status,
                                      incomplete=(run.extra or {}).get("incomplete", []))


def stored_item_values(store: Any, record: MetaEvaluation, metric: str) -> np.ndarray:
    """A stored meta-evaluation's per-item values of one metric (NaN where none), from its run."""
    cv = record.metrics[metric].cross_validation if metric in record.metrics else None
    if cv and isinstance(cv.get("values"), Mapping):  # the cross-validated values the agreement is of
        values = dict(cv["values"])
    else:
        table = store.score_table(record.run_id).get(metric, {})
        values = {sid: s.value for sid, s in table.items()}
    ids = record.items["ids"]
    labels = HumanLabels(record.kind, record.dataset, record.label, list(ids), [], np.zeros((len(ids), 0)), [])
    return item_values(labels, values)


def compare_meta_evals(store: Any, a: str, b: str, *, n_bootstrap: int = N_BOOTSTRAP,
                       seed: int = SEED) -> MetaComparison:
    """Two stored meta-evaluations side by side, metric by metric (``b`` minus ``a``).

    When both scored the same items against the same human labels (the same file, e.g. before and
    after a judge prompt change), each difference of correlations gets a paired bootstrap interval
    over items (one set of resamples for both); otherwise the values are only set side by side.
    """
    ra, rb = load_meta_eval(store, a), load_meta_eval(store, b)
    same = (ra.kind == rb.kind and ra.items["ids"] == rb.items["ids"]
            and np.allclose(ra.items["human"], rb.items["human"], equal_nan=True))
    level = rb.level
    human = np.array(rb.items["human"], dtype=np.float64)
    counts = Resamples.draw(len(human), n_bootstrap, seed=seed, level=level).counts if same else None
    out = MetaComparison(str(ra.run_id), str(rb.run_id), same, level,
                         None if same else "different items or labels: no paired interval of the differences")
    for key in list(dict.fromkeys([*ra.ranking, *rb.ranking])):
        ma, mb = ra.metrics.get(key), rb.metrics.get(key)
        names = list(CORRELATIONS) + [s for s in ("pairwise_accuracy", "auroc", "f1")
                                      if (ma and s in ma.statistics) or (mb and s in mb.statistics)]
        paired: dict[str, tuple[float, np.ndarray]] = {}
        if same and ma and mb and counts is not None:
            # the difference on the items both have a value for, on one set of resamples
            va, vb = stored_item_values(store, ra, key), stored_item_values(store, rb, key)
            keep = np.flatnonzero(np.isfinite(va) & np.isfinite(vb))
            pa, pb = correlations(va[keep], human[keep], None), correlations(vb[keep], human[keep], None)
            if all(pa[c]["value"] is not None and pb[c]["value"] is not None for c in CORRELATIONS):
                w = counts[:, keep]
                ba, bb = boot_correlations(va[keep], human[keep], w), boot_correlations(vb[keep], human[keep], w)
                paired = {c: (pb[c]["value"] - pa[c]["value"], bb[c] - ba[c]) for c in CORRELATIONS}
        row: dict[str, Difference] = {}
        for s in names:
            x, y = _value(ma, s), _value(mb, s)
            d = None if x is None or y is None else y - x
            lo = hi = None
            if s in paired:
                d = paired[s][0]
                lo, hi = interval(paired[s][1], level)
            row[s] = Difference(x, y, d, lo, hi)
        out.metrics[key] = row
    return out


def _value(m: MetricAgreement | None, name: str) -> float | None:
    """The value of statistic ``name`` of a metric (``None`` when it has none)."""
    stat = m.stat(name) if m is not None else None
    return stat.value if stat is not None else None
