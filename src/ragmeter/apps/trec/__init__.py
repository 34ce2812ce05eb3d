"""The trec_eval drop-in (``ragmeter trec``): TREC qrels/run files, dicts and DataFrames in,
trec_eval's numbers and output format out.

Conventions are those of trec_eval 9.0.x (the version pytrec_eval bundles): documents ranked by
score descending with ties broken by docid descending; a document is relevant when its qrels
grade is at least the relevance level (1; ``-l``); unjudged documents are non-relevant; queries
evaluated are those present in both files, in qid order; queries in the qrels whose documents
are all non-relevant are evaluated (they score 0) and count in the averages; ``complete``
(``-c``) averages over every qrels query, and a query missing from the run is evaluated as an
empty ranking, as trec_eval 10.0 does: ``-q`` prints its lines too, in qid order, with
``num_rel`` = its relevant documents and every other value 0 (trec_eval 9.0.x averaged the same
way but printed no lines for it); ``max_docs`` (``-M``) keeps the
top documents of each query. Values print as ``measure<TAB>qid<TAB>value`` with the measure name
left-aligned in 22 characters and 4 decimals.

The files are read by :mod:`ragmeter.io.trec`, a run file is evaluated block by block of whole
queries (:mod:`.blocks`), each query's values and the averages are trec_eval's measures of
:mod:`ragmeter.metrics.retrieval.trec_measures`, and the text is built column-wise (:mod:`.text`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.apps.trec.text import format_lines
from ragmeter.core.errors import DatasetError, MetricError
from ragmeter.io.trec import Columns, as_columns, from_numpy, read_qrels, read_run
from ragmeter.metrics.retrieval.relevance import NOT_RETRIEVED, RelevanceMatrix
from ragmeter.metrics.retrieval.trec_measures import (
    COUNTS,
    MEASURES,
    NICKNAMES,
    averages,
    parse_measures,
    query_values,
)

__all__ = ["MEASURES", "NICKNAMES", "NOT_RETRIEVED", "Columns", "RelevanceMatrix", "TrecResult", "as_columns",
           "evaluate", "parse_measures", "read_qrels", "read_run"]


# ---------------------------------------------------------------------------- evaluation
@dataclass
class TrecResult:
    """Per-query values and trec_eval averages of one evaluation.

    Attributes:
        qids: evaluated queries, in trec_eval's order.
        values: ``{value name (P_5, map ...): array over qids}``.
        summary: ``{value name: value over all queries}`` (as trec_eval's ``all`` line).
        measures: the parsed measures (``{measure: cutoffs}``).
        run_id: the run's tag, when known.
        missing: with ``complete``: the qrels queries the run has no result for, each with its
            number of relevant documents (grade >= the relevance level). trec_eval evaluates them
            as an empty ranking: ``num_rel`` is that number, every other value 0.
    """

    qids: list[str]
    values: dict[str, np.ndarray]
    summary: dict[str, float | int | str]
    measures: dict[str, tuple[float, ...] | None]
    run_id: str | None = None
    names: dict[str, list[str]] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)

    def _rows(self) -> tuple[list[str], np.ndarray]:
        """Query ids in trec_eval's print order (strcmp, i.e. code point order: the qrels queries
        with ``complete``) and each one's row in ``values`` (-1: missing from the run)."""
        if not self.missing:
            return self.qids, np.arange(len(self.qids))
        rows = sorted([(q, i) for i, q in enumerate(self.qids)] + [(q, -1) for q in self.missing])
        return [q for q, _ in rows], np.fromiter((i for _, i in rows), dtype=np.int64, count=len(rows))

    def _value(self, name: str, qid: str, row: int | None) -> float:
        if row is not None:
            return float(self.values[name][row])
        return float(self.missing[qid]) if name == "num_rel" else 0.0

    def per_query(self) -> dict[str, dict[str, float]]:
        """``{qid: {value name: value}}`` as pytrec_eval returns it (with ``complete``, also the
        qrels queries missing from the run, as trec_eval -c -q prints them)."""
        cols = [(n, v.tolist()) for n, v in self.values.items()]
        out = {q: {n: v[i] for n, v in cols} for i, q in enumerate(self.qids)}
        for q in self.missing:
            out[q] = {n: self._value(n, q, None) for n in self.values}
        return out

    def text(self, per_query: bool = False, summary: bool = True, chunk: int = 20_000) -> Iterator[str]:
        """trec_eval's output, in pieces of ``chunk`` queries: each piece formatted column-wise
        (numpy), not line by line."""
        if per_query:
            cols = [n for m in self.measures for n in self.names.get(m, [])
                    if m not in ("gm_map", "runid", "num_q")]
            qids, rows = self._rows()
            for lo in range(0, len(qids) if cols else 0, chunk):
                part = rows[lo:lo + chunk]
                mat = np.zeros((len(part), len(cols)))
                have = part >= 0
                for j, n in enumerate(cols):
                    mat[have, j] = self.values[n][part[have]]
                    if n == "num_rel" and not have.all():
                        mat[~have, j] = [self.missing[qids[lo + k]] for k in np.flatnonzero(~have)]
                yield format_lines(cols, qids[lo:lo + chunk], mat, COUNTS)
        if summary:
            out: list[str] = []
            for m in self.measures:
                for n in self.names.get(m, []):
                    val = self.summary[n]
                    if isinstance(val, str):
                        out.append(f"{n:<22}\tall\t{val}\n")
                    else:
                        out.append(_line(n, "all", val, n in COUNTS) + "\n")
            yield "".join(out)

    def lines(self, per_query: bool = False, summary: bool = True) -> list[str]:
        """trec_eval's output lines (without newlines)."""
        return "".join(self.text(per_query, summary)).splitlines()

    def to_dict(self, per_query: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"summary": dict(self.summary), "n_queries": len(self.qids)}
        if per_query:
            d["per_query"] = {q: {n: _json_float(x) for n, x in row.items()}
                              for q, row in self.per_query().items()}
        d["summary"] = {n: _json_float(x) if isinstance(x, float) else x for n, x in self.summary.items()}
        return d


