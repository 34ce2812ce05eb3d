"""Helpers for a user's own test suite (pytest or any other runner).

>>> from ragmeter.testing import assert_scores
>>> assert_scores({"question": "Capital of France?", "answer": "Paris", "reference": "Paris"},
...               metrics=["token_f1"], thresholds={"token_f1": 0.5})      # doctest: +SKIP

>>> import ragmeter
>>> from ragmeter.testing import assert_no_regression
>>> def test_rag_quality():                                            # doctest: +SKIP
...     result = ragmeter.evaluate("golden.jsonl", ["correct_semantic_guarded", "ndcg@5"])
...     assert_no_regression(result, baseline="tests/baseline.json", max_drop=0.05)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.analysis.gate import GateResult, gate

__all__ = ["assert_no_regression", "assert_scores", "recorded_checks"]

# every assert_scores call of this process, for the pytest plugin's session summary
_CHECKS: list[dict[str, Any]] = []


def recorded_checks() -> list[dict[str, Any]]:
    """``[{"sample", "metric", "value", "threshold", "passed", "reason"}]`` of every
    :func:`assert_scores` call in this process (the pytest plugin prints them as a table)."""
    return list(_CHECKS)


def _short(text: Any, n: int = 120) -> str:
    s = str(text)
    return s if len(s) <= n else s[: n - 1] + "…"


def assert_scores(sample: Any, metrics: Sequence[str], thresholds: Mapping[str, Any] | Sequence[str],
                  *, options: Mapping[str, Any] | None = None, db: str | Any = None) -> dict[str, float | None]:
    """Score one sample (or a list of them) and fail when a metric misses its threshold, as
    DeepEval's ``assert_test`` does.

    Nothing is stored unless ``db`` is given (the run goes to an in-memory database).

    Args:
        sample: a mapping (``question``, ``answer``, ``reference``, ``contexts`` ...), a
            :class:`~ragmeter.core.schema.Sample`, or a list of either.
        metrics: metric names, e.g. ``["token_f1", "faithfulness"]``.
        thresholds: ``{"token_f1": 0.5, "hallucination": "<=0.2"}`` or ``["token_f1=0.5"]``;
            "=" means at least for higher-is-better metrics and at most for lower-is-better ones.
        options: run options (``judge`` ...), as for :func:`ragmeter.evaluate`.
        db: a store or URL to keep the run in (default: not stored).

    Returns:
        ``{metric: value}`` of the first sample.

    Raises:
        AssertionError: naming each failing sample, metric, value, threshold and the reason
            (no value, or the judge's verdict).
        ConfigError: a threshold for a metric not in ``metrics``, or an unknown metric.
    """
    from ragmeter.run.eval_config import EvalConfig
    from ragmeter.run.rows import first_reference
    from ragmeter.run.runner import run

    items = list(sample) if isinstance(sample, (list, tuple)) else [sample]
    items = [dict(x) if isinstance(x, Mapping) else x for x in items]
    for i, x in enumerate(items):
        if isinstance(x, dict) and "id" not in x:
            x["id"] = f"sample-{i + 1}"
    res = run(items, EvalConfig(metrics=tuple(metrics), thresholds=thresholds, options=dict(options or {}),
                                db=db or "sqlite:///:memory:"))
    failures = []
    rows = res.rows()
    for key, summ in res.summary.items():
        if summ.check is None:
            continue
        thr_text = summ.check["threshold"]
        for row in rows:
            verdict = row.get(key + "__pass")
            reason = row["no_value_reasons"].get(key) or row["judge"].get(key)
            _CHECKS.append({"sample": row["id"], "metric": key, "value": row[key], "threshold": thr_text,
                            "passed": verdict is True, "reason": reason})
            if verdict is not True:
                value = "no value" if row[key] is None else f"{row[key]:.4f}"
                why = f" ({reason})" if reason else ""
                failures.append(f"{key} = {value}, threshold {thr_text}{why}\n"
                                f"    sample {row['id']}: question={_short(row['question'])!r} "
                                f"answer={_short(row['answer'])!r} reference={_short(first_reference(row))!r}")
    if failures:
        raise AssertionError(f"{len(failures)} threshold check(s) failed:\n  " + "\n  ".join(failures))
    return {k: rows[0][k] for k in res.scores} if rows else {}


def assert_no_regression(current: Any, baseline: Any, *, max_drop: float = 0.05,
                         metrics: list[str] | None = None, alpha: float = 0.05, relative: bool = False,
                         db: str | Any = None) -> GateResult:
    """Fail (``AssertionError``) when ``current`` regressed against ``baseline``, as ``ragmeter gate`` does.

    A metric regresses when it dropped by more than ``max_drop`` (absolute, or a fraction of the
    baseline mean with ``relative=True``) *and* a one-sided paired permutation test on the
    per-sample values says the drop is significant at ``alpha``.

    Args:
        current: an :class:`~ragmeter.run.runner.EvaluationResult`, a run id/name, or a baseline-format file.
        baseline: a baseline JSON file (``ragmeter baseline save``), a run id/name, or a result.
        metrics: the metrics to check (default: every metric in both).
        db: the store holding run ids (default ``$RAGMETER_DB`` / ``.ragmeter/ragmeter.db``).

    Returns:
        The :class:`~ragmeter.analysis.gate.GateResult` when nothing regressed.

    Raises:
        AssertionError: with the gate's table of what moved.
    """
    store = None
    if db is not None:
        from ragmeter.store import Store, open_store

        store = db if isinstance(db, Store) else open_store(db)
    res = gate(current, baseline, max_drop=max_drop, metrics=metrics, alpha=alpha, relative=relative,
               store=store)
    if res.failed:
        bad = ", ".join(r.metric for r in res.rows if r.regressed)
        raise AssertionError(f"quality regression in {bad}\n{res.report()}")
    return res
