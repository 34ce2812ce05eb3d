"""LLM judges: OpenAI-compatible, Anthropic and Google clients behind one service with structured
verdicts, retries, rate limits, a persistent cache, token/cost accounting, budgets and dry runs.

Metrics use it as ``ctx.service("judge")``; see :class:`~ragmeter.llm.service.JudgeService` and
docs/judge.md. Importing this package imports no SDK.
"""

from __future__ import annotations

from typing import Any

from ragmeter.core.context import register_service
from ragmeter.llm.config import (
    HOW_TO_CONFIGURE,
    JudgeConfig,
    JudgeConfigError,
    config_from_options,
    judge_configured,
    parse_judge,
    problem,
)
from ragmeter.llm.prices import Price, PriceTable
from ragmeter.llm.request import JudgeRequest, JudgeResult
from ragmeter.llm.service import JudgeService, estimate_tokens
from ragmeter.llm.structured import ReplyParseError, parse_reply, strict_schema

__all__ = [
    "HOW_TO_CONFIGURE", "JudgeConfig", "JudgeConfigError", "JudgeRequest",
    "JudgeResult", "JudgeService", "Price", "PriceTable", "ReplyParseError", "config_from_options",
    "estimate_tokens", "get_judge", "judge_configured", "parse_judge", "parse_reply", "problem",
    "strict_schema",
]


def get_judge(judge: str, *, store: Any = None, run_id: str | None = None, **options: Any) -> JudgeService:
    """A judge service outside a run, e.g. ``get_judge("openai:gpt-4o-mini", concurrency=16)``.

    ``options`` are the ``judge_*`` settings without their prefix (``base_url``, ``api_key_env``,
    ``concurrency``, ``rpm``, ``max_cost`` ...). Close it with ``.close()`` when done.
    """
    opts = {"judge": judge, **{f"judge_{k}": v for k, v in options.items()}}
    return JudgeService(config_from_options(opts), store=store, run_id=run_id)


register_service("judge", JudgeService.from_context)

