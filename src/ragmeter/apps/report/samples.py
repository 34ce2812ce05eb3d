"""A run's samples as the report and the dashboard show them: a table row per sample (its values,
bands, no-value reasons and judge reasoning, ranked by quality, worst first) and a sample's detail
(its fields, contexts and every metric's verdict)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ragmeter.apps.report.bands import band, oriented
from ragmeter.core.redact import redact
from ragmeter.core.schema import Sample, Score
from ragmeter.store import Store

#: keys of ``Score.details`` read as a judge's reasoning, in this order.
_REASON_KEYS = ("reasoning", "reason", "explanation", "rationale", "justification", "feedback",
                "critique", "comment")
#: keys of ``Score.details`` holding per-claim/per-statement verdict lists.
_VERDICT_KEYS = ("verdicts", "claims", "statements", "steps")


def reasoning_text(details: Mapping[str, Any] | None, limit: int | None = None) -> str | None:
    """A judge's reasoning read from ``Score.details``: the metric's verdict summary, its
    reason-like strings, then its per-claim verdicts as ``verdict: reason`` lines. ``None`` when
    the details hold none."""
    if not isinstance(details, Mapping):
        return None
    parts: list[str] = []
    summary = details.get("summary")
    summary = summary.strip() if isinstance(summary, str) else ""
    if summary:  # the metric's own summary, built from the same verdicts as the score
        parts.append(summary)
    for k in _REASON_KEYS:
        v = details.get(k)
        if isinstance(v, str) and v.strip() and v.strip() not in summary:
            parts.append(v.strip())
    for k in _VERDICT_KEYS:
        v = details.get(k)
        if isinstance(v, list):
            for item in v:
                if isinstance(item, Mapping):
                    head = next((str(item[x]) for x in ("verdict", "label", "supported", "score")
                                 if x in item), "")
                    what = next((str(item[x]) for x in ("claim", "statement", "text", "step")
                                 if item.get(x)), "")
                    why = next((str(item[x]) for x in _REASON_KEYS if item.get(x)), "")
                    line = " — ".join(p for p in (what, why) if p)
                    parts.append(f"{head}: {line}" if head and line else head or line)
                elif isinstance(item, str):
                    parts.append(item)
    text = "\n".join(p for p in parts if p)
    if not text:
        return None
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    return text


def quality(values: Mapping[str, float | None], metas: Sequence[Mapping[str, Any]]) -> float | None:
    """Mean of the sample's banded values, each turned so higher is better (worst-first key)."""
    vals = [oriented(values.get(m["key"]), m["higher_is_better"]) for m in metas if m["banded"]]
    vals = [v for v in vals if v is not None]
    return math.fsum(vals) / len(vals) if vals else None


def sample_row(sample: Sample, position: int, table: Mapping[str, Mapping[str, Score]],
               metas: Sequence[Mapping[str, Any]], *, with_details: bool = False) -> dict[str, Any]:
    """One line of the per-sample table (and, with ``with_details``, what its detail view shows)."""
    values: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    bands: dict[str, str | None] = {}
    reasoning: list[dict[str, str]] = []
    for m in metas:
        sc = table.get(m["key"], {}).get(sample.id)
        v = sc.value if sc is not None else None
        values[m["key"]] = v
        b = band(v, m["higher_is_better"]) if m.get("show_band") else None
        bands[m["key"]] = b.css if b else None
        if sc is None:
            reasons[m["key"]] = "not scored yet"
        elif v is None:
            reasons[m["key"]] = redact(sc.reason or "no value")  # runs stored before redaction too
        text = reasoning_text(sc.details if sc is not None else None)
        if text:
            reasoning.append({"metric": m["key"], "text": text})
    q = quality(values, metas)
    qb = band(q)
    row: dict[str, Any] = {
        "id": sample.id, "position": position, "question": sample.question,
        "answer": sample.answer, "reference": sample.reference,
        "n_contexts": len(sample.contexts) if sample.contexts is not None else None,
        "label": sample.label, "values": values, "reasons": reasons, "bands": bands,
        "quality": q, "quality_band": qb.css if qb else None, "reasoning": reasoning,
    }
    if with_details:
        row["detail"] = sample_detail(sample, table, metas)
    return row


def sample_detail(sample: Sample, table: Mapping[str, Mapping[str, Score]],
                  metas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Everything about one sample: its fields, contexts, and every metric's value, band,
    reason and details (judge verdicts ...)."""
    scores = []
    for m in metas:
        sc = table.get(m["key"], {}).get(sample.id)
        v = sc.value if sc is not None else None
        b = band(v, m["higher_is_better"]) if m.get("show_band") else None
        scores.append({
            "metric": m["key"], "family": m["family"], "direction": m["direction"],
            "value": v, "band": b.name if b else None, "band_css": b.css if b else None,
            "reason": (sc.reason if sc is not None else "not scored yet"),
            "details": sc.details if sc is not None else None,
            "reasoning": reasoning_text(sc.details if sc is not None else None),
        })
    return {"sample": sample.model_dump(mode="json", exclude_none=True), "scores": scores,
            "quality": quality({s["metric"]: s["value"] for s in scores}, metas)}


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # worst first; samples without any banded value go last, in dataset order
    return sorted(rows, key=lambda r: (r["quality"] is None, r["quality"] if r["quality"] is not None
                                       else 0.0, r["position"]))


class BriefSample(NamedTuple):
    """What a comparison reads of a sample: its id, question and answer."""

    id: str
    question: str | None
    answer: str | None


def brief_samples(store: Store, run_id: str) -> list[BriefSample]:
    """A run's samples in dataset order as :class:`BriefSample` (two runs of 100k samples do not
    need whole Sample objects in memory to be compared)."""
    rows = [(pos, BriefSample(sid, raw.get("question"), raw.get("answer")))
            for _pk, pos, sid, raw in store.iter_sample_rows(run_id)]
    rows.sort(key=lambda r: r[0])
    return [b for _pos, b in rows]
