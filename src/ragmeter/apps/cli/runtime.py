"""The ``ragmeter`` command's runtime policy: how its process treats the interpreter.

A command such as ``ragmeter eval`` is a process that starts, does one batch of work and ends, so it
can make choices a library must not make for its caller's process. They are all here, and only the
console entry point (:func:`ragmeter.apps.cli.entry`) applies them; ``ragmeter.evaluate()`` called from
Python leaves the interpreter as it found it.

* Garbage collector (:func:`pause_collector`): off for the batch commands. A run allocates millions
  of small acyclic objects (samples, chunks, scores, token lists) and each collection pass walks all
  of them again (reading 100,000 rows with ten chunk ids each: 14.8 s with collection, 8.0 s
  without); the process ends with its work, so nothing is gained by collecting.
  ``compare`` and ``report`` are batch commands too (two 100,000-sample runs: about a tenth of a fresh
  process's time was collection passes over the imported modules and the score rows, for the same
  peak memory). A server (``serve``, :func:`pause_collector_while_starting`) collects, but not
  while it starts: its imports, its app and its first page are a batch of the same kind, then the
  objects made so far are frozen out of the collector's sight and collection resumes.
* Allocator (:func:`keep_freed_memory`): glibc keeps freed memory for reuse instead of mapping and
  unmapping every multi-megabyte numpy temporary.
* Printed warnings (:func:`escape_printed_warnings`): control characters shown as ``\\xNN``.
* Exit (:func:`fast_exit`): the stores are closed, the ``atexit`` handlers run, the streams are
  flushed, and the process ends with ``os._exit`` instead of freeing every object one by one.
  ``RAGMETER_SLOW_EXIT=1`` keeps the normal interpreter shutdown.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence

#: commands whose process does one batch of work and ends: no cyclic garbage collection
COLLECTOR_OFF = frozenset({"eval", "trec", "test", "compare", "report"})
#: servers: no cyclic garbage collection while they start (until :func:`server_started`)
COLLECTOR_PAUSED_AT_START = frozenset({"serve"})
#: the longest a server's start keeps the collector paused, in seconds
START_PAUSE_S = 30.0
#: commands that read and score large files: glibc keeps freed memory (:func:`keep_freed_memory`)
ALLOCATOR_TUNED = frozenset({"eval", "trec"})


def apply(argv: Sequence[str]) -> None:
    """The policy for the command ``argv[0]`` (the words after ``ragmeter``)."""
    command = argv[0] if argv else ""
    escape_printed_warnings()
    if command in COLLECTOR_OFF:
        pause_collector()
    if command in COLLECTOR_PAUSED_AT_START:
        pause_collector_while_starting()
    if command in ALLOCATOR_TUNED:
        keep_freed_memory()


def escape_printed_warnings() -> None:
    """Warnings and log records the command prints to stderr (Python's ``warnings``, and
    ``logging``'s last-resort handler when nothing else handles a record) show control characters
    as ``\\xNN``, as every line the command prints does (:mod:`ragmeter.core.terminal`): they can
    quote a file's text, such as a CSV's column names."""
    import logging
    import warnings

    from ragmeter.core.terminal import escape_controls

    class StderrHandler(logging.Handler):  # logging's last resort, with the text escaped
        def emit(self, record: logging.LogRecord) -> None:
            try:
                sys.stderr.write(escape_controls(self.format(record)) + "\n")
            except Exception:  # noqa: BLE001 - as logging's own handlers: report, never raise
                self.handleError(record)

    logging.lastResort = StderrHandler(logging.WARNING)
    plain = warnings.formatwarning
    warnings.formatwarning = lambda *args, **kwargs: escape_controls(plain(*args, **kwargs))


def pause_collector() -> None:
    """No cyclic garbage collection for the rest of the process (see the module docstring); the
    objects made so far (imported modules) are moved out of the collector's sight as well."""
    import gc

    gc.disable()
    gc.freeze()


_resume_lock = threading.Lock()
_resume: list[Callable[[], None]] = []


def pause_collector_while_starting(limit_s: float = START_PAUSE_S) -> None:
    """No cyclic garbage collection while a server starts (imports, its app, its first page),
    until :func:`server_started` or ``limit_s`` seconds, whichever comes first; then the objects
    made so far are moved out of the collector's sight (``gc.freeze``) and collection resumes for
    the rest of the server's life."""
    import gc

    if not gc.isenabled():
        return
    gc.disable()
    done = threading.Event()

    def resume() -> None:
        with _resume_lock:
            if done.is_set():
                return
            done.set()
            gc.freeze()
            gc.enable()

    with _resume_lock:
        _resume.append(resume)
    timer = threading.Timer(limit_s, resume)
    timer.daemon = True
    timer.start()


def server_started() -> None:
    """A server has answered its first page: the collector paused by
    :func:`pause_collector_while_starting` runs again (nothing happens when it was not paused)."""
    with _resume_lock:
        waiting = list(_resume)
        _resume.clear()
    for resume in waiting:
        resume()


def keep_freed_memory() -> None:
    """glibc: serve large allocations from the heap and keep up to 128 MB of freed memory for reuse,
    instead of mapping and unmapping every multi-megabyte numpy temporary (a 30,000-pair eval
    took 200,000 page faults, 0.6 s of system time; 96,000 and 0.35 s this way, peak memory +17 MB)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: below 64 MB, from the heap
    mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD: give back to the OS beyond 128 MB free


def fast_exit(code: int) -> None:
    """End the process with ``code``: close the stores (SQLite checkpoints its log), run the
    ``atexit`` handlers (Ray shutdown, temporary files, logging), flush the streams, ``os._exit``.
    With ``RAGMETER_SLOW_EXIT=1``: ``SystemExit(code)``, the normal interpreter shutdown."""
    if "ragmeter.store.store" in sys.modules:
        from ragmeter.store.store import close_all

        close_all()
    if os.environ.get("RAGMETER_SLOW_EXIT", "").strip() in {"1", "true", "yes"}:
        raise SystemExit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`ragmeter ... | head`)
            pass
    os._exit(code)
