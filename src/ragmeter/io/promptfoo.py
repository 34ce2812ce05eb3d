"""promptfoo's results file (``promptfoo eval -o results.json``): ``{"evalId", "results": {"version",
"results": [...]}}``, one result per test case and prompt/provider. Each becomes a row: the test's
``vars`` as columns (so ``question``, ``query``, ``context``, ``expected`` ... map as in any file),
the provider's ``response.output`` as the answer, and what promptfoo decided kept in metadata."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def results(obj: Any) -> list[Any] | None:
    """The result list of a promptfoo results document, else ``None``."""
    inner = obj.get("results") if isinstance(obj, Mapping) else None
    if not isinstance(inner, Mapping) or not isinstance(inner.get("results"), list):
        return None
    if "evalId" not in obj and "version" not in inner:
        return None
    return inner["results"]


def row(result: Any) -> Any:
    """One promptfoo result as a dataset row (anything that is not an object is left for the
    row reader to refuse with its line)."""
    if not isinstance(result, Mapping):
        return result
    out: dict[str, Any] = {}
    test_vars = result.get("vars")
    if isinstance(test_vars, Mapping):
        out.update({str(k): v for k, v in test_vars.items()})
    rid = result.get("id")
    out["id"] = str(rid) if rid not in (None, "") else f"test{result.get('testIdx', '?')}-prompt{result.get('promptIdx', '?')}"
    response = result.get("response")
    output = response.get("output") if isinstance(response, Mapping) else None
    out["answer"] = output if isinstance(output, str) or output is None else json.dumps(output, ensure_ascii=False)
    provider = result.get("provider")
    grading = result.get("gradingResult") if isinstance(result.get("gradingResult"), Mapping) else {}
    prompt = result.get("prompt") if isinstance(result.get("prompt"), Mapping) else {}
    out["metadata"] = {"promptfoo": {
        "provider": provider.get("id") if isinstance(provider, Mapping) else provider,
        "prompt": prompt.get("label") or prompt.get("raw"), "success": result.get("success"),
        "score": result.get("score"), "reason": grading.get("reason"), "latency_ms": result.get("latencyMs"),
        "error": result.get("error")}}
    return out
