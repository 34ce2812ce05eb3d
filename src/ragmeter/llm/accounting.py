"""Per-run judge accounting read back from the store (``judge_calls``): calls, tokens, cost."""

from __future__ import annotations

from typing import Any


def run_judge_usage(store: Any, run_id: str) -> dict[str, Any] | None:
    """Sum the judge calls recorded for a run, overall and per metric; ``None`` if there are none.

    ``calls`` counts requests sent to the provider, ``cached`` those served from the cache,
    ``failed`` the requests that ended without a usable verdict; of ``input_tokens``,
    ``cached_input_tokens`` were read from the provider's prompt cache and ``cache_write_tokens``
    written to it.
    """
    from sqlalchemy import case, func, select

    from ragmeter.store.models import JudgeCallRow

    real = case((JudgeCallRow.cached.is_(False), 1), else_=0)
    hit = case((JudgeCallRow.cached.is_(True), 1), else_=0)
    bad = case((JudgeCallRow.ok.is_(False) & JudgeCallRow.cached.is_(False), 1), else_=0)
    cols = (func.sum(real), func.sum(hit), func.sum(bad), func.sum(JudgeCallRow.input_tokens),
            func.sum(JudgeCallRow.output_tokens), func.sum(JudgeCallRow.cached_input_tokens),
            func.sum(JudgeCallRow.cache_write_tokens), func.sum(JudgeCallRow.cost_usd))
    with store.session() as s:
        rows = s.execute(select(JudgeCallRow.metric, JudgeCallRow.provider, JudgeCallRow.model, *cols)
                         .where(JudgeCallRow.run_id == run_id)
                         .group_by(JudgeCallRow.metric, JudgeCallRow.provider, JudgeCallRow.model)).all()
    if not rows:
        return None
    per_metric: dict[str, dict[str, Any]] = {}
    total = {"calls": 0, "cached": 0, "failed": 0, "input_tokens": 0, "output_tokens": 0,
             "cached_input_tokens": 0, "cache_write_tokens": 0, "cost_usd": 0.0}
    models = set()
    for metric, provider, model, *figures in rows:
        models.add(f"{provider}:{model}")
        m = per_metric.setdefault(metric or "-", dict.fromkeys(total, 0))
        for k, v in zip(total, figures, strict=True):
            m[k] += v or 0
            total[k] += v or 0
    total["cost_usd"] = round(float(total["cost_usd"]), 6)
    for m in per_metric.values():
        m["cost_usd"] = round(float(m["cost_usd"]), 6)
    from ragmeter.llm.joint import attribute  # a joint call's figures, shared by its metrics

    return {"judge": ", ".join(sorted(models)), **total, "per_metric": attribute(per_metric)}


def show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show`` section: the run's judge tokens and cost."""
    usage = run_judge_usage(store, run.id)
    if usage is None:
        return {}
    price_known = (run.extra or {}).get("judge", {}).get("cost_usd", 0) is not None
    cost = f"${usage['cost_usd']:.6f}" if price_known else "unknown (no price for this model)"
    lines = [f"judge {usage['judge']}: {usage['calls']} calls, {usage['cached']} served from cache, "
             f"{usage['failed']} failed",
             f"tokens: {usage['input_tokens']:,} in{_prompt_cache(usage)}, {usage['output_tokens']:,} out; "
             f"cost {cost}"]
    for metric, m in sorted(usage["per_metric"].items()):
        mc = f"${m['cost_usd']:.6f}" if price_known else "cost ?"
        shared = f" ({m['joint_calls']} joint, cost shared equally)" if m.get("joint_calls") else ""
        lines.append(f"  {metric}: {m['calls']} calls{shared}, {m['cached']} cached, {m['failed']} failed; "
                     f"{m['input_tokens']:,} in{_prompt_cache(m)} / {m['output_tokens']:,} out tokens; {mc}")
    return {"judge tokens and cost": "\n".join(lines)}


def _prompt_cache(usage: dict[str, Any]) -> str:
    """How much of the input the provider's prompt cache served (and took in), when any."""
    read, written = usage.get("cached_input_tokens") or 0, usage.get("cache_write_tokens") or 0
    if not read and not written:
        return ""
    share = f" = {read / usage['input_tokens']:.0%}" if usage.get("input_tokens") else ""
    return f" ({read:,}{share} read from the provider's prompt cache" + (
        f", {written:,} written to it" if written else "") + ")"
