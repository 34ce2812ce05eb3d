"""How well embedding similarity separates right from wrong answers on a labelled dataset.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/semantic_threshold_report.py [DATA] [--model NAME] [--json]

DATA defaults to the bundled example (human ``label`` per answer). Scores every sample with
``semantic_similarity`` (cosine of answer and reference, best of the references) in a throw-away
store, then prints ROC AUC, the best threshold and its accuracy (fit on the same data), the
cross-validated accuracy of a fitted threshold, the accuracy of seed 003's fixed thresholds, and
the mean similarity per ``metadata.answer_kind`` when the data has it. The numbers in
docs/metrics/semantic.md come from this script; the last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

import ragmeter  # noqa: E402
from ragmeter.embed import get_encoder  # noqa: E402
from ragmeter.metrics.semantic import separation_report  # noqa: E402

PAIRS = [("The capital of France is London", "The capital of France is Paris"),
         ("Paris is the capital of France.", "Paris"),
         ("The capital of France is Paris", "Paris is France's capital city")]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", default="example")
    ap.add_argument("--model", default=None, help="embedding model (default: bundled all-MiniLM-L6-v2)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)

    metric = {"name": "semantic_similarity", "params": {"model": args.model}}
    with tempfile.TemporaryDirectory() as tmp:
        result = ragmeter.evaluate(args.data, [metric], db=f"sqlite:///{Path(tmp) / 'r.db'}")
    key = result.metrics[0]
    rows = [(s, sc.value) for s, sc in zip(result.samples, result.scores[key], strict=True)
            if s.label is not None and sc.value is not None]
    if len(rows) < 2:
        raise SystemExit(f"{args.data}: fewer than two samples with both a label and a similarity")
    sims = np.array([v for _, v in rows])
    labels = np.array([s.label for s, _ in rows])
    report = separation_report(sims, labels)

    by_kind: dict[str, list[float]] = defaultdict(list)
    for s, v in rows:
        kind = s.metadata.get("answer_kind")
        if kind is not None:
            by_kind[str(kind)].append(v)
    report["mean_by_answer_kind"] = {k: {"n": len(v), "mean": float(np.mean(v)), "min": float(np.min(v)),
                                         "max": float(np.max(v))} for k, v in sorted(by_kind.items())}
    enc = get_encoder(args.model)
    report["pairs"] = []
    for a, b in PAIRS:
        x = enc.encode([a, b])
        report["pairs"].append({"a": a, "b": b, "cosine": float(x[0] @ x[1])})
    report.update(dataset=str(args.data), model=enc.model_id, embeddings=result.extra.get("embeddings"))

    if not args.json:
        print(f"dataset {args.data}: {report['n']} labelled answers, {report['n_correct']} correct; model {enc.model_id}")
        print(f"ROC AUC                          {report['roc_auc']:.3f}")
        print(f"best threshold (fit on this data) {report['best_threshold']:.3f} -> accuracy {report['best_accuracy']:.3f}")
        print(f"threshold fit on other folds      accuracy {report['cv_accuracy']:.3f} ({report['cv_folds']}-fold)")
        print(f"always the majority class         accuracy {report['majority_accuracy']:.3f}")
        for t, acc in report["accuracy_at"].items():
            print(f"fixed threshold {t:<5}             accuracy {acc:.3f}")
        for k, v in report["mean_by_answer_kind"].items():
            print(f"  {k:<11} n={v['n']:<3} mean {v['mean']:.3f}  min {v['min']:.3f}  max {v['max']:.3f}")
        for p in report["pairs"]:
            print(f"  cos({p['a']!r}, {p['b']!r}) = {p['cosine']:.4f}")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
