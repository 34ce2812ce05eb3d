"""Per-metric thresholds: parsing, per-sample pass/fail, pass rates with Wilson intervals, run rules.

Pass/fail is never stored with a score: a run keeps its thresholds (and its run-level rule) in
``Run.extra["thresholds"]`` and every reader (summary, export, JUnit, ``to_pandas``) derives the
verdict of one score through :func:`passes`, so all of them agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ragmeter.core.errors import ConfigError

__all__ = ["RunRule", "Threshold", "parse_rate_targets", "parse_rule", "parse_thresholds", "pass_rate", "passes",
           "wilson", "with_rate_targets"]

_OPS = ("<=", ">=", "<", ">", "=")
_SPEC = re.compile(r"^\s*([^<>=\s]+)\s*(<=|>=|<|>|=)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Threshold:
    """``metric op value``. ``op`` ``"="`` means "at least" for a higher-is-better metric and
    "at most" for a lower-is-better one (as DeepEval's ``threshold=`` does).

    ``pass_rate``: this metric's own run-level target, the share of samples that must pass (the
    rate itself, not its interval); it replaces the run rule for this metric (an OpenAI eval's
    grader: ``ragmeter test`` with ``openai_eval``)."""

    metric: str
    value: float
    op: str = "="
    pass_rate: float | None = None

    def as_text(self, higher_is_better: bool = True) -> str:
        return f"{self.metric} {self.resolved_op(higher_is_better)} {self.value:g}"

    def resolved_op(self, higher_is_better: bool = True) -> str:
        if self.op == "=":
            return ">=" if higher_is_better else "<="
        return self.op

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "op": self.op, "value": self.value}
        if self.pass_rate is not None:
            out["pass_rate"] = self.pass_rate
        return out


def _number(metric: str, raw: Any) -> float:
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"threshold for {metric!r}: {raw!r} is not a number") from None
    if math.isnan(v):
        raise ConfigError(f"threshold for {metric!r} is NaN")
    return v


def parse_thresholds(spec: Mapping[str, Any] | Iterable[str] | Iterable[Mapping[str, Any]] | None,
                     ) -> dict[str, Threshold]:
    """Read thresholds from a config mapping or command-line strings.

    Accepted forms: ``{"token_f1": 0.3}``, ``{"hallucination": "<=0.2"}``,
    ``["faithfulness=0.7", "hallucination<=0.2"]`` and stored ``[{"metric", "op", "value"}]``.

    Raises:
        ConfigError: a malformed entry, naming it and the expected form.
    """
    out: dict[str, Threshold] = {}
    if spec is None:
        return out
    if isinstance(spec, Mapping):
        for metric, raw in spec.items():
            op = "="
            if isinstance(raw, str):
                m = re.match(r"^\s*(<=|>=|<|>|=)?\s*(.+)$", raw)
                op, raw = (m.group(1) or "=", m.group(2)) if m else ("=", raw)
            out[str(metric)] = Threshold(str(metric), _number(str(metric), raw), op)
        return out
    if isinstance(spec, str):
        spec = [spec]
    for item in spec:
        if isinstance(item, Mapping):
            if item.get("op", "=") not in _OPS or "metric" not in item:
                raise ConfigError(f"bad threshold {dict(item)!r}: expected metric, op ({', '.join(_OPS)}), value")
            rate = item.get("pass_rate")
            if rate is not None:
                rate = _number(str(item["metric"]), rate)
                if not 0.0 <= rate <= 1.0:
                    raise ConfigError(f"pass-rate target of {item['metric']!r} is {rate:g}, outside [0, 1]")
            t = Threshold(str(item["metric"]), _number(str(item["metric"]), item.get("value")),
                          item.get("op", "="), rate)
        else:
            m = _SPEC.match(str(item))
            if not m:
                raise ConfigError(f"bad threshold {item!r}: expected METRIC=VALUE, METRIC>=VALUE or "
                                  "METRIC<=VALUE, e.g. faithfulness=0.7 or hallucination<=0.2")
            t = Threshold(m.group(1), _number(m.group(1), m.group(3)), m.group(2))
        out[t.metric] = t
    return out


def passes(value: float | None, threshold: Threshold, higher_is_better: bool = True) -> bool | None:
    """The one rule deciding whether a score passes: ``None`` when there is no value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    op = threshold.resolved_op(higher_is_better)
    v, t = float(value), threshold.value
    return {"<=": v <= t, ">=": v >= t, "<": v < t, ">": v > t}[op]


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval for ``k`` successes out of ``n`` (Wilson 1927); ``(None, None)`` for n=0."""
    if n <= 0:
        return None, None
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class RunRule:
    """When a whole run passes a threshold: ``"all"`` samples, or a pass rate whose Wilson lower
    bound is at least ``target``; ``"none"``: pass rates are reported, the run is not checked
    (``ragmeter eval --openai-eval`` without a target)."""

    kind: str = "all"
    target: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target}

    def describe(self) -> str:
        if self.kind == "none":
            return "pass rates reported, not checked"
        return "every sample passes" if self.kind == "all" else \
            f"pass rate lower 95% bound >= {self.target:g}"


def parse_rule(raw: Any) -> RunRule:
    """``"all"`` / ``None`` → every sample; ``"none"`` → no run-level check; a number or
    ``{"pass_rate": x}`` / ``{"kind", "target"}`` → pass-rate rule."""
    if raw is None or raw == "all":
        return RunRule()
    if raw == "none":
        return RunRule("none")
    if isinstance(raw, Mapping):
        if "kind" in raw:
            if raw["kind"] in {"all", "none"}:
                return RunRule(raw["kind"])
            return RunRule("pass_rate", _number("rule", raw.get("target")))
        if "pass_rate" in raw:
            raw = raw["pass_rate"]
    try:
        target = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"bad run rule {raw!r}: expected 'all' or a pass rate between 0 and 1") from None
    if not 0.0 <= target <= 1.0:
        raise ConfigError(f"pass-rate target {target} is outside [0, 1]")
    return RunRule("pass_rate", target)


def pass_rate(verdicts: Iterable[bool | None], rule: RunRule | None = None,
              target: float | None = None) -> dict[str, Any]:
    """Pass-rate record of one metric: ``n`` judged, ``passed``, ``failed``, ``no_value``, ``rate``,
    Wilson ``rate_low``/``rate_high`` and ``ok`` under ``rule`` (samples without a value count as
    not passing: a check cannot pass on missing evidence). ``target``: the metric's own pass-rate
    target (``ok`` when ``rate >= target``), in place of ``rule``."""
    rule = rule or RunRule()
    vs = list(verdicts)
    passed = sum(1 for v in vs if v is True)
    failed = sum(1 for v in vs if v is False)
    missing = sum(1 for v in vs if v is None)
    n = len(vs)
    lo, hi = wilson(passed, n)
    if target is not None:
        ok = n > 0 and passed / n >= target
    elif rule.kind == "none":
        ok = True
    elif rule.kind == "all":
        ok = failed == 0 and missing == 0
    else:
        ok = lo is not None and rule.target is not None and lo >= rule.target
    out = {"n": n, "passed": passed, "failed": failed, "no_value": missing,
           "rate": passed / n if n else None, "rate_low": lo, "rate_high": hi, "ok": bool(ok and n)}
    if target is not None:
        out["target"] = target
    elif rule.kind == "none":
        out["checked"] = False
    return out


def record(thresholds: Mapping[str, Threshold], rule: RunRule | None = None) -> dict[str, Any]:
    """What a run stores in ``Run.extra["thresholds"]``."""
    return {"items": [t.to_dict() for t in thresholds.values()], "rule": (rule or RunRule()).to_dict()}


def from_record(rec: Mapping[str, Any] | None) -> tuple[dict[str, Threshold], RunRule]:
    """Inverse of :func:`record` (empty when the run has no thresholds)."""
    if not rec:
        return {}, RunRule()
    return parse_thresholds(rec.get("items") or []), parse_rule(rec.get("rule"))


def apply(thresholds: Mapping[str, Threshold], rule: RunRule | None,
          values: Mapping[str, list[float | None]], higher: Mapping[str, bool]) -> dict[str, dict[str, Any]]:
    """``{metric: pass-rate record + "verdicts" (one per sample) + "threshold" text}`` for every
    thresholded metric in ``values``."""
    out = {}
    for key, thr in thresholds.items():
        if key not in values:
            continue
        hib = higher.get(key, True)
        verdicts = [passes(v, thr, hib) for v in values[key]]
        text = thr.as_text(hib) + (f" (pass rate >= {thr.pass_rate:g})" if thr.pass_rate is not None else "")
        out[key] = {**pass_rate(verdicts, rule, thr.pass_rate), "threshold": text, "verdicts": verdicts}
    return out


#: the command-line option of a metric's pass-rate target (``--threshold`` is the per-sample one)
RATE_OPTION = "--pass-rate-target"


def parse_rate_targets(items: Iterable[str] | None, option: str = RATE_OPTION) -> dict[str | None, float]:
    """``--pass-rate-target`` values: ``METRIC=RATE`` (that metric) or ``RATE`` (every thresholded
    metric, key ``None``); a rate is the share of samples that must pass, in [0, 1].

    Raises:
        ConfigError: a malformed entry or a rate outside [0, 1], naming ``option``.
    """
    out: dict[str | None, float] = {}
    for item in items or []:
        metric, eq, raw = str(item).rpartition("=")
        name = metric.strip() if eq else None
        if eq and (not name or any(c in name for c in "<>")):
            raise ConfigError(f"{option} {item!r}: use METRIC=RATE or RATE, e.g. {option} exact=0.9")
        try:
            rate = float(raw)
        except ValueError:
            raise ConfigError(f"{option} {item!r}: {raw.strip()!r} is not a number; use METRIC=RATE or RATE, "
                              f"e.g. {option} exact=0.9") from None
        if not 0.0 <= rate <= 1.0:  # NaN fails this too
            raise ConfigError(f"{option} {item!r}: a pass-rate target is a share of the samples between 0 and 1")
        out[name] = rate
    return out


def with_rate_targets(items: Iterable[Mapping[str, Any] | str], targets: Mapping[str | None, float],
                      option: str = RATE_OPTION) -> list[dict[str, Any]]:
    """Thresholds (``--threshold`` strings or stored items) with each one's pass-rate target from
    ``targets`` (:func:`parse_rate_targets`; a named target wins over the one for every metric).

    Raises:
        ConfigError: a target naming a metric that has no per-sample threshold.
    """
    thr = parse_thresholds(list(items))
    lonely = [m for m in targets if m is not None and m not in thr]
    if lonely:
        raise ConfigError(f"{option} {lonely[0]}={targets[lonely[0]]:g}: {lonely[0]!r} has no per-sample threshold; "
                          f"give one with --threshold {lonely[0]}>=VALUE (a sample passes when its value meets it)")
    out = []
    for t in thr.values():
        rate = targets.get(t.metric, targets.get(None, t.pass_rate))
        out.append(Threshold(t.metric, t.value, t.op, rate).to_dict())
    return out


def check_known(thresholds: Mapping[str, Threshold], metric_keys: Iterable[str]) -> None:
    """Raise ``ConfigError`` when a threshold names a metric the run does not compute."""
    keys = list(metric_keys)
    unknown = [k for k in thresholds if k not in keys]
    if unknown:
        raise ConfigError(f"threshold for {', '.join(unknown)} but the run computes only "
                          f"{', '.join(keys)}; add the metric or drop the threshold")


def check_in_range(thresholds: Mapping[str, Threshold], ranges: Mapping[str, tuple[float, float] | None]) -> None:
    """Raise ``ConfigError`` when a threshold lies outside its metric's declared range (``ranges``:
    ``{metric key: (low, high)}``, ``None`` for a metric that declares none): every sample would
    fail it (``token_f1 >= 75``, a percentage where scores are 0-1) or pass it, so the run's
    verdict would say nothing about the samples."""
    for key, t in thresholds.items():
        rng = ranges.get(key)
        if rng is None or rng[0] <= t.value <= rng[1]:
            continue
        low, high = rng
        hint = (f"; scores are {low:g}-{high:g}, so {t.value:g}% is {key}={t.value / 100:g}"
                if (low, high) == (0.0, 1.0) and 5.0 <= t.value <= 100.0 else "")
        raise ConfigError(f"threshold {key}{t.op}{t.value:g} is outside {key}'s range [{low:g}, {high:g}]: "
                          f"every sample passes it or none does{hint}")
