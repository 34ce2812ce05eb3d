"""Reading and writing datasets: JSONL, CSV, Parquet and Python lists of dicts; and the other file
formats ragmeter reads (TREC run and qrels files: :mod:`ragmeter.io.trec`; OpenAI Evals files:
:mod:`ragmeter.io.openai_evals`).

The dataset names below load on first use, so that a module of one format (``ragmeter trec``
reading TREC files) does not load the dataset readers and the schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmeter.io.readers import FIELD_ALIASES, Dataset, load, parse_mapping, sample_from_dict
    from ragmeter.io.writers import save

__all__ = ["FIELD_ALIASES", "Dataset", "load", "parse_mapping", "sample_from_dict", "save"]


def __getattr__(name: str) -> Any:
    if name == "save":
        from ragmeter.io.writers import save

        return save
    if name in __all__:
        from ragmeter.io import readers

        return getattr(readers, name)
    raise AttributeError(f"module 'ragmeter.io' has no attribute {name!r}")
