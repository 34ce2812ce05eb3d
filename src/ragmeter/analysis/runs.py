"""Per-sample values of a run (from the store, a baseline file or an in-memory result), aligned by
sample id for paired statistics."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError, StoreError

BASELINE_FORMAT = "ragmeter-baseline"
BASELINE_VERSION = 1


@dataclass
class RunValues:
    """What paired comparisons need from a run.

    Attributes:
        run_id: the run id (or the baseline file's run id).
        name: the run's name, if any.
        values: ``{metric_key: {sample_id: value or None}}``.
        means: ``{metric_key: mean}`` as stored (used when per-sample values are absent).
        directions: ``{metric_key: "higher" | "lower"}``.
        label: how to show it (name or id, or the file path).
        ranges: ``{metric_key: (low, high) or None}``, the declared range of the metric's values
            (:func:`ragmeter.metrics.registry.recorded_range`: its request's spec, else the range
            recorded with the run); ``None``: the metric declares none. See :meth:`range_of`.
    """

    run_id: str
    name: str | None = None
    values: dict[str, dict[str, float | None]] = field(default_factory=dict)
    means: dict[str, float | None] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)
    label: str = ""
    dataset_fingerprint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    #: a stored run's scores as arrays by sample position (:mod:`ragmeter.store.columns`): pairs
    #: two runs of the same samples without a per-sample lookup
    columns: Any = None
    #: ``{turn sample id: conversation id}`` for a run of conversations (``None`` otherwise): the
    #: turns of one conversation are compared as a cluster (:func:`pair_clusters`)
    clusters: dict[str, str] | None = None

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys([*self.values, *self.means]))

    def range_of(self, metric: str) -> tuple[float, float] | None:
        """The declared range of ``metric``'s values, found when the run was loaded (its request's
        spec, else the range recorded with the run); for a metric loaded without one, the
        registry's by its key; ``None`` when it declares none or is unknown here."""
        if metric in self.ranges:
            return self.ranges[metric]
        return registry_range(metric)

    def higher_is_better(self, metric: str) -> bool:
        return self.directions.get(metric, "higher") != "lower"


def from_store(store: Any, ref: str) -> RunValues:
    """A stored run's per-sample values.

    Raises:
        StoreError: no such run.
    """
    from ragmeter.store.columns import run_columns

    run = store.get_run(ref)
    cols, _ = run_columns(store, run.id)
    values = _ColumnValues(cols)
    summary = store.run_summary(run)
    directions = {m: summary[m].direction if m in summary else _registry_direction(m) for m in values}
    means = {m: _column_mean(v) for m, v in cols.values.items()}
    from ragmeter.metrics.registry import recorded_range

    requests = {m.get("key"): m for m in (run.metrics or []) if isinstance(m, dict)}
    ranges = {m: recorded_range(m, requests.get(m), summary[m].range if m in summary else None) for m in values}
    return RunValues(run_id=run.id, name=run.name, values=values, means=means, directions=directions,
                     label=f"{run.name} ({run.id})" if run.name else run.id,
                     dataset_fingerprint=run.dataset_fingerprint, extra=dict(run.extra or {}),
                     ranges=ranges, columns=cols, clusters=stored_clusters(store, run.id))


def stored_clusters(store: Any, run_id: str) -> dict[str, str] | None:
    """``{turn id: conversation id}`` of a stored run of conversations, ``{row id: trace's sample
    id}`` of a run scored per span (``--per-span``; the samples' metadata is read only when the
    first sample says the run is one of these), else ``None``."""
    from ragmeter.conversations.view import run_has_conversations
    from ragmeter.run.spans import TRACE_SAMPLE

    if run_has_conversations(store, run_id):
        return turn_clusters(store.run_samples(run_id))
    first = next(iter(store.iter_sample_rows(run_id, chunk=1)), None)
    meta = ((first[3] or {}).get("metadata") or {}) if first is not None else {}
    if isinstance(meta, Mapping) and TRACE_SAMPLE in meta:
        return turn_clusters(store.run_samples(run_id))
    return None


