"""A count with its noun for text users read: ``1 sample``, ``2 samples``, ``1,200 samples``."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None, *, sep: str = "") -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1.

    Args:
        n: the count.
        noun: the singular noun (``"sample"``).
        plural: the plural when it is not ``noun + "s"``.
        sep: the thousands separator format (``","`` writes ``1,200``).

    >>> count(1, "sample"), count(0, "sample"), count(1200, "sample", sep=",")
    ('1 sample', '0 samples', '1,200 samples')
    """
    number = format(n, sep) if sep else str(n)
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
