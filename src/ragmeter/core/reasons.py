"""No-value reasons with a precise part: ``"judge failure: invalid reply — turn(s) [1] are not
assistant turns"`` is a short category (before the dash) and what exactly went wrong for that
sample (after it). Each sample keeps its whole reason; a run's summary counts them, and folds
the rarer precise texts of one category into one line so the summary stays readable."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from ragmeter.core.redact import redact

#: between a reason's category and its precise part
SEP = " — "
#: the precise part is cut to this many characters (the score's details keep the whole error)
DETAIL_LIMIT = 300
#: a summary lists at most this many precise texts of one category; the others are counted together
PER_CATEGORY = 3
#: control characters left after whitespace is folded (C0, DEL, C1)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def detailed(category: str, detail: str | None) -> str:
    """``category — detail``: the detail on one line, redacted, with other control characters
    written as ``\\xNN`` (a provider's message may hold terminal escapes), at most
    :data:`DETAIL_LIMIT` characters (redacted before it is cut, so a key cut in two is never half
    shown); just the category when there is no detail."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(redact(detail).split())) if detail else ""
    if not text:
        return category
    if len(text) > DETAIL_LIMIT:
        text = text[:DETAIL_LIMIT - 1].rstrip() + "…"
    return f"{category}{SEP}{text}"


def category(reason: str) -> str:
    """The category of a reason: the part before the first :data:`SEP` (the whole reason when it
    has no precise part)."""
    return reason.split(SEP, 1)[0]


def folded(category: str, kinds: int) -> str:
    """The summary line that stands for ``kinds`` other precise texts of ``category``."""
    return f"{category}{SEP}{kinds} other detail{'s' if kinds != 1 else ''} (each sample's reason: ragmeter export)"


def summarise(reasons: Iterable[str] | Mapping[str, int]) -> dict[str, int]:
    """``{reason: count}``, most common first, for a run's summary: every reason as it is, except
    that a category with more than :data:`PER_CATEGORY` different precise texts keeps its most
    common ones and counts the rest on one :func:`folded` line. The counts add up to the number
    of reasons given.

    >>> summarise(["judge failure: timeout", "judge failure: timeout", "missing field: answer"])
    {'judge failure: timeout': 2, 'missing field: answer': 1}
    """
    counts = Counter(reasons) if not isinstance(reasons, Mapping) else Counter(dict(reasons))
    ranked = counts.most_common()
    by_category: dict[str, list[tuple[str, int]]] = {}
    for reason, n in ranked:
        by_category.setdefault(category(reason), []).append((reason, n))
    out: list[tuple[str, int]] = []
    for cat, items in by_category.items():
        if len(items) <= PER_CATEGORY:
            out += items
            continue
        out += items[:PER_CATEGORY]
        rest = items[PER_CATEGORY:]
        out.append((folded(cat, len(rest)), sum(n for _, n in rest)))
    out.sort(key=lambda kv: -kv[1])  # stable: equal counts keep the category's order
    return dict(out)
