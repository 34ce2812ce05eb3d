"""Exception classes; each carries where the problem happened so a person can act on it."""

from __future__ import annotations


class RagmeterError(Exception):
    """Base class of every error ragmeter raises on purpose."""


class DatasetError(RagmeterError):
    """A dataset row (or the whole file) could not be read.

    Attributes:
        file: the file being read, or ``"<list>"`` for in-memory data.
        line: 1-based line (JSONL, CSV: physical data row + header offset) or row number.
        field: the offending field, when known.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if file:
            where.append(str(file))
        if line is not None:
            where.append(f"line {line}")
        if field:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class ConfigError(RagmeterError):
    """A configuration (metric names, options, config file) is invalid."""


class MetricError(RagmeterError):
    """A metric was called with invalid arguments (e.g. ``k <= 0``, ``gamma <= 0``)."""


class JudgeError(RagmeterError):
    """An LLM judge could not be configured or failed for good after its retries."""


class StoreError(RagmeterError):
    """The results store could not be opened, or a run id does not exist."""


class RunLeaseError(StoreError):
    """A run cannot be resumed: another live process is still writing it."""
