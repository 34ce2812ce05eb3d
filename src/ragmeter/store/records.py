"""Typed, versioned run records: :class:`RunSummary` of :class:`MetricSummary` (as inspect_ai's
``EvalLog`` carries a format version).

A run's summary is stored in ``runs.summary`` (JSON: ``{metric key: {mean, n, ...}}``, the shape
every reader of the store knows) beside its format version in ``runs.summary_format``
(:data:`FORMAT_VERSION`). Runs stored before the version existed have no version (``NULL``): they
are read as version 0, whose JSON has the same shape with any of the keys possibly absent, and
converted (:meth:`RunSummary.from_stored`). A version newer than this code knows is refused.

Code reads the records' attributes (``m.mean``, ``m.ci_low``, ``m.missing_reasons``); the JSON dict is
made in one place, :meth:`RunSummary.to_dict` (the store, ``--json``, the HTTP API, exports). Both
records also answer as read-only mappings of that JSON (``summary["token_f1"]["mean"]``), the
public view of ``EvaluationResult.summary`` and of the ``{key: {mean, ...}}`` every reader of a
stored summary knew.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ragmeter.core.errors import StoreError

#: the format of summaries this code writes; 0 = stored before the version existed
FORMAT_VERSION = 1

#: keys every metric summary has, in the order they are written
_AGGREGATE = ("n", "n_missing", "missing_reasons", "mean", "std", "min", "max", "ci_low", "ci_high", "ci_method")
_SPEC = ("direction", "family", "range")
_CHECK = ("pass", "pass_rate")
_FIELDS = (*_AGGREGATE, *_SPEC)


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(eq=False)
class MetricSummary(Mapping[str, Any]):
    """One metric's aggregate over a run.

    Read its attributes; as a read-only mapping it is its stored JSON (:meth:`to_dict`: the keys
    below, ``pass`` for :attr:`check`, the :attr:`extra` figures), so ``m["mean"]`` and
    ``m.get("corpus_score")`` read as they did when summaries were dicts, and it equals that dict.

    Attributes:
        n: samples with a value.
        n_missing: samples without a value.
        missing_reasons: ``{reason: count}`` of the samples without a value, most common first.
        mean, std, min, max: of the values (``None`` without values).
        ci_low, ci_high, ci_method: the 95% interval of the mean and how it was computed
            (:func:`ragmeter.stats.aggregate`).
        direction: ``"higher"`` or ``"lower"`` is better.
        family: the metric's family (``lexical``, ``retrieval`` ...).
        range: ``[low, high]`` of the metric's values.
        check: the threshold check of the run (``pass`` in the stored JSON: threshold, passed, n,
            rate, Wilson bounds, ok), or ``None`` without a threshold.
        pass_rate: the share of samples that pass (``None`` without a threshold).
        extra: any other figure (``corpus_bleu``, ``mean_kind``, ``corpus_note`` ...), as stored.
    """

    n: int = 0
    n_missing: int = 0
    missing_reasons: dict[str, int] = field(default_factory=dict)
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str | None = None
    direction: str = "higher"
    family: str | None = None
    range: list[float] | None = None
    check: dict[str, Any] | None = None
    pass_rate: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetricSummary:
        """From the stored JSON of one metric (any format version; absent keys take their default)."""
        rng = d.get("range")
        return cls(n=int(d.get("n") or 0), n_missing=int(d.get("n_missing") or 0),
                   missing_reasons={str(k): int(v) for k, v in (d.get("missing_reasons") or {}).items()},
                   mean=_float(d.get("mean")), std=_float(d.get("std")), min=_float(d.get("min")),
                   max=_float(d.get("max")), ci_low=_float(d.get("ci_low")), ci_high=_float(d.get("ci_high")),
                   ci_method=d.get("ci_method"), direction=d.get("direction") or "higher",
                   family=d.get("family"), range=[float(x) for x in rng] if rng is not None else None,
                   check=dict(d["pass"]) if d.get("pass") is not None else None,
                   pass_rate=_float(d.get("pass_rate")),
                   extra={k: v for k, v in d.items() if k not in (*_AGGREGATE, *_SPEC, *_CHECK)})

    # -- the read-only mapping of the stored JSON (the keys of :meth:`to_dict`, in its order)
    def __getitem__(self, key: str) -> Any:
        if key in _FIELDS:
            return list(self.range) if key == "range" and self.range is not None else getattr(self, key)
        if key in self.extra:
            return self.extra[key]
        if key == "pass" and self.check is not None:
            return self.check
        if key == "pass_rate" and self.pass_rate is not None:
            return self.pass_rate
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield from _FIELDS
        yield from self.extra
        if self.check is not None:
            yield "pass"
        if self.pass_rate is not None:
            yield "pass_rate"

    def __len__(self) -> int:
        return len(_FIELDS) + len(self.extra) + (self.check is not None) + (self.pass_rate is not None)

    def __repr__(self) -> str:
        return f"MetricSummary({self.to_dict()!r})"

    def updated(self, fields: Mapping[str, Any]) -> MetricSummary:
        """A new record with ``fields`` (keys of the stored JSON: ``ci_low``, ``corpus_score``,
        ``pass`` ...) replacing or adding to this one's; this one is unchanged."""
        return MetricSummary.from_dict({**self.to_dict(), **fields}) if fields else self

    @property
    def has_values(self) -> bool:
        """Whether any sample has a value (``n > 0``)."""
        return self.n > 0

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON: the aggregate, the metric's direction, family and range, the other
        figures, then the threshold check (when there is one)."""
        out: dict[str, Any] = {"n": self.n, "n_missing": self.n_missing,
                               "missing_reasons": dict(self.missing_reasons), "mean": self.mean, "std": self.std,
                               "min": self.min, "max": self.max, "ci_low": self.ci_low, "ci_high": self.ci_high,
                               "ci_method": self.ci_method, "direction": self.direction, "family": self.family,
                               "range": list(self.range) if self.range is not None else None}
        out.update(self.extra)
        if self.check is not None:
            out["pass"] = dict(self.check)
        if self.pass_rate is not None:
            out["pass_rate"] = self.pass_rate
        return out


@dataclass(eq=False)
class RunSummary(Mapping[str, MetricSummary]):
    """A run's summary: one :class:`MetricSummary` per metric key (a read-only mapping of them, in
    request order), and the format version it was stored in (:data:`FORMAT_VERSION` for a new one;
    0 for a run stored before versions). It equals the ``{key: {mean, ...}}`` dict it stores."""

    metrics: dict[str, MetricSummary] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def __getitem__(self, key: str) -> MetricSummary:
        return self.metrics[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.metrics)

    def __len__(self) -> int:
        return len(self.metrics)

    def __repr__(self) -> str:
        return f"RunSummary({self.metrics!r}, format_version={self.format_version})"

    def updated(self, fields: Mapping[str, Mapping[str, Any]]) -> RunSummary:
        """A new summary whose metrics in ``fields`` (``{key: {field: value}}``) have those fields
        replaced or added (:meth:`MetricSummary.updated`); keys it does not have are left out."""
        return replace(self, metrics={k: m.updated(fields.get(k) or {}) for k, m in self.metrics.items()})

    @classmethod
    def from_dict(cls, d: Mapping[str, Mapping[str, Any]]) -> RunSummary:
        """From ``{metric key: {mean, n, ...}}`` (a run's summary as the runner computes it)."""
        return cls({k: MetricSummary.from_dict(v) for k, v in d.items()})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{metric key: {mean, n, ...}}``: the stored JSON and ``EvaluationResult.summary``."""
        return {k: m.to_dict() for k, m in self.metrics.items()}

    @classmethod
    def from_stored(cls, data: Mapping[str, Any] | None, version: int | None) -> RunSummary:
        """Read a stored summary of format ``version`` (``None``: stored before versions, read as 0).

        Raises:
            StoreError: a version newer than this code knows (written by a newer ragmeter).
        """
        v = 0 if version is None else int(version)
        if v > FORMAT_VERSION:
            raise StoreError(f"run summary of format version {v}: this ragmeter reads up to version "
                             f"{FORMAT_VERSION}; upgrade ragmeter-eval to read it")
        return cls({k: MetricSummary.from_dict(m) for k, m in (data or {}).items() if isinstance(m, Mapping)},
                   format_version=v)
