"""What the DeepEval single-turn parity tests share (tests/test_parity_deepeval_*.py): the scripted
server of tests/parity_server.py taught the verdicts of DeepEval's misuse, non-advice, PII leakage,
role violation, prompt alignment, summarization and DAG steps, and the two ways of scoring a
sample (ragmeter's one request, DeepEval's own pipeline).

Case kinds added here (``ParityServer.case(kind, verdicts, ...)``):

- ``flagged``: ``["yes", "no", ...]``, one verdict per extracted statement (misuse, non-advice, PII
  leakage, role violation: ``yes`` is a violation);
- ``instructions``: ``["yes", "no", ...]``, one per prompt instruction;
- ``summary``: ``(claims, questions)``: claim verdicts (yes / no / borderline) and ``(original,
  summary)`` answers per assessment question; the sample's input holds ``ORIGINAL-TEXT`` and its
  answer ``SUMMARY-TEXT`` so the two answer steps can be told apart;
- ``dag``: ``{"task": {instructions: output}, "judgement": {criteria: verdict}, "geval": score}`` (a task node's
  output found by its instructions, a judgement node's verdict by its criteria; the sample's marker
  is added to a text output, so the nodes after it carry it; ``geval``: a GEval child's 0-10 score,
  without token log-probabilities).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from parity_server import _MARK, Case, ParityServer
from ragmeter.core.context import ScoringContext
from ragmeter.metrics.registry import resolve
from references import require_reference

require_reference("deepeval")  # imported only by the DeepEval parity tests, which require it too
pytestmark = pytest.mark.contract

_EXTRACT = {"Misuses": "misuses", "Advices": "advices", "ExtractedPII": "extracted_pii",
            "RoleViolations": "role_violations"}


class DeepEvalServer(ParityServer):
    """:class:`ParityServer` with the cases above."""

    def _ragmeter(self, case: Case, schema: str, system: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "flagged" and schema == "FlaggedStatements":
            return {"statements": [{"statement": f"statement {i} {mark}", "reason": "scripted", "verdict": x}
                                   for i, x in enumerate(v)]}
        if case.kind == "instructions" and schema == "InstructionVerdicts":
            return {"verdicts": [{"instruction": i, "reason": "scripted", "verdict": x} for i, x in enumerate(v, 1)]}
        if case.kind == "summary" and schema == "SummaryVerdicts":
            claims, questions = v
            return {"claims": [{"claim": f"claim {i} {mark}", "reason": "scripted", "verdict": x}
                               for i, x in enumerate(claims)],
                    "questions": [{"question": f"question {i} {mark}", "original": o, "summary": s}
                                  for i, (o, s) in enumerate(questions)]}
        if case.kind == "dag":
            return self._dag(case, schema, system + "\n" + user, ragmeter=True)
        return super()._ragmeter(case, schema, system, user, mark)

    def _deepeval(self, case: Case, schema: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if case.kind == "flagged":
            if schema in _EXTRACT:
                return {_EXTRACT[schema]: [f"statement {i} {mark}" for i in range(len(v))]}
            if schema == "Verdicts":
                return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in v]}
        if case.kind == "instructions" and schema == "Verdicts":
            return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in v]}
        if case.kind == "summary":
            claims, questions = v
            if schema == "Truths":
                return {"truths": [f"truth {mark}"]}
            if schema == "Claims":
                return {"claims": [f"claim {i} {mark}" for i in range(len(claims))]}
            if schema == "Verdicts":
                return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in claims]}
            if schema == "Questions":
                return {"questions": [f"question {i} {mark}" for i in range(len(questions))]}
            if schema == "Answers":
                text = user.rsplit("Text:", 1)[-1].split("Questions:", 1)[0]
                side = 0 if "ORIGINAL-TEXT" in text else 1
                assert side == 1 or "SUMMARY-TEXT" not in text
                return {"answers": [q[side] for q in questions]}
        if case.kind == "dag":
            return self._dag(case, schema, user, ragmeter=False)
        return super()._deepeval(case, schema, user, mark)

    @staticmethod
    def _dag(case: Case, schema: str, text: str, *, ragmeter: bool) -> dict[str, Any]:
        v = case.verdicts
        mark = _MARK.search(text).group(0)
        if schema == "Steps":  # a verdict's GEval child
            return {"steps": ["Check the output.", "Check it again."]}
        if schema in ("raw", "ReasonScore"):
            return {"reason": "scripted", "score": v["geval"]}
        if schema in ("TaskNodeOutput", "DagTaskOutput"):
            for instructions, output in v["task"].items():
                if instructions in text:
                    return {"output": f"{output} {mark}" if isinstance(output, str) else output}
            raise ValueError(f"no scripted task output for {text[:300]!r}")
        for criteria, verdict in v["judgement"].items():
            if criteria in text:
                return {"verdict": verdict, "reason": "scripted"}
        raise ValueError(f"no scripted verdict ({schema}) for {text[:400]!r}")


def ours(srv: ParityServer, entry: Any, samples: list[Any], options: dict[str, Any] | None = None) -> list[Any]:
    """ragmeter's scores of ``entry`` on ``samples`` (one run: prepare, flush, score)."""
    import os

    os.environ["PARITY_KEY"] = "parity"
    req = resolve(entry)
    opts = {"judge": "openai:gpt-4o-mini", "judge_base_url": srv.url, "judge_api_key_env": "PARITY_KEY",
            "judge_backoff_base": 0.01, "judge_backoff_max": 0.02, "judge_parse_retries": 0, **(options or {})}
    ctx = ScoringContext(opts)
    try:
        if req.spec.check is not None:
            msg = req.spec.check(ctx, **req.params)
            assert msg is None, msg
        if req.spec.prepare is not None:
            req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        return req.spec.fn(samples, ctx, **req.params)
    finally:
        ctx.close()


def deepeval_model(srv: ParityServer) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from deepeval.models import OpenAIModel

        return OpenAIModel(model="gpt-4o-mini", base_url=srv.url, api_key="parity")


def deepeval_score(metric: Any, **fields: Any) -> tuple[float | None, bool | None]:
    """DeepEval's number and its success, ``(None, None)`` for a refused test case."""
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.test_case import LLMTestCase

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = metric.measure(LLMTestCase(**fields), _show_indicator=False)
    except MissingTestCaseParamsError:
        return None, None
    return (None if v is None else float(v)), metric.success


def close(a: float | None, b: float | None, rel: float = 1e-6) -> bool:
    """Equal within ``rel`` (relative), or both no value."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))
