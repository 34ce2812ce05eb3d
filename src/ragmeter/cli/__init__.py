"""The ``ragmeter`` command line. Every module of this package that defines ``register(app)``
adds its commands, so each feature keeps its CLI next to nothing else's."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

app = typer.Typer(name="ragmeter", no_args_is_help=True, add_completion=False,
                  help="Measure RAG and agent quality: metrics, runs, comparisons, reports.",
                  pretty_exceptions_enable=False)


def _register_all() -> None:
    pkg = sys.modules[__name__]
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "register"):
            mod.register(app)


_register_all()


def main() -> None:
    """Console entry point: runs the app, turning ragmeter's own errors into one clear line."""
    from ragmeter.errors import RagmeterError, StoreError

    try:
        # without standalone mode click returns typer.Exit's code instead of exiting with it
        rc = app(standalone_mode=False)
    except RagmeterError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        # a missing database, an unknown run or a run still being written: an input error
        raise SystemExit(2 if isinstance(exc, StoreError) else 1) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        typer.echo("aborted", err=True)
        raise SystemExit(130) from None
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            raise SystemExit(exc.exit_code) from None
        raise
    if isinstance(rc, int) and rc != 0:
        raise SystemExit(rc)
