"""Response models of the dashboard's JSON API (they make up its OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class RunInfo(BaseModel):
    """A stored run, as listed."""

    id: str
    name: str | None = None
    label: str = Field(description="The name, or the id when the run has no name.")
    status: str = Field(description="running, completed, incomplete (no samples, or a metric without values) or failed")
    created_at: str | None = None
    finished_at: str | None = None
    n_samples: int
    dataset: str | None = None
    metrics: list[str] = Field(description="Metric keys, in request order.")
    ragmeter_version: str | None = None


class RunListItem(RunInfo):
    means: dict[str, float | None] = Field(default_factory=dict, description="Mean per metric.")
    directions: dict[str, str] = Field(default_factory=dict,
                                       description="'higher' or 'lower' is better, per metric.")
    bands: dict[str, str] = Field(default_factory=dict, description="Score band of each mean.")


class Histogram(BaseModel):
    edges: list[float]
    counts: list[int]


class MetricAggregate(BaseModel):
    """One metric's aggregate over a run."""

    key: str
    name: str
    family: str
    direction: str = Field(description="'higher' or 'lower' is better.")
    range: list[float]
    banded: bool = Field(description="Whether score bands apply (metrics in [0, 1]).")
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    ci_low: float | None = Field(description="95% confidence interval of the mean, inside the metric's "
                                             "range (docs/statistics.md).")
    ci_high: float | None
    n: int = Field(description="Samples with a value.")
    n_missing: int = Field(description="Samples without a value (see missing_reasons).")
    n_pending: int = Field(description="Samples not scored yet (runs in progress).")
    missing_reasons: dict[str, int]
    band: str | None = Field(description="Excellent, Good, Fair, Poor or Critical (of 1 − mean "
                                         "for lower-is-better metrics).")
    band_action: str | None = None
    histogram: Histogram


class RunDetail(BaseModel):
    """A run's report content: config, dataset summary, aggregates, plots' data, hints."""

    run: RunInfo
    live: bool = Field(description="True while the run is not completed: aggregates come from "
                                    "the scores stored so far.")
    config: dict[str, Any]
    requests: list[dict[str, Any]]
    method: dict[str, Any] | None = None
    timings: dict[str, Any]
    services: dict[str, Any] = Field(description="Service figures (embeddings, judge tokens and cost).")
    dataset: dict[str, Any]
    metrics: list[MetricAggregate]
    samples_total: int
    calibration: dict[str, Any] | None = None
    grids: list[dict[str, Any]]
    composites: list[dict[str, Any]]
    hints: list[dict[str, Any]]


class SampleRow(BaseModel):
    """One sample's line of the per-sample table."""

    id: str
    position: int = Field(description="0-based position in the dataset.")
    question: str | None = None
    answer: str | None = None
    reference: str | None = None
    n_contexts: int | None = None
    label: float | None = None
    values: dict[str, float | None] = Field(description="Value per metric (null = no value).")
    reasons: dict[str, str] = Field(description="Why a metric has no value.")
    bands: dict[str, str | None]
    quality: float | None = Field(description="Mean of the banded values, each turned so higher "
                                              "is better: the worst-first sort key.")
    quality_band: str | None = None
    reasoning: list[dict[str, str]] = Field(description="Judge reasoning per metric, when present.")


class SamplePage(BaseModel):
    run_id: str
    total: int = Field(description="Samples matching the filter.")
    offset: int
    limit: int
    sort: str
    items: list[SampleRow]


class SampleScore(BaseModel):
    metric: str
    family: str
    direction: str
    value: float | None
    band: str | None = None
    reason: str | None = None
    details: dict[str, Any] | None = Field(default=None, description="Judge claims, verdicts ...")
    reasoning: str | None = None


class SampleDetail(BaseModel):
    """One sample with its contexts and every metric's verdict."""

    run: RunInfo
    position: int
    n_samples: int
    prev_id: str | None = None
    next_id: str | None = None
    sample: dict[str, Any] = Field(description="The sample as evaluated (question, answer, "
                                               "references, contexts, relevant, label, metadata, trace).")
    scores: list[SampleScore]
    quality: float | None = None


class CompareCell(BaseModel):
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_missing: int
    band: str | None = None


class CompareMetric(BaseModel):
    key: str
    direction: str
    family: str
    runs: list[CompareCell | None] = Field(description="One cell per run, in the runs' order "
                                                       "(null: the run lacks this metric).")


class PairedDifference(BaseModel):
    """One metric, one run against the baseline, samples paired by id."""

    metric: str
    baseline: str
    run: str
    run_label: str
    direction: str
    n_pairs: int
    mean_a: float | None = Field(description="Baseline mean over the paired samples.")
    mean_b: float | None = Field(description="This run's mean over the paired samples.")
    diff: float | None = Field(description="mean(run − baseline) over the pairs.")
    ci_low: float | None = Field(description="95% CI of diff, inside [low - high, high - low] for a "
                                             "metric on [low, high].")
    ci_high: float | None
    p_value: float | None = Field(default=None, description="Two-sided paired permutation test "
                                                            "(when ragmeter.analysis is installed).")
    p_adjusted: float | None = Field(default=None, description="p_value Holm-adjusted over every metric "
                                                               "and run of the comparison; the verdict "
                                                               "needs it below 0.05 (as ragmeter compare).")
    wins: int
    ties: int
    losses: int
    significant: bool
    verdict: str = Field(description="better, worse, no significant difference, no paired samples "
                                     "(Holm-adjusted paired permutation test, the rule of ragmeter compare)")
    n_clusters: int | None = Field(default=None, description="Conversations the paired turns came from "
                                                             "(traces, for runs scored per span): the interval "
                                                             "and the test are per conversation (trace).")
    cluster_unit: str | None = Field(default=None, description="What n_clusters counts: conversation, or trace "
                                                               "for runs scored per span.")


class SampleChange(BaseModel):
    id: str
    question: str | None = None
    answer: str | None = None
    qualities: list[float | None]
    deltas: list[float | None]
    worst_delta: float


class Comparison(BaseModel):
    """Several runs side by side; the first is the baseline."""

    runs: list[RunInfo]
    baseline: str
    metrics: list[CompareMetric]
    differences: list[PairedDifference]
    sample_changes: list[SampleChange]
    sample_changes_total: int


class ErrorBody(BaseModel):
    detail: str
