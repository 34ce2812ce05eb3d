"""The scripted judge's rule-based replies (tests/judge_server.py) for the reply schemas of the
DeepEval single-turn metrics and the DAG metric: a sentence is flagged as a violation when it holds
a digit, an instruction is followed when the output shares a word with it, a summary claim is
supported when its words occur in the original, a DAG task outputs the first sentence of its text
and a binary judgement is true when that text holds a digit."""

from __future__ import annotations

import json
import re
from typing import Any

SCHEMAS = ("FlaggedStatements", "InstructionVerdicts", "SummaryVerdicts", "DagTaskOutput", "DagBinaryVerdict",
           "DagChoiceVerdict")


def reply(schema: str, system: str, b: dict[str, str], words: Any, sentences: Any, numbered: Any) -> dict[str, Any]:
    out = b.get("ACTUAL OUTPUT", b.get("SUMMARY", ""))
    if schema == "FlaggedStatements":
        return {"statements": [{"statement": s, "reason": "rule",
                                "verdict": "yes" if re.search(r"\d", s) else "no"} for s in sentences(out)]}
    if schema == "InstructionVerdicts":
        ow = words(out)
        return {"verdicts": [{"instruction": i, "reason": "rule", "verdict": "yes" if words(t) & ow else "no"}
                             for i, t in enumerate(numbered(b, "INSTRUCTION"), 1)]}
    if schema == "SummaryVerdicts":
        orig = words(b.get("ORIGINAL TEXT", ""))
        given = numbered(b, "QUESTION")
        qs = given or [f"Does it say {s}?" for s in sentences(b.get("ORIGINAL TEXT", ""))[:5]]
        return {"claims": [{"claim": s, "reason": "rule", "verdict": "yes" if words(s) <= orig else "borderline"}
                           for s in sentences(out)],
                "questions": [{"question": q, "original": "yes", "summary": "yes" if words(q) & words(out) else "no"}
                              for q in qs]}
    text = "\n".join(b.values())
    if schema == "DagTaskOutput":
        first = sentences(text)
        return {"output": first[0] if first else ""}
    if schema == "DagBinaryVerdict":
        return {"verdict": bool(re.search(r"\d", text)), "reason": "rule"}
    if schema == "DagChoiceVerdict":
        options = [json.loads(x) for x in re.findall(r'^- (".*")$', system, re.M)]
        return {"verdict": options[len(text) % len(options)] if options else "", "reason": "rule"}
    raise ValueError(schema)
