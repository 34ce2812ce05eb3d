"""The ``ragmeter`` command line. Every module of this package that defines ``register(app)``
adds its commands, so each feature keeps its CLI next to nothing else's."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from ragmeter import __version__

#: the exit status table every command's --help ends with (docs/exit-codes.md); ``\b`` keeps
#: click from re-wrapping it into one paragraph
EXIT_CODES_EPILOG = (
    "\b\nExit status: 0 done, every requested metric has values; 1 the check failed\n"
    "(regression, threshold); 2 usage, config or input error (nothing stored);\n"
    "3 finished but incomplete (no samples, or a metric without values)."
)

#: ``ragmeter --help``'s sections, in the order a new user meets them; a command missing here is
#: listed under "Other commands" (tests/test_cli_help_layout.py keeps that section empty)
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start here", ("example", "eval", "show", "report", "serve", "metrics")),
    ("Runs and comparisons", ("runs", "compare", "gate", "baseline", "test", "power", "trend", "export",
                              "consistency", "composite")),
    ("Datasets and pipelines", ("dataset", "corpus", "golden", "pipeline", "grid", "trec")),
    ("Judges", ("correctness", "reliability", "calibrate", "align", "meta-eval", "fit-quality",
                "judge-prices", "batches")),
    ("People", ("annotate", "agreement", "arena")),
    ("Agents and production", ("agent-stats", "simulate", "monitor")),
)


class _SectionedGroup(TyperGroup):
    """The top-level group: its commands listed under :data:`SECTIONS`, one name column for all."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        cmds = {}
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                cmds[name] = cmd
        if not cmds:
            return
        width = max(len(n) for n in cmds)
        limit = formatter.width - 6 - width
        placed: set[str] = set()
        for title, names in (*SECTIONS, ("Other commands", tuple(cmds))):
            rows = [(n.ljust(width), cmds[n].get_short_help_str(limit)) for n in names
                    if n in cmds and n not in placed]
            placed.update(n for n in names if n in cmds)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


# plain (click) help, not rich panels: option names are never cut and it reads at 80 columns
app = typer.Typer(name="ragmeter", no_args_is_help=True, add_completion=False, cls=_SectionedGroup,
                  help="Measure RAG and agent quality: metrics, runs, comparisons, reports.",
                  epilog=EXIT_CODES_EPILOG, pretty_exceptions_enable=False, rich_markup_mode=None)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ragmeter {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Measure RAG and agent quality: metrics, runs, comparisons, reports."""


def _register_all() -> None:
    pkg = sys.modules[__name__]
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "register"):
            mod.register(app)
    for cmd in app.registered_commands:
        if not cmd.epilog:
            cmd.epilog = EXIT_CODES_EPILOG
    for group in app.registered_groups:
        if group.typer_instance is not None and not group.typer_instance.info.epilog:
            group.typer_instance.info.epilog = EXIT_CODES_EPILOG


_register_all()


def _single_command(name: str) -> typer.Typer:
    """A Typer app holding only the command ``name`` (run as ``ragmeter NAME``)."""
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    cmd = next(c for c in app.registered_commands if c.name == name)
    one.registered_commands.append(cmd)
    return one


def _usage_hint(exc: BaseException, argv: list[str]) -> str:
    """``Try 'ragmeter CMD --help'`` for the command the usage error happened in (click knows it
    for most errors; for an option missing its value, the command is the first known word)."""
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None)
    if not path or path == "ragmeter":
        names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
        names |= {g.name for g in app.registered_groups if g.name}
        cmd = next((a for a in argv if a in names), None)
        path = f"ragmeter {cmd}" if cmd else "ragmeter"
    return f"Try '{path} --help' for how to call it."


def entry() -> None:
    """The ``ragmeter`` console script: :func:`main` under the command's runtime policy
    (:mod:`ragmeter.apps.cli.runtime`: garbage collector, allocator), then a quick exit
    (:func:`ragmeter.apps.cli.runtime.fast_exit`)."""
    from ragmeter.apps.cli import runtime

    runtime.apply(sys.argv[1:2])
    try:
        main()
        code: int = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            from ragmeter.core.terminal import escape_controls

            print(escape_controls(str(exc.code)), file=sys.stderr)
            code = 1
    runtime.fast_exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs the app and turns every error a user can cause into one or two
    lines and the exit status of docs/exit-codes.md, never a traceback.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    from ragmeter.core.errors import EXIT_USAGE, RagmeterError, exit_code_for
    from ragmeter.core.terminal import escape_controls

    args = sys.argv[1:] if argv is None else list(argv)
    target, prog = app, "ragmeter"
    if args[:1] and args[0] in {c.name for c in app.registered_commands}:
        # a top-level command (eval, trec, compare, report, serve ...): build only the command itself
        # (building every command's parameters costs 60-170 ms, more on a loaded machine); help,
        # errors and exit codes are the same
        target, prog, args = _single_command(args[0]), f"ragmeter {args[0]}", args[1:]
    try:
        # without standalone mode click returns typer.Exit's code instead of exiting with it,
        # and lets usage errors through to be printed here
        rc = target(args=args, prog_name=prog, standalone_mode=False)
    except RagmeterError as exc:
        # str(RagmeterError) is redacted; it may quote a file's or a server's text: shown, never obeyed
        typer.secho(escape_controls(f"error: {exc}"), fg="red", err=True)
        raise SystemExit(exit_code_for(exc)) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        raise SystemExit(130) from None
    except ModuleNotFoundError as exc:
        # an optional dependency the command needs is not installed: name the extra that brings it
        from ragmeter.core.extras import missing_module_message

        message = missing_module_message(exc.name)
        if message is None:
            raise
        typer.secho(f"error: {message}", fg="red", err=True)
        raise SystemExit(EXIT_USAGE) from None
    except OSError as exc:
        # a path the command was given cannot be read or written (missing, a folder, a file in the
        # way of a folder, no permission, a name too long): the caller's input, status 2
        if exc.filename is None:
            raise
        from ragmeter.core.redact import redact

        typer.secho(escape_controls(f"error: {redact(str(exc.filename))}: {exc.strerror or exc}"), fg="red", err=True)
        raise SystemExit(EXIT_USAGE) from None
    except typer.TyperException as exc:
        # typer >= 0.29 vendors click: its UsageError/BadParameter/NoSuchOption ... derive from
        # TyperException, carry the exit status (2 for usage errors) and the failing command
        typer.secho(escape_controls(f"error: {exc.format_message()}"), fg="red", err=True)
        if getattr(exc, "ctx", None) is not None or exc.exit_code == EXIT_USAGE:
            typer.echo(_usage_hint(exc, sys.argv[1:] if argv is None else argv), err=True)
        raise SystemExit(exc.exit_code) from None
    if isinstance(rc, int) and rc != 0:
        raise SystemExit(rc)
