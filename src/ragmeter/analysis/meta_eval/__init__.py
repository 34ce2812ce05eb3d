"""Meta-evaluation: how well each metric agrees with human judgement, beside how well people agree
among themselves (docs/meta-eval.md). ``read_labels`` reads pointwise and pairwise human-labelled
files, ``meta_evaluate`` scores them through the runner and measures the agreement,
``load_meta_eval`` / ``compare_meta_evals`` read stored results back."""

from ragmeter.analysis.meta_eval.evaluation import (
    compare_meta_evals,
    load_meta_eval,
    meta_evaluate,
    offline_metrics,
)
from ragmeter.analysis.meta_eval.reader import HumanLabels, read_labels

__all__ = ["HumanLabels", "compare_meta_evals", "load_meta_eval", "meta_evaluate", "offline_metrics", "read_labels"]
