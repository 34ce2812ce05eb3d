"""What a metric asks the judge (:class:`JudgeRequest`) and what it gets back (:class:`JudgeResult`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from ragmeter.core.schema import Score

#: status of a result
OK, FAILED, BUDGET, DRY_RUN = "ok", "failed", "budget", "dry_run"


@dataclass(frozen=True)
class JudgeRequest:
    """One structured judge request.

    Attributes:
        metric: the metric asking (for accounting).
        sample_id: the sample judged (for accounting).
        system: the system prompt (the metric's template: instructions only, no evaluated text).
        user: the user message (evaluated text, fenced as data).
        schema: the pydantic model the reply must parse into.
        template_version: hash of the prompt template; part of the cache key, so an upgraded
            prompt never serves stale verdicts.
        expected_output_tokens: a guess of the reply's size, for dry-run and budget estimates.
        max_tokens: output cap (``None``: the judge's default).
        messages: the conversation after the system prompt, ``({"role", "content"}, ...)`` with
            roles ``user`` / ``assistant``; empty: one user message, ``user`` (an OpenAI Evals
            model grader sends its own messages).
        sampling: per-request sampling parameters (``temperature``, ``top_p``, ``seed``,
            ``reasoning_effort``) as ``((name, value), ...)``; empty: the judge's settings.
        validate: extra checks on the parsed reply (e.g. one verdict per context); raise
            ``ValueError`` to reject it (it is then retried like a malformed reply).
        logprobs: ask for the reply's token log-probabilities with this many alternatives per
            token (``top_logprobs``; OpenAI-compatible judges only, e.g. for G-Eval's
            probability-weighted score); ``None`` asks for none.
    """

    metric: str
    sample_id: str | None
    system: str
    user: str
    schema: type[BaseModel]
    template_version: str
    expected_output_tokens: int = 200
    max_tokens: int | None = None
    messages: tuple[dict[str, str], ...] = ()
    sampling: tuple[tuple[str, Any], ...] = ()
    validate: Callable[[Any], None] | None = field(default=None, compare=False)
    logprobs: int | None = None


@dataclass
class JudgeResult:
    """The outcome of a request: a parsed verdict, or why there is none.

    ``status`` is ``ok``, ``failed`` (after retries; ``raw`` holds the last reply), ``budget``
    (``max_cost`` reached before the call) or ``dry_run`` (planned, not made). ``logprobs`` holds
    the reply's tokens with their log-probabilities (``[{"token", "logprob", "top_logprobs":
    [{"token", "logprob"}, ...]}, ...]``) when the request asked for them and the judge gave them.
    """

    status: str
    key: str
    value: BaseModel | None = None
    raw: str | None = None
    error: str | None = None
    reason: str | None = None
    cached: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    attempts: int = 0
    latency_ms: float | None = None
    logprobs: list[dict[str, Any]] | None = None
    #: of ``input_tokens``: those the provider read from / wrote to its prompt cache
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_cached(self) -> JudgeResult:
        """The same verdict served again: no new tokens or cost."""
        return replace(self, cached=True, input_tokens=0, output_tokens=0, cached_tokens=0, cache_write_tokens=0,
                       cost_usd=0.0 if self.cost_usd is not None else None, attempts=0, latency_ms=None)

    def missing(self, details: dict[str, Any] | None = None) -> Score:
        """A no-value :class:`Score` saying why (never a 0)."""
        d: dict[str, Any] = dict(details or {})
        if self.error:
            d["judge_error"] = self.error
        if self.raw is not None:
            d["judge_raw_reply"] = self.raw[:4000]
        if self.attempts:
            d["judge_attempts"] = self.attempts
        return Score.missing(self.reason or f"judge {self.status}", d or None)
