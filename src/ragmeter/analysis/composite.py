"""Composite (weighted overall) scores, score bands and automatic hints (agent-evaluation guide).

A composite combines other metrics' per-sample values with weights: DeepEval's overall score,
OpenEvals' agent-efficiency overall, the agent-evaluation guide's unified quality score, or the user's own. Metrics
never see each other's scores inside a run, so composites are computed *after* a run, from its
stored per-sample scores (:func:`composite_scores`), or from a plain mapping of values
(:func:`composite_from_values`). Lower-is-better inputs (hallucination, bias ...) are inverted.

Public names used by the report and ``ragmeter show`` (whose text is :mod:`ragmeter.apps.cli.agent`):
:data:`PRESETS`, :func:`composite_scores`, :func:`composite_from_values`, :func:`band`, :func:`hints`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError

# =============================================================================================
# Presets (data)
# =============================================================================================

#: Built-in composites. A component is a weight, or a mapping with ``weight`` and one of
#: ``metric`` (a metric key or a list of candidate keys, first present wins; default: the
#: component's name), ``preset`` (a nested composite) or ``source: consistency`` (the per-sample
#: overall consistency recorded by ``ragmeter consistency`` for the run); ``invert`` forces
#: (``true``) or forbids (``false``) ``1 - value``; by default lower-is-better metrics are inverted.
PRESETS: dict[str, dict[str, Any]] = {
    "deepeval": {
        "description": "DeepEval overall (agent-evaluation guide): 0.25 answer relevancy + 0.30 faithfulness + "
                       "0.25 (1 - hallucination) + 0.10 contextual relevancy + 0.10 (1 - bias)",
        "components": {
            "answer_relevancy": {"weight": 0.25, "metric": ["answer_relevancy", "ragas_answer_relevance"]},
            "faithfulness": {"weight": 0.30, "metric": ["faithfulness", "ragas_faithfulness"]},
            "hallucination": {"weight": 0.25, "invert": True},
            "contextual_relevancy": {"weight": 0.10},
            "bias": {"weight": 0.10, "invert": True},
        },
    },
    "openevals": {
        "description": "OpenEvals/AgentEvals agent-efficiency overall (agent-evaluation guide): 0.15 intent + 0.15 plan "
                       "+ 0.20 tool choice + 0.15 tool completeness + 0.15 trajectory + 0.20 final answer",
        "components": {
            "intent_correctness": 0.15,
            "plan_quality": 0.15,
            "tool_choice_correctness": 0.20,
            "tool_completeness": 0.15,
            "trajectory_match": 0.15,
            "final_answer_quality": 0.20,
        },
    },
    "accuracy": {
        "description": "Accuracy category of the agent-evaluation guide's unified view: faithfulness, 1 - hallucination, "
                       "answer relevancy, factual accuracy, equal weights (the guide names the members, "
                       "not their weights)",
        "components": {
            "faithfulness": {"weight": 0.25, "metric": ["faithfulness", "ragas_faithfulness"]},
            "hallucination": {"weight": 0.25, "invert": True},
            "answer_relevancy": {"weight": 0.25, "metric": ["answer_relevancy", "ragas_answer_relevance"]},
            "factual_accuracy": {"weight": 0.25, "metric": ["factual_accuracy", "answer_correctness"]},
        },
    },
    "unified": {
        "description": "Unified overall quality (agent-evaluation guide): 0.35 accuracy + 0.25 consistency + "
                       "0.40 agent efficiency (accuracy and openevals presets; consistency from "
                       "`ragmeter consistency`)",
        "components": {
            "accuracy": {"weight": 0.35, "preset": "accuracy"},
            "consistency": {"weight": 0.25, "source": "consistency", "metric": ["consistency"]},
            "agent_efficiency": {"weight": 0.40, "preset": "openevals"},
        },
    },
}

#: What to do when a component has no value: ``renormalise`` over the present components (the
#: default; the result lists what was missing), or ``none`` (no composite value).
MISSING_POLICIES = ("renormalise", "none")
DEFAULT_MISSING = "renormalise"
#: With ``renormalise``, a composite whose present components weigh less than this share of the
#: total weight has no value (it would be another score wearing the composite's name).
DEFAULT_MIN_COVERAGE = 0.5


@dataclass(frozen=True)
class Component:
    name: str
    weight: float
    metrics: tuple[str, ...]
    preset: Composite | None = None
    source: str | None = None
    invert: bool | None = None


@dataclass(frozen=True)
class Composite:
    """A resolved composite definition."""

    name: str
    components: tuple[Component, ...]
    missing: str = DEFAULT_MISSING
    min_coverage: float = DEFAULT_MIN_COVERAGE
    description: str = ""

    @property
    def total_weight(self) -> float:
        return sum(c.weight for c in self.components)

    def weights(self) -> dict[str, float]:
        return {c.name: c.weight for c in self.components}


def _load_file(path: Path) -> dict[str, Any]:
    from ragmeter.core.files import read_text

    text = read_text(path, "composite definition")
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - yaml and json errors differ
        raise ConfigError(f"{path}: cannot parse composite definition: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a composite definition must be a mapping")
    data.setdefault("name", path.stem)
    return data


def resolve_composite(preset: str | Mapping[str, Any] | Composite, *,
                      custom: Mapping[str, Any] | None = None, missing: str | None = None,
                      min_coverage: float | None = None, _seen: tuple[str, ...] = ()) -> Composite:
    """Turn a preset name, a YAML/JSON file path or a mapping into a :class:`Composite`.

    A mapping is ``{"components": {name: weight | {...}}, "missing": ..., "min_coverage": ...}``
    or just ``{name: weight}``. ``custom`` holds extra named definitions (a run's
    ``options.composite``) that names may refer to, before the built-in presets.

    Raises:
        ConfigError: unknown name, non-positive weights, a preset nested in itself, bad policy.
    """
    if isinstance(preset, Composite):
        comp = preset
    else:
        if isinstance(preset, str):
            name = preset
            if custom and name in custom:
                spec = custom[name]
            elif name in PRESETS:
                spec = PRESETS[name]
            elif Path(name).suffix.lower() in {".yaml", ".yml", ".json"} or Path(name).is_file():
                if not Path(name).is_file():
                    raise ConfigError(f"composite definition file not found: {name}")
                spec = _load_file(Path(name))
                name = spec.get("name", Path(name).stem)
            else:
                known = sorted(set(PRESETS) | set(custom or {}))
                raise ConfigError(f"unknown composite {name!r}; presets: {', '.join(known)} (or a YAML/JSON file)")
            if name in _seen:
                raise ConfigError(f"composite {name!r} contains itself")
            _seen = (*_seen, name)
        elif isinstance(preset, Mapping):
            spec, name = preset, str(preset.get("name", "custom"))
        else:
            raise ConfigError(f"a composite is a preset name, a file or a mapping, got {type(preset).__name__}")
        comp = _build(name, spec, custom, _seen)
    if missing is not None or min_coverage is not None:
        comp = Composite(comp.name, comp.components, missing or comp.missing,
                         comp.min_coverage if min_coverage is None else min_coverage, comp.description)
    if comp.missing not in MISSING_POLICIES:
        raise ConfigError(f"missing policy must be one of {', '.join(MISSING_POLICIES)}, got {comp.missing!r}")
    if not 0 <= comp.min_coverage <= 1:
        raise ConfigError(f"min_coverage must be in [0, 1], got {comp.min_coverage}")
    return comp


def _build(name: str, spec: Mapping[str, Any], custom: Mapping[str, Any] | None,
           seen: tuple[str, ...]) -> Composite:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"composite {name!r} must be a mapping")
    comps_raw = spec.get("components")
    if comps_raw is None:  # the short form {metric: weight, ...}
        comps_raw = {k: v for k, v in spec.items() if k not in {"name", "description", "missing", "min_coverage"}}
    if not isinstance(comps_raw, Mapping) or not comps_raw:
        raise ConfigError(f"composite {name!r} has no components")
    comps = []
    for cname, c in comps_raw.items():
        where = f"composite {name!r}, component {cname!r}"
        if isinstance(c, int | float) and not isinstance(c, bool):
            c = {"weight": c}
        if not isinstance(c, Mapping):
            raise ConfigError(f"{where}: give a weight or a mapping with 'weight'")
        unknown = set(c) - {"weight", "metric", "preset", "source", "invert"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid: weight, metric, preset, source, invert")
        w = c.get("weight")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"{where}: weight must be a number >= 0, got {w!r}")
        metrics = c.get("metric", cname)
        metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
        if not metrics or not all(isinstance(m, str) for m in metrics):
            raise ConfigError(f"{where}: metric must be a metric key or a list of keys")
        nested = None
        if c.get("preset") is not None:
            nested = resolve_composite(c["preset"], custom=custom, _seen=seen)
        source = c.get("source")
        if source not in (None, "consistency"):
            raise ConfigError(f"{where}: source must be 'consistency', got {source!r}")
        invert = c.get("invert")
        if invert is not None and not isinstance(invert, bool):
            raise ConfigError(f"{where}: invert must be true or false")
        comps.append(Component(str(cname), float(w), metrics, nested, source, invert))
    if sum(c.weight for c in comps) <= 0:
        raise ConfigError(f"composite {name!r}: the weights add up to 0")
    mc = spec.get("min_coverage", DEFAULT_MIN_COVERAGE)
    if isinstance(mc, bool) or not isinstance(mc, int | float):
        raise ConfigError(f"composite {name!r}: min_coverage must be a number in [0, 1]")
    return Composite(name, tuple(comps), str(spec.get("missing", DEFAULT_MISSING)), float(mc),
                     str(spec.get("description", "")))


# =============================================================================================
# Combining values
# =============================================================================================

def _registry_direction(key: str) -> bool | None:
    """``higher_is_better`` of a registered metric (by key, base name before ``(``/``@``)."""
    from ragmeter.metrics.registry import get_spec

    for name in (key, _base(key)):
        try:
            return get_spec(name).higher_is_better
        except ConfigError:
            continue
    return None


def _base(key: str) -> str:
    return key.split("(", 1)[0].split("@", 1)[0]


def _inverted(comp: Component, key: str | None, directions: Mapping[str, str | bool] | None) -> bool:
    if comp.invert is not None:
        return comp.invert
    if key is None:
        return False
    if directions and key in directions:
        d = directions[key]
        return (d is False) or d == "lower"
    hib = _registry_direction(key)
    return hib is False


def _combine(comp: Composite, values: Mapping[str, float | None]) -> tuple[float | None, dict[str, Any]]:
    """Weighted mean of component values (already oriented), per the missing policy."""
    present = {c.name: values[c.name] for c in comp.components if values.get(c.name) is not None}
    missing = [c.name for c in comp.components if values.get(c.name) is None]
    total = comp.total_weight
    w_present = sum(c.weight for c in comp.components if c.name in present)
    info: dict[str, Any] = {"missing": missing, "coverage": _clean(w_present / total)}
    if missing and comp.missing == "none":
        info["reason"] = f"missing component(s): {', '.join(missing)} (policy: none)"
        return None, info
    if w_present <= 0 or w_present / total < comp.min_coverage - 1e-12:
        info["reason"] = (f"missing component(s): {', '.join(missing)}; the present ones weigh "
                          f"{w_present / total:.0%} < min_coverage {comp.min_coverage:.0%}")
        return None, info
    value = sum(c.weight * present[c.name] for c in comp.components if c.name in present) / w_present
    info["renormalised"] = bool(missing)
    return _clean(value), info


def _clean(x: float) -> float:
    # drop binary floating-point noise: 0.95*0.25 + ... = 0.9200000000000002 -> 0.92
    return round(x, 12)


def composite_from_values(values: Mapping[str, float | None], preset: str | Mapping[str, Any] | Composite,
                          *, directions: Mapping[str, str | bool] | None = None, missing: str | None = None,
                          min_coverage: float | None = None) -> dict[str, Any]:
    """A composite of one set of metric values (one sample, or a run's means).

    ``value = Σ w_i · v_i / Σ w_i`` over the components, where ``v_i`` is the component's metric
    value, ``1 - value`` for lower-is-better metrics (the component's ``invert``; else
    ``directions[key]`` = ``"lower"``/``False``; else the metric registry), or a nested
    composite's value. A nested component takes ``values[component name]`` when given, else is
    computed from ``values``. With a missing component the composite renormalises over the
    present ones (default) or has no value (``missing="none"``); below ``min_coverage`` of the
    total weight it has no value.

    Returns:
        ``{"value", "band", "missing", "coverage", "renormalised", "components": {name:
        {"metric", "value", "inverted", "weight"}}, "reason"?}``.

    Example (the agent-evaluation guide's DeepEval example):
        >>> composite_from_values({"answer_relevancy": 0.95, "faithfulness": 0.90,
        ...     "hallucination": 0.05, "contextual_relevancy": 0.85, "bias": 0.10}, "deepeval")["value"]
        0.92
    """
    comp = resolve_composite(preset, missing=missing, min_coverage=min_coverage)
    return _from_values(comp, values, directions)


def _from_values(comp: Composite, values: Mapping[str, float | None],
                 directions: Mapping[str, str | bool] | None) -> dict[str, Any]:
    oriented: dict[str, float | None] = {}
    parts: dict[str, Any] = {}
    for c in comp.components:
        if c.preset is not None and values.get(c.name) is None:
            sub = _from_values(c.preset, values, directions)
            oriented[c.name] = sub["value"]
            parts[c.name] = {"preset": c.preset.name, "value": sub["value"], "weight": c.weight,
                             "missing": sub["missing"]}
            continue
        keys = (c.name,) if c.preset is not None else c.metrics
        key = next((k for k in keys if values.get(k) is not None), None)
        raw = values.get(key) if key is not None else None
        if raw is not None:
            raw = _check_unit(float(raw), key)  # type: ignore[arg-type]
        inv = raw is not None and c.preset is None and _inverted(c, key, directions)
        oriented[c.name] = None if raw is None else (1.0 - raw if inv else raw)
        parts[c.name] = {"metric": key, "value": raw, "inverted": inv, "weight": c.weight}
    value, info = _combine(comp, oriented)
    return {"composite": comp.name, "value": value, "band": band(value), **info, "components": parts}


#: a composite is a weighted mean (weights >= 0) of components on [0, 1] (:func:`_check_unit`)
COMPOSITE_RANGE = (0.0, 1.0)


def _check_unit(v: float, key: str) -> float:
    if math.isnan(v) or not -1e-9 <= v <= 1 + 1e-9:
        raise ConfigError(f"composite input {key!r} = {v} is not in [0, 1]")
    return v


# =============================================================================================
# Composites of a stored run
# =============================================================================================

def _match_key(candidates: Sequence[str], keys: Sequence[str]) -> str | None:
    """The run's metric key for a component: an exact key first, else one with that base name."""
    for c in candidates:
        if c in keys:
            return c
    for c in candidates:
        for k in keys:
            if _base(k) == c:
                return k
    return None


def _run_inputs(comp: Composite, keys: Sequence[str], has_consistency: bool) -> tuple[dict[str, Any], list[str]]:
    """Which run metric feeds each component (recursively); and the components nothing feeds."""
    plan: dict[str, Any] = {}
    absent: list[str] = []
    for c in comp.components:
        if c.preset is not None:
            sub, sub_absent = _run_inputs(c.preset, keys, has_consistency)
            plan[c.name] = ("preset", c.preset, sub)
            if len(sub_absent) == len(c.preset.components):
                absent.append(c.name)
        elif c.source == "consistency" and has_consistency:
            plan[c.name] = ("consistency", None, None)
        else:
            k = _match_key(c.metrics, keys)
            plan[c.name] = ("metric", k, None)
            if k is None:
                absent.append(c.name)
    return plan, absent


def _to_unit(v: float, rng: tuple[float, float] | None) -> float:
    """A metric's value on its declared range ``rng`` mapped onto [0, 1] (``(v - low) / (high - low)``:
    a composite weighs every component on the same scale); unchanged without a declared range."""
    if rng is None or rng == (0.0, 1.0):
        return v
    low, high = rng
    return (v - low) / (high - low)


def _combine_columns(comp: Composite, oriented: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_combine` of every sample at once: ``(values, pattern)``, NaN where the composite has
    no value; ``pattern`` numbers each sample's set of missing components (the same number, the same
    ``_combine`` info). The sums run in component order with 0 for a missing component (adding 0.0
    changes no float), and each value is rounded by :func:`_clean` itself: the floats of a sample
    are those of :func:`_combine`."""
    n = len(next(iter(oriented.values()))) if oriented else 0
    weighted, w_present = np.zeros(n), np.zeros(n)
    pattern = np.zeros(n, dtype=np.int64)
    for bit, c in enumerate(comp.components):
        v = oriented[c.name]
        present = ~np.isnan(v)
        pattern |= (~present).astype(np.int64) << bit
        weighted = weighted + np.where(present, c.weight * np.where(present, v, 0.0), 0.0)
        w_present = w_present + np.where(present, c.weight, 0.0)
    out = np.full(n, np.nan)
    for code in np.unique(pattern).tolist():
        at = pattern == code
        probe = {c.name: (None if code >> bit & 1 else 0.5) for bit, c in enumerate(comp.components)}
        value, _ = _combine(comp, probe)
        if value is not None:  # the same rule decides: the policy and the present weight
            with np.errstate(invalid="ignore", divide="ignore"):
                raw = weighted[at] / w_present[at]
            out[at] = [_clean(x) for x in raw.tolist()]
    return out, pattern


def _oriented_columns(comp: Composite, plan: Mapping[str, Any], cols: Any, rows: np.ndarray,
                      consistency: Mapping[str, float], directions: Mapping[str, str],
                      ranges: Mapping[str, tuple[float, float] | None]) -> dict[str, np.ndarray]:
    """Each component's values (oriented, on [0, 1]) at the samples ``rows`` of the run's columns."""
    n = len(rows)
    oriented: dict[str, np.ndarray] = {}
    for c in comp.components:
        kind, ref, sub = plan[c.name]
        if kind == "preset":
            oriented[c.name] = _combine_columns(
                ref, _oriented_columns(ref, sub, cols, rows, consistency, directions, ranges))[0]
        elif kind == "consistency":
            ids = cols.sample_ids
            oriented[c.name] = np.array([consistency.get(ids[i], np.nan) for i in rows.tolist()], dtype=np.float64)
        elif ref is None or ref not in cols.values:
            oriented[c.name] = np.full(n, np.nan)
        else:
            rng = ranges.get(ref)
            v = cols.values[ref][rows]
            if rng is not None and rng != (0.0, 1.0):
                v = (v - rng[0]) / (rng[1] - rng[0])
            bad = ~np.isnan(v) & ((v < -1e-9) | (v > 1 + 1e-9))
            if bad.any():
                _check_unit(float(v[np.flatnonzero(bad)[0]]), ref)
            oriented[c.name] = 1.0 - v if _inverted(c, ref, directions) else v
    return oriented


def composite_scores(store: Any, run_id: str, preset: str | Mapping[str, Any] | Composite, *,
                     missing: str | None = None, min_coverage: float | None = None,
                     per_sample: bool = False, columns: Any = None) -> dict[str, Any] | None:
    """A composite over a stored run: one value per sample, then their mean with a 95% CI.

    Computed on the run's score columns (:func:`ragmeter.store.columns.run_columns`; ``columns``:
    already read, or a function that reads them — the report reads them once for every preset
    that applies), every sample at once.

    Each sample's composite is :func:`composite_from_values` of its stored scores (components
    matched to the run's metric keys: an exact key, else a key with that base name, e.g.
    ``faithfulness(judge=...)``; ``source: consistency`` reads the per-sample overall consistency
    ``ragmeter consistency`` recorded for the run), each mapped onto [0, 1] from its declared range
    (:func:`ragmeter.metrics.registry.recorded_range`: an OpenAI score_model grader on [1, 7]
    enters as ``(v - 1) / 6``), so the composite's range is [0, 1]. The run's ``options.composite``
    may define named composites too.

    Returns:
        ``None`` when the run holds none of the preset's components (it does not apply); else
        ``{"composite", "description", "weights", "inputs": {component: metric key | None},
        "absent": [components the run lacks], "missing_policy", "min_coverage", "mean", "std",
        "ci_low", "ci_high", "n", "n_missing", "missing_reasons", "n_renormalised", "band",
        "of_means", "per_sample"?}``; ``of_means`` is the composite of the metrics' run means.

    Raises:
        ConfigError: unknown preset; StoreError: unknown run.
    """
    from ragmeter.stats.intervals import aggregate_many

    rid = store.resolve_run(run_id)
    run = store.get_run(rid)
    custom = ((run.config or {}).get("options") or {}).get("composite") or None
    comp = resolve_composite(preset, custom=custom if isinstance(custom, Mapping) else None,
                             missing=missing, min_coverage=min_coverage)
    keys = [m["key"] for m in (run.metrics or [])]
    consistency, consistency_overall = consistency_record(store.kv_get("consistency", rid) or {})
    plan, absent = _run_inputs(comp, keys, bool(consistency))
    if len(absent) == len(comp.components):
        return None
    from ragmeter.store.columns import run_columns

    cols = columns() if callable(columns) else columns if columns is not None else run_columns(store, rid)[0]
    summary = run.summary or {}
    from ragmeter.metrics.registry import recorded_range

    ranges = {m["key"]: recorded_range(m["key"], m, (summary.get(m["key"]) or {}).get("range"))
              for m in run.metrics or []}
    directions = {k: v.get("direction") for k, v in summary.items() if isinstance(v, Mapping) and v.get("direction")}
    # every (sample, metric) pair is stored, with or without a value: a sample any metric scored
    scored = [a for a in cols.scored.values()]
    rows = (np.flatnonzero(np.logical_or.reduce(scored)) if scored else np.zeros(0, dtype=np.int64))
    values, pattern = _combine_columns(comp, _oriented_columns(comp, plan, cols, rows, consistency, directions,
                                                              ranges))
    infos = {code: _combine(comp, {c.name: (None if code >> bit & 1 else 0.5)
                                   for bit, c in enumerate(comp.components)})[1]
             for code in np.unique(pattern).tolist()}
    renorm = sum(int(np.count_nonzero(pattern == code)) for code, info in infos.items()
                 if info.get("renormalised"))
    reasons = [None] * len(rows)
    for code, info in infos.items():
        if info.get("reason"):
            for i in np.flatnonzero(pattern == code).tolist():
                reasons[i] = info["reason"]
    out_rows = {}
    if per_sample:
        ids = cols.sample_ids
        out_rows = {ids[p]: {"value": None if v != v else v, "missing": infos[code]["missing"]}
                    for p, v, code in zip(rows.tolist(), values.tolist(), pattern.tolist(), strict=True)}
    agg = aggregate_many({comp.name: (values, reasons)}, bounds={comp.name: COMPOSITE_RANGE})[comp.name]
    means = {k: None if v.get("mean") is None else _to_unit(float(v["mean"]), ranges.get(k))
             for k, v in summary.items() if isinstance(v, Mapping)}
    if consistency_overall is not None:
        means["consistency"] = consistency_overall
    of_means = _from_values(comp, {k: v for k, v in means.items() if v is not None}, directions)
    out = {"composite": comp.name, "description": comp.description, "weights": comp.weights(),
           "inputs": _inputs_view(plan), "absent": absent, "missing_policy": comp.missing,
           "min_coverage": comp.min_coverage, **agg, "n_renormalised": renorm,
           "band": band(agg["mean"]), "of_means": of_means["value"]}
    if per_sample:
        out["per_sample"] = out_rows
    return out


def _inputs_view(plan: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (kind, ref, sub) in plan.items():
        if kind == "preset":
            out[name] = {"preset": ref.name, "inputs": _inputs_view(sub)}
        elif kind == "consistency":
            out[name] = "consistency record"
        else:
            out[name] = ref
    return out


def consistency_record(rec: Mapping[str, Any]) -> tuple[dict[str, float], float | None]:
    """Per-sample overall consistency and its mean from a run's ``kv("consistency", run_id)``
    record (written by :mod:`ragmeter.analysis.consistency`; same-model figures preferred)."""
    for kind in ("same_model", "cross_model"):
        part = rec.get(kind)
        if isinstance(part, Mapping) and isinstance(part.get("per_sample"), Mapping):
            per = {str(k): float(v) for k, v in part["per_sample"].items() if v is not None}
            return per, part.get("overall")
    return {}, None


# =============================================================================================
# Bands and hints
# =============================================================================================

#: (name, lower bound, action), best first (the agent-evaluation guide's "Interpreting Scores").
BANDS: tuple[tuple[str, float, str], ...] = (
    ("Excellent", 0.9, "No action needed"),
    ("Good", 0.7, "Minor improvements possible"),
    ("Fair", 0.5, "Review and improve"),
    ("Poor", 0.3, "Significant issues"),
    ("Critical", -math.inf, "Requires immediate attention"),
)


def band(value: float | None, higher_is_better: bool = True) -> str | None:
    """The band of a score in [0, 1]: Excellent >= 0.9, Good >= 0.7, Fair >= 0.5, Poor >= 0.3,
    else Critical; ``None`` without a value (or NaN). For a lower-is-better metric the band of
    ``1 - value`` (``higher_is_better=False``), so "Excellent" is always good news. The value is
    rounded to 12 decimals first, so floating-point noise (a mean of 0.6999999999999998 for
    0.7) never crosses a boundary.

    >>> band(0.92), band(0.7), band(0.69), band(0.05, higher_is_better=False)
    ('Excellent', 'Good', 'Fair', 'Excellent')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    v = _clean(float(value) if higher_is_better else 1.0 - float(value))
    return next(name for name, low, _ in BANDS if v >= low)


def bands_apply(key: str, family: str | None, options: Mapping[str, Any] | None = None) -> bool:
    """Whether a metric gets a score band.

    The bands (Excellent >= 0.9 ... Critical) come from an agent-evaluation guide's table for agent,
    composite and LLM-judge scores on a 0-1 quality scale; on other metrics they mislead (precision@5
    is at most 0.2 with one relevant chunk per question, a BLEU of 0.29 is ordinary). So a band is
    shown for the metrics whose spec declares it (:attr:`~ragmeter.metrics.registry.MetricSpec.banded`:
    the agent and judge families, composites, custom metrics of unknown family; for a metric this
    process does not know, by the ``family`` its run recorded: :func:`~ragmeter.metrics.registry.banded`),
    and any metric the user lists in the run option ``bands`` (a list of metric keys or names);
    never for lexical, semantic, retrieval or correctness metrics otherwise. Values outside [0, 1]
    never get a band.
    """
    from ragmeter.metrics.registry import banded

    wanted = (options or {}).get("bands")
    if isinstance(wanted, str):
        wanted = [w.strip() for w in wanted.split(",")]
    if isinstance(wanted, list | tuple | set | Mapping) and (key in wanted or key.split("@")[0] in wanted):
        return True
    return banded(key, family)


def band_action(name: str) -> str:
    """The action the agent-evaluation guide attaches to a band ("Review and improve" ...)."""
    return next(a for n, _, a in BANDS if n == name)


@dataclass(frozen=True)
class HintRule:
    """The agent-evaluation guide's "Common issues and fixes", one row: when ``metric`` is weak, say why and what to do."""

    metric: str
    issue: str
    cause: str
    fix: str
    higher_is_better: bool = True
    from_seed: bool = True


#: The agent-evaluation guide's table (first five), then the same idea for the other metrics it defines.
HINT_RULES: tuple[HintRule, ...] = (
    HintRule("faithfulness", "Low faithfulness", "Answer contains unsupported claims", "Improve context retrieval"),
    HintRule("hallucination", "High hallucination", "Model generating facts not in context",
             "Add stricter grounding", higher_is_better=False),
    HintRule("tool_completeness", "Low tool_completeness", "Missing required data sources",
             "Update tool selection logic"),
    HintRule("trajectory_match", "Low trajectory_match", "Steps out of order or missing", "Review workflow graph"),
    HintRule("final_answer_quality", "Low final_answer_quality", "Missing required output fields",
             "Update synthesis prompt"),
    HintRule("answer_relevancy", "Low answer_relevancy", "Answer drifts away from the question",
             "Tighten the answer prompt to the question asked", from_seed=False),
    HintRule("contextual_relevancy", "Low contextual_relevancy", "Retrieved context is off-topic",
             "Tune retrieval (top-k, chunking, reranking)", from_seed=False),
    HintRule("tool_choice_correctness", "Low tool_choice_correctness", "Agent calls tools the task does not need",
             "Make tool descriptions and selection rules stricter", from_seed=False),
    HintRule("intent_correctness", "Low intent_correctness", "Agent misreads the request",
             "Improve input parsing (entity and type extraction)", from_seed=False),
    HintRule("plan_quality", "Low plan_quality", "Plans lack data-gathering or analysis steps",
             "Revise the planning prompt", from_seed=False),
    HintRule("bias", "High bias", "Answer contains slanted or one-sided statements",
             "Add neutrality instructions and review sources", higher_is_better=False, from_seed=False),
    HintRule("toxicity", "High toxicity", "Answer contains toxic language",
             "Add a safety filter or moderation step", higher_is_better=False, from_seed=False),
)


def hints(summary: Mapping[str, Mapping[str, Any]], *, threshold: float = 0.7,
          rules: Sequence[HintRule] = HINT_RULES) -> list[dict[str, Any]]:
    """Automatic hints for a run summary (``Run.summary``: ``{metric_key: {"mean", "direction", ...}}``).

    A rule fires when its metric's mean, turned so higher is better (``1 - mean`` when the
    summary's ``direction`` is ``"lower"``, or the rule says so when the summary has no
    direction), is below ``threshold`` (0.7: the band is Fair or worse). A rule applies to a key
    equal to its metric or with that base name (``trajectory_match@strict``,
    ``faithfulness(judge=...)``). Metrics without a mean are skipped.

    Returns:
        One dict per fired rule, worst first: ``{"metric", "value", "band", "issue", "cause",
        "fix", "message", "from_seed"}``.

    Example:
        >>> [h["fix"] for h in hints({"faithfulness": {"mean": 0.4, "direction": "higher"}})]
        ['Improve context retrieval']
    """
    out = []
    for key, agg in summary.items():
        if not isinstance(agg, Mapping):
            continue
        mean = agg.get("mean")
        if mean is None or (isinstance(mean, float) and math.isnan(mean)):
            continue
        rule = next((r for r in rules if r.metric in (key, _base(key))), None)
        if rule is None:
            continue
        direction = agg.get("direction")
        hib = rule.higher_is_better if direction is None else direction != "lower"
        good = _clean(float(mean) if hib else 1.0 - float(mean))
        if good >= threshold:
            continue
        b = band(float(mean), hib)
        out.append({"metric": key, "value": float(mean), "band": b, "issue": rule.issue, "cause": rule.cause,
                    "fix": rule.fix, "from_seed": rule.from_seed, "_good": good,
                    "message": f"{rule.issue} ({key} {float(mean):.2f}, {b}): {rule.cause.lower()} — {rule.fix.lower()}"})
    out.sort(key=lambda h: h["_good"])
    for h in out:
        del h["_good"]
    return out

