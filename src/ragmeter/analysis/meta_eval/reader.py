"""Read human-labelled data for meta-evaluation: pointwise files (a sample and one or more human
scores) and pairwise files (a question, answers A and B, a preference), from one or more raters.

Pointwise: the sample fields are read as ``ragmeter eval`` reads them (ragas, DeepEval and the
other layouts of docs/formats.md, ``--map``); the label is a column of numbers (``human``), several
columns (one per rater: ``--label r1,r2``), an object ``{rater: score}``, a list (raters by
position), or a long layout with one row per item and rater (a ``rater`` column, or rows of one
id in order).

Pairwise: RAGChecker's human-preference layout (``instance_id``, ``query``, ``gt_answer``,
``model1: {"response"}``, ``model2: {"response"}``, ``<name>_label``; one row per item and rater; a
positive label prefers model2) and the common ``answer_a``/``answer_b`` and ``response_a``/
``response_b`` columns. A preference is a number (-2..2, positive for B) or ``A``/``B``/``tie``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import Sample
from ragmeter.io.readers import (
    BUNDLED,
    FIELD_ALIASES,
    bundled_path,
    iter_rows,
    parse_mapping,
    sample_from_dict,
)

#: label columns tried in order when ``--label`` is not given
POINTWISE_LABELS = ("human", "human_score", "human_label", "human_rating", "rating", "score", "label")
PAIRWISE_LABELS = ("preference", "overall_label", "human_preference", "label", "winner", "choice")
#: a column naming the rater in long layouts
RATER_COLUMNS = ("rater", "rater_id", "annotator", "annotator_id", "worker_id", "judge_id")
#: the two answers of a pairwise row, first pair present wins
PAIR_COLUMNS = (("model1", "model2"), ("answer_a", "answer_b"), ("response_a", "response_b"),
                ("answer1", "answer2"), ("response1", "response2"), ("output_a", "output_b"),
                ("completion_a", "completion_b"))
#: keys of an answer given as an object (RAGChecker: ``{"model_name", "response", ...}``)
_ANSWER_KEYS = ("response", "answer", "output", "text", "content")
_ITEM_ID = ("instance_id", "pair_id", "item_id", *FIELD_ALIASES["id"])
_PREFER_A = {"a", "model1", "model_a", "first", "left", "response_a", "answer_a", "1st"}
_PREFER_B = {"b", "model2", "model_b", "second", "right", "response_b", "answer_b", "2nd"}
_TIE = {"tie", "equal", "same", "both", "neither", "draw", "none", "="}
_TRUE = {"true", "yes", "y", "correct", "right", "t", "pass"}
_FALSE = {"false", "no", "n", "incorrect", "wrong", "f", "fail"}
#: ``--map`` targets of pairwise files beyond the sample fields
PAIR_TARGETS = ("answer_a", "answer_b")


@dataclass
class HumanLabels:
    """Human-labelled items ready to score.

    Attributes:
        kind: ``"pointwise"`` or ``"pairwise"``.
        source: the file (or bundled dataset name).
        label: the label column(s) read.
        items: item ids, in file order.
        raters: rater names, in first-seen order.
        ratings: ``(items, raters)`` labels, NaN where a rater did not rate an item.
        samples: pointwise: one sample per item; pairwise: answer A then answer B of each item
            (ids ``ITEM::A`` and ``ITEM::B``).
        lines: the first line of each item.
        rater_layout: how raters were found (``single``, ``columns``, ``object``, ``list``,
            ``rater column``, ``row order``).
    """

    kind: str
    source: str
    label: str
    items: list[str]
    raters: list[str]
    ratings: np.ndarray
    samples: list[Sample]
    lines: list[int] = field(default_factory=list)
    rater_layout: str = "single"

    @property
    def human(self) -> np.ndarray:
        """The label of each item: the mean over its raters."""
        counts = (~np.isnan(self.ratings)).sum(axis=1)
        return np.nansum(self.ratings, axis=1) / counts

    @property
    def binary(self) -> bool:
        """Whether every rating is 0 or 1 (then AUROC and F1 are computed)."""
        r = self.ratings[~np.isnan(self.ratings)]
        return self.kind == "pointwise" and r.size > 0 and bool(np.all((r == 0) | (r == 1)))

    def majority(self) -> np.ndarray:
        """The raters' majority 0/1 label of each item, NaN on a tie (binary labels)."""
        h = self.human
        return np.where(h > 0.5, 1.0, np.where(h < 0.5, 0.0, np.nan))

    def side_ids(self, item: str) -> tuple[str, str]:
        return f"{item}::A", f"{item}::B"


