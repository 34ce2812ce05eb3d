"""Consistency (agent-evaluation guide): does the same model give the same result across repeated runs, and
do different models agree?

Inputs are groups of samples paired by id: several stored runs (answers from
``Store.run_samples``, metric scores from ``Store.score_table``) or one file with a run or model
column. Per sample the figures below are computed over the groups that have it; run-level
figures are means over the samples where a figure has a value (``n`` says how many).

Same model (groups = repeated runs):

- **label agreement** = share of runs giving the modal label (:func:`label_agreement`);
- **score std** = population standard deviation of a score across runs (raw units);
- **score consistency** = ``1 - std / ((high - low) / 2)`` (:func:`score_consistency`);
- **semantic agreement** = mean pairwise cosine similarity of the runs' answers, each pair
  clipped to [0, 1] (:func:`semantic_agreement`; the embeddings encoder);
- **overall consistency** = mean of the sample's available figures among label agreement, the
  mean of its score consistencies, and semantic agreement.

Across models (groups = models; a model's repeated runs are first reduced to its modal label
and mean scores):

- **label agreement** = share of models giving the modal label;
- **score range** = ``max - min`` of the models' scores (raw units), and normalised by
  ``high - low``;
- **confidence agreement** = ``1 - std / ((high - low) / 2)`` of the models' confidences;
- **semantic agreement** = mean cosine over answer pairs from different models;
- **overall agreement** = mean of the sample's available figures among label agreement,
  ``1 - mean normalised score range``, confidence agreement and semantic agreement.

Nothing here is a per-sample metric of one run, so nothing is registered in the metric registry.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.schema import Sample

# =============================================================================================
# The figures, as plain functions
# =============================================================================================


def label_agreement(labels: Sequence[Any]) -> float:
    """Share of the labels equal to the most common one (the modal label), in [1/n, 1].

    Example: ``label_agreement(["low", "low", "high"])`` -> 2/3.

    Raises:
        ValueError: no label.
    """
    if not labels:
        raise ValueError("label_agreement needs at least one label")
    return Counter(labels).most_common(1)[0][1] / len(labels)


def score_consistency(values: Sequence[float], low: float = 0.0, high: float = 1.0) -> float:
    """``1 - std / ((high - low) / 2)``: 1.0 when all values are equal, 0.0 at the largest spread
    possible on the scale (half the values at each end), where ``std`` is the population standard
    deviation. Values outside ``[low, high]`` raise (the scale would be wrong).

    Example: ``score_consistency([80, 90], 0, 100)`` -> ``1 - 5 / 50`` = 0.9.
    """
    if high <= low:
        raise ValueError(f"the scale needs high > low, got [{low}, {high}]")
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("score_consistency needs at least one value")
    if np.any(x < low - 1e-9) or np.any(x > high + 1e-9):
        raise ValueError(f"values outside the scale [{low}, {high}]: min {x.min()}, max {x.max()}")
    return float(max(0.0, 1.0 - x.std() / ((high - low) / 2)))


def semantic_agreement(vectors: np.ndarray, groups: Sequence[Any] | None = None) -> float:
    """Mean pairwise cosine similarity of L2-normalised row vectors, each pair clipped to [0, 1].

    With ``groups``, only pairs from different groups count (answers of different models).

    Raises:
        ValueError: no pair to compare.
    """
    v = np.asarray(vectors, dtype=np.float64)
    sims = np.clip(v @ v.T, 0.0, 1.0)
    n = v.shape[0]
    iu = np.triu_indices(n, k=1)
    mask = np.ones(len(iu[0]), dtype=bool)
    if groups is not None:
        g = np.asarray([str(x) for x in groups])
        mask = g[iu[0]] != g[iu[1]]
    if not mask.any():
        raise ValueError("semantic_agreement needs at least two vectors (from different groups)")
    return float(sims[iu][mask].mean())


# =============================================================================================
# Reading labels, scores and confidences off samples
# =============================================================================================

def _norm_text(s: str) -> str:
    return " ".join(s.split()).casefold()


def _field(sample: Sample, spec: str) -> Any:
    """A value from the sample: ``answer``, ``question``, ``label``, ``metadata.X``,
    ``final_output.X``, ``intent.X``, or a bare name looked up in final_output, then metadata."""
    from ragmeter.metrics.agent.lookup import lookup

    if spec in ("answer", "question", "reference", "id"):
        return getattr(sample, spec)
    if spec == "label":
        return sample.label
    if "." in spec:
        return lookup(sample, spec)
    v = lookup(sample, f"final_output.{spec}")
    return v if v is not None else sample.metadata.get(spec)


def _label_value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, str):
        v = _norm_text(v)
        return v or None
    if isinstance(v, bool | int | float):
        return v
    import json

    return json.dumps(v, sort_keys=True, default=str)


def _number(v: Any) -> float | None:
    """A finite number, or ``None``; numeric text (CSV cells) counts."""
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


@dataclass
class _Obs:
    label: Any = None
    scores: dict[str, float] = field(default_factory=dict)
    confidence: float | None = None
    text: str | None = None


@dataclass
class Inputs:
    """What a consistency computation reads: groups of samples and, optionally, stored scores.

    Attributes:
        groups: ``{group: [Sample]}`` (a group is a run, or a model).
        score_tables: ``{group: {metric_key: {sample_id: value | None}}}`` from stored runs.
        parents: ``{group: model}`` when groups are runs of several models (file input).
        ranges: ``{metric_key: (low, high) or None}``: the declared range of each stored metric
            (:func:`ragmeter.metrics.registry.recorded_range` of its run's request).
    """

    groups: dict[str, list[Sample]]
    score_tables: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    parents: dict[str, str] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float] | None] = field(default_factory=dict)


def _score_range(name: str, score_range: Any, is_metric: bool,
                 recorded: tuple[float, float] | None = None) -> tuple[float, float]:
    """The scale of a score: ``score_range[name]``; else a stored metric's declared range
    (``recorded``, from its run's request; else the registry's by its key); else ``score_range``
    when it is one ``(low, high)`` pair (field scores); else (0, 1)."""
    if isinstance(score_range, Mapping) and name in score_range:
        lo, hi = score_range[name]
        return float(lo), float(hi)
    if is_metric and recorded is not None:
        return recorded
    if is_metric:
        from ragmeter.metrics.registry import get_spec

        for key in (name, name.split("(", 1)[0].split("@", 1)[0]):
            try:
                lo, hi = get_spec(key).range
            except ConfigError:
                continue
            if math.isfinite(lo) and math.isfinite(hi):
                return float(lo), float(hi)
    if isinstance(score_range, tuple | list) and len(score_range) == 2 and not isinstance(score_range[0], list | tuple):
        return float(score_range[0]), float(score_range[1])
    return 0.0, 1.0


def _ranges(inp: Inputs, scores: Sequence[str], score_range: Any) -> dict[str, tuple[float, float]]:
    return {name: _score_range(name, score_range, any(name in t for t in inp.score_tables.values()),
                               inp.ranges.get(name)) for name in scores}


def _observations(inp: Inputs, label: str | None, scores: Sequence[str], confidence: str | None,
                  semantic: bool) -> dict[str, dict[str, _Obs]]:
    out: dict[str, dict[str, _Obs]] = {}
    for g, samples in inp.groups.items():
        table = inp.score_tables.get(g, {})
        rows: dict[str, _Obs] = {}
        for s in samples:
            o = _Obs()
            if label:
                o.label = _label_value(_field(s, label))
            for name in scores:
                v = table[name].get(s.id) if name in table else _number(_field(s, name))
                if v is not None:
                    o.scores[name] = float(v)
            if confidence:
                o.confidence = _number(_field(s, confidence))
            if semantic and isinstance(s.answer, str) and s.answer.strip():
                o.text = s.answer
            rows[s.id] = o
        out[g] = rows
    return out


# =============================================================================================
# Same model and cross model
# =============================================================================================

def _mean(xs: Sequence[float | None]) -> tuple[float | None, int]:
    vals = [x for x in xs if x is not None]
    return (float(np.mean(vals)) if vals else None), len(vals)


def _embed(texts: Sequence[str], encoder: Any, model: str | None, store: Any) -> np.ndarray:
    if encoder is None and store is not None:
        try:
            from ragmeter.core.context import ScoringContext

            svc = ScoringContext({"embedding_model": model} if model else {}, store=store).service("embeddings")
            return np.asarray(svc.matrix(list(texts), model=model), dtype=np.float64)
        except Exception:  # noqa: BLE001 - no embeddings service here: fall back to a plain encoder
            pass
    if encoder is None:
        from ragmeter.embed import get_encoder

        encoder = get_encoder(model)
    return np.asarray(encoder.encode(list(texts)), dtype=np.float64)


def _semantic_per_sample(obs: Mapping[str, Mapping[str, _Obs]], ids: Sequence[str], encoder: Any,
                         model: str | None, store: Any, group_of: Mapping[str, str] | None
                         ) -> tuple[dict[str, float | None], str | None]:
    texts = sorted({o.text for rows in obs.values() for o in rows.values() if o.text})
    if not texts:
        return {}, "no answers to compare"
    try:
        mat = _embed(texts, encoder, model, store)
    except Exception as exc:  # noqa: BLE001 - the other figures stand without this one
        return {}, f"semantic agreement unavailable: {type(exc).__name__}: {exc}"
    row = {t: i for i, t in enumerate(texts)}
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    mat = np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)
    out: dict[str, float | None] = {}
    for sid in ids:
        items = [(g, o.text) for g, rows in obs.items() if (o := rows.get(sid)) is not None and o.text]
        if len(items) < 2:
            out[sid] = None
            continue
        vecs = mat[[row[t] for _, t in items]]
        grp = [group_of.get(g, g) for g, _ in items] if group_of is not None else None
        try:
            out[sid] = semantic_agreement(vecs, grp)
        except ValueError:
            out[sid] = None
    return out, None


def _paired_ids(obs: Mapping[str, Mapping[str, _Obs]]) -> list[str]:
    order: dict[str, int] = {}
    for rows in obs.values():
        for sid in rows:
            order[sid] = order.get(sid, 0) + 1
    return [sid for sid, n in order.items() if n >= 2]


def same_model_consistency(inp: Inputs, *, label: str | None = "answer", scores: Sequence[str] = (),
                           score_range: Any = None, semantic: bool = True, encoder: Any = None,
                           embedding_model: str | None = None, store: Any = None) -> dict[str, Any]:
    """Same-model consistency of repeated runs (groups of ``inp``); see the module docstring.

    Args:
        inp: the runs' samples (and stored scores).
        label: where the label is read: ``answer`` (whitespace- and case-normalised text),
            ``label``, ``metadata.X``, ``final_output.X``, or a bare name (final_output, then
            metadata); ``None`` for no label agreement.
        scores: score names: a stored metric key, else a numeric field (as for ``label``).
        score_range: ``(low, high)`` or ``{name: (low, high)}`` for field scores (a metric's
            registered range is used otherwise; default (0, 1)).
        semantic: compute semantic agreement of the answers (loads the embedding model).
        encoder: an object with ``encode(texts) -> array`` (default: ragmeter's encoder).

    Returns:
        ``{"kind": "same_model", "groups", "n_groups", "n_samples", "label", "label_agreement",
        "n_label", "scores": {name: {"std", "consistency", "range", "n"}}, "score_std",
        "score_consistency", "semantic_agreement", "n_semantic", "overall_consistency",
        "n_overall", "notes", "per_sample": {id: {...}}}``. ``score_std`` / ``score_consistency``
        are those of the first score (the mean over scores for the consistency).

    Raises:
        ConfigError: fewer than two groups, or a score outside its scale.
    """
    if len(inp.groups) < 2:
        raise ConfigError(f"consistency needs at least two runs, got {len(inp.groups)}")
    obs = _observations(inp, label, scores, None, semantic)
    ids = _paired_ids(obs)
    notes: list[str] = []
    ranges = _ranges(inp, scores, score_range)
    sem: dict[str, float | None] = {}
    if semantic:
        sem, note = _semantic_per_sample(obs, ids, encoder, embedding_model, store, None)
        if note:
            notes.append(note)
    per: dict[str, dict[str, Any]] = {}
    for sid in ids:
        rows = [o for rows in obs.values() if (o := rows.get(sid)) is not None]
        rec: dict[str, Any] = {"n_runs": len(rows)}
        labels = [o.label for o in rows if o.label is not None]
        rec["label_agreement"] = label_agreement(labels) if len(labels) >= 2 else None
        if labels:
            rec["modal_label"] = Counter(labels).most_common(1)[0][0]
        cons = []
        for name in scores:
            vals = [o.scores[name] for o in rows if name in o.scores]
            if len(vals) < 2:
                rec[f"std:{name}"] = rec[f"consistency:{name}"] = None
                continue
            lo, hi = ranges[name]
            try:
                c = score_consistency(vals, lo, hi)
            except ValueError as exc:
                raise ConfigError(f"score {name!r} of sample {sid!r}: {exc}; give its scale "
                                  f"(--score-range LOW,HIGH)") from exc
            rec[f"std:{name}"] = float(np.std(vals))
            rec[f"consistency:{name}"] = c
            cons.append(c)
        rec["semantic_agreement"] = sem.get(sid)
        parts = [rec["label_agreement"], float(np.mean(cons)) if cons else None, rec["semantic_agreement"]]
        rec["overall"], _ = _mean(parts)
        per[sid] = rec
    out: dict[str, Any] = {"kind": "same_model", "groups": list(inp.groups), "n_groups": len(inp.groups),
                           "n_samples": len(ids), "label": label, "semantic": semantic}
    out["label_agreement"], out["n_label"] = _mean([r["label_agreement"] for r in per.values()])
    out["scores"] = {}
    for name in scores:
        std, n = _mean([r[f"std:{name}"] for r in per.values()])
        cons, _ = _mean([r[f"consistency:{name}"] for r in per.values()])
        out["scores"][name] = {"std": std, "consistency": cons, "range": list(ranges[name]), "n": n}
    first = out["scores"].get(scores[0]) if scores else None
    out["score_std"] = first["std"] if first else None
    out["score_consistency"], _ = _mean([v["consistency"] for v in out["scores"].values()])
    out["semantic_agreement"], out["n_semantic"] = _mean([r["semantic_agreement"] for r in per.values()])
    out["overall_consistency"], out["n_overall"] = _mean([r["overall"] for r in per.values()])
    if not ids:
        notes.append("no sample id appears in two runs or more")
    out["notes"] = notes
    out["per_sample"] = per
    return out


def cross_model_consistency(inp: Inputs, *, label: str | None = "answer", scores: Sequence[str] = (),
                            score_range: Any = None, confidence: str | None = "confidence",
                            confidence_range: tuple[float, float] = (0.0, 1.0), semantic: bool = True,
                            encoder: Any = None, embedding_model: str | None = None,
                            store: Any = None) -> dict[str, Any]:
    """Agreement across models (see the module docstring). Groups are models; when
    ``inp.parents`` maps groups (runs) to models, each model's runs are first reduced to its modal
    label, mean scores and mean confidence. Arguments as :func:`same_model_consistency`, plus
    ``confidence`` (where the confidence is read; ``None`` to skip) and its scale.

    Returns:
        ``{"kind": "cross_model", "models", "n_models", "n_samples", "label", "label_agreement",
        "scores": {name: {"range", "normalised_range", "n", "scale"}}, "score_range",
        "confidence_agreement", "semantic_agreement", "overall_agreement", ... "per_sample"}``.
    """
    obs = _observations(inp, label, scores, confidence, semantic)
    model_of = {g: inp.parents.get(g, g) for g in inp.groups}
    models = list(dict.fromkeys(model_of.values()))
    if len(models) < 2:
        raise ConfigError(f"cross-model agreement needs at least two models, got {len(models)}")
    # reduce each model's runs to one observation per sample
    reduced: dict[str, dict[str, _Obs]] = {m: {} for m in models}
    by_model: dict[str, list[dict[str, _Obs]]] = {m: [] for m in models}
    for g, rows in obs.items():
        by_model[model_of[g]].append(rows)
    for m, runs in by_model.items():
        sids = dict.fromkeys(sid for rows in runs for sid in rows)
        for sid in sids:
            items = [rows[sid] for rows in runs if sid in rows]
            o = _Obs()
            labels = [x.label for x in items if x.label is not None]
            o.label = Counter(labels).most_common(1)[0][0] if labels else None
            for name in scores:
                vals = [x.scores[name] for x in items if name in x.scores]
                if vals:
                    o.scores[name] = float(np.mean(vals))
            confs = [x.confidence for x in items if x.confidence is not None]
            o.confidence = float(np.mean(confs)) if confs else None
            reduced[m][sid] = o
    ids = _paired_ids(reduced)
    notes: list[str] = []
    ranges = _ranges(inp, scores, score_range)
    sem: dict[str, float | None] = {}
    if semantic:
        sem, note = _semantic_per_sample(obs, ids, encoder, embedding_model, store, model_of)
        if note:
            notes.append(note)
    per: dict[str, dict[str, Any]] = {}
    for sid in ids:
        rows = [o for rows in reduced.values() if (o := rows.get(sid)) is not None]
        rec: dict[str, Any] = {"n_models": len(rows)}
        labels = [o.label for o in rows if o.label is not None]
        rec["label_agreement"] = label_agreement(labels) if len(labels) >= 2 else None
        norm_ranges = []
        for name in scores:
            vals = [o.scores[name] for o in rows if name in o.scores]
            if len(vals) < 2:
                rec[f"range:{name}"] = rec[f"normalised_range:{name}"] = None
                continue
            lo, hi = ranges[name]
            if min(vals) < lo - 1e-9 or max(vals) > hi + 1e-9:
                raise ConfigError(f"score {name!r} of sample {sid!r} falls outside its scale [{lo}, {hi}]; "
                                  f"give its scale (--score-range LOW,HIGH)")
            r = max(vals) - min(vals)
            rec[f"range:{name}"] = r
            rec[f"normalised_range:{name}"] = r / (hi - lo)
            norm_ranges.append(r / (hi - lo))
        confs = [o.confidence for o in rows if o.confidence is not None]
        if len(confs) >= 2:
            try:
                rec["confidence_agreement"] = score_consistency(confs, *confidence_range)
            except ValueError as exc:
                raise ConfigError(f"confidence of sample {sid!r}: {exc}") from exc
        else:
            rec["confidence_agreement"] = None
        rec["semantic_agreement"] = sem.get(sid)
        parts = [rec["label_agreement"], 1.0 - float(np.mean(norm_ranges)) if norm_ranges else None,
                 rec["confidence_agreement"], rec["semantic_agreement"]]
        rec["overall"], _ = _mean(parts)
        per[sid] = rec
    out: dict[str, Any] = {"kind": "cross_model", "models": models, "n_models": len(models),
                           "n_samples": len(ids), "label": label, "confidence": confidence, "semantic": semantic}
    out["label_agreement"], out["n_label"] = _mean([r["label_agreement"] for r in per.values()])
    out["scores"] = {}
    for name in scores:
        rng, n = _mean([r[f"range:{name}"] for r in per.values()])
        nrng, _ = _mean([r[f"normalised_range:{name}"] for r in per.values()])
        out["scores"][name] = {"range": rng, "normalised_range": nrng, "scale": list(ranges[name]), "n": n}
    first = out["scores"].get(scores[0]) if scores else None
    out["score_range"] = first["range"] if first else None
    out["confidence_agreement"], out["n_confidence"] = _mean([r["confidence_agreement"] for r in per.values()])
    out["semantic_agreement"], out["n_semantic"] = _mean([r["semantic_agreement"] for r in per.values()])
    out["overall_agreement"], out["n_overall"] = _mean([r["overall"] for r in per.values()])
    if not ids:
        notes.append("no sample id appears for two models or more")
    out["notes"] = notes
    out["per_sample"] = per
    return out


# =============================================================================================
# Inputs: stored runs, or one file
# =============================================================================================

def inputs_from_runs(store: Any, run_refs: Sequence[str]) -> tuple[Inputs, list[str]]:
    """Load runs (ids, prefixes, names) as :class:`Inputs`; also the metric keys all runs share."""
    ids = [store.resolve_run(r) for r in run_refs]
    if len(set(ids)) != len(ids):
        raise ConfigError("the same run is given twice")
    groups: dict[str, list[Sample]] = {}
    tables: dict[str, dict[str, dict[str, float | None]]] = {}
    common: list[str] | None = None
    ranges: dict[str, tuple[float, float] | None] = {}
    from ragmeter.metrics.registry import recorded_range

    for rid in ids:
        run = store.get_run(rid)
        summary = store.run_summary(run)
        groups[rid] = store.run_samples(rid)
        tables[rid] = {m: {sid: sc.value for sid, sc in per.items()} for m, per in store.score_table(rid).items()}
        keys = [m["key"] for m in (run.metrics or [])]
        common = keys if common is None else [k for k in common if k in keys]
        for m in run.metrics or []:
            if m["key"] not in ranges:
                ranges[m["key"]] = recorded_range(m["key"], m, summary[m["key"]].range if m["key"] in summary else None)
    return Inputs(groups, tables, ranges=ranges), list(common or [])


def inputs_from_file(path: str | Path, *, by: str = "run", run_column: str = "run",
                     model_column: str = "model") -> Inputs:
    """Read one file (JSONL/JSON/CSV/Parquet) with a run or model column into :class:`Inputs`.

    ``by="run"``: groups are the values of ``run_column``. ``by="model"``: groups are models
    (``model_column``); when rows also have ``run_column``, each (model, run) is a group and
    ``parents`` maps it to its model. The other columns are read as dataset rows (field aliases
    apply; unknown columns land in metadata).

    Raises:
        DatasetError: a row without the group column, a bad row, or an id twice in one group.
    """
    from ragmeter.io.formats import _rows_from_file
    from ragmeter.io.readers import sample_from_dict

    if by not in ("run", "model"):
        raise ConfigError(f"--by must be run or model, got {by!r}")
    p = Path(path)
    if not p.exists():
        raise DatasetError("file not found", file=str(p))
    col = run_column if by == "run" else model_column
    groups: dict[str, list[Sample]] = {}
    parents: dict[str, str] = {}
    seen: dict[tuple[str, str], int] = {}
    rows, cells = _rows_from_file(p, None)
    for lineno, row in rows:
        if isinstance(row, DatasetError):
            raise row
        if not isinstance(row, Mapping):
            raise DatasetError("expected an object with fields", file=str(p), line=lineno)
        if row.get(col) is None:
            raise DatasetError(f"no {col!r} column value (consistency --by {by})", file=str(p), line=lineno, field=col)
        group = str(row[col])
        if by == "model" and row.get(run_column) is not None:
            group = f"{row[col]}/{row[run_column]}"
            parents[group] = str(row[col])
        elif by == "model":
            parents[group] = group
        rest = {k: v for k, v in row.items() if k not in (run_column, model_column)}
        sample = sample_from_dict(rest, default_id=f"row-{lineno}", file=str(p), line=lineno, cells=cells)
        if (group, sample.id) in seen:
            raise DatasetError(f"id {sample.id!r} appears twice in {col} {group!r} "
                               f"(first on line {seen[(group, sample.id)]})", file=str(p), line=lineno, field="id")
        seen[(group, sample.id)] = lineno
        groups.setdefault(group, []).append(sample)
    return Inputs(groups, parents=parents)


def save_record(store: Any, result: Mapping[str, Any]) -> None:
    """Record per-sample overall figures under ``kv("consistency", run_id)`` for every run of a
    same-model (or cross-model, one run per model) result, so composites (the ``unified``
    preset) can use them."""
    kind = result["kind"]
    runs = result.get("groups") or result.get("models") or []
    overall = result.get("overall_consistency") if kind == "same_model" else result.get("overall_agreement")
    rec = {"runs": list(runs), "overall": overall, "label": result.get("label"),
           "per_sample": {sid: r.get("overall") for sid, r in result["per_sample"].items()}}
    for rid in runs:
        prev = store.kv_get("consistency", rid) or {}
        store.kv_put("consistency", rid, {**prev, kind: rec})


def consistency_from_runs(store: Any, run_refs: Sequence[str], *, cross_model: bool = False,
                          label: str | None = "answer", scores: Sequence[str] | None = None,
                          save: bool = True, **kwargs: Any) -> dict[str, Any]:
    """Consistency of stored runs: same-model by default, cross-model (each run one model) with
    ``cross_model=True``. ``scores`` defaults to every metric the runs share. The result is
    recorded for the runs (see :func:`save_record`) unless ``save=False``. Other keyword
    arguments go to :func:`same_model_consistency` / :func:`cross_model_consistency`.
    """
    inp, common = inputs_from_runs(store, run_refs)
    names = list(common if scores is None else scores)
    fn = cross_model_consistency if cross_model else same_model_consistency
    if cross_model:
        names_of = {rid: (store.get_run(rid).name or rid) for rid in inp.groups}
        if len(set(names_of.values())) == len(names_of):
            inp = Inputs({names_of[g]: v for g, v in inp.groups.items()},
                         {names_of[g]: v for g, v in inp.score_tables.items()})
    result = fn(inp, label=label, scores=names, store=store, **kwargs)
    if save and not cross_model:
        save_record(store, result)
    return result


def consistency_from_file(path: str | Path, *, by: str = "run", run_column: str = "run",
                          model_column: str = "model", label: str | None = "answer",
                          scores: Sequence[str] = (), **kwargs: Any) -> dict[str, Any]:
    """Consistency from one file: ``by="run"`` -> same-model figures; ``by="model"`` ->
    cross-model figures, plus ``per_model`` same-model figures for models with two runs or more
    (when the file has a run column)."""
    inp = inputs_from_file(path, by=by, run_column=run_column, model_column=model_column)
    if by == "run":
        return same_model_consistency(inp, label=label, scores=scores, **kwargs)
    kw = {k: v for k, v in kwargs.items() if k not in ("confidence", "confidence_range")}
    result = cross_model_consistency(inp, label=label, scores=scores, **kwargs)
    per_model = {}
    for model in result["models"]:
        runs = {g: v for g, v in inp.groups.items() if inp.parents.get(g) == model}
        if len(runs) >= 2:
            per_model[model] = same_model_consistency(Inputs(runs), label=label, scores=scores, **kw)
            per_model[model].pop("per_sample")
    result["per_model"] = per_model
    return result
