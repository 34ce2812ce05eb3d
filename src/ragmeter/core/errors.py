"""Exception classes; each carries where the problem happened so a person can act on it.

Every class has an ``exit_code``: the status the ``ragmeter`` command exits with when the
error stops it. This is the one place that maps errors to exit codes (docs/exit-codes.md):

====  ==============================================================================
code  meaning
====  ==============================================================================
0     done, and every requested metric has values
1     the check the command exists for failed (regression found, threshold missed)
2     usage, configuration or input error; nothing was stored
3     the run finished but is incomplete (no samples, or a metric without values)
====  ==============================================================================
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3


class RagmeterError(Exception):
    """Base class of every error ragmeter raises on purpose.

    Attributes:
        exit_code: the status the command line exits with for this error (2 unless a subclass
            says otherwise: an error ragmeter raises on purpose is about what it was given).
    """

    exit_code: int = EXIT_USAGE

    # the message never carries a credential (a store URL's password, a key a server echoed):
    # every error message passes through the redaction layer when it is made and when printed
    def __init__(self, *args: object) -> None:
        from ragmeter.core.redact import redact

        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))

    def __str__(self) -> str:
        from ragmeter.core.redact import redact

        return redact(super().__str__())


class DatasetError(RagmeterError):
    """A dataset row (or the whole file) could not be read.

    Attributes:
        file: the file being read, or ``"<list>"`` for in-memory data.
        line: 1-based line (JSONL, CSV: physical data row + header offset) or row number.
        field: the offending field, when known.
    """

    exit_code = EXIT_USAGE

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

    exit_code = EXIT_USAGE


class MetricError(RagmeterError):
    """A metric was called with invalid arguments (e.g. ``k <= 0``, ``gamma <= 0``)."""

    exit_code = EXIT_USAGE


class JudgeError(RagmeterError):
    """An LLM judge could not be configured, could not be reached before a run (pre-flight),
    or failed for good after its retries."""

    exit_code = EXIT_USAGE


class StoreError(RagmeterError):
    """The results store could not be opened, or a run id does not exist."""

    exit_code = EXIT_USAGE


class CheckFailedError(RagmeterError):
    """The check a command exists for failed: a regression was found, a threshold was missed."""

    exit_code = EXIT_CHECK_FAILED


class IncompleteRunError(RagmeterError):
    """A run finished but is incomplete: it had no samples, or a metric has no value on more of
    the samples than allowed (``max_missing``).

    :func:`ragmeter.evaluate` does not raise it: it returns the result, whose ``status`` is
    ``"incomplete"``; :meth:`~ragmeter.run.runner.EvaluationResult.raise_for_status` raises it.

    Attributes:
        run_id: the stored run (status ``incomplete``).
        reasons: one line per problem (``"token_f1: no value on 145 of 145 samples (...)"``).
        result: the :class:`~ragmeter.run.runner.EvaluationResult`, when raised from one.
    """

    exit_code = EXIT_INCOMPLETE

    def __init__(self, run_id: str, reasons: list[str], result: Any = None) -> None:
        self.run_id = run_id
        self.reasons = list(reasons)
        self.result = result
        super().__init__(f"run {run_id} is incomplete: " + "; ".join(self.reasons))


def exit_code_for(exc: BaseException) -> int:
    """The command-line exit status for ``exc`` (its ``exit_code``; 1 for anything unexpected)."""
    code = getattr(exc, "exit_code", None)
    return code if isinstance(code, int) else 1


class RunLeaseError(StoreError):
    """A run cannot be resumed: another live process is still writing it."""