def _json_float(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _line(name: str, qid: str, value: float, is_count: bool) -> str:
    if is_count:
        return f"{name:<22}\t{qid}\t{int(value)}"
    if math.isnan(value):
        return f"{name:<22}\t{qid}\t{'-nan':>6}"
    return f"{name:<22}\t{qid}\t{value:6.4f}"


def evaluate(qrels: Any, run: Any, measures: Sequence[str] | str = ("official",), *,
             relevance_level: int = 1, complete: bool = False,
             max_docs: int | None = None, workers: int | None = None) -> TrecResult:
    """Evaluate a run against qrels exactly as trec_eval does.

    A run file is read and evaluated in blocks of whole queries on ``workers`` threads (default:
    the cores available, at most 4), so memory holds a few blocks, not the file; a file whose
    queries are not each in one stretch of lines, or whose lines need the tolerant reader (tabs,
    comments), is read whole instead.

    Args:
        qrels: TREC qrels path, DataFrame (query id, doc id, relevance columns) or
            ``{qid: {docid: grade}}``.
        run: TREC run path, DataFrame (query id, doc id, score columns) or ``{qid: {docid: score}}``.
        measures: trec measure names (``map``, ``P_5``, ``P.5,10``, ``ndcg_cut_10``, ``recip_rank``,
            ``Rprec``, ``recall_100``, ``success_1``, ``ndcg``, ``bpref`` ...; ``official``).
        relevance_level: grades at or above it are relevant (``-l``).
        complete: average over every query of the qrels, missing ones scoring 0 (``-c``).
        max_docs: evaluate only the top ``max_docs`` documents of each query (``-M``).
        workers: threads evaluating blocks (1: none).

    Returns:
        A :class:`TrecResult`.

    Raises:
        DatasetError: unreadable input, duplicate documents, no query in common.
        ConfigError: unknown measure.

    Example:
        >>> r = evaluate({"q1": {"d1": 1, "d2": 1}}, {"q1": {"d1": 0.9, "d3": 0.5}}, ["map", "P_2"])
        >>> r.summary["map"], r.summary["P_2"]
        (0.5, 0.5)
    """
    parsed = parse_measures([measures] if isinstance(measures, str) else measures)
    if relevance_level < 0:
        raise MetricError(f"relevance_level must be >= 0, got {relevance_level}")
    if max_docs is not None and max_docs < 0:
        raise MetricError(f"max_docs must be >= 0, got {max_docs}")
    if isinstance(qrels, Mapping) and isinstance(run, Mapping):
        m = RelevanceMatrix.from_dicts(qrels, run, relevance_level=relevance_level, max_docs=max_docs)
        if m.n_queries == 0:
            raise DatasetError("no query has both results in <run dict> and judgements in <qrels dict>")
        n_all = sum(1 for d in qrels.values() if d) if complete else m.n_queries
        rel_by_q = None if not complete else {
            str(q): sum(1 for g in d.values() if math.trunc(g) >= 1) for q, d in qrels.items()}
        res = _result(list(m.qids), query_values(m, parsed), parsed, complete=complete,
                      n_qrels_queries=n_all, rel_by_q=rel_by_q, run_id=None)
        if complete:
            present = set(m.qids)
            res.missing = {str(q): sum(1 for g in d.values() if math.trunc(g) >= relevance_level)
                           for q, d in qrels.items() if d and str(q) not in present}
        return res
    return _evaluate_columns(qrels, run, parsed, relevance_level=relevance_level, complete=complete,
                             max_docs=max_docs, workers=workers)


def _evaluate_columns(qrels: Any, run: Any, parsed: dict[str, tuple[float, ...] | None], *,
                      relevance_level: int, complete: bool, max_docs: int | None,
                      workers: int | None) -> TrecResult:
    from ragmeter.apps.trec import blocks as B

    qc = as_columns(qrels, "qrels")
    ix = B.QrelsIndex.build(qc.qid, qc.doc, qc.value, qc.name)
    del qc  # the index holds what is needed
    opts = B.Options(relevance_level, max_docs, str(run) if isinstance(run, str | Path) else "",
                     lambda m: query_values(m, parsed))
    got = None
    if isinstance(run, str | Path):
        try:
            got = B.evaluate_run_file(ix, Path(run), opts, workers=workers)
        except (B.Fallback, OSError):
            got = None  # the whole-file reader takes over (and names what is wrong, if anything)
    if got is None:
        rc = as_columns(run, "run")
        opts.run_name = rc.name
        qi, values = B.evaluate_columns(ix, rc.qid, rc.doc, rc.value, opts, workers=workers)
        run_id = rc.run_id
    else:
        qi, values, run_id = got
    ix.check_duplicates(qi)
    if len(qi) == 0:
        raise DatasetError(f"no query has both results in {opts.run_name} and judgements in {ix.name}")
    qids = ix.names.take(from_numpy(qi)).to_pylist()
    n_all, rel_by_q, at_level = (_qrels_queries(ix, relevance_level) if complete
                                 else (len(qi), None, None))
    res = _result(qids, values, parsed, complete=complete, n_qrels_queries=n_all, rel_by_q=rel_by_q,
                  run_id=run_id)
    if at_level is not None:
        present = set(qids)
        res.missing = {q: n for q, n in at_level.items() if q not in present}
    return res


def _qrels_queries(ix: Any, level: int) -> tuple[int, dict[str, int], dict[str, int]]:
    """For ``-c``: the number of qrels queries and, per query, its documents graded >= 1 and
    its documents graded >= ``level`` (``ix``: the qrels' :class:`.blocks.QrelsIndex`)."""
    nq = len(ix.keys)
    rows_q = np.repeat(np.arange(nq), np.diff(ix.start))
    grades = np.trunc(ix.grade)
    counts = np.bincount(rows_q[grades >= 1], minlength=nq)
    at_level = np.bincount(rows_q[grades >= level], minlength=nq)
    names = ix.names.to_pylist()
    return (nq, dict(zip(names, counts.tolist(), strict=True)),
            dict(zip(names, at_level.tolist(), strict=True)))


def _result(qids: list[str], values: dict[str, np.ndarray], parsed: dict[str, tuple[float, ...] | None], *,
            complete: bool, n_qrels_queries: int, rel_by_q: dict[str, int] | None,
            run_id: str | None) -> TrecResult:
    """The :class:`TrecResult` of per-query values (queries in trec_eval's order)."""
    names, summary = averages(values, parsed, n_eval=len(qids), complete=complete, n_qrels_queries=n_qrels_queries,
                              rel_by_q=rel_by_q, run_id=run_id)
    return TrecResult(qids, values, summary, parsed, run_id, names)