def _rating(v: Any, pairwise: bool, err: Any) -> float:
    """One rater's label as a number (NaN: not rated)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return math.nan
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int | float):
        if not math.isfinite(v):
            raise err(f"label must be a finite number, got {v!r}")
        return float(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if not s:
            return math.nan
        try:
            x = float(s)
        except ValueError:
            pass
        else:
            if math.isfinite(x):
                return x
            raise err(f"label must be a finite number, got {v!r}")
        words = ({**dict.fromkeys(_PREFER_A, -1.0), **dict.fromkeys(_PREFER_B, 1.0), **dict.fromkeys(_TIE, 0.0)}
                 if pairwise else {**dict.fromkeys(_TRUE, 1.0), **dict.fromkeys(_FALSE, 0.0)})
        if s in words:
            return words[s]
        allowed = "a number, A, B or tie" if pairwise else "a number or true/false"
        raise err(f"label must be {allowed}, got {v!r}")
    kind = {dict: "an object", list: "a list"}.get(type(v), type(v).__name__)
    raise err(f"label must be a number, got {kind}")


def _ratings_of(row: Mapping[str, Any], columns: Sequence[str], pairwise: bool,
                err: Any) -> tuple[list[tuple[str | None, float]], str]:
    """``[(rater or None, value)]`` of one row and the layout they came in."""
    if len(columns) > 1:
        return [(c, _rating(row.get(c), pairwise, lambda m, c=c: err(c, m))) for c in columns], "columns"
    col = columns[0]
    v = row.get(col)
    if isinstance(v, Mapping):
        if not v:
            raise err(col, "the object of ratings is empty")
        return [(str(k), _rating(x, pairwise, lambda m, k=k: err(f"{col}.{k}", m))) for k, x in v.items()], "object"
    if isinstance(v, list | tuple):
        if not v:
            raise err(col, "the list of ratings is empty")
        return [(f"rater{i + 1}", _rating(x, pairwise, lambda m, i=i: err(f"{col}[{i}]", m)))
                for i, x in enumerate(v)], "list"
    return [(None, _rating(v, pairwise, lambda m: err(col, m)))], "single"


def _answer_text(v: Any, err: Any) -> str:
    if isinstance(v, Mapping):
        for k in _ANSWER_KEYS:
            if isinstance(v.get(k), str):
                return v[k]
        raise err(f"an answer object needs one of {', '.join(_ANSWER_KEYS)} as text (keys: {', '.join(map(str, v))})")
    if isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return str(v)
    raise err(f"expected the answer as text or an object with a 'response', got {type(v).__name__}")


def _source_rows(data: Any, fmt: str | None) -> tuple[str, Iterable[tuple[int, Any]]]:
    if isinstance(data, str | Path):
        name = str(data)
        path = bundled_path(name) if name in BUNDLED and not Path(data).exists() else Path(data)
        rows, _ = iter_rows(path, fmt)
        return (name if name in BUNDLED and not Path(data).exists() else str(path)), rows
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas
        return "<DataFrame>", enumerate(data.to_dict("records"), start=1)
    if isinstance(data, Mapping) or isinstance(data, str | bytes):
        raise DatasetError("expected a file path, a DataFrame or a list of rows")
    return "<list>", enumerate(data, start=1)


def _split_mapping(mapping: Mapping[str, str] | Iterable[str] | None, pairwise: bool) -> tuple[dict[str, str], dict[str, str]]:
    """``(sample-field mapping, answer_a/answer_b mapping)``."""
    if not mapping:
        return {}, {}
    items = mapping.items() if isinstance(mapping, Mapping) else [m.split("=", 1) if "=" in m else (m, "")
                                                                   for m in mapping]
    pair, rest = {}, {}
    for k, v in items:
        k, v = k.strip(), v.strip()
        if k in PAIR_TARGETS:
            if not pairwise:
                raise DatasetError(f"--map {k}=... is for pairwise files (--pairwise)")
            pair[k] = v
        else:
            rest[k] = v
    return parse_mapping(rest), pair


def read_labels(data: Any, *, pairwise: bool = False, label: str | Sequence[str] | None = None,
                rater: str | None = None, mapping: Mapping[str, str] | Iterable[str] | None = None,
                fmt: str | None = None) -> HumanLabels:
    """Read a human-labelled file (or bundled dataset, DataFrame, list of rows) for meta-evaluation.

    Args:
        data: a path (``.jsonl``, ``.json``, ``.csv``, ``.tsv``, ``.parquet``, gzipped or not), a
            bundled dataset name (``example-human``), a pandas DataFrame or a list of mappings.
        pairwise: the rows compare two answers (see the module docstring).
        label: the label column, or several (one per rater), comma-separated or a list; default:
            the first of :data:`POINTWISE_LABELS` (:data:`PAIRWISE_LABELS`) in the first row.
        rater: the column naming the rater in a long layout; default: the first of
            :data:`RATER_COLUMNS` present. Without one, rows that share an item id are raters in
            row order.
        mapping: ``{field: column}`` (or ``["field=column"]``) for sample fields the aliases miss;
            pairwise files also take ``answer_a`` and ``answer_b``.
        fmt: force a file format.

    Raises:
        DatasetError: naming the file, line and field of the first bad row.
    """
    source, rows = _source_rows(data, fmt)
    sample_map, pair_map = _split_mapping(mapping, pairwise)
    columns = [c.strip() for c in label.split(",")] if isinstance(label, str) else list(label or [])
    if any(not c for c in columns):
        raise DatasetError(f"--label has an empty column name: {label!r}")
    kind = "pairwise" if pairwise else "pointwise"
    items: dict[str, int] = {}
    first: dict[str, tuple[int, Sample | tuple[Sample, Sample]]] = {}
    raters: dict[str, None] = {}
    cells: dict[tuple[int, str], tuple[float, int]] = {}
    layouts: set[str] = set()
    rater_col: str | None = rater
    order_count: dict[str, int] = {}
    for lineno, row in rows:
        if isinstance(row, DatasetError):
            raise row
        if not isinstance(row, Mapping):
            raise DatasetError(f"expected an object with fields, got {type(row).__name__}", file=source, line=lineno)

        def err(fld: str | None, msg: str, lineno: int = lineno) -> DatasetError:
            return DatasetError(msg, file=source, line=lineno, field=fld)

        if not columns:
            defaults = PAIRWISE_LABELS if pairwise else POINTWISE_LABELS
            columns = [next((c for c in defaults if c in row), "")]
            if not columns[0]:
                raise err(None, f"no human label column (tried {', '.join(defaults)}; columns: "
                                f"{', '.join(map(str, row))}): name it with --label COLUMN")
        missing = [c for c in columns if c not in row]
        if len(missing) == len(columns):
            raise err(columns[0], f"no column {columns[0]!r} for the human label (columns: {', '.join(map(str, row))})")
        if rater_col is None and not items:
            rater_col = next((c for c in RATER_COLUMNS if c in row), None)
        elif rater is not None and rater not in row:
            raise err(rater, f"no column {rater!r} naming the rater (columns: {', '.join(map(str, row))})")
        skip = {*columns, *([rater_col] if rater_col else [])}
        rest = {k: v for k, v in row.items() if k not in skip}
        if pairwise:
            item, sample = _pair_samples(rest, source, lineno, sample_map, pair_map, err)
        else:
            sample = sample_from_dict(rest, mapping=sample_map, default_id=f"row-{lineno}", file=source, line=lineno)
            item = sample.id
        got, layout = _ratings_of(row, columns, pairwise, err)
        if item in items:
            _same_item(first[item], sample, item, err)
        else:
            items[item] = len(items)
            first[item] = (lineno, sample)
        idx = items[item]
        if layout == "single":
            if rater_col is not None:
                who = row.get(rater_col)
                if who is None or (isinstance(who, float) and math.isnan(who)) or str(who).strip() == "":
                    raise err(rater_col, "no rater named in this row")
                got = [(str(who).strip(), got[0][1])]
                layout = "rater column"
            else:
                order_count[item] = order_count.get(item, 0) + 1
                k = order_count[item]
                got = [(f"rater{k}", got[0][1])]
                layout = "row order" if k > 1 else "single"
        layouts.add(layout)
        for who, value in got:
            assert who is not None
            if (idx, who) in cells:
                raise err(rater_col or columns[0], f"rater {who!r} labels item {item!r} twice "
                                                   f"(first on line {cells[(idx, who)][1]})")
            raters.setdefault(who, None)
            cells[(idx, who)] = (value, lineno)
    if not items:
        raise DatasetError("no rows: the file holds no labelled item", file=source)
    rater_names = list(raters)
    col_of = {r: j for j, r in enumerate(rater_names)}
    ratings = np.full((len(items), len(rater_names)), np.nan)
    for (i, who), (value, _) in cells.items():
        ratings[i, col_of[who]] = value
    lines = [first[it][0] for it in items]
    for it, i in items.items():
        if np.isnan(ratings[i]).all():
            raise DatasetError(f"item {it!r} has no human label", file=source, line=lines[i],
                               field=",".join(columns))
    samples: list[Sample] = []
    for it in items:
        s = first[it][1]
        samples.extend(s if isinstance(s, tuple) else (s,))
    layout = "row order" if "row order" in layouts else sorted(layouts)[0]
    return HumanLabels(kind, source, ",".join(columns), list(items), rater_names, ratings, samples, lines, layout)


def _pair_samples(row: dict[str, Any], source: str, lineno: int, sample_map: dict[str, str],
                  pair_map: dict[str, str], err: Any) -> tuple[str, tuple[Sample, Sample]]:
    """The item id and the two samples (answer A, answer B) of a pairwise row."""
    cols = (pair_map.get("answer_a"), pair_map.get("answer_b"))
    if cols[0] or cols[1]:
        if not (cols[0] and cols[1]):
            raise err(None, "give both --map answer_a=COLUMN and --map answer_b=COLUMN")
        for c in cols:
            if c not in row:
                raise err(c, f"no column {c!r} (columns: {', '.join(map(str, row))})")
        pair = (cols[0], cols[1])
    else:
        found = next((p for p in PAIR_COLUMNS if p[0] in row and p[1] in row), None)
        if found is None:
            raise err(None, "no pair of answers: expected model1/model2 (RAGChecker), answer_a/answer_b or "
                            "response_a/response_b columns, or --map answer_a=COLUMN --map answer_b=COLUMN "
                            f"(columns: {', '.join(map(str, row))})")
        pair = found
    id_col = sample_map.get("id") or next((c for c in _ITEM_ID if row.get(c) is not None), None)
    if id_col is not None and id_col not in row:
        raise err(id_col, f"no column {id_col!r} (columns: {', '.join(map(str, row))})")
    raw_id = row.get(id_col) if id_col else None
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, str | int | float)):
        raise err(id_col, f"expected text or a number, got {type(raw_id).__name__}")
    item = (str(int(raw_id)) if isinstance(raw_id, float) and raw_id.is_integer() else str(raw_id)) \
        if raw_id is not None else f"row-{lineno}"
    texts = [_answer_text(row[c], lambda m, c=c: err(c, m)) for c in pair]
    base = {k: v for k, v in row.items() if k not in pair and k not in _ITEM_ID and k != id_col}
    maps = {k: v for k, v in sample_map.items() if k != "id"}
    out = []
    for side, text in zip(("A", "B"), texts, strict=True):
        s = sample_from_dict({**base, "id": f"{item}::{side}", "answer": text}, mapping=maps,
                             file=source, line=lineno)
        out.append(s)
    return item, (out[0], out[1])


def _core(s: Sample | tuple[Sample, Sample]) -> Any:
    parts = s if isinstance(s, tuple) else (s,)
    return [p.model_dump(exclude={"metadata"}, exclude_none=True) for p in parts]


def _same_item(first: tuple[int, Sample | tuple[Sample, Sample]], sample: Sample | tuple[Sample, Sample],
               item: str, err: Any) -> None:
    """Rows of one item (one per rater) must carry the same question, answers and references."""
    a, b = _core(first[1]), _core(sample)
    if a == b:
        return
    for x, y in zip(a, b, strict=True):
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k) and k != "id":
                raise err(k, f"rows of item {item!r} differ in {k} (first row on line {first[0]}); the rows "
                             "of one item (one per rater) must carry the same texts")
    raise err(None, f"rows of item {item!r} differ (first row on line {first[0]})")
