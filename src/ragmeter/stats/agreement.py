"""Chance-corrected agreement between raters: Cohen's kappa, Fleiss' kappa, Krippendorff's alpha
and percent agreement, each with a bootstrap interval over items.

The three coefficient functions take the arguments their reference implementations take, so code
written for them works unchanged:

- :func:`cohen_kappa` ``(y1, y2, labels=None, weights=None)`` as scikit-learn's
  ``cohen_kappa_score``;
- :func:`krippendorff_alpha` ``(reliability_data=None, value_counts=None,
  level_of_measurement="nominal", value_domain=None)`` as the ``krippendorff`` package's
  ``alpha`` (which it calls);
- :func:`fleiss_kappa` ``(table)`` as statsmodels' ``fleiss_kappa`` (method "fleiss").

A coefficient is *undefined* when the raters used one category only (chance agreement is then 1
and the ratio is 0/0): the functions return ``nan`` for it, and :func:`agreement` says why in
``AgreementResult.undefined``; an undefined agreement is never reported as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.counts import count

__all__ = [
    "AgreementResult", "Ratings", "agreement", "code_labels", "cohen_kappa", "fleiss_kappa", "interpret",
    "krippendorff_alpha", "percent_agreement", "read_ratings",
]

N_BOOTSTRAP = 1000
LEVELS = ("nominal", "ordinal", "interval", "ratio")
WEIGHTS = (None, "linear", "quadratic")
ONE_CATEGORY = ("one category only: every label is the same, chance agreement is 1 and the "
                "coefficient is 0/0")


def _missing_extra(package: str) -> ImportError:
    return ImportError(f"{package} is needed for this agreement coefficient: "
                       "pip install 'ragmeter-eval[human]'")


# ---- the coefficients ------------------------------------------------------------------------
def cohen_kappa(y1: Sequence[Any], y2: Sequence[Any], labels: Sequence[Any] | None = None,
                weights: str | None = None) -> float:
    """Cohen's kappa between two raters who labelled the same items.

    ``kappa = 1 - sum(w * O) / sum(w * E)``, where ``O`` is the confusion matrix of the two raters,
    ``E`` the matrix expected by chance (outer product of the marginals over ``n``) and ``w`` the
    disagreement weights: 0 on the diagonal and 1 elsewhere (unweighted), ``|i - j|`` (linear)
    or ``(i - j)^2`` (quadratic), with ``i, j`` the positions of the labels in ``labels``
    (sorted labels by default). The same definition and arguments as scikit-learn's
    ``cohen_kappa_score``; Cohen (1960), weighted: Cohen (1968).

    Args:
        y1: labels of the first rater, one per item.
        y2: labels of the second rater, same items in the same order.
        labels: the label set and its order (for weights); labels outside it are ignored.
            Default: the sorted labels that occur.
        weights: ``None``, ``"linear"`` or ``"quadratic"``.

    Returns:
        kappa in [-1, 1]; ``nan`` when undefined (both raters used one and the same category).

    Example:
        >>> cohen_kappa(["y"] * 20 + ["y"] * 5 + ["n"] * 10 + ["n"] * 15,
        ...             ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15)
        0.4
    """
    a, b = list(y1), list(y2)
    if len(a) != len(b):
        raise ValueError(f"y1 and y2 differ in length ({len(a)} vs {len(b)})")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    if labels is None:
        labels = sorted(set(a) | set(b))
    index = {lab: i for i, lab in enumerate(labels)}
    keep = [(index[x], index[y]) for x, y in zip(a, b, strict=True) if x in index and y in index]
    if not keep:
        raise ValueError("no item has both labels in `labels`")
    k = len(labels)
    idx = np.asarray(keep, dtype=np.int64)
    confusion = np.bincount(idx[:, 0] * k + idx[:, 1], minlength=k * k).reshape(k, k).astype(float)
    return _kappa_from_confusion(confusion, _weight_matrix(k, weights))


def _weight_matrix(k: int, weights: str | None) -> np.ndarray:
    d = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
    if weights is None:
        return (d > 0).astype(float)
    return d if weights == "linear" else d ** 2


def _kappa_from_confusion(confusion: np.ndarray, w: np.ndarray) -> float:
    n = confusion.sum()
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / n
    denom = float((w * expected).sum())
    if denom <= 0:
        return math.nan
    return float(1.0 - (w * confusion).sum() / denom)


def fleiss_kappa(table: Any) -> float:
    """Fleiss' kappa for any number of raters, each item rated by the same number of raters.

    ``table[i, j]`` is how many raters put item ``i`` in category ``j``. With ``n`` ratings per
    item, ``P_i = (sum_j table[i,j]^2 - n) / (n (n - 1))``, ``P = mean_i P_i``,
    ``p_j = sum_i table[i,j] / (N n)`` and ``P_e = sum_j p_j^2``; ``kappa = (P - P_e) / (1 - P_e)``
    (Fleiss 1971; statsmodels' ``fleiss_kappa(table, method="fleiss")``).

    Args:
        table: items x categories counts (e.g. from :meth:`Ratings.count_table`).

    Returns:
        kappa (at most 1); ``nan`` when every rating is the same category.

    Raises:
        ValueError: items rated by different numbers of raters, or fewer than two per item.
    """
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError("table must be a non-empty items x categories array")
    per_item = t.sum(axis=1)
    n = per_item[0]
    if not np.allclose(per_item, n):
        raise ValueError("Fleiss' kappa needs the same number of ratings for every item "
                         f"(found {sorted(set(per_item.astype(int).tolist()))})")
    if n < 2:
        raise ValueError("Fleiss' kappa needs at least two ratings per item")
    p_cat = t.sum(axis=0) / t.sum()
    p_item = ((t * t).sum(axis=1) - n) / (n * (n - 1))
    p_exp = float((p_cat ** 2).sum())
    if p_exp >= 1.0 - 1e-12:
        return math.nan
    return float((p_item.mean() - p_exp) / (1.0 - p_exp))


def _is_missing(v: Any) -> bool:
    """A missing rating: ``None``, a float NaN, or empty text."""
    if v is None:
        return True
    if isinstance(v, float | np.floating):
        return bool(np.isnan(v))
    return isinstance(v, str) and not v.strip()


def _text(v: Any) -> str:
    """A label as text: integral numbers without ``.0`` (``4.0`` -> ``"4"``), text stripped."""
    if isinstance(v, bool | np.bool_):
        return str(bool(v))
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    return str(v).strip()


def code_labels(reliability_data: Any, value_domain: Any = None, level_of_measurement: str = "nominal"
                ) -> tuple[np.ndarray, Any]:
    """``(codes, domain)``: ratings of any kind as the float matrix the coefficients compute on
    (``nan`` = missing) and the ``value_domain`` to compute with.

    Numbers stay numbers (``value_domain`` as given). Text labels (any text among the ratings, or a
    ``value_domain`` of text) become their position in ``value_domain`` (``"very low"`` -> 0,
    ``"low"`` -> 1 ...), or, without one, in their sorted set (nominal only: text has no order), and
    the domain becomes ``0 .. k-1``: Krippendorff's alpha of the positions equals the ``krippendorff``
    package's on the text for nominal and ordinal data (the ordinal distance depends only on the
    positions and the counts); interval alpha of ordered text is that of equally spaced positions.
    Missing: ``None``, NaN, empty text, and the text ``"nan"`` numpy makes of a NaN among strings.

    Raises:
        ValueError: not 2-D; ordinal, interval or ratio text labels without ``value_domain``; ratio
            text labels (no natural zero); a label not in ``value_domain`` (naming it); a domain that
            repeats a value.
    """
    try:
        raw = np.asarray(reliability_data, dtype=None if isinstance(reliability_data, np.ndarray) else object)
    except ValueError:  # rows of different lengths
        raw = np.empty(0)
    if raw.ndim != 2:
        raise ValueError("reliability_data must be raters x items (2-D)")
    domain_text = value_domain is not None and any(isinstance(v, str) for v in np.ravel(value_domain))
    if raw.dtype.kind in "iufb" and not domain_text:
        return raw.astype(float), value_domain
    numpy_text = raw.dtype.kind in "US" or (raw.dtype == object and any(isinstance(v, str) for v in raw.ravel()))
    cells = raw.ravel().tolist()
    nan_text = numpy_text and not (value_domain is not None and "nan" in [_text(v) for v in np.ravel(value_domain)])
    missing = [_is_missing(v) or (nan_text and isinstance(v, str) and v.strip() == "nan") for v in cells]
    present = [v for v, m in zip(cells, missing, strict=True) if not m]
    if not numpy_text and not domain_text:
        try:
            data = np.array([np.nan if m else float(v) for v, m in zip(cells, missing, strict=True)], dtype=float)
        except (TypeError, ValueError):
            raise ValueError("ratings must be numbers or text labels") from None
        return data.reshape(raw.shape), value_domain
    if value_domain is None:
        if level_of_measurement != "nominal":
            raise ValueError(f"{level_of_measurement} alpha of text labels needs their order: "
                             "value_domain=[...] (e.g. ['low', 'mid', 'high'])")
        order = sorted({_text(v) for v in present})
    else:
        order = [_text(v) for v in np.ravel(value_domain)]
        dup = sorted({v for v in order if order.count(v) > 1})
        if dup:
            raise ValueError(f"value_domain repeats {', '.join(map(repr, dup))}")
        if level_of_measurement == "ratio":
            raise ValueError("ratio alpha needs numeric labels (a natural zero); text labels in order "
                             "are ordinal or interval")
    pos = {v: float(i) for i, v in enumerate(order)}
    bad = sorted({_text(v) for v in present} - set(pos))
    if bad:
        raise ValueError(f"label(s) not in value_domain: {', '.join(map(repr, bad[:5]))}"
                         f"{' ...' if len(bad) > 5 else ''} (value_domain: {', '.join(map(repr, order))})")
    data = np.array([np.nan if m else pos[_text(v)] for v, m in zip(cells, missing, strict=True)], dtype=float)
    return data.reshape(raw.shape), list(range(len(order)))


def krippendorff_alpha(reliability_data: Any = None, value_counts: Any = None,
                       level_of_measurement: str = "nominal", value_domain: Any = None) -> float:
    """Krippendorff's alpha: ``1 - D_o / D_e``, observed over expected disagreement among all
    pairable values, for any number of raters and missing ratings (Krippendorff 2011).

    Computed by the ``krippendorff`` package (``krippendorff.alpha``), with the same arguments, and
    equal to it (tests/test_agreement.py, on random data): numbers, and text labels (nominal
    ``["yes", "no", ...]``; ordinal with ``value_domain=["very low", "low", "mid", "high", "very
    high"]``) coded by :func:`code_labels`. Interval alpha of text labels in ``value_domain`` order
    treats them as equally spaced (the package cannot subtract text).

    Args:
        reliability_data: raters x items; numbers or text; ``nan``, ``None`` or empty text for a
            missing rating.
        value_counts: items x values counts (instead of ``reliability_data``).
        level_of_measurement: ``"nominal"``, ``"ordinal"``, ``"interval"`` or ``"ratio"``.
        value_domain: the possible values, in order (needed to order ordinal or interval text).

    Returns:
        alpha (at most 1); ``nan`` when undefined: fewer than two distinct values, or no item
        with two ratings.

    Raises:
        ValueError: a label outside ``value_domain`` (naming it), ordered text without
            ``value_domain``, an unknown level.

    Example:
        >>> d = [["very low", "low", "mid", "mid"], ["very low", "mid", "mid", "high"]]
        >>> round(krippendorff_alpha(d, level_of_measurement="ordinal",
        ...                          value_domain=["very low", "low", "mid", "high", "very high"]), 3)
        0.7
    """
    if level_of_measurement not in LEVELS:
        raise ValueError(f"level_of_measurement must be one of {', '.join(LEVELS)}")
    try:
        import krippendorff
    except ImportError:
        raise _missing_extra("the krippendorff package") from None
    if value_counts is None:
        if reliability_data is None:
            raise ValueError("give reliability_data or value_counts")
        data, value_domain = code_labels(reliability_data, value_domain, level_of_measurement)
        pairable = (~np.isnan(data)).sum(axis=0) >= 2
        vals = data[:, pairable]
        vals = vals[~np.isnan(vals)]
        if vals.size == 0 or np.unique(vals).size < 2:
            return math.nan
        if value_domain is not None and len(value_domain) < 2:
            return math.nan
        value = krippendorff.alpha(reliability_data=data, level_of_measurement=level_of_measurement,
                                   value_domain=value_domain)
    else:
        counts = np.asarray(value_counts, dtype=float)
        counts = counts[counts.sum(axis=1) >= 2]
        if counts.size == 0 or (counts.sum(axis=0) > 0).sum() < 2:
            return math.nan
        value = krippendorff.alpha(value_counts=counts, level_of_measurement=level_of_measurement,
                                   value_domain=value_domain)
    return float(value)


def percent_agreement(reliability_data: Any) -> float:
    """Share of agreeing rater pairs, averaged over the items with at least two ratings.

    Not chance-corrected: two raters who always say "yes" agree 100%. Reported next to the
    chance-corrected coefficients because it is what people read first.

    Args:
        reliability_data: raters x items array of numbers or text labels (:func:`code_labels`);
            ``nan``, ``None`` or empty text for missing.
    """
    data = code_labels(reliability_data)[0]
    present = ~np.isnan(data)
    m = present.sum(axis=0)
    keep = m >= 2
    if not keep.any():
        return math.nan
    values = np.unique(data[present])
    counts = np.stack([(data[:, keep] == v).sum(axis=0) for v in values])  # values x items
    mk = m[keep].astype(float)
    shares = (counts * (counts - 1)).sum(axis=0) / (mk * (mk - 1))
    return float(shares.mean())


# ---- ratings from files and lists -----------------------------------------------------------
@dataclass
class Ratings:
    """Ratings as a raters x items matrix of numeric codes (``nan`` = no rating).

    ``categories`` maps a code back to the label as written (codes are the labels themselves for
    numeric labels; positions in the sorted or given order for text labels).
    """

    items: list[str]
    raters: list[str]
    data: np.ndarray
    categories: list[Any]
    numeric: bool
    ordered: bool = False

    @classmethod
    def from_long(cls, rows: Sequence[tuple[Any, Any, Any]], order: Sequence[str] | None = None,
                  raters: Sequence[str] = ()) -> Ratings:
        """From ``(item, rater, label)`` triples; a rater's repeated label for an item: the last wins.
        ``raters`` fixes the order (and presence) of raters; others follow as they appear."""
        items: dict[str, int] = {}
        rater_pos: dict[str, int] = {str(r): i for i, r in enumerate(raters)}
        cells: dict[tuple[int, int], Any] = {}
        for item, rater, label in rows:
            if label is None or (isinstance(label, str) and not label.strip()):
                continue
            i = items.setdefault(str(item), len(items))
            r = rater_pos.setdefault(str(rater), len(rater_pos))
            cells[(r, i)] = label.strip() if isinstance(label, str) else label
        labels = list(cells.values())
        codes, categories, numeric = _encode(labels, order)
        data = np.full((len(rater_pos), len(items)), np.nan)
        for (r, i), code in zip(cells.keys(), codes, strict=True):
            data[r, i] = code
        return cls(list(items), list(rater_pos), data, categories, numeric, ordered=bool(order) or numeric)

    def select_raters(self, names: Sequence[str]) -> Ratings:
        missing = [n for n in names if n not in self.raters]
        if missing:
            raise ValueError(f"no rater {', '.join(missing)} (raters: {', '.join(self.raters)})")
        rows = [self.raters.index(n) for n in names]
        return Ratings(self.items, list(names), self.data[rows], self.categories, self.numeric,
                       self.ordered)

    def codes(self) -> list[float]:
        """The category codes in order."""
        return [float(c) for c in (self.categories if self.numeric else range(len(self.categories)))]

    def count_table(self, data: np.ndarray | None = None) -> np.ndarray:
        """Items x categories counts (the input of Fleiss' kappa)."""
        d = self.data if data is None else data
        codes = np.asarray(self.codes())
        return np.stack([(d == c).sum(axis=0) for c in codes], axis=1).astype(float)


def _label_key(x: Any) -> str:
    """A label as matched against a value domain: numbers by value (a spreadsheet's ``4.0`` is the
    domain's ``4``), other text as written (stripped)."""
    text = str(x).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return _text(number) if math.isfinite(number) else text


def _encode(labels: Sequence[Any], order: Sequence[str] | None) -> tuple[list[float], list[Any], bool]:
    if order:
        pos = {_label_key(o): i for i, o in enumerate(order)}
        if len(pos) < len(order):
            raise ValueError(f"the value domain repeats a value: {', '.join(map(str, order))}")
        bad = sorted({_label_key(x) for x in labels} - set(pos))
        if bad:
            raise ValueError(f"labels not in the given categories: {', '.join(bad[:5])}")
        return [float(pos[_label_key(x)]) for x in labels], list(order), False
    try:
        nums = [float(x) for x in labels]
    except (TypeError, ValueError):
        cats = sorted({str(x) for x in labels})
        pos = {c: i for i, c in enumerate(cats)}
        return [float(pos[str(x)]) for x in labels], cats, False
    if any(math.isnan(x) for x in nums):
        raise ValueError("a label is NaN; leave the cell empty for a missing rating")
    return nums, sorted(set(nums)), True


_ITEM_COLS = ("item", "unit", "sample_id", "sample", "id", "task")
_RATER_COLS = ("rater", "coder", "annotator", "judge", "observer")
_LABEL_COLS = ("label", "value", "score", "rating")
_SCALE_COLS = ("scale", "criterion")
#: columns of a dataset or a labelling tool's export, never a rater of a wide file
_DATA_FIELDS = {"text", "question", "answer", "response", "contexts", "context", "reference", "references",
                "status", "created_at", "updated_at", "inserted_at", "lead_time", "annotation_id", "metadata"}


def _is_data_field(name: str) -> bool:
    low = name.strip().lower()
    return low in _DATA_FIELDS or low.endswith((".responses", ".responses.users", ".responses.status",
                                                ".suggestion", ".suggestion.score", ".suggestion.agent"))


def read_ratings(path: str | Path, order: Sequence[str] | None = None, *, item_column: str | None = None,
                 rater_column: str | None = None, label_column: str | None = None,
                 scale: str | None = None) -> Ratings:
    """Read ratings from a CSV file in either layout (chosen by the header):

    - long: one row per rating, columns ``item,rater,label`` (also accepted: unit/sample_id/id for
      item, coder/annotator/judge for rater, value/score/rating for label); other columns ignored.
    - wide: one row per item, one column per rater; the first column is the item id when it is
      named item/unit/sample_id/id, else items are numbered by row. An empty cell is a missing
      rating.

    A file with a rater column but no label column among the names above (a Label Studio CSV
    export names it after the labelling control, e.g. ``sentiment``) is an error, not a wide
    layout of every column: ``label_column`` names it.

    Args:
        path: the CSV file.
        order: the value domain: the categories in order, for text labels on an ordinal or interval
            scale (numbers need none); every label must be one of them.
        item_column, rater_column, label_column: the long layout's columns by name, when they are
            not among the names above (case-insensitive).
        scale: with a ``scale`` (or ``criterion``) column, as in ``ragmeter annotate export
            --labels``: the scale whose ratings are read. Needed when the file holds more than one.

    Raises:
        DatasetError: the file cannot be read (missing, a folder, not UTF-8, not CSV), a label
            is not in ``order``, a row has more fields than the header, a rater rated an item
            twice, a named column is not in the header, or a rater column has no label column
            (naming the file, line and column).
        ValueError: with the file and line, when the file cannot be read as ratings.
    """
    from ragmeter.core.errors import DatasetError
    from ragmeter.core.files import csv_rows, read_text

    p = Path(path)
    reader = csv_rows(read_text(p, "ratings file"), p)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{p}: empty file") from None
    lower = [h.lower() for h in header]

    def col(names: tuple[str, ...], given: str | None, option: str) -> int | None:
        if given is None:
            return next((lower.index(n) for n in names if n in lower), None)
        if given.strip().lower() not in lower:
            raise DatasetError(f"no column {given!r} ({option}); the header is {','.join(header)}",
                               file=str(p), line=1)
        return lower.index(given.strip().lower())

    ci = col(_ITEM_COLS, item_column, "--item-column")
    cr = col(_RATER_COLS, rater_column, "--rater-column")
    cl = col(_LABEL_COLS, label_column, "--label-column")
    if cr is not None and cl is None:
        # read as wide, every other column (text, dates, annotation ids) would count as a rater
        raise DatasetError(f"a rater column ({header[cr]!r}) but no label column ({', '.join(_LABEL_COLS)}); "
                           f"name it with --label-column (the header is {','.join(header)})",
                           file=str(p), line=1)
    triples: list[tuple[str, str, str]] = []
    where: list[tuple[int, str]] = []  # each rating's line and column, for errors
    rater_names: list[str] = []
    seen: dict[tuple[str, str | None], int] = {}

    def once(item: str, rater: str | None, line: int) -> None:
        first = seen.setdefault((item, rater), line)
        if first == line:
            return
        what = f"rater {rater!r} rated item {item!r}" if rater is not None else f"item {item!r} appears"
        raise DatasetError(f"{what} twice (lines {first} and {line}); keep one rating per rater and item",
                           file=str(p), line=line)

    def fits(row: list[str], line: int) -> None:
        if len(row) > len(header):
            raise DatasetError(f"{len(row)} fields but the header has {len(header)} (a comma inside an "
                               "unquoted value, such as a decimal comma?)", file=str(p), line=line)

    if (item_column or rater_column or label_column) and None in (ci, cr, cl):
        # a column named for the long layout, another one missing: never fall back to the wide layout
        what = [f"{name} ({', '.join(names)}; {option})" for c, name, names, option in (
            (ci, "item", _ITEM_COLS, "--item-column"), (cr, "rater", _RATER_COLS, "--rater-column"),
            (cl, "label", _LABEL_COLS, "--label-column")) if c is None]
        raise DatasetError(f"no {' and no '.join(what)} column for the long layout (the header is "
                           f"{','.join(header)})", file=str(p), line=1)
    cs = col(_SCALE_COLS, None, "")
    if scale is not None and (cs is None or cl is None):
        raise DatasetError(f"--scale {scale}: the file has no scale column (long layout with a 'scale' "
                           f"column); the header is {','.join(header)}", file=str(p), line=1)
    scales: dict[str, int] = {}  # each scale of the file: its first line
    if ci is not None and cr is not None and cl is not None:
        for line, row in enumerate(reader, start=2):
            if not any(c.strip() for c in row):
                continue
            fits(row, line)
            if cs is not None and cs < len(row):
                name = row[cs].strip()
                scales.setdefault(name, line)
                if scale is not None and name != scale:
                    continue
                if scale is None and len(scales) > 1:
                    raise DatasetError(f"ratings on more than one scale ({', '.join(map(repr, scales))} ...): "
                                       "pick one with --scale", file=str(p), line=line, field=header[cs])
            if len(row) <= max(ci, cr, cl):
                raise ValueError(f"{p}, line {line}: expected columns {header[ci]},{header[cr]},"
                                 f"{header[cl]}, got {len(row)} fields")
            if row[cl].strip():
                once(row[ci].strip(), row[cr].strip(), line)
            triples.append((row[ci].strip(), row[cr].strip(), row[cl]))
            where.append((line, header[cl]))
    else:
        rater_cols = [j for j in range(len(header)) if j != ci]
        rater_names = [header[j] for j in rater_cols]
        fields = [header[j] for j in rater_cols if _is_data_field(header[j])]
        if fields:
            # an export of a labelling tool (Argilla: text, status, label.responses ...) is not a wide
            # table of raters: reading it so would compare texts and dates as labels
            raise DatasetError(f"column {fields[0]!r} is not a rater: a wide file has an item column and one "
                               "column per rater; a file of one row per rating names its columns with "
                               "--item-column, --rater-column and --label-column (the header is "
                               f"{','.join(header)})", file=str(p), line=1, field=fields[0])
        if len(rater_cols) < 2:
            raise ValueError(f"{p}: need long columns item,rater,label or one column per rater "
                             f"(at least two); header is {','.join(header)}")
        for line, row in enumerate(reader, start=2):
            if not any(c.strip() for c in row):
                continue
            fits(row, line)
            item = row[ci].strip() if ci is not None and ci < len(row) else str(line - 1)
            if any(j < len(row) and row[j].strip() for j in rater_cols):
                once(item, None, line)
            for j in rater_cols:
                if j < len(row):
                    triples.append((item, header[j], row[j]))
                    where.append((line, header[j]))
    if not triples and scale is not None:
        raise DatasetError(f"no ratings on scale {scale!r} (scales: {', '.join(scales) or 'none'})",
                           file=str(p), field=header[cs] if cs is not None else None)
    if not triples:
        raise ValueError(f"{p}: no ratings")
    if order:
        _check_domain(triples, where, order, p)
    try:
        return Ratings.from_long(triples, order, raters=rater_names)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None


def _check_domain(triples: Sequence[tuple[str, str, str]], where: Sequence[tuple[int, str]],
                  order: Sequence[str], path: Path) -> None:
    """Every label of the file is in the value domain, or a :class:`DatasetError` naming the file,
    line and column of the first that is not."""
    from ragmeter.core.errors import DatasetError

    known = {_label_key(o) for o in order}
    for (_item, _rater, label), (line, column) in zip(triples, where, strict=True):
        text = label.strip()
        if text and _label_key(text) not in known:
            raise DatasetError(f"label {text!r} is not in the value domain ({', '.join(map(str, order))}; "
                               "--value-domain)", file=str(path), line=line, field=column)


# ---- one entry point with an interval ---------------------------------------------------------
@dataclass
class AgreementResult:
    """A coefficient with its bootstrap interval over items, or why it is undefined."""

    method: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n_items: int
    n_raters: int
    level: str | None = None
    weights: str | None = None
    n_bootstrap: int = 0
    undefined: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.method == "alpha":
            return f"Krippendorff's alpha ({self.level})"
        if self.method == "kappa":
            return f"Cohen's kappa ({self.weights or 'unweighted'})"
        return {"fleiss": "Fleiss' kappa", "percent": "percent agreement"}[self.method]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["label"] = self.label
        d["reading"] = interpret(self.value, self.method) if self.value is not None else None
        return d


def interpret(value: float | None, method: str = "alpha") -> str:
    """A plain-language reading: Krippendorff's thresholds for alpha (>= 0.8 reliable, >= 0.667
    tentative), Landis & Koch's bands for kappa (> 0.8 almost perfect ... )."""
    if value is None or math.isnan(value):
        return "undefined"
    if method == "percent":
        return "raw agreement (not corrected for chance)"
    if method == "alpha":
        if value >= 0.8:
            return "reliable (alpha >= 0.8)"
        if value >= 0.667:
            return "tentative: usable for tentative conclusions only (0.667 <= alpha < 0.8)"
        return "unreliable (alpha < 0.667)"
    for lo, word in ((0.8, "excellent / almost perfect (> 0.8)"), (0.6, "good / substantial (> 0.6)"),
                     (0.4, "moderate (0.4-0.6)"), (0.2, "fair (0.2-0.4)"), (0.0, "slight (0-0.2)")):
        if value > lo:
            return word
    return "no better than chance (<= 0)"


def _statistic(r: Ratings, method: str, level: str, weights: str | None):  # noqa: ANN202
    codes = r.codes()
    if method == "alpha":
        # text labels in order: their positions, equally spaced for interval alpha
        domain = codes if level in ("nominal", "ordinal") or not r.numeric else None
        return lambda d: krippendorff_alpha(d, level_of_measurement=level, value_domain=domain)
    if method == "kappa":
        def kappa(d: np.ndarray) -> float:
            both = ~np.isnan(d).any(axis=0)
            if not both.any():
                return math.nan
            return cohen_kappa(d[0, both], d[1, both], labels=codes, weights=weights)
        return kappa
    if method == "fleiss":
        return lambda d: fleiss_kappa(r.count_table(d))
    if method == "percent":
        return percent_agreement
    raise ValueError(f"unknown method {method!r}: alpha, kappa, fleiss or percent")


def agreement(ratings: Ratings, method: str = "alpha", *, level: str = "nominal",
              weights: str | None = None, raters: Sequence[str] | None = None,
              n_bootstrap: int = N_BOOTSTRAP, confidence: float = 0.95, seed: int = 0
              ) -> AgreementResult:
    """A coefficient on ratings with a percentile bootstrap interval over items (items are
    resampled with replacement, raters kept; resamples where the coefficient is undefined are
    dropped and counted in ``notes``).

    Args:
        ratings: from :func:`read_ratings` or :meth:`Ratings.from_long`.
        method: ``alpha`` (Krippendorff), ``kappa`` (Cohen, two raters), ``fleiss`` or ``percent``.
        level: level of measurement for alpha.
        weights: ``None``, ``linear`` or ``quadratic`` for Cohen's kappa.
        raters: use only these raters (kappa needs exactly two).
        n_bootstrap: resamples for the interval (0: no interval).
        confidence: interval level.
        seed: random seed of the resampling.
    """
    if level not in LEVELS:
        raise ValueError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"--weights must be linear or quadratic (or none), not {weights!r}")
    if method == "alpha" and level == "ratio" and not ratings.numeric:
        raise ValueError("ratio alpha needs numeric labels (a natural zero); text labels are nominal, or "
                         "ordinal or interval with their order given (--value-domain low,mid,high)")
    if method == "alpha" and level == "interval" and not ratings.numeric and not ratings.ordered:
        raise ValueError("interval alpha of text labels needs their order (--value-domain low,mid,high): "
                         "they are then equally spaced")
    if not ratings.numeric and not ratings.ordered and (
            (method == "alpha" and level == "ordinal") or (method == "kappa" and weights)):
        raise ValueError("text labels have no order: give it (--value-domain low,mid,high) for ordinal "
                         "alpha or weighted kappa")
    r = ratings.select_raters(raters) if raters else ratings
    notes: list[str] = []
    data = r.data
    if method == "kappa":
        if len(r.raters) != 2:
            raise ValueError(f"Cohen's kappa compares two raters; found {len(r.raters)} "
                             f"({', '.join(r.raters)}): pick two with --raters A,B, or use fleiss or alpha")
        both = ~np.isnan(data).any(axis=0)
        if (~both).any():
            notes.append(f"{count(int((~both).sum()), 'item')} without both ratings left out")
        data = data[:, both]
    elif method == "fleiss" and len(r.raters) < 2:
        # as alpha and percent: a file of one rater holds no agreement (undefined), not a usage error
        data = data[:, :0]
    elif method == "fleiss":
        n_per = (~np.isnan(data)).sum(axis=0)
        full = n_per == len(r.raters)
        if (~full).any():
            notes.append(f"{count(int((~full).sum()), 'item')} not rated by all {len(r.raters)} raters left out "
                         "(Fleiss' kappa needs the same number of ratings per item; alpha handles missing ones)")
        data = data[:, full]
    else:
        pairable = (~np.isnan(data)).sum(axis=0) >= 2
        if (~pairable).any():
            notes.append(f"{count(int((~pairable).sum()), 'item')} with fewer than two ratings left out (no pair to compare)")
        data = data[:, pairable]
    n_items = data.shape[1]
    res = AgreementResult(method, None, None, None, n_items, len(r.raters),
                          level=level if method == "alpha" else None,
                          weights=weights if method == "kappa" else None, notes=notes)
    if n_items == 0:
        res.undefined = ("one rater: agreement needs at least two" if len(r.raters) < 2
                         else "no item has ratings from enough raters")
        return res
    if method == "kappa" and len(r.raters) == 2 and n_items < 2:
        res.undefined = "fewer than two items rated by both raters"
        return res
    stat = _statistic(r, method, level, weights)
    value = stat(data)
    if math.isnan(value):
        present = data[~np.isnan(data)]
        res.undefined = ONE_CATEGORY if np.unique(present).size < 2 else \
            "not enough pairable ratings"
        return res
    res.value = value
    if n_bootstrap > 0 and n_items >= 2:
        rng = np.random.default_rng(seed)
        boots = []
        for _ in range(n_bootstrap):
            v = stat(data[:, rng.integers(0, n_items, size=n_items)])
            if not math.isnan(v):
                boots.append(v)
        dropped = n_bootstrap - len(boots)
        if dropped:
            notes.append(f"{dropped} of {n_bootstrap} resamples had one category only (undefined), left out")
        if boots:
            tail = (1 - confidence) / 2
            lo, hi = np.quantile(boots, [tail, 1 - tail])
            res.ci_low, res.ci_high = float(lo), float(hi)
        res.n_bootstrap = len(boots)
    return res
