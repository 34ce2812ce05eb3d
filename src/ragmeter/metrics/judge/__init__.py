"""LLM-as-judge metrics. Each metric's prompt is a template in ``prompts/`` next to this code; its
algorithm is in its docstring; the judge's intermediate verdicts are stored in ``Score.details``.

Each module registers its metrics when it is imported, and imports no LLM SDK;
:mod:`ragmeter.metrics.judge.registered` imports them all (the family as the metric registry
loads it). This package's own names (and its modules, as attributes) are imported on first use,
so importing one judge metric's module does not import the whole family.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the names this package gives, and the module that defines each
_EXPORTS = {"DATA_NOTICE": "_common", "JudgedMetric": "_common", "PromptTemplate": "_common",
            "fence_blocks": "_common", "load_template": "_common", "register_judged": "_common",
            "average_precision_of_verdicts": "contexts", "PRESETS": "correctness",
            "normalise_criteria": "correctness"}

__all__ = ["DATA_NOTICE", "PRESETS", "JudgedMetric", "PromptTemplate", "average_precision_of_verdicts",
           "fence_blocks", "load_template", "normalise_criteria", "register_judged"]


def __getattr__(name: str) -> Any:
    home = _EXPORTS.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif not name.startswith("__"):
        try:  # a module of the package as an attribute (``judge.geval``), as when it was imported
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
