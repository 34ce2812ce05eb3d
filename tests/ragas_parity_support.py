"""What the ragas parity tests (tests/test_parity_ragas*.py) share: ragmeter's scores of a metric
through one run's steps (prepare, flush, score) against the scripted parity server, and ragas'
number of a metric (``None`` for NaN or a sample ragas refuses with an error)."""

from __future__ import annotations

import asyncio
import math
import os
from typing import Any

from ragmeter.core.context import ScoringContext
from ragmeter.metrics.registry import resolve


def ours(url: str | None, entry: Any, samples: list) -> list[tuple[float | None, Any]]:
    """ragmeter's ``(value, score)`` of ``entry`` on ``samples``; ``url``: the parity server's (judge and
    embeddings), ``None`` for a metric that needs neither."""
    req = resolve(entry)
    opts: dict[str, Any] = {}
    if url is not None:
        os.environ.setdefault("PARITY_KEY", "parity")
        opts = {"judge": "openai:gpt-4o-mini", "judge_base_url": url, "judge_api_key_env": "PARITY_KEY",
                "judge_backoff_base": 0.01, "judge_backoff_max": 0.02, "judge_parse_retries": 0,
                "embedding_model": "openai:parity-embeddings", "embedding_base_url": url}
    ctx = ScoringContext(opts)
    try:
        if req.spec.prepare is not None:
            req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        out = req.spec.fn(samples, ctx, **req.params)
    finally:
        ctx.close()
    return [(s.value, s) for s in out]


def ragas_value(metric: Any, **fields: Any) -> float | None:
    """ragas' number; ``None`` for NaN or a sample ragas refuses (it raises)."""
    try:
        v = asyncio.run(metric.ascore(**fields)).value
    except (ValueError, AssertionError, ZeroDivisionError, IndexError):
        return None
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def close(a: float | None, b: float | None, rel: float = 1e-6) -> bool:
    """Equal within ``rel`` (relative; absolute near 0), or both without a value."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))
