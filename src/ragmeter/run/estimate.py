"""Estimate an evaluation's judge calls and cost without making any (``ragmeter eval --dry-run``)."""

from __future__ import annotations

from typing import Any


def estimate_run_cost(data: Any, metrics: list[str] | None = None, *, config: Any = None,
                      mapping: Any = None, on_error: str = "raise", db: Any = None,
                      options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plan the judge calls of an evaluation without making any: calls, tokens and cost.

    Runs the LLM metrics in dry-run mode against the store (so cached verdicts are not counted),
    then deletes the planning run. Returns the judge's dry-run figures (``planned_calls``,
    ``cached``, ``est_input_tokens``, ``est_output_tokens``, ``est_cost_usd``, ``per_metric``).
    """
    from ragmeter.core.config import load_config
    from ragmeter.metrics.registry import resolve_all
    from ragmeter.run.runner import evaluate
    from ragmeter.store import Store, open_store

    cfg = load_config(config)
    entries = list(cfg.get("metrics") or []) + list(metrics or [])
    requests = resolve_all(entries)
    llm = [{"name": r.spec.name, "params": r.params, "key": r.key} for r in requests if r.spec.needs_llm]
    opts = {**cfg.get("options", {}), **(options or {}), "judge_dry_run": True}
    if not llm:
        return {"dry_run": True, "planned_calls": 0, "note": "no LLM metric requested"}
    store = db if isinstance(db, Store) else open_store(db)
    result = evaluate(data, llm, mapping=mapping or cfg.get("map"), on_error=on_error, db=store,
                      options=opts, name="dry-run")
    store.delete_run(result.run_id)
    return result.extra.get("judge", {"dry_run": True, "planned_calls": 0})
