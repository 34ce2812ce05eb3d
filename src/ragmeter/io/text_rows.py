"""JSON rows whose values are all text, read by a plan per row shape: which field each column
gives is worked out once for the shape (as :func:`ragmeter.io.readers.sample_from_dict` works it
out for every row), then each row is one dictionary look-up per field and one pydantic call."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ragmeter.core.records import RESULT_MARKERS
from ragmeter.core.schema import Sample

#: (field, column) pairs, and the columns kept in metadata
Plan = tuple[tuple[tuple[str, str], ...], tuple[str, ...]]
#: ``readers._resolve_columns``: (columns, which are None, --map) -> (field -> column, columns read)
Resolve = Callable[[tuple[str, ...], tuple[bool, ...], tuple[tuple[str, str], ...]],
                   tuple[dict[str, str], frozenset[str]]]
_JUST_STR = {str}
#: fields whose plain-text value needs no parsing (see the fast path in ``sample_from_dict``)
_SIMPLE_TARGETS = frozenset({"id", "question", "answer", "references"})


@functools.lru_cache(maxsize=1024)
def _plain_keys(keys: tuple[Any, ...]) -> bool:
    """Whether every key of a row shape is text and none is a pandas index column."""
    return all(type(k) is str and not _is_index(k) for k in keys)


def _is_index(col: str) -> bool:
    # the index column pandas writes with to_csv(index=True): "" or "Unnamed: 0"
    return col == "" or col.startswith("Unnamed: ")


def plan_for(keys: tuple[Any, ...], resolve: Resolve) -> Plan | None:
    """For JSON rows with columns ``keys`` and text in every one (no ``--map``): the plan, when
    :func:`~ragmeter.io.readers.sample_from_dict` takes its common row's path for such a row (id,
    question, answer, reference as text); ``None`` when it does more (a result row, a pandas index
    column, a DeepEval tool call, a field that parses its text, no known field)."""
    if not _plain_keys(keys) or (RESULT_MARKERS[0] in keys and RESULT_MARKERS[1] in keys) or "tools_called" in keys:
        return None
    names_of, used = resolve(keys, (False,) * len(keys), ())
    if not names_of or not _SIMPLE_TARGETS.issuperset(names_of):
        return None
    return tuple(names_of.items()), tuple(k for k in keys if k not in used)


def text_row(row: dict[str, Any], plans: dict[tuple[Any, ...], Plan | None], default_id: str,
             used: set[str], resolve: Resolve) -> Sample | None:
    """The sample of ``row`` by its shape's plan (``plans`` caches them; ``used`` gathers the columns
    some field reads; ``resolve`` is the reader's column resolution), or ``None`` for a row the plan
    does not cover: a value that is not text, a shape without a plan, a text that cannot be encoded
    (``sample_from_dict`` then names its field)."""
    if set(map(type, row.values())) != _JUST_STR:
        return None
    keys = tuple(row)
    plan = plans.get(keys, False)
    if plan is False:
        plan = plans[keys] = plan_for(keys, resolve)
        if plan is not None:
            used.update(k for k in keys if k not in plan[1])
    if plan is None:
        return None
    texts = "".join(row.values())
    if not texts.isascii():
        try:
            texts.encode("utf-8")
        except UnicodeEncodeError:
            return None
    fields, extra = plan
    fast: dict[str, Any] = {f: row[c] for f, c in fields}
    if "references" in fast:
        fast["references"] = [fast["references"]]
    fast.setdefault("id", default_id)
    fast["metadata"] = {k: row[k] for k in extra}
    return Sample.model_validate(fast)
