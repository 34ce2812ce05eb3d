"""What a run with a panel of judges keeps about the panel: a typed, versioned record
(:class:`PanelSummary`, stored in the run's ``extra["panel"]``, shown by ``ragmeter show`` and the
report) of each judge's values, their agreement and each judge's preference for its own family.

Per judge metric:

- ``values``: each judge's value of every sample (``None``: no value), ``combined``: the metric's
  value (the panel's combination), aligned with ``sample_ids``;
- ``alpha``: Krippendorff's alpha between the judges (the ``krippendorff`` package through
  :func:`ragmeter.stats.agreement.krippendorff_alpha`): nominal when every value is 0 or 1 (binary
  verdicts), interval otherwise; ``None`` when undefined (fewer than two distinct values);
- ``agreement``: each judge against the panel without it
  (:func:`ragmeter.stats.panel.agreement_with_panel`: mean absolute difference and Pearson's r);
- ``self_preference``: with the model that wrote each answer in the samples' metadata (``model``,
  ``answer_model``, ``generator_model``), per judge: on the answers of its own model family
  (:func:`ragmeter.llm.families.model_family`), the mean of its value minus the other judges' mean
  value of the same answer, with a percentile bootstrap interval over answers; the same figure on
  the other families' answers beside it (a judge that is lenient to everyone shows it on both).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ragmeter.core.counts import count
from ragmeter.core.errors import StoreError
from ragmeter.core.schema import Sample

#: the format of panel records this code writes
FORMAT_VERSION = 1
#: sample metadata fields naming the model that wrote the answer, first present wins
MODEL_FIELDS = ("model", "answer_model", "generator_model")


@dataclass
class PanelJudge:
    """One judge of the panel: its label, model and family, and its calls and cost in the run
    (the run's ``judge_calls`` rows of its provider and model)."""

    label: str
    model: str
    family: str | None
    calls: int = 0
    cached: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class PanelMetric:
    """A judge metric's panel figures (see the module's docstring)."""

    key: str
    n_items: int
    level: str
    alpha: float | None
    sample_ids: list[str]
    combined: list[float | None]
    values: dict[str, list[float | None]]
    means: dict[str, float | None]
    agreement: dict[str, dict[str, Any]]
    self_preference: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class PanelSummary:
    """A run's panel: the combine rule, the judges, and each judge metric's figures."""

    combine: str
    judges: list[PanelJudge]
    metrics: dict[str, PanelMetric]
    version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "combine": self.combine, "judges": [asdict(j) for j in self.judges],
                "metrics": {k: asdict(m) for k, m in self.metrics.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PanelSummary:
        version = int(d.get("version") or 0)
        if version > FORMAT_VERSION:
            raise StoreError(f"panel record version {version} is newer than this ragmeter reads ({FORMAT_VERSION}): "
                             "upgrade ragmeter")
        return cls(combine=str(d.get("combine") or "mean"), version=version,
                   judges=[PanelJudge(**j) for j in d.get("judges") or []],
                   metrics={k: PanelMetric(**m) for k, m in (d.get("metrics") or {}).items()})


def _finite(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def answer_model(sample: Sample) -> str | None:
    """The model that wrote the sample's answer, from its metadata (:data:`MODEL_FIELDS`)."""
    for name in MODEL_FIELDS:
        v = sample.metadata.get(name)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def metric_figures(key: str, sample_ids: Sequence[str], judges: Sequence[str], values: Sequence[Sequence[float | None]],
                   combined: Sequence[float | None], combine: str, bounds: tuple[float, float],
                   judge_families: Sequence[str | None], answer_families: Sequence[str | None]) -> PanelMetric:
    """One metric's panel figures from its values (judges x samples)."""
    from ragmeter.stats.agreement import krippendorff_alpha
    from ragmeter.stats.panel import agreement_with_panel, others_mean, paired_difference

    matrix = np.array([[np.nan if v is None else float(v) for v in row] for row in values], dtype=float)
    seen = matrix[~np.isnan(matrix)]
    level = "nominal" if seen.size and np.isin(seen, (0.0, 1.0)).all() else "interval"
    alpha = _finite(krippendorff_alpha(matrix, level_of_measurement=level)) if matrix.size else None
    agreement = {label: agreement_with_panel(matrix, j, combine, bounds) for j, label in enumerate(judges)}
    prefs: dict[str, dict[str, Any]] = {}
    fams = np.array([f or "" for f in answer_families], dtype=object)
    if any(answer_families):
        for j, (label, family) in enumerate(zip(judges, judge_families, strict=True)):
            others = others_mean(matrix, j)
            own = fams == (family or "\0")
            rest = (fams != "") & ~own
            prefs[label] = {"family": family,
                            **paired_difference(matrix[j][own], others[own]),
                            "other_families": paired_difference(matrix[j][rest], others[rest])}
    means = {label: _finite(np.nanmean(row)) if (~np.isnan(row)).any() else None
             for label, row in zip(judges, matrix, strict=True)}
    return PanelMetric(key=key, n_items=int((~np.isnan(matrix)).any(axis=0).sum()), level=level, alpha=alpha,
                       sample_ids=list(sample_ids), combined=[_finite(c) for c in combined],
                       values={label: [_finite(v) for v in row] for label, row in zip(judges, values, strict=True)},
                       means=means, agreement=agreement, self_preference=prefs)


def _usage(store: Any, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    from sqlalchemy import case, func, select

    from ragmeter.store.models import JudgeCallRow

    real = case((JudgeCallRow.cached.is_(False), 1), else_=0)
    hit = case((JudgeCallRow.cached.is_(True), 1), else_=0)
    bad = case((JudgeCallRow.ok.is_(False) & JudgeCallRow.cached.is_(False), 1), else_=0)
    with store.session() as s:
        rows = s.execute(select(JudgeCallRow.provider, JudgeCallRow.model, func.sum(real), func.sum(hit),
                                func.sum(bad), func.sum(JudgeCallRow.input_tokens),
                                func.sum(JudgeCallRow.output_tokens), func.sum(JudgeCallRow.cost_usd))
                         .where(JudgeCallRow.run_id == run_id)
                         .group_by(JudgeCallRow.provider, JudgeCallRow.model)).all()
    return {(p, m): {"calls": int(a or 0), "cached": int(b or 0), "failed": int(c or 0), "input_tokens": int(i or 0),
                     "output_tokens": int(o or 0), "cost_usd": round(float(cost or 0.0), 6)}
            for p, m, a, b, c, i, o, cost in rows}


def build(store: Any, run_id: str, samples: Sequence[Sample], requests: Sequence[Any],
          options: Mapping[str, Any], stats: Mapping[str, Any] | None = None) -> PanelSummary:
    """The panel record of a finished run, from its stored scores (``details["panel"]``).

    Args:
        stats: each judge's service figures of this process (``{label: stats}``), for the prices.
    """
    from ragmeter.llm.config import config_from_options
    from ragmeter.llm.families import model_family
    from ragmeter.run.panel import PanelMetric as Wrapped
    from ragmeter.run.panel import combine_rule, member_options, members

    panel = members(options)
    how = combine_rule(options)
    labels = [m.label for m in panel]
    usage = _usage(store, run_id)
    judges = []
    for m in panel:
        cfg = config_from_options(member_options(options, m))
        figures = dict(usage.get((cfg.provider, cfg.model), {}))
        if (stats or {}).get(m.label, {}).get("cost_usd", 0) is None:
            figures["cost_usd"] = None  # no price for this model: unknown, not 0
        judges.append(PanelJudge(label=m.label, model=cfg.model, family=model_family(cfg.model), **figures))
    families = [j.family for j in judges]
    answer_families = [model_family(answer_model(s)) for s in samples]
    position = {s.id: i for i, s in enumerate(samples)}
    out: dict[str, PanelMetric] = {}
    for r in requests:
        if not isinstance(r.spec.fn, Wrapped):
            continue
        stored = sorted(store.scores(run_id, r.key), key=lambda x: position.get(x.sample_id, len(position)))
        stored = [x for x in stored if x.sample_id in position]
        rows = [[((x.details or {}).get("panel") or {}).get("values", {}).get(label) for x in stored] for label in labels]
        out[r.key] = metric_figures(r.key, [x.sample_id for x in stored], labels, rows, [x.value for x in stored], how,
                                    (float(r.spec.range[0]), float(r.spec.range[1])), families,
                                    [answer_families[position[x.sample_id]] for x in stored])
    return PanelSummary(combine=how, judges=judges, metrics=out)


def finish(store: Any, run_id: str, samples: Sequence[Sample], requests: Sequence[Any],
           options: Mapping[str, Any], stats: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a panel run adds to its ``extra`` when it finishes: in a dry run, the judges' summed
    plan as the run's ``judge`` figures (each judge's under ``judges``); else ``panel``, the record."""
    from ragmeter.run.panel import estimate

    dry = options.get("judge_dry_run")
    if dry is True or str(dry).strip().lower() in {"1", "true", "yes", "on"}:
        return {"judge": estimate(stats or {})}
    return {"panel": build(store, run_id, samples, requests, options, stats).to_dict()}


def _num(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def lines(record: PanelSummary) -> list[str]:
    """The panel as text (``ragmeter show``, the report): judges, then per metric the alpha, each
    judge's mean, agreement with the rest of the panel and self-preference."""
    out = [f"combine: {record.combine} of {len(record.judges)} judges (docs/panels.md)"]
    for j in record.judges:
        cost = "cost unknown" if j.cost_usd is None else f"${j.cost_usd:.6f}"
        out.append(f"  {j.label} (family {j.family or '?'}): {j.calls} calls, {j.cached} cached, "
                   f"{j.failed} failed; {cost}")
    for key, m in record.metrics.items():
        out.append(f"{key}: Krippendorff's alpha ({m.level}) {_num(m.alpha)} over {count(m.n_items, 'sample')}")
        for label in m.values:
            a = m.agreement.get(label, {})
            line = (f"  {label}: mean {_num(m.means.get(label))}; vs the rest of the panel: mean |diff| "
                    f"{_num(a.get('mean_abs_diff'))}, Pearson r {_num(a.get('pearson'))} (n={a.get('n', 0)})")
            p = m.self_preference.get(label)
            if p and p.get("n"):
                ci = (f" [{_num(p['ci_low'])}, {_num(p['ci_high'])}]" if p.get("ci_low") is not None else "")
                line += (f"; self-preference on {p['n']} {p['family']} answers {p['difference']:+.3f}{ci} "
                         f"(other families {_num((p.get('other_families') or {}).get('difference'))})")
            elif p is not None:
                line += f"; no {p.get('family') or '?'} answers to test self-preference on"
            out.append(line)
    return out


def show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show`` section: the run's judge panel, as text."""
    raw = (run.extra or {}).get("panel")
    if not isinstance(raw, Mapping) or "metrics" not in raw:
        return {}
    return {"judge panel": "\n".join(lines(PanelSummary.from_dict(raw)))}
