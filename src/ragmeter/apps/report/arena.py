"""The report's and dashboard's arena section: per pair of systems the wins, ties and losses, the
win rate with its interval and the position-bias rate; the Bradley-Terry strengths and ranking."""

from __future__ import annotations

from typing import Any


def arena_view(run: Any) -> dict[str, Any] | None:
    """What the section shows, or ``None`` when the run is not an arena (``ragmeter arena``)."""
    from ragmeter.analysis.arena import stored_arena

    rec = stored_arena(run)
    if rec is None:
        return None
    bt = rec.get("bradley_terry") or None
    return {"systems": [s.get("label") for s in rec.get("systems") or []], "metric": rec.get("metric"),
            "criteria": rec.get("criteria"), "n_items": rec.get("n_items"),
            "dropped": {k: v for k, v in (rec.get("dropped") or {}).items() if v},
            "level": rec.get("level", 0.95), "pairs": list(rec.get("pairs") or []),
            "position_bias": rec.get("position_bias") or {}, "bradley_terry": bt,
            "ranking": list(rec.get("ranking") or []), "win_rate_method": rec.get("win_rate_method")}
