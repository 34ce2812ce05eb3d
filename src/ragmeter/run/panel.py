"""A panel of judges in a run: every judge metric is computed by each judge of the panel and the
values are combined into the metric's value (``--judge A --judge B ...`` or ``--panel FILE``,
``--panel-combine``).

The run option ``panel`` lists the judges (``"provider:model"`` or a mapping of judge settings:
``{"model": "openai:gpt-4o", "base_url": ..., "temperature": 0, "label": "big"}``; never a key,
keys come from the environment). Each judge gets its own scoring context whose ``judge`` service
is that judge (its own cache keys, its own calls in the run's accounting); every other service is
the run's. A judge metric's spec is replaced by a :class:`PanelMetric` that queues and scores the
samples with each judge, then stores the combined value with every judge's value in its details
(``details["panel"]``). The panel's statistics are made when the run finishes
(:mod:`ragmeter.run.panel_record`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.core.context import ScoringContext, register_service
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.registry import MetricRequest, MetricSpec
from ragmeter.stats.panel import COMBINES, combine

#: run options of a panel
PANEL_OPTION = "panel"
COMBINE_OPTION = "panel_combine"
#: the service of a run's panel (the judges' contexts); its stats land in the run's extra
SERVICE = "judge_panel"
#: keys a panel entry may have besides the judge settings
_ENTRY_KEYS = ("label", "name", "options")


@dataclass(frozen=True)
class PanelMember:
    """One judge of a panel.

    Attributes:
        label: its name in the run (the ``provider:model`` given, or the entry's ``label``;
            ``#2``, ``#3`` ... make repeated names unique).
        judge: the ``judge`` run option of this judge (a mapping of judge settings).
    """

    label: str
    judge: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.judge.get("model") or "")


def _entry(raw: Any, where: str) -> tuple[str | None, dict[str, Any]]:
    if isinstance(raw, str):
        if not raw.strip():
            raise ConfigError(f"{where}: an empty judge; give provider:model, e.g. openai:gpt-4o-mini")
        return None, {"model": raw.strip()}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a judge is provider:model or a mapping with 'model', got {type(raw).__name__}")
    entry = {str(k): v for k, v in raw.items()}
    label = entry.pop("label", None) or entry.pop("name", None)
    extra = entry.pop("options", None) or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"{where}: 'options' must be a mapping of judge settings")
    entry = {**{str(k).removeprefix("judge_"): v for k, v in extra.items()}, **entry}
    model = entry.get("model") or entry.get("judge")
    if not model:
        raise ConfigError(f"{where}: a judge mapping needs 'model': 'provider:model'")
    entry.pop("judge", None)
    entry["model"] = str(model).strip()
    return (str(label).strip() if label else None), entry


def members(options: Mapping[str, Any]) -> list[PanelMember]:
    """The panel's judges from the run options (empty without a panel).

    Raises:
        ConfigError: fewer than two judges, a malformed entry, an unknown setting or a secret in an
            entry (a key comes from the environment: ``api_key_env`` names its variable).
    """
    from ragmeter.llm.config import check_judge_keys, parse_judge

    raw = options.get(PANEL_OPTION)
    if not raw:
        return []
    if isinstance(raw, str | Mapping) or not isinstance(raw, Sequence):
        raise ConfigError("panel: a list of judges (provider:model or mappings with 'model')")
    out: list[PanelMember] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw, 1):
        label, judge = _entry(item, f"panel judge {i}")
        check_judge_keys({"judge": judge})  # unknown settings and secrets, named, never shown
        parse_judge(judge["model"])  # provider:model, or a clear error
        label = label or judge["model"]
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label}#{seen[label]}"
        out.append(PanelMember(label, judge))
    if len(out) < 2:
        raise ConfigError("a panel needs at least two judges (--judge A --judge B, or a --panel file listing them)")
    return out


def combine_rule(options: Mapping[str, Any]) -> str:
    how = str(options.get(COMBINE_OPTION) or "mean")
    if how not in COMBINES:
        raise ConfigError(f"panel_combine={how!r}: use one of {', '.join(COMBINES)}")
    return how


def member_options(options: Mapping[str, Any], member: PanelMember) -> dict[str, Any]:
    """The run options one judge scores with: the run's, its ``judge_*`` settings moved into the
    judge's mapping under the entry's own settings (an entry's ``base_url`` wins over
    ``--judge-base-url``), without the panel."""
    from ragmeter.llm.config import SETTINGS

    shared = {name: options[f"judge_{name}"] for name in SETTINGS if options.get(f"judge_{name}") is not None}
    rest = {k: v for k, v in options.items()
            if k not in ("judge", PANEL_OPTION, COMBINE_OPTION) and not k.startswith("judge_")}
    return {**rest, "judge": {**shared, **member.judge}}


class MemberContext(ScoringContext):
    """A judge's scoring context inside a panel run: its own ``judge`` service, the run's others."""

    def __init__(self, parent: ScoringContext, options: dict[str, Any]) -> None:
        super().__init__(options, store=parent.store, run_id=parent.run_id, progress=parent.progress)
        self.parent = parent

    def service(self, name: str) -> Any:
        return super().service(name) if name == "judge" else self.parent.service(name)

    def has_service(self, name: str) -> bool:
        return super().has_service(name) if name == "judge" else self.parent.has_service(name)


class PanelService:
    """The judges of a run's panel, each with its context (``ctx.service("judge_panel")``)."""

    def __init__(self, ctx: ScoringContext) -> None:
        self.members = members(ctx.options)
        self.combine = combine_rule(ctx.options)
        self.contexts = {m.label: MemberContext(ctx, member_options(ctx.options, m)) for m in self.members}

    def flush(self) -> None:
        """Send every judge's queued requests (judge after judge; each judge's calls concurrently)."""
        for c in self.contexts.values():
            c.service("judge").flush()

    def stats(self) -> dict[str, Any]:
        """Each judge's figures as its service counted them in this process (the run's accounting
        per judge is read back from the store when the run finishes)."""
        return {label: c.service("judge").stats() for label, c in self.contexts.items() if c.has_service("judge")}

    def close(self) -> None:
        for c in self.contexts.values():
            if c.has_service("judge"):
                c.service("judge").close()


register_service(SERVICE, PanelService)


@dataclass
class PanelMetric:
    """A judge metric computed by every judge of the run's panel and combined (the spec's ``fn``).

    A sample's value is the combination (:func:`ragmeter.stats.panel.combine`) of the values of
    the judges that gave one; no value when none did (with the first judge's reason). Its details
    keep every judge's value and verdict summary: ``{"panel": {"combine", "values": {judge: value
    or None}, "reasons": {judge: why no value}}, "judges": {judge: summary}, "summary"}``.
    """

    spec: MetricSpec

    def prepare(self, samples: Sequence[Sample], ctx: ScoringContext, **params: Any) -> None:
        if self.spec.prepare is None:
            return
        panel = ctx.service(SERVICE)
        for c in panel.contexts.values():
            self.spec.prepare(samples, c, **params)

    def check(self, ctx: ScoringContext, **params: Any) -> str | None:
        if self.spec.check is None:
            return None
        panel = ctx.service(SERVICE)
        said = [f"judge {label}: {msg}" for label, c in panel.contexts.items()
                if (msg := self.spec.check(c, **params))]
        return "; ".join(said) or None

    def __call__(self, samples: Sequence[Sample], ctx: ScoringContext, **params: Any) -> list[Score]:
        panel = ctx.service(SERVICE)
        per_judge = {label: self.spec.fn(list(samples), c, **params) for label, c in panel.contexts.items()}
        bounds = (float(self.spec.range[0]), float(self.spec.range[1]))
        return [self._combined({label: scores[i] for label, scores in per_judge.items()}, panel.combine, bounds)
                for i in range(len(samples))]

    @staticmethod
    def _combined(scores: Mapping[str, Score], how: str, bounds: tuple[float, float]) -> Score:
        values = {label: s.value for label, s in scores.items()}
        reasons = {label: s.reason for label, s in scores.items() if s.value is None}
        summaries = {label: str((s.details or {}).get("summary") or "") for label, s in scores.items()}
        given = [v for v in values.values() if v is not None]
        record = {"combine": how, "values": values, "reasons": reasons}
        details = {"panel": record, "judges": {k: v for k, v in summaries.items() if v}}
        if not given:
            first = next(iter(reasons.values()), None) or "no judge gave a value"
            return Score.missing(f"{first} (every judge of the panel)", details=details)
        value = combine(given, how, bounds)
        parts = ", ".join(f"{label} {'-' if v is None else f'{v:.3f}'}" for label, v in values.items())
        details["summary"] = f"panel {how} {value:.3f} of {len(given)} of {len(values)} judges ({parts})"
        return Score(value, details=details)


def wrap(requests: list[MetricRequest], options: dict[str, Any], *, engine: str = "local") -> list[MetricRequest]:
    """The run's requests with every judge metric computed by the panel of ``options`` (the same
    list without one). Sets the run's ``judge`` option to the first judge when none is given, so the
    run's own checks (pre-flight, dry run) have a judge to ask.

    Raises:
        ConfigError: a malformed panel, or a panel on an engine other than the local one.
    """
    panel = members(options)
    if not panel:
        return requests
    combine_rule(options)
    if engine != "local":
        raise ConfigError("a judge panel runs on the local engine: run it without --engine ray")
    if options.get("judge_batch"):
        raise ConfigError("a judge panel sends its requests online: run it without --batch")
    options.setdefault("judge", dict(member_options(options, panel[0])["judge"]))
    out = []
    for r in requests:
        if not r.spec.needs_llm or isinstance(r.spec.fn, PanelMetric):
            out.append(r)
            continue
        pm = PanelMetric(r.spec)
        spec = dataclasses.replace(r.spec, fn=pm, prepare=pm.prepare if r.spec.prepare else None,
                                   check=pm.check if r.spec.check else None)
        out.append(dataclasses.replace(r, spec=spec))
    return out


def estimate(plans: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A panel run's dry-run figures from each judge's (``{judge: its service's dry-run stats}``):
    the sums, and each judge's own under ``judges``."""
    total_cost: float | None = 0.0
    out: dict[str, Any] = {"dry_run": True, "judge": f"panel of {len(plans)}: {', '.join(plans)}",
                           "planned_calls": 0, "cached": 0, "est_input_tokens": 0, "est_output_tokens": 0}
    per_metric: dict[str, dict[str, int]] = {}
    for p in plans.values():
        for k in ("planned_calls", "cached", "est_input_tokens", "est_output_tokens"):
            out[k] += int(p.get(k) or 0)
        cost = p.get("est_cost_usd")
        total_cost = None if cost is None or total_cost is None else total_cost + float(cost)
        for metric, m in (p.get("per_metric") or {}).items():
            agg = per_metric.setdefault(metric, {"calls": 0, "input_tokens": 0, "output_tokens": 0})
            for k in agg:
                agg[k] += int(m.get(k) or 0)
    out["est_cost_usd"] = None if total_cost is None else round(total_cost, 6)
    out["per_metric"] = per_metric
    out["token_estimate"] = next((p.get("token_estimate") for p in plans.values() if p.get("token_estimate")), None)
    out["judges"] = {label: {k: p.get(k) for k in ("planned_calls", "cached", "est_input_tokens",
                                                    "est_output_tokens", "est_cost_usd")}
                     for label, p in plans.items()}
    return out
