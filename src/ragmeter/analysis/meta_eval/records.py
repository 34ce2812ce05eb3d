"""Typed records of a meta-evaluation: :class:`MetaEvaluation` (each metric's
:class:`MetricAgreement` with the human label, the human ceiling, the ranking) and
:class:`MetaComparison` (two stored meta-evaluations side by side).

A meta-evaluation is kept in its run (``Run.extra["meta_eval"]``, format :data:`FORMAT`) as the
JSON :meth:`MetaEvaluation.to_record` makes, and read back with :meth:`MetaEvaluation.from_record`.
Code reads the attributes; the JSON is made in one place per record (``to_dict``: ``ragmeter
meta-eval --json``, the stored record). A :class:`MetaEvaluation` also answers as a read-only
mapping of its JSON (``res["ranking"]``), what :func:`~ragmeter.analysis.meta_eval.meta_evaluate`
returned before it was typed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the format of the stored record
FORMAT = 1
#: the agreement statistics a metric may have, in the order they are shown
STATISTICS = ("pearson", "spearman", "kendall", "pairwise_accuracy", "pairwise_accuracy_tie_calibrated",
              "auroc", "f1")


@dataclass(frozen=True)
class Statistic:
    """One agreement statistic with its interval.

    Attributes:
        value: the statistic (``None`` when it is undefined on these items).
        ci_low, ci_high: its bootstrap interval over items (``None`` without resamples).
        extra: what else it records (``p_value``, ``undefined``: why there is no value,
            ``n_positive`` ...), as stored.
    """

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def undefined(self) -> str | None:
        """Why the statistic has no value (``None`` when it has one)."""
        return self.extra.get("undefined")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Statistic:
        return cls(d.get("value"), d.get("ci_low"), d.get("ci_high"),
                   {k: v for k, v in d.items() if k not in ("value", "ci_low", "ci_high")})

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, **self.extra}


@dataclass
class MetricAgreement:
    """How one metric agrees with the human label.

    Attributes:
        direction: ``"higher"`` or ``"lower"`` is better.
        family: the metric's family.
        n: items with a value; ``n_missing``: items without one.
        statistics: ``{name: Statistic}`` in :data:`STATISTICS` order (correlations always;
            pairwise accuracies of pairwise labels; AUROC and F1 of 0/1 labels).
        human_ceiling: the same statistics between raters on this metric's items (``None`` with
            one rater), as stored.
        agreement: the sort statistic oriented so that higher is more agreeing (the ranking's key).
        cross_validation: for a metric fitted to human labels (``quality_offline``), how its values
            were cross-validated on these labels (folds, groups, penalties); ``None`` otherwise.
    """

    direction: str
    family: str | None
    n: int
    n_missing: int
    statistics: dict[str, Statistic]
    human_ceiling: dict[str, Any] | None = None
    agreement: float | None = None
    cross_validation: dict[str, Any] | None = None

    def stat(self, name: str) -> Statistic | None:
        """The statistic ``name`` (``None`` when this metric does not have it)."""
        return self.statistics.get(name)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetricAgreement:
        return cls(direction=d.get("direction") or "higher", family=d.get("family"), n=int(d.get("n") or 0),
                   n_missing=int(d.get("n_missing") or 0),
                   statistics={s: Statistic.from_dict(d[s]) for s in STATISTICS if isinstance(d.get(s), Mapping)},
                   human_ceiling=d.get("human_ceiling"), agreement=d.get("agreement"),
                   cross_validation=d.get("cross_validation"))

    def to_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "family": self.family, "n": self.n,
                **{s: v.to_dict() for s, v in self.statistics.items()}, "n_missing": self.n_missing,
                "human_ceiling": self.human_ceiling, "agreement": self.agreement,
                **({"cross_validated": True, "cross_validation": self.cross_validation}
                   if self.cross_validation else {})}


@dataclass
class Difference:
    """One statistic of one metric in two meta-evaluations: ``a``'s, ``b``'s, ``b - a`` and, when
    both scored the same items against the same labels, its paired bootstrap interval."""

    a: float | None
    b: float | None
    difference: float | None
    ci_low: float | None = None
    ci_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "difference": self.difference, "ci_low": self.ci_low,
                "ci_high": self.ci_high}


@dataclass
class MetaComparison:
    """Two stored meta-evaluations side by side (``b`` minus ``a``).

    Attributes:
        a, b: their run ids.
        paired: whether both scored the same items against the same labels (then every
            difference has a paired interval).
        level: the intervals' confidence level.
        note: why the differences have no interval (``None`` when paired).
        metrics: ``{metric: {statistic: Difference}}``.
    """

    a: str
    b: str
    paired: bool
    level: float
    note: str | None
    metrics: dict[str, dict[str, Difference]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "paired": self.paired, "level": self.level, "note": self.note,
                "metrics": {k: {s: d.to_dict() for s, d in row.items()} for k, row in self.metrics.items()}}


#: the stored record's keys, in the order they are written (the run's status is not stored with it)
_RECORD = ("format", "kind", "dataset", "label", "n_items", "n_ratings", "raters", "rater_layout", "binary",
           "level", "n_bootstrap", "seed", "ci_method", "sort", "metrics", "ranking", "human_ceiling", "items")


@dataclass(eq=False)
class MetaEvaluation(Mapping[str, Any]):
    """A meta-evaluation: how well each metric agrees with people, beside the raters' own agreement.

    Attributes:
        kind: ``"pointwise"`` or ``"pairwise"`` labels.
        dataset, label: the labelled file and its label column.
        n_items, n_ratings: items and labels; ``raters``: the raters' names (``rater_layout``: how
            the file gave them).
        binary: whether the labels are 0/1.
        level, n_bootstrap, seed, ci_method: the intervals (bootstrap over items).
        sort: the statistic the ranking orders by.
        metrics: ``{metric key: MetricAgreement}``; ``ranking``: the keys, most agreeing first.
        human_ceiling: the statistics between raters over all items (``None`` with one rater), as stored.
        items: ``{"ids": [...], "human": [...]}``, the items and their human label.
        run_id, status, incomplete: the run that scored the items (``status`` as ``ragmeter eval``
            stores it; ``incomplete``: why a metric has no value).
        judge: the judge's figures, when metrics were judged.
        comparison: another meta-evaluation compared with this one (``ragmeter meta-eval --compare``).
    """

    kind: str
    dataset: str
    label: Any
    n_items: int
    n_ratings: int
    raters: list[str]
    rater_layout: Any
    binary: bool
    level: float
    n_bootstrap: int
    seed: int
    ci_method: str
    sort: str
    metrics: dict[str, MetricAgreement]
    ranking: list[str]
    human_ceiling: dict[str, Any] | None
    items: dict[str, Any]
    run_id: str | None = None
    status: str | None = None
    incomplete: list[str] = field(default_factory=list)
    judge: dict[str, Any] | None = None
    comparison: MetaComparison | None = None
    format: int = FORMAT

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], *, run_id: str | None = None, status: str | None = None,
                    incomplete: list[str] | None = None) -> MetaEvaluation:
        """From the stored record (``Run.extra["meta_eval"]``) and the run it is kept in."""
        return cls(kind=rec["kind"], dataset=rec["dataset"], label=rec.get("label"), n_items=int(rec["n_items"]),
                   n_ratings=int(rec.get("n_ratings") or 0), raters=list(rec.get("raters") or []),
                   rater_layout=rec.get("rater_layout"), binary=bool(rec.get("binary")),
                   level=float(rec.get("level", 0.95)), n_bootstrap=int(rec.get("n_bootstrap") or 0),
                   seed=int(rec.get("seed") or 0), ci_method=rec.get("ci_method") or "", sort=rec.get("sort") or "kendall",
                   metrics={k: MetricAgreement.from_dict(m) for k, m in (rec.get("metrics") or {}).items()},
                   ranking=list(rec.get("ranking") or []), human_ceiling=rec.get("human_ceiling"),
                   items=dict(rec.get("items") or {"ids": [], "human": []}), run_id=run_id, status=status,
                   incomplete=list(incomplete or []), judge=rec.get("judge"), format=int(rec.get("format") or FORMAT))

    def to_record(self) -> dict[str, Any]:
        """The record stored in the run (``Run.extra["meta_eval"]``)."""
        out = {k: getattr(self, k) for k in _RECORD}
        out["metrics"] = {k: m.to_dict() for k, m in self.metrics.items()}
        out["ranking"] = list(self.ranking)
        if self.judge is not None:
            out["judge"] = self.judge
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``ragmeter meta-eval --json`` (with ``items``): the run, then the record, then
        the comparison when there is one."""
        out = {"run_id": self.run_id, "status": self.status, "incomplete": list(self.incomplete), **self.to_record()}
        if self.comparison is not None:
            out["comparison"] = self.comparison.to_dict()
        return out

    # -- the read-only mapping of :meth:`to_dict`
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())
