"""A lean store: a run of the five lexical metrics costs at most 150 bytes of database file per
stored score (sizes are deterministic for given data; the figure for 30,000 samples is in
docs/internals.md, from benchmarks/store_size.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_size import METRICS, measure  # noqa: E402


def test_lexical_run_costs_at_most_150_bytes_per_score(tmp_path):
    got = measure(3000, tmp_path)
    assert got["n_scores"] == 3000 * len(METRICS)
    assert got["bytes_per_score"] <= 150, got
