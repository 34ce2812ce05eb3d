"""trec_eval-compatible evaluation: TREC qrels/run files, dicts and DataFrames in, trec_eval's
numbers and output format out.

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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.errors import ConfigError, DatasetError, MetricError
from ragmeter.retrieval import measures as M
from ragmeter.retrieval.engine import RelevanceMatrix

_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_IPREC = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

#: measures in trec_eval's print order; value: default cutoffs (None: not a cutoff measure)
MEASURES: dict[str, tuple[float, ...] | None] = {
    "runid": None, "num_q": None, "num_ret": None, "num_rel": None, "num_rel_ret": None,
    "map": None, "gm_map": None, "Rprec": None, "bpref": None, "recip_rank": None,
    "iprec_at_recall": _IPREC, "P": _CUTS, "recall": _CUTS, "ndcg": None, "ndcg_cut": _CUTS,
    "map_cut": _CUTS, "success": (1, 5, 10), "set_P": None, "set_recall": None, "set_F": None,
    "num_nonrel_judged_ret": None,
}
_COUNTS = {"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"}
NICKNAMES = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec",
                 "bpref", "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "set_P", "set_recall", "set_F"),
}
_MIN_GEO_MEAN = 0.00001


def parse_measures(specs: Iterable[str]) -> dict[str, tuple[float, ...] | None]:
    """Turn ``-m`` arguments into ``{measure: cutoffs}`` in trec_eval's print order.

    Accepts trec_eval's ``P.5,10`` form, the printed ``P_5`` form, a bare cutoff measure (its
    default cutoffs, unless cutoffs are given for it in another argument) and the nicknames
    ``official`` and ``set``. Cutoffs given in several arguments are merged (trec_eval keeps only
    the first ``-m`` with cutoffs of a measure).

    Raises:
        ConfigError: an unknown measure or a bad cutoff.
    """
    chosen: dict[str, set[float] | None] = {}
    for raw in specs:
        for spec in [s.strip() for s in str(raw).split() if s.strip()]:
            if spec in NICKNAMES:
                for name in NICKNAMES[spec]:
                    _add(chosen, name, None)
                continue
            name, params = spec, None
            if "." in spec and spec.split(".", 1)[0] in MEASURES:
                name, rest = spec.split(".", 1)
                params = [p for p in rest.split(",")]
            elif spec not in MEASURES:
                base = next((b for b in sorted(MEASURES, key=len, reverse=True)
                             if MEASURES[b] is not None and spec.startswith(b + "_")), None)
                if base is None:
                    raise ConfigError(f"unknown trec measure {spec!r}; supported: "
                                      f"{', '.join(MEASURES)} (cutoff forms like P_5 or P.5,10) "
                                      f"and the nicknames {', '.join(NICKNAMES)}")
                name, params = base, [spec[len(base) + 1:]]
            if params is not None and MEASURES[name] is None:
                raise ConfigError(f"trec measure {name!r} takes no cutoff (got {spec!r})")
            _add(chosen, name, None if params is None else [_cutoff(name, p, spec) for p in params])
    out: dict[str, tuple[float, ...] | None] = {}
    for name in MEASURES:
        if name in chosen:
            cuts = chosen[name]
            out[name] = None if MEASURES[name] is None else tuple(sorted(cuts or MEASURES[name] or ()))
    return out


def _add(chosen: dict[str, set[float] | None], name: str, cuts: list[float] | None) -> None:
    # a bare cutoff measure means its default cutoffs unless cutoffs are given for it somewhere
    if MEASURES[name] is None:
        chosen[name] = None
        return
    cur = chosen.setdefault(name, set())
    assert cur is not None
    if cuts is not None:
        cur.update(cuts)


def _cutoff(name: str, text: str, spec: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"bad cutoff {text!r} in trec measure {spec!r}") from None
    if name == "iprec_at_recall":
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"recall level must be in [0, 1], got {text!r} in {spec!r}")
        return v
    if v != int(v) or v < 1:
        raise ConfigError(f"cutoff must be a positive integer, got {text!r} in {spec!r}")
    return int(v)


def _value_name(name: str, cut: float) -> str:
    return f"{name}_{cut:3.2f}" if name == "iprec_at_recall" else f"{name}_{int(cut)}"


# ---------------------------------------------------------------------------- readers
@dataclass
class Columns:
    """A run or qrels as columns: query ids, doc ids, and scores (run) or grades (qrels)."""

    qid: Any
    doc: Any
    value: Any
    name: str
    run_id: str | None = None

    def __len__(self) -> int:
        return len(self.qid)


def read_run(path: str | Path) -> Columns:
    """Read a TREC run file (``qid Q0 docid rank score tag``; fields after the tag are ignored)."""
    return _read(Path(path), kind="run")


def read_qrels(path: str | Path) -> Columns:
    """Read a TREC qrels file (``qid iter docid rel``)."""
    return _read(Path(path), kind="qrels")


def _read(path: Path, kind: str) -> Columns:

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read {kind} file: {exc.strerror or exc}", file=str(path)) from None
    if not data or data.isspace():
        raise DatasetError(f"the {kind} file is empty", file=str(path))
    # fast path: single-space separated lines; anything else (tabs, runs of blanks, comments,
    # short lines) fails the parse or the checks below and is normalised first
    table = _parse(data, kind)
    if table is None or not _plausible(table, data, kind):
        data = _normalise(data)
        table = _parse(data, kind)
        if table is None or not _plausible(table, data, kind):
            return _read_slow(data, path, kind)
    run_id = _last_run_id(data) if kind == "run" else None
    return Columns(table.column(0), table.column(1), table.column(2), str(path), run_id)


def _parse(data: bytes, kind: str) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    want = (0, 2, 4) if kind == "run" else (0, 2, 3)
    try:
        return pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(column_names=["f0", "f1", "f2", "f3"] if kind == "qrels" else None,
                                          autogenerate_column_names=kind == "run"),
            parse_options=pcsv.ParseOptions(delimiter=" ", quote_char=False, ignore_empty_lines=True),
            convert_options=pcsv.ConvertOptions(
                include_columns=[f"f{i}" for i in want],
                column_types={f"f{want[0]}": pa.string(), f"f{want[1]}": pa.string(),
                              f"f{want[2]}": pa.float64()},
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowKeyError, KeyError):
        return None


def _plausible(table: Any, data: bytes, kind: str) -> bool:
    """Rules out what a lenient single-space parse could misread: empty fields (leading or
    doubled blanks), comment lines, run lines without a tag (every line has the field count of
    the first one, or the parse failed)."""
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return False
    first = data[:data.find(b"\n")] if b"\n" in data else data
    if kind == "run" and len(first.split()) < 6:
        return False
    q, d = table.column(0), table.column(1)
    if pc.any(pc.equal(pc.utf8_length(q), 0)).as_py() or pc.any(pc.equal(pc.utf8_length(d), 0)).as_py():
        return False
    return not pc.any(pc.starts_with(q, "#")).as_py()


def _normalise(data: bytes) -> bytes:
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    data = re.sub(rb"(?m)^[ \t]*#[^\n]*(\n|$)", b"", data)
    data = re.sub(rb"[ \t\f\v]+", b" ", data)
    return re.sub(rb"(?m)^ | $", b"", data)


def _last_run_id(data: bytes) -> str | None:
    """The tag of the last data line (trec_eval keeps the last one)."""
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        parts = data[start:end].split()
        if len(parts) >= 6 and not parts[0].startswith(b"#"):
            return parts[5].decode("utf-8", "replace")
        end = start - 1 if start > 0 else 0
        if start == 0:
            break
    return None


def _read_slow(data: bytes, path: Path, kind: str) -> Columns:
    """Line-by-line reader: used for files pyarrow refuses, to name the bad line."""
    qids: list[str] = []
    docs: list[str] = []
    vals: list[float] = []
    run_id = None
    for lineno, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        parts = raw.split()
        if not parts or parts[0].startswith("#"):
            continue
        if kind == "run":
            if len(parts) < 6:
                raise DatasetError(f"malformed run line (expected 'qid Q0 docid rank score tag'): {raw!r}",
                                   file=str(path), line=lineno)
            try:
                vals.append(float(parts[4]))
            except ValueError:
                raise DatasetError(f"score {parts[4]!r} is not a number", file=str(path), line=lineno,
                                   field="score") from None
            run_id = parts[5]
        else:
            if len(parts) != 4:
                raise DatasetError(f"malformed qrels line (expected 'qid iter docid rel'): {raw!r}",
                                   file=str(path), line=lineno)
            try:
                vals.append(float(parts[3]))
            except ValueError:
                raise DatasetError(f"relevance {parts[3]!r} is not a number", file=str(path),
                                   line=lineno, field="rel") from None
        qids.append(parts[0])
        docs.append(parts[2])
    if not qids:
        raise DatasetError(f"the {kind} file has no data lines", file=str(path))
    return Columns(qids, docs, np.asarray(vals, dtype=np.float64), str(path), run_id)


_QID = ("qid", "query_id", "q_id", "query", "topic")
_DOC = ("docid", "doc_id", "docno", "doc", "document_id", "pid", "passage_id")
_GRADE = ("rel", "relevance", "grade", "label", "judgment", "score")
_SCORE = ("score", "sim", "similarity", "rank_score")


def _frame_columns(df: Any, kind: str) -> Columns:
    cols = {str(c).lower(): c for c in df.columns}

    def pick(options: tuple[str, ...], what: str) -> Any:
        for o in options:
            if o in cols:
                return df[cols[o]]
        raise DatasetError(f"{kind} DataFrame has no {what} column (expected one of {', '.join(options)}; "
                           f"got {', '.join(map(str, df.columns))})", file=f"<{kind} DataFrame>")

    value = pick(_SCORE if kind == "run" else _GRADE, "score" if kind == "run" else "relevance")
    run_id = None
    for tag in ("tag", "run_id", "runid", "run"):
        if kind == "run" and tag in cols and len(df):
            run_id = str(df[cols[tag]].iloc[-1])
    return Columns(pick(_QID, "query id").astype(str).to_numpy(), pick(_DOC, "doc id").astype(str).to_numpy(),
                   value.to_numpy(dtype=np.float64), f"<{kind} DataFrame>", run_id)


def _dict_columns(d: Mapping[str, Mapping[str, float]], kind: str) -> Columns:
    qids, docs, vals = [], [], []
    for q, items in d.items():
        for doc, v in items.items():
            qids.append(str(q))
            docs.append(str(doc))
            vals.append(v)
    return Columns(qids, docs, np.asarray(vals, dtype=np.float64), f"<{kind} dict>")


def as_columns(obj: Any, kind: str) -> Columns:
    """A run or qrels given as a path, a DataFrame, a ``{qid: {docid: value}}`` dict or Columns."""
    if isinstance(obj, Columns):
        return obj
    if isinstance(obj, str | Path):
        return _read(Path(obj), kind)
    if isinstance(obj, Mapping):
        return _dict_columns(obj, kind)
    if hasattr(obj, "columns") and hasattr(obj, "iloc"):
        return _frame_columns(obj, kind)
    raise DatasetError(f"cannot read a {kind} from {type(obj).__name__}: give a TREC file path, a "
                       "pandas DataFrame or a {qid: {docid: value}} dict")


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

    def _rows(self) -> list[tuple[str, int | None]]:
        # trec_eval walks the qrels queries in qid order (strcmp, i.e. code point order); a
        # query the run lacks has no row in ``values`` (None)
        rows: list[tuple[str, int | None]] = [(q, i) for i, q in enumerate(self.qids)]
        if self.missing:
            rows = sorted(rows + [(q, None) for q in self.missing], key=lambda r: r[0])
        return rows

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

    def lines(self, per_query: bool = False, summary: bool = True) -> list[str]:
        """trec_eval's output lines (without newlines)."""
        out: list[str] = []
        if per_query:
            cols = [(n, n in _COUNT_VALUES) for m in self.measures
                    for n in self.names.get(m, []) if m not in ("gm_map", "runid", "num_q")]
            for q, i in self._rows():
                for n, is_count in cols:
                    out.append(_line(n, q, self._value(n, q, i), is_count))
        if summary:
            for m in self.measures:
                for n in self.names.get(m, []):
                    val = self.summary[n]
                    if isinstance(val, str):
                        out.append(f"{n:<22}\tall\t{val}")
                    else:
                        out.append(_line(n, "all", val, n in _COUNT_VALUES))
        return out

    def to_dict(self, per_query: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"summary": dict(self.summary), "n_queries": len(self.qids)}
        if per_query:
            d["per_query"] = {q: {n: _json_float(x) for n, x in row.items()}
                              for q, row in self.per_query().items()}
        d["summary"] = {n: _json_float(x) if isinstance(x, float) else x for n, x in self.summary.items()}
        return d