def turn_clusters(samples: Any) -> dict[str, str] | None:
    """``{turn sample id: conversation id}`` of the assistant-turn samples among ``samples`` (in a
    run scored per span, ``{row id: its trace's sample id}``: :func:`ragmeter.run.spans.trace_clusters`),
    or ``None`` when there is none (independent samples)."""
    from ragmeter.conversations.model import CONVERSATION_ID, is_turn_sample
    from ragmeter.run.spans import trace_clusters

    out = {s.id: str(s.metadata[CONVERSATION_ID]) for s in samples if is_turn_sample(s)}
    return out or trace_clusters(samples)


def pair_clusters(a: RunValues, b: RunValues, ids: list[str]) -> list[str] | None:
    """The cluster of each paired sample (its conversation) when the pairs include turns of
    conversations, else ``None`` (independent samples). A sample outside every conversation is a
    cluster of its own."""
    return cluster_labels(a.clusters or b.clusters, ids)


def cluster_words(a: RunValues, b: RunValues) -> tuple[str, str]:
    """``(unit, members)`` of the clusters of a paired comparison, for its notes: ``("conversation",
    "turns")``, or ``("trace", "rows")`` for runs scored per span."""
    known = a.clusters or b.clusters
    return getattr(known, "unit", "conversation"), getattr(known, "members", "turns")


def cluster_labels(known: Mapping[str, str] | None, ids: list[str]) -> list[str] | None:
    """``known[i]`` for each id (a sample outside every cluster is a cluster of its own), or
    ``None`` when no id is in ``known``."""
    if not known or not any(i in known for i in ids):
        return None
    return [known.get(i, "sample:" + i) for i in ids]


class _ColumnValues(Mapping[str, dict[str, "float | None"]]):
    """``RunValues.values`` of a stored run: each metric's ``{sample_id: value}`` made from its
    column only when read (paired statistics read the columns themselves)."""

    def __init__(self, cols: Any) -> None:
        self._cols, self._made = cols, {}  # type: ignore[var-annotated]

    def __getitem__(self, metric: str) -> dict[str, float | None]:
        if metric not in self._made:
            if metric not in self._cols.values:
                raise KeyError(metric)
            self._made[metric] = _value_map(self._cols, metric)
        return self._made[metric]

    def __contains__(self, metric: object) -> bool:
        return metric in self._cols.values

    def __iter__(self) -> Any:
        return iter(self._cols.values)

    def __len__(self) -> int:
        return len(self._cols.values)


def _column_mean(v: np.ndarray) -> float | None:
    x = v[~np.isnan(v)]
    return float(np.mean(x)) if x.size else None


def _value_map(cols: Any, metric: str) -> dict[str, float | None]:
    """``{sample_id: value or None}`` of the samples with a stored score, in position order."""
    idx = np.flatnonzero(cols.scored[metric])
    ids = cols.sample_ids
    return {ids[i]: (None if x != x else x) for i, x in zip(idx.tolist(), cols.values[metric][idx].tolist(), strict=True)}


def from_result(result: Any) -> RunValues:
    """Values of an :class:`ragmeter.run.runner.EvaluationResult`."""
    ids = [s.id for s in result.samples]
    values = {m: {i: sc.value for i, sc in zip(ids, scores, strict=True)} for m, scores in result.scores.items()}
    summary = result.summary
    directions = {m: summary[m].direction if m in summary else "higher" for m in values}
    ranges = {m: _recorded(summary[m].range) if m in summary else None for m in values}  # as its specs declared
    return RunValues(run_id=result.run_id, values=values, means={m: _mean(v) for m, v in values.items()},
                     directions=directions, label=result.run_id, extra=dict(result.extra or {}),
                     ranges=ranges, clusters=turn_clusters(result.samples))


