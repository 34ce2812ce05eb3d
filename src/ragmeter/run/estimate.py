"""Estimate an evaluation's judge calls and cost without making any (``ragmeter eval --dry-run``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragmeter.run.eval_config import EvalConfig


def estimate_run_cost(data: Any, metrics: Sequence[str | dict[str, Any]] | None = None, *,
                      config: EvalConfig | str | Path | dict[str, Any] | None = None,
                      **options: Any) -> dict[str, Any]:
    """Plan the judge calls of an evaluation without making any: calls, tokens and cost.

    Takes what :func:`ragmeter.evaluate` takes (one :class:`~ragmeter.run.eval_config.EvalConfig`,
    or its fields as options). Runs the LLM metrics in dry-run mode against the store (so cached
    verdicts are not counted), then deletes the planning run. Returns the judge's dry-run figures
    (``planned_calls``, ``cached``, ``est_input_tokens``, ``est_output_tokens``, ``est_cost_usd``,
    ``per_metric``).
    """
    from ragmeter.core.config import load_config
    from ragmeter.metrics.registry import resolve_all
    from ragmeter.run.runner import run
    from ragmeter.store import Store, open_store

    c = EvalConfig.of(config, metrics, **options)
    cfg = load_config(c.file)
    entries = list(cfg.get("metrics") or []) + list(c.metrics)
    requests = resolve_all(entries)
    llm = [{"name": r.spec.name, "params": r.params, "key": r.key} for r in requests if r.spec.needs_llm]
    opts = {**cfg.get("options", {}), **c.options, "judge_dry_run": True}
    if not llm:
        return {"dry_run": True, "planned_calls": 0, "note": "no LLM metric requested"}
    store = c.db if isinstance(c.db, Store) else open_store(c.db)
    result = run(data, EvalConfig(metrics=tuple(llm), mapping=c.mapping or cfg.get("map"), on_error=c.on_error,
                                  db=store, options=opts, name="dry-run"))
    store.delete_run(result.run_id)
    return result.extra.get("judge", {"dry_run": True, "planned_calls": 0})
