"""The scripted judge's replies to the reply schemas of ragmeter's ``ragas:*`` metrics
(metrics/judge/ragas_more.py, metrics/conversation/ragas_conversation.py): rule-based and
deterministic, like the rest of tests/judge_server.py, which hands these schemas here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SCHEMAS = ("AccuracyRatings", "ThreeLevelRatings", "EntityLists", "FactualClaims", "NoiseVerdicts",
           "RagasSummaryVerdicts", "SQLEquivalence", "RubricScore", "GoalVerdict")


def _share(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a) if a else 0.0


def reply(schema: str, system: str, b: dict[str, str], words: Callable[[str], set[str]],
          sentences: Callable[[str], list[str]], numbered: Callable[[dict[str, str], str], list[str]]) -> dict[str, Any]:
    answer, ref, q = b.get("ANSWER", ""), b.get("REFERENCE", ""), b.get("QUESTION", "")
    contexts = numbered(b, "CONTEXT") if "CONTEXT 1" in b else ([b["CONTEXT"]] if "CONTEXT" in b else [])
    if schema == "AccuracyRatings":  # the share of the reference's words in the answer, on 0/2/4
        s = _share(words(ref), words(answer))
        level = 4 if s >= 0.8 else 2 if s >= 0.4 else 0
        return {"rating_1": level, "rating_2": 4 if level == 4 else max(0, level - 2)}
    if schema == "ThreeLevelRatings":  # words of the question (or answer) found in the context
        target = words(q or answer)
        s = _share(target, set().union(*(words(c) for c in contexts)) if contexts else set())
        level = 2 if s >= 0.6 else 1 if s > 0 else 0
        return {"rating_1": level, "rating_2": min(2, level + (1 if s >= 0.3 else 0))}
    if schema == "EntityLists":  # capitalised words as entities
        def ents(t: str) -> list[str]:
            return sorted({w.strip(".,;:!?()\"'") for w in t.split() if w[:1].isupper()})
        return {"reference_entities": ents(ref), "context_entities": ents(" ".join(contexts))}
    if schema == "FactualClaims":
        aw, rw = words(answer), words(ref)
        return {"answer_claims": [{"claim": s, "reason": "rule", "verdict": int(words(s) <= rw)} for s in sentences(answer)],
                "reference_claims": [{"claim": s, "reason": "rule", "verdict": int(words(s) <= aw)} for s in sentences(ref)]}
    if schema == "NoiseVerdicts":
        cw = [words(c) for c in contexts]
        rw = words(ref)

        def inside(s: str) -> list[int]:
            return [int(bool(words(s)) and words(s) <= c) for c in cw]
        return {"reference_statements": [{"statement": s, "in_contexts": inside(s)} for s in sentences(ref)],
                "answer_statements": [{"statement": s, "in_contexts": inside(s), "in_reference": int(words(s) <= rw)}
                                      for s in sentences(answer)]}
    if schema == "RagasSummaryVerdicts":
        text, summary = b.get("TEXT", ""), words(b.get("SUMMARY", ""))
        qs = [{"question": f"Does the text say: {s}", "answer": "1" if words(s) & summary else "0"}
              for s in sentences(text)]
        return {"keyphrases": sorted(w for w in words(text) if len(w) > 6)[:5], "questions": qs}
    if schema == "SQLEquivalence":
        same = " ".join(answer.lower().split()) == " ".join(ref.lower().split())
        return {"response_explanation": "rule", "reference_explanation": "rule", "equivalent": same}
    if schema == "RubricScore":
        target = ref or q
        s = _share(words(target), words(answer)) if target else 0.5
        return {"feedback": "word overlap", "score": 1 + round(4 * s)}
    if schema == "GoalVerdict":
        conv = b.get("CONVERSATION", "")
        desired = b.get("DESIRED OUTCOME", "")
        done = "tool call" in conv or (bool(desired) and words(desired) <= words(conv))
        return {"user_goal": "what the user asked", "end_state": "what the assistant did", "reason": "rule",
                "verdict": int(done)}
    raise ValueError(f"scripted judge: unknown ragas schema {schema!r}")
