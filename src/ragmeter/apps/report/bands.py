"""Score bands for display (the agent-evaluation guide's "Interpreting Scores" table), with CSS class names.

A score in [0, 1] falls in one band: Excellent >= 0.9, Good >= 0.7, Fair >= 0.5, Poor >= 0.3,
Critical below. For a lower-is-better metric (hallucination, bias, toxicity) the band is that of
``1 - value``, so "Excellent" always means "good news". The thresholds are those of
:data:`ragmeter.analysis.composite.BANDS`, so the report and ``ragmeter show`` agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragmeter.analysis.composite import BANDS


@dataclass(frozen=True, slots=True)
class Band:
    """The band a score falls in. ``css`` is the lower-case name, used as a CSS class."""

    name: str
    action: str

    @property
    def css(self) -> str:
        return self.name.lower()


def oriented(value: float | None, higher_is_better: bool = True) -> float | None:
    """``value`` turned so that higher is better: ``1 - value`` for lower-is-better metrics.

    ``None`` (no value) and NaN stay ``None``.

    >>> oriented(0.2, higher_is_better=False)
    0.8
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value) if higher_is_better else 1.0 - float(value)


def band(value: float | None, higher_is_better: bool = True) -> Band | None:
    """The band of a score in [0, 1], or ``None`` when there is no value.

    Args:
        value: the score (a mean or a single sample's value).
        higher_is_better: ``False`` to band ``1 - value`` (lower-is-better metrics).

    >>> band(0.9).name, band(0.89).name, band(0.1, higher_is_better=False).name
    ('Excellent', 'Good', 'Excellent')
    """
    v = oriented(value, higher_is_better)
    if v is None:
        return None
    for name, low, action in BANDS:
        if v >= low:
            return Band(name, action)
    raise AssertionError("unreachable: the last band has no lower bound")


def band_names() -> list[str]:
    return [b[0] for b in BANDS]
