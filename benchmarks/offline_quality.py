"""How well every offline answer-quality metric agrees with people on the bundled human-labelled
data (``example-human``: SQuALITY, 300 long answers, 3 raters), beside the raters' own agreement.

Runs ``ragmeter meta-eval example-human`` (the Python call behind it) with the lexical baselines,
the sentence-embedding similarity, BERTScore, the claim metrics and ``quality_offline`` (its figure
grouped-cross-validated: each answer scored by a model fitted on folds without its question), and
prints one row per metric: Pearson, Spearman and Kendall with 95% bootstrap intervals over items.
It also times BERTScore against the ``bert-score`` package on the same 100 pairs (same model folder
and layer) and reports the largest difference. The last line is one JSON object.

    python benchmarks/offline_quality.py [--label human|human_coverage|human_overall] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

METRICS = ("token_f1", "rouge1_fmeasure", "semantic_similarity", "bertscore_precision", "bertscore_recall",
           "bertscore_f1", "claim_recall", "claim_precision", "claim_f1", "quality_offline")


def bertscore_parity(n: int = 100) -> dict[str, float]:
    """ragmeter's BERTScore and bert-score's on ``n`` shortened pairs of example-human: max |diff|, times."""
    from ragmeter.analysis.meta_eval.reader import read_labels
    from ragmeter.embed import bundled_model_path
    from ragmeter.metrics.bertscore import bertscore

    samples = read_labels("example-human").samples[:n]
    cands = [" ".join((s.answer or "").split()[:40]) for s in samples]
    refs = [" ".join(s.references[0].split()[:40]) for s in samples]
    t0 = time.perf_counter()
    mine = bertscore(cands, refs)["f1"]
    t_mine = time.perf_counter() - t0
    try:
        import bert_score
    except ImportError:
        return {"bertscore_s": round(t_mine, 2)}
    t0 = time.perf_counter()
    _, _, f = bert_score.score(cands, refs, model_type=str(bundled_model_path()), num_layers=6)
    t_ref = time.perf_counter() - t0
    return {"bertscore_max_abs_difference": float(np.abs(mine - f.numpy()).max()),
            "bertscore_s": round(t_mine, 2), "bert_score_package_s": round(t_ref, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="human")
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    from ragmeter.analysis.meta_eval.evaluation import meta_evaluate

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rec = meta_evaluate("example-human", list(METRICS), label=args.label, db=f"sqlite:///{Path(tmp) / 'q.db'}",
                            n_bootstrap=args.bootstrap, sort="pearson")
        elapsed = time.perf_counter() - t0
    rows = {}
    print(f"{'metric':<22} {'Pearson':>22} {'Spearman':>22} {'Kendall':>22}")
    for key in rec.ranking:
        m = rec.metrics[key]
        cells = []
        row = {}
        for s in ("pearson", "spearman", "kendall"):
            st = m.stat(s)
            row[s] = [st.value, st.ci_low, st.ci_high]
            cells.append(f"{st.value:.3f} [{st.ci_low:.3f}, {st.ci_high:.3f}]")
        row["cross_validated"] = bool(m.cross_validation)
        rows[key] = row
        print(f"{key + (' (cv)' if m.cross_validation else ''):<22} " + " ".join(f"{c:>22}" for c in cells))
    ceiling = rec.human_ceiling or {}
    for part in ("rater_vs_rater", "leave_one_out"):
        c = ceiling.get(part)
        if c:
            print(f"{'human ' + part:<22} {c['pearson']['value']:.3f}")
    parity = bertscore_parity()
    print(json.dumps({"label": args.label, "n_items": rec.n_items, "metrics": rows, "seconds": round(elapsed, 1),
                      "human_rater_vs_rater_pearson": (ceiling.get("rater_vs_rater") or {}).get("pearson", {}).get("value"),
                      **parity}))


if __name__ == "__main__":
    main()
