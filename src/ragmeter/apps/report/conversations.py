"""Conversations in the report and the dashboard: each conversation as a thread, its turns with
their per-turn scores and the conversation metrics' verdicts placed on the turns they concern."""

from __future__ import annotations

from typing import Any

from ragmeter.conversations.view import threads
from ragmeter.store import Store

#: at most this many conversations are drawn as threads in one page (the rest are listed)
MAX_THREADS = 200
#: detail keys of the conversation metrics that hold per-turn verdicts (``turn`` is 1-based)
_PER_TURN = ("verdicts", "out_of_character", "forgetting")


def _notes(thread: dict[str, Any]) -> None:
    """Attach the conversation metrics' per-turn verdicts to the turns (``turn["notes"]``)."""
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for metric, sc in thread["metrics"].items():
        seen = set()
        for key in _PER_TURN:
            for v in sc.get(key) or []:
                if not isinstance(v, dict) or not isinstance(v.get("turn"), int) or (v["turn"], metric) in seen:
                    continue
                seen.add((v["turn"], metric))
                verdict = v.get("verdict") or ("out of character" if key == "out_of_character" else None)
                by_turn.setdefault(v["turn"], []).append({"metric": metric, "verdict": verdict,
                                                          "reason": v.get("reason")})
    for t in thread["turns"]:
        t["notes"] = by_turn.get(t["turn"], [])


def conversations_for(store: Store, run_id: str, *, limit: int = MAX_THREADS) -> dict[str, Any] | None:
    """``{"threads": [...], "total": n, "metrics": [conversation metric keys]}`` or ``None`` for
    a run without conversations."""
    got = threads(store, run_id)
    if not got:
        return None
    for t in got[:limit]:
        _notes(t)
    keys = list(dict.fromkeys(k for t in got for k in t["metrics"]))
    return {"threads": got[:limit], "total": len(got), "metrics": keys,
            "index": [{"id": t["id"], "metrics": {k: v["value"] for k, v in t["metrics"].items()}} for t in got]}


def conversation_view(store: Store, run_ref: str, conversation_id: str) -> dict[str, Any]:
    """One conversation of a run as a thread.

    Raises:
        StoreError: no such run, or no such conversation in it.
    """
    from ragmeter.core.errors import StoreError

    run = store.get_run(run_ref)
    got = threads(store, run.id, only=conversation_id)
    if not got:
        raise StoreError(f"run {run.id} has no conversation {conversation_id!r}")
    _notes(got[0])
    header = {"id": run.id, "name": run.name, "label": run.name or run.id, "status": run.status}
    return {"run": header, "thread": got[0]}
