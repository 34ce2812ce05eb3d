"""Cell-level helpers of the dataset readers: missing values, plain Python values, text checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _is_missing(v: Any) -> bool:
    """None, NaN, pandas ``NA``/``NaT`` and numpy NaN are "no value"."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    return type(v).__name__ in {"NAType", "NaTType"} or (
        type(v).__module__ == "numpy" and getattr(v, "ndim", 1) == 0 and v != v)


_PLAIN_SCALARS = (str, int)


def _plain(v: Any) -> Any:
    """numpy scalars/arrays -> Python values, recursively; missing values -> None."""
    if type(v) is list and all(type(x) in _PLAIN_SCALARS for x in v):
        return v  # a JSON list of texts or ids: already plain
    if _is_missing(v):
        return None
    mod = type(v).__module__
    if mod == "numpy" and hasattr(v, "tolist"):
        return _plain(v.tolist())
    if mod.startswith("pandas") and hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, float) and math.isinf(v):
        return None  # not valid JSON; a store would reject it
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def _check_text(v: Any, where: str, err: Any) -> None:
    """Every string must be encodable (a lone surrogate from JSON ``"\\ud800"`` is not)."""
    if isinstance(v, str):
        if v.isascii():
            return
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise err(where or "text", f"invalid character {v[exc.start]!r} at position {exc.start} "
                                       "(a lone UTF-16 surrogate)") from None
    elif isinstance(v, Mapping):
        for k, x in v.items():
            _check_text(x, f"{where}.{k}" if where else str(k), err)
    elif isinstance(v, list | tuple):
        if all(type(x) is int or (type(x) is str and x.isascii()) for x in v):
            return
        for i, x in enumerate(v):
            _check_text(x, f"{where}[{i}]", err)
    elif hasattr(v, "model_dump"):
        _check_text(v.model_dump(), where, err)
