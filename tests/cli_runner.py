"""Run the ``ragmeter`` command in this process, as the tests do: exit status, stdout, stderr."""

from __future__ import annotations

import contextlib
import io


def run_main(*args: str) -> tuple[int, str, str]:
    """``ragmeter.apps.cli.main(ARGS)`` in this process (a module's Ray runtime or fixtures are reused):
    (exit status, stdout, stderr)."""
    from ragmeter.apps.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()
