"""Reading and writing datasets: JSONL, CSV, Parquet and Python lists of dicts."""

from ragmeter.io.readers import FIELD_ALIASES, Dataset, load, parse_mapping, sample_from_dict
from ragmeter.io.writers import save

__all__ = ["FIELD_ALIASES", "Dataset", "load", "parse_mapping", "sample_from_dict", "save"]
