"""A stored conversation run as threads: each conversation with its turns, the per-turn scores of
its assistant turns and the conversation metrics' values with their reasons (what ``ragmeter
show``, the report and the dashboard display). Reads only from the store."""

from __future__ import annotations

from typing import Any

from ragmeter.conversations.model import CONVERSATION_ID, CONVERSATION_KEY, TURN_KEY


def _score(sc: Any) -> dict[str, Any]:
    det = sc.details or {}
    d: dict[str, Any] = {"value": sc.value, "reason": sc.reason or None, "summary": det.get("summary")}
    for k in ("verdicts", "out_of_character", "forgetting", "intentions", "topics", "turns", "reasoning"):
        if det.get(k):
            d[k] = det[k]
    return d


def run_has_conversations(store: Any, run_id: str) -> bool:
    """Whether a run holds conversations, from its first stored sample only (a conversation
    dataset starts with a conversation sample), so other runs are not read."""
    first = next(iter(store.iter_sample_rows(run_id, chunk=1)), None)
    return first is not None and isinstance(((first[3] or {}).get("metadata") or {}).get(CONVERSATION_KEY), dict)


def threads(store: Any, run_id: str, only: str | None = None) -> list[dict[str, Any]]:
    """``[{"id", "chatbot_role", "scenario", "expected_outcome", "metrics": {key: score},
    "turns": [{"turn", "role", "content", "reference", "contexts", "tool_calls", "scores"}]}]``
    (turn numbers are 1-based positions); empty when the run holds no conversation. ``only``: one
    conversation id."""
    if not run_has_conversations(store, run_id):
        return []
    samples = store.run_samples(run_id)
    convs = [s for s in samples if isinstance(s.metadata.get(CONVERSATION_KEY), dict)
             and (only is None or s.id == only)]
    if not convs:
        return []
    table = store.score_table(run_id)
    by_turn: dict[tuple[str, int], dict[str, Any]] = {}
    for s in samples:
        if CONVERSATION_ID in s.metadata and TURN_KEY in s.metadata and s.metadata.get(CONVERSATION_KEY) is None:
            scores = {k: _score(col[s.id]) for k, col in table.items() if s.id in col}
            by_turn[(str(s.metadata[CONVERSATION_ID]), int(s.metadata[TURN_KEY]))] = scores
    out = []
    for s in convs:
        conv = s.metadata[CONVERSATION_KEY]
        turns = []
        for pos, t in enumerate(conv.get("turns") or []):
            turns.append({"turn": pos + 1, "role": t.get("role"), "content": t.get("content", ""),
                          "reference": t.get("reference"),
                          "contexts": [c.get("text") or c.get("id") or "" for c in t.get("contexts") or []],
                          "tool_calls": [{"name": c.get("name"), "arguments": c.get("arguments")}
                                         for c in t.get("tool_calls") or []],
                          "scores": by_turn.get((s.id, pos), {})})
        out.append({"id": s.id, "chatbot_role": conv.get("chatbot_role"), "scenario": conv.get("scenario"),
                    "expected_outcome": conv.get("expected_outcome"),
                    "metrics": {k: _score(col[s.id]) for k, col in table.items() if s.id in col},
                    "turns": turns})
    return out


def show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show``'s ``conversations`` section: per conversation, its conversation metrics'
    values (``metrics``) and each assistant turn's values (``turns``: ``{"turn N": {metric: value}}``),
    with the no-value reasons (``missing``)."""
    got = threads(store, run.id)
    if not got:
        return {}
    body: dict[str, Any] = {}
    for c in got:
        entry: dict[str, Any] = {"metrics": {k: v["value"] for k, v in c["metrics"].items()},
                                 "turns": {f"turn {t['turn']}": {k: v["value"] for k, v in t["scores"].items()}
                                           for t in c["turns"] if t["role"] == "assistant"}}
        missing = {k: v["reason"] for k, v in c["metrics"].items() if v["value"] is None and v.get("reason")}
        missing.update({f"turn {t['turn']} {k}": v["reason"] for t in c["turns"] for k, v in t["scores"].items()
                        if v["value"] is None and v.get("reason")})
        if missing:
            entry["missing"] = missing
        body[c["id"]] = entry
    return {"conversations": body}
