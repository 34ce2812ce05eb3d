"""Retrieval evaluation engine: relevance matrices, ranking measures, trec_eval compatibility.

``RelevanceMatrix`` holds, for a batch of queries, the rank at which every judged item was first
retrieved; every measure in :mod:`ragmeter.retrieval.measures` is a numpy reduction of it.
:func:`evaluate` reproduces trec_eval on TREC files, dicts and DataFrames. Per-sample metric
functions (``precision_at_k`` ...) live in :mod:`ragmeter.metrics.retrieval`.
"""

from ragmeter.retrieval.engine import NOT_RETRIEVED, RelevanceMatrix
from ragmeter.retrieval.trec import TrecResult, evaluate, parse_measures, read_qrels, read_run

__all__ = ["NOT_RETRIEVED", "RelevanceMatrix", "TrecResult", "evaluate", "parse_measures",
           "read_qrels", "read_run"]