def _stored_range(entry: Any) -> tuple[float, float] | None:
    """The ``range`` recorded in a baseline file's metric entry, if valid."""
    return _recorded(entry.get("range") if isinstance(entry, dict) else None)


def _recorded(rng: Any) -> tuple[float, float] | None:
    """A recorded ``[low, high]`` (a run summary's or a baseline file's) as a declared range, if valid."""
    if not isinstance(rng, list | tuple) or len(rng) != 2:
        return None
    try:
        low, high = float(rng[0]), float(rng[1])
    except (TypeError, ValueError):
        return None
    from ragmeter.metrics.registry import declared_range

    return declared_range((low, high))


def registry_range(metric: str) -> tuple[float, float] | None:
    """The registry's declared ``range`` of a metric key (``ndcg@10``, ``faithfulness(judge=...)``
    resolve to their metric); ``None`` for a name this process does not know, or a metric that
    declares no range."""
    from ragmeter.metrics.registry import recorded_range

    return recorded_range(metric)


def _registry_direction(metric: str) -> str:
    try:
        from ragmeter.metrics.registry import resolve

        return "higher" if resolve(metric).spec.higher_is_better else "lower"
    except Exception:  # noqa: BLE001 - an unknown key keeps the default direction
        return "higher"


def _mean(v: dict[str, float | None]) -> float | None:
    xs = [x for x in v.values() if x is not None]
    return float(np.mean(xs)) if xs else None


def load_runs(ref: str | Any, store: Any = None) -> RunValues:
    """A run id/name/prefix (needs ``store``), a baseline JSON file path, an ``EvaluationResult``
    or a :class:`RunValues`.

    Raises:
        StoreError / ConfigError: the reference names neither a stored run nor a readable file.
    """
    if isinstance(ref, RunValues):
        return ref
    if hasattr(ref, "scores") and hasattr(ref, "samples"):
        return from_result(ref)
    ref = str(ref)
    path = Path(ref)
    if path.suffix.lower() == ".json" or (path.is_file() and not _looks_like_run_id(ref)):
        return load_baseline(path)
    if store is None:
        from ragmeter.store import open_store

        store = open_store()
    return from_store(store, ref)


def _looks_like_run_id(ref: str) -> bool:
    return len(ref) <= 32 and ref.isalnum()


