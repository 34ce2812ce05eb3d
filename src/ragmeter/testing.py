"""Helpers for a user's own test suite (pytest or any other runner).

>>> import ragmeter
>>> from ragmeter.testing import assert_no_regression
>>> def test_rag_quality():                                            # doctest: +SKIP
...     result = ragmeter.evaluate("golden.jsonl", ["correct_semantic_guarded", "ndcg@5"])
...     assert_no_regression(result, baseline="tests/baseline.json", max_drop=0.05)
"""

from __future__ import annotations

from typing import Any

from ragmeter.experiments.gate import GateResult, gate

__all__ = ["assert_no_regression"]


def assert_no_regression(current: Any, baseline: Any, *, max_drop: float = 0.05,
                         metrics: list[str] | None = None, alpha: float = 0.05, relative: bool = False,
                         db: str | Any = None) -> GateResult:
    """Fail (``AssertionError``) when ``current`` regressed against ``baseline``, as ``ragmeter gate`` does.

    A metric regresses when it dropped by more than ``max_drop`` (absolute, or a fraction of the
    baseline mean with ``relative=True``) *and* a one-sided paired permutation test on the
    per-sample values says the drop is significant at ``alpha``.

    Args:
        current: an :class:`~ragmeter.runner.EvaluationResult`, a run id/name, or a baseline-format file.
        baseline: a baseline JSON file (``ragmeter baseline save``), a run id/name, or a result.
        metrics: the metrics to check (default: every metric in both).
        db: the store holding run ids (default ``$RAGMETER_DB`` / ``.ragmeter/ragmeter.db``).

    Returns:
        The :class:`~ragmeter.experiments.gate.GateResult` when nothing regressed.

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
