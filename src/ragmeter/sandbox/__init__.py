"""Where code that comes with a user's data runs: python graders of OpenAI evals, each call in a
child process, isolated in a bubblewrap sandbox unless the user opts out by name.

A metric never starts a process: it asks its scoring context for this service,
``ctx.service("python_sandbox")`` (a :class:`PythonSandbox`, declared by the grader metrics), and
hands it the grader's source and the items. The service reads the run's options: the permission
(``python_graders``: ``isolated`` or ``unisolated``, never stored with a run) and the limits
(``python_grader_timeout``, ``python_grader_memory_mb``, ``python_grader_workers``,
``python_grader_processes``). The child processes are :mod:`.python_grader`, the sandbox around
them :mod:`.isolation`. This module imports neither until a grader runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.core.config import PYTHON_GRADERS_OPTION
from ragmeter.core.context import ScoringContext, register_service
from ragmeter.core.errors import ConfigError

ISOLATED, UNISOLATED = "isolated", "unisolated"
#: the values of the ``python_graders`` run option (the permission to run python graders)
MODES = (ISOLATED, UNISOLATED)
#: run options of python graders
TIMEOUT_OPTION, MEMORY_OPTION, WORKERS_OPTION = "python_grader_timeout", "python_grader_memory_mb", "python_grader_workers"
PROCESSES_OPTION = "python_grader_processes"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 2048
DEFAULT_WORKERS = 4
#: processes and threads a sandboxed grader may have at once (its interpreter and bwrap's init included)
DEFAULT_PROCESSES = 64
#: the name a metric asks its scoring context for
SERVICE = "python_sandbox"


def permission(options: Mapping[str, Any]) -> str | None:
    """How this process may run python graders (:data:`ISOLATED`, :data:`UNISOLATED`), ``None`` when
    it may not.

    Raises:
        ConfigError: a value of the ``python_graders`` option that is neither.
    """
    mode = options.get(PYTHON_GRADERS_OPTION)
    if mode is None or mode is False:
        return None
    if mode not in MODES:
        raise ConfigError(f"option {PYTHON_GRADERS_OPTION}={mode!r}: use {' or '.join(MODES)} "
                          "(--allow-python-graders, --unisolated-python-graders)")
    return str(mode)


class PythonSandbox:
    """The python-grader executor of one scoring context (see the module's docstring)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: Mapping[str, Any] = options or {}

    @classmethod
    def from_context(cls, ctx: ScoringContext) -> PythonSandbox:
        return cls(ctx.options)

    @property
    def mode(self) -> str | None:
        """The permission of the run (:func:`permission`)."""
        return permission(self.options)

    def problem(self) -> str | None:
        """Why python graders cannot run here as the run asks (``None``: they can): for ``isolated``,
        what keeps the sandbox from starting (checked once per process by starting one)."""
        if self.mode != ISOLATED:
            return None
        from ragmeter.sandbox.python_grader import isolation_problem

        return isolation_problem()

    def limits(self) -> dict[str, Any]:
        """The run's limits of one grader call, checked.

        Raises:
            ConfigError: a limit that is not a number, or out of its range.
        """
        opts = self.options
        try:
            timeout = float(opts.get(TIMEOUT_OPTION, DEFAULT_TIMEOUT_S))
            memory = int(opts.get(MEMORY_OPTION, DEFAULT_MEMORY_MB))
            workers = int(opts.get(WORKERS_OPTION, DEFAULT_WORKERS))
            processes = int(opts.get(PROCESSES_OPTION, DEFAULT_PROCESSES))
        except (TypeError, ValueError):
            raise ConfigError(f"{TIMEOUT_OPTION} (seconds), {MEMORY_OPTION} (MB), {WORKERS_OPTION} and "
                              f"{PROCESSES_OPTION} must be numbers") from None
        if not (timeout > 0 and memory >= 64 and workers >= 1 and processes >= 4):
            raise ConfigError(f"{TIMEOUT_OPTION} must be > 0 s, {MEMORY_OPTION} at least 64 MB, {WORKERS_OPTION} >= 1, "
                              f"{PROCESSES_OPTION} >= 4; got {timeout:g}, {memory}, {workers}, {processes}")
        return {"timeout_s": timeout, "memory_mb": memory, "workers": workers, "processes": processes}

    def grade(self, name: str, source: str,
              jobs: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any]]]) -> list[Any]:
        """Grade ``(sample, item)`` pairs with the grader ``name``'s ``grade(sample, item)`` (its
        ``source``), in child processes under the run's permission and limits: one
        :class:`~ragmeter.sandbox.python_grader.Outcome` per pair, in order.

        Raises:
            ConfigError: the run has no permission to run python graders, or a bad limit.
        """
        mode = self.mode
        if mode is None:
            raise ConfigError(f"grader {name!r} runs Python code and the run has no permission to run it "
                              "(--allow-python-graders)")
        limits = self.limits()
        from ragmeter.sandbox.python_grader import run_python_grader

        return run_python_grader(name, source, jobs, isolated=mode != UNISOLATED, **limits)


register_service(SERVICE, PythonSandbox.from_context)