def save_baseline(values: RunValues, path: str | Path, *, metrics: list[str] | None = None) -> Path:
    """Write a baseline file: per metric its direction, mean, count and every per-sample value,
    so a later paired test works against the file without the database.

    Format (JSON)::

        {"format": "ragmeter-baseline", "version": 1, "run_id": "...", "name": "...",
         "created_at": "...", "dataset_fingerprint": "...",
         "metrics": {"ndcg@5": {"direction": "higher", "mean": 0.71, "n": 48,
                                "values": {"sample-id": 0.63, "other-id": null, ...}}}}

    A run of conversations adds ``"clusters": {"turn-id": "conversation-id", ...}``.
    """
    from datetime import UTC, datetime

    keys = metrics or values.metrics
    missing = [m for m in keys if m not in values.values]
    if missing:
        raise ConfigError(f"run {values.label} has no metric(s) {missing}; it has {values.metrics}")
    doc = {"format": BASELINE_FORMAT, "version": BASELINE_VERSION, "run_id": values.run_id,
           "name": values.name, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "dataset_fingerprint": values.dataset_fingerprint,
           "metrics": {m: {"direction": values.directions.get(m, "higher"), "mean": values.means.get(m),
                           "n": sum(v is not None for v in values.values[m].values()),
                           "range": list(r) if (r := values.range_of(m)) is not None else None,
                           "values": values.values[m]} for m in keys}}
    if "method" in values.extra:
        doc["method"] = values.extra["method"]
    if values.clusters:  # a run of conversations: its turns are compared per conversation
        doc["clusters"] = values.clusters
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_baseline(path: str | Path) -> RunValues:
    """Read a baseline file written by :func:`save_baseline`. Also accepted: baseline files of the form
    ``{"date": ..., "metrics": {"name": mean, ...}}`` (means only: the gate then compares means
    without a significance test and says so).

    Raises:
        ConfigError: unreadable file or an unknown structure.
    """
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"baseline file not found: {path}")
    from ragmeter.core.files import read_text

    text = read_text(path, "baseline file")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # not JSON, a 5,000-digit number, nested too deeply
        raise ConfigError(f"{path}: cannot read baseline: {str(exc)[:200]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict):
        raise ConfigError(f"{path}: a baseline needs a 'metrics' mapping")
    values: dict[str, dict[str, float | None]] = {}
    means: dict[str, float | None] = {}
    directions: dict[str, str] = {}
    ranges: dict[str, tuple[float, float] | None] = {}
    for m, entry in doc["metrics"].items():
        if isinstance(entry, int | float) and not isinstance(entry, bool):
            means[m] = float(entry)  # {"metrics": {name: mean}} style: mean only
            directions[m] = _registry_direction(m)
            continue
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: metric {m!r} must be a number or a mapping")
        directions[m] = str(entry.get("direction") or _registry_direction(m))
        # the file records each metric's declared range (null: none), which may differ from a
        # registered metric of the same name (an OpenAI grader named "bleu")
        ranges[m] = _stored_range(entry) if "range" in entry else registry_range(m)
        if entry.get("mean") is not None:
            means[m] = float(entry["mean"])
        raw = entry.get("values")
        if isinstance(raw, dict):
            vals: dict[str, float | None] = {}
            for sid, v in raw.items():
                if v is not None and not (isinstance(v, int | float) and math.isfinite(v)):
                    raise ConfigError(f"{path}: metric {m!r}, sample {sid!r}: value must be a number or null")
                vals[str(sid)] = None if v is None else float(v)
            values[m] = vals
            if m not in means:
                means[m] = _mean(vals)
    rid = str(doc.get("run_id") or path.stem)
    clusters = doc.get("clusters")
    if clusters is not None and not (isinstance(clusters, dict)
                                     and all(isinstance(v, str) for v in clusters.values())):
        raise ConfigError(f"{path}: 'clusters' must map sample ids to conversation ids")
    return RunValues(run_id=rid, name=doc.get("name"), values=values, means=means, directions=directions,
                     label=str(path), dataset_fingerprint=doc.get("dataset_fingerprint"), ranges=ranges,
                     clusters={str(k): v for k, v in clusters.items()} if clusters else None)


def paired_arrays(a: RunValues, b: RunValues, metric: str) -> tuple[np.ndarray, np.ndarray, list[str], int]:
    """Values of ``metric`` for the samples both runs scored (paired by sample id, in ``a``'s
    order), the ids, and how many samples of either run were left out (no value or not in both)."""
    ca, cb = a.columns, b.columns
    if (ca is not None and cb is not None and metric in ca.values and metric in cb.values
            and ca.sample_ids == cb.sample_ids):
        # two stored runs of the same samples: pair the columns by position, in bulk
        xa_all, xb_all = ca.values[metric], cb.values[metric]
        ha, hb = ~np.isnan(xa_all), ~np.isnan(xb_all)
        both = ha & hb
        ids = [ca.sample_ids[i] for i in np.flatnonzero(both).tolist()]
        return xa_all[both], xb_all[both], ids, int(np.count_nonzero(ha | hb) - len(ids))
    va, vb = a.values.get(metric, {}), b.values.get(metric, {})
    ids = [i for i, x in va.items() if x is not None and vb.get(i) is not None]
    union = {i for i, x in va.items() if x is not None} | {i for i, x in vb.items() if x is not None}
    xa = np.array([va[i] for i in ids], dtype=np.float64)
    xb = np.array([vb[i] for i in ids], dtype=np.float64)
    return xa, xb, ids, len(union) - len(ids)