_COUNT_VALUES = _COUNTS


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
             max_docs: int | None = None) -> TrecResult:
    """Evaluate a run against qrels exactly as trec_eval does.

    Args:
        qrels: TREC qrels path, DataFrame (query id, doc id, relevance columns) or
            ``{qid: {docid: grade}}``.
        run: TREC run path, DataFrame (query id, doc id, score columns) or ``{qid: {docid: score}}``.
        measures: trec measure names (``map``, ``P_5``, ``P.5,10``, ``ndcg_cut_10``, ``recip_rank``,
            ``Rprec``, ``recall_100``, ``success_1``, ``ndcg``, ``bpref`` ...; ``official``).
        relevance_level: grades at or above it are relevant (``-l``).
        complete: average over every query of the qrels, missing ones scoring 0 (``-c``).
        max_docs: evaluate only the top ``max_docs`` documents of each query (``-M``).

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
    run_id = None
    if isinstance(qrels, Mapping) and isinstance(run, Mapping):
        m = RelevanceMatrix.from_dicts(qrels, run, relevance_level=relevance_level, max_docs=max_docs)
        n_all = sum(1 for d in qrels.values() if d) if complete else m.n_queries
        rel_by_q = None if not complete else {
            str(q): sum(1 for g in d.values() if math.trunc(g) >= 1) for q, d in qrels.items()}
        at_level = None if not complete else {
            str(q): sum(1 for g in d.values() if math.trunc(g) >= relevance_level)
            for q, d in qrels.items() if d}
        qrels_name, run_name = "<qrels dict>", "<run dict>"
    else:
        qc, rc = as_columns(qrels, "qrels"), as_columns(run, "run")
        run_id = rc.run_id
        m = RelevanceMatrix.from_columns(rc.qid, rc.doc, rc.value, qc.qid, qc.doc, qc.value,
                                         relevance_level=relevance_level, max_docs=max_docs,
                                         run_name=rc.name, qrels_name=qc.name)
        n_all, rel_by_q, at_level = (_qrels_queries(qc, relevance_level) if complete
                                     else (m.n_queries, None, None))
        qrels_name, run_name = qc.name, rc.name
    if m.n_queries == 0:
        raise DatasetError(f"no query has both results in {run_name} and judgements in {qrels_name}")
    res = _compute(m, parsed, complete=complete, n_qrels_queries=n_all, rel_by_q=rel_by_q,
                   run_id=run_id)
    if at_level is not None:
        present = set(m.qids)
        res.missing = {q: n for q, n in at_level.items() if q not in present}
    return res


def _qrels_queries(qc: Columns, level: int) -> tuple[int, dict[str, int], dict[str, int]]:
    """For ``-c``: the number of qrels queries and, per query, its documents graded >= 1 and
    its documents graded >= ``level``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    q = qc.qid if isinstance(qc.qid, pa.Array | pa.ChunkedArray) else pa.array(list(map(str, qc.qid)))
    if isinstance(q, pa.ChunkedArray):
        q = q.combine_chunks()
    uniq = pc.unique(q)
    grades = np.trunc(np.asarray(qc.value.to_numpy(zero_copy_only=False) if hasattr(qc.value, "to_numpy")
                                 else qc.value, dtype=np.float64))
    enc = pc.dictionary_encode(q)
    idx = enc.indices.to_numpy(zero_copy_only=False)
    counts = np.bincount(idx[grades >= 1], minlength=len(enc.dictionary))
    at_level = np.bincount(idx[grades >= level], minlength=len(enc.dictionary))
    names = [str(x) for x in enc.dictionary.to_pylist()]
    return (len(uniq), dict(zip(names, counts.tolist(), strict=True)),
            dict(zip(names, at_level.tolist(), strict=True)))


