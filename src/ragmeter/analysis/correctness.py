"""How well each correctness method agrees with human labels, on the same samples."""

from __future__ import annotations

from typing import Any

from ragmeter.metrics.correctness.calibration import binary_scores

DYNAMIC = "correct_semantic_dynamic"


def label_agreement(result: Any, *, held_out_from: str = DYNAMIC) -> list[dict[str, Any]]:
    """One row per correctness metric of an evaluation result: its mean and number of values, and
    accuracy / precision / recall / F1 (from :func:`binary_scores`, predictions and labels
    binarised at 0.5) against the samples' human labels:

    - ``all``: every labelled sample the method scored;
    - ``held_out``: only the samples ``held_out_from`` (semantic_dynamic) scored, i.e. those not
      used to calibrate its threshold — the fair comparison with the calibrated method.

    Metrics other than ``correct_*`` are ignored; a method with no labelled value gets empty dicts.
    """
    labels = {s.id: s.label for s in result.samples}
    held: set[str] | None = None
    if held_out_from in result.scores:
        held = {s.id for s, sc in zip(result.samples, result.scores[held_out_from], strict=True)
                if sc.value is not None}
    rows = []
    for key, scores in result.scores.items():
        if not key.startswith("correct"):
            continue
        pairs = [(labels[s.id], sc.value, s.id) for s, sc in zip(result.samples, scores, strict=True)
                 if sc.value is not None and labels[s.id] is not None]
        summ = result.summary.get(key)
        row: dict[str, Any] = {"method": key, "mean": summ.mean if summ else None, "n": summ.n if summ else 0,
                               "all": {}, "held_out": {}}
        if pairs:
            row["all"] = binary_scores([p[0] for p in pairs], [p[1] for p in pairs]).to_dict()
        if held is not None:
            hp = [p for p in pairs if p[2] in held]
            if hp:
                row["held_out"] = binary_scores([p[0] for p in hp], [p[1] for p in hp]).to_dict()
        rows.append(row)
    return rows
