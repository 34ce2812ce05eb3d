"""The one shape a sample's inputs take in every file ragmeter writes: datasets
(:func:`ragmeter.io.save`) and the per-sample result rows of ``ragmeter export``, ``eval --out`` and
``to_pandas()``, so each reads back as the same samples (``ragmeter eval EXPORTED.jsonl`` scores what
the run scored); :func:`ragmeter.io.readers.sample_from_dict` is the other half."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: a sample's input columns, in order, under the names the readers read first
#: (:data:`ragmeter.io.readers.FIELD_ALIASES`); chunks as objects (``id``, ``text``, ``source``,
#: ``start``, ``end``, ``score``, ``grade``), a chunk that is only a text as that text
SAMPLE_COLUMNS = ("id", "question", "answer", "references", "negative_references", "contexts", "relevant",
                  "label", "metadata", "trace")
#: written in every result row; the others only when a sample of the run has them
CORE_COLUMNS = ("id", "question", "answer", "references", "contexts")
#: the columns that mark a per-sample result row (``export``, ``--out``, ``to_pandas()``): a reader
#: seeing both reads the inputs from :data:`SAMPLE_COLUMNS` only and leaves the rest (metric values,
#: ``METRIC__pass``, these two) unread, so a result is never read as an input
RESULT_MARKERS = ("no_value_reasons", "judge")
_CHUNK_LISTS = ("contexts", "relevant")
_EMPTY_IS_NONE = ("references", "negative_references", "metadata")


def _chunks(items: list[Any]) -> list[Any]:
    return [c["text"] if isinstance(c, dict) and len(c) == 1 and "text" in c else c for c in items]


def sample_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """``{column: value}`` of :data:`SAMPLE_COLUMNS` (``None`` = not given) from a sample as the
    store keeps it (``Sample.model_dump(mode="json", exclude_defaults=True)``).

    ``contexts: []`` (an empty retrieval) stays ``[]``; empty references and metadata are ``None``
    (their default, which is what the reader gives back for a missing value).
    """
    out: dict[str, Any] = {}
    for col in SAMPLE_COLUMNS:
        v = data.get(col)
        if col in _CHUNK_LISTS and v:
            v = _chunks(v)
        elif col in _EMPTY_IS_NONE and not v:
            v = None
        out[col] = v
    return out


def sample_columns(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The input columns of a set of records (:func:`sample_record`): :data:`CORE_COLUMNS` and the
    others some record has a value for, in :data:`SAMPLE_COLUMNS` order."""
    have = set(CORE_COLUMNS)
    rest = [c for c in SAMPLE_COLUMNS if c not in have]
    for r in records:
        if not rest:
            break
        for c in [c for c in rest if r.get(c) is not None]:
            have.add(c)
            rest.remove(c)
    return [c for c in SAMPLE_COLUMNS if c in have]