def _compute(m: RelevanceMatrix, parsed: dict[str, tuple[float, ...] | None], *, complete: bool,
             n_qrels_queries: int, rel_by_q: dict[str, int] | None, run_id: str | None) -> TrecResult:
    values: dict[str, np.ndarray] = {}
    names: dict[str, list[str]] = {}
    summary: dict[str, float | int | str] = {}
    n_eval = m.n_queries
    denom = n_qrels_queries if complete else n_eval

    def mean(v: np.ndarray) -> float:
        # trec_eval adds query values one by one, then divides
        return float(np.cumsum(v)[-1] / denom) if len(v) and denom else 0.0

    def put(name: str, v: np.ndarray, count: bool = False) -> None:
        v = np.nan_to_num(v, nan=0.0)
        values[name] = v
        if count:
            summary[name] = int(v.sum())
        else:
            summary[name] = mean(v)

    for meas, cuts in parsed.items():
        if meas == "runid":
            if run_id is not None:
                names[meas] = ["runid"]
                summary["runid"] = run_id
            continue
        if meas == "num_q":
            names[meas] = ["num_q"]
            summary["num_q"] = n_qrels_queries if complete else n_eval
            continue
        if cuts is None:
            names[meas] = [meas]
            if meas == "num_ret":
                put(meas, M.num_ret(m), True)
            elif meas == "num_rel":
                put(meas, M.num_rel(m), True)
                if complete and rel_by_q is not None:
                    # trec_eval 9.0 with -c: the total of every qrels query's documents graded
                    # >= 1, whatever -l says
                    summary[meas] = int(sum(rel_by_q.values()))
            elif meas == "num_rel_ret":
                put(meas, M.num_rel_ret(m), True)
            elif meas == "num_nonrel_judged_ret":
                put(meas, M.num_nonrel_judged_ret(m), True)
            elif meas == "map":
                put(meas, M.average_precision(m))
            elif meas == "gm_map":
                ap = np.nan_to_num(M.average_precision(m), nan=0.0)
                logs = np.log(np.maximum(ap, _MIN_GEO_MEAN))
                values[meas] = logs
                total = float(np.cumsum(logs)[-1]) if len(logs) else 0.0
                if complete:
                    total += (n_qrels_queries - n_eval) * math.log(_MIN_GEO_MEAN)
                summary[meas] = math.exp(total / denom) if denom else 0.0
            elif meas == "Rprec":
                put(meas, M.r_precision(m))
            elif meas == "bpref":
                put(meas, M.bpref(m))
            elif meas == "recip_rank":
                put(meas, M.reciprocal_rank(m))
            elif meas == "ndcg":
                put(meas, M.ndcg(m, None, "linear"))
            elif meas in ("set_P", "set_recall", "set_F"):
                rr, ret, rel = M.num_rel_ret(m), M.num_ret(m), M.num_rel(m)
                p = np.divide(rr, ret, out=np.zeros_like(rr), where=ret > 0)
                r = np.divide(rr, rel, out=np.zeros_like(rr), where=rel > 0)
                if meas == "set_P":
                    put(meas, p)
                elif meas == "set_recall":
                    put(meas, r)
                else:
                    put(meas, np.divide(2 * p * r, p + r, out=np.zeros_like(p), where=(p + r) > 0))
            continue
        names[meas] = [_value_name(meas, c) for c in cuts]
        if meas == "iprec_at_recall":
            table = M.iprec_at_recall(m, cuts)
            for j, n in enumerate(names[meas]):
                values[n] = table[:, j]
                summary[n] = mean(table[:, j])
            continue
        for c, n in zip(cuts, names[meas], strict=True):
            k = int(c)
            if meas == "P":
                put(n, M.precision(m, k))
            elif meas == "recall":
                put(n, M.recall(m, k))
            elif meas == "ndcg_cut":
                put(n, M.ndcg(m, k, "linear"))
            elif meas == "map_cut":
                put(n, M.average_precision(m, k))
            elif meas == "success":
                put(n, M.hit_rate(m, k))
    return TrecResult(list(m.qids), values, summary, parsed, run_id, names)
