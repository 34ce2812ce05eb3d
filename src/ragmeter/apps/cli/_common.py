"""Helpers shared by the CLI modules: store option, tables, number formatting."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads when a command prints with it, not at start-up
    from rich.console import Console, Group

    from ragmeter.store import Store
    from ragmeter.store.records import RunSummary


class _Console:
    """A console made at use time, so it sees the terminal width (and ``COLUMNS``) of the call,
    not of the moment the module was imported; it shows control characters of text as ``\\xNN``
    (:func:`ragmeter.core.terminal.console`)."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr

    def __getattr__(self, name: str) -> Any:
        from ragmeter.core.terminal import console as escaping_console

        return getattr(escaping_console(stderr=self._stderr), name)


console: Console = _Console()  # type: ignore[assignment]
err_console: Console = _Console(stderr=True)  # type: ignore[assignment]

#: the port ``ragmeter serve`` listens on by default (links printed by other commands use it too)
DEFAULT_PORT = 8765
DB_HELP = "SQLAlchemy URL or SQLite path of the store (default: $RAGMETER_DB or .ragmeter/ragmeter.db)."


def fail(msg: str, code: int = 2) -> Any:
    """Print ``error: MSG`` on stderr and return the ``typer.Exit(code)`` to raise. The message is
    text, not markup (a label such as ``[x]`` shows as written), and it is not folded inside a word:
    a long file path stays whole for the user to copy."""
    import typer
    from rich.markup import escape

    err_console.print(f"[red]error:[/red] {escape(msg)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def get_store(db: str | None, must_exist: bool = False) -> Store:
    """The store at ``db``; read-only commands pass ``must_exist`` so a mistyped path fails
    instead of leaving a new empty database behind."""
    from ragmeter.store import open_store  # SQLAlchemy loads only for commands that open the store

    return open_store(db, must_exist=must_exist)


def fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


#: no-value reasons listed per metric under a summary table (a run's summary already lists at most
#: three precise texts of each kind of failure: ragmeter.core.reasons.summarise)
_REASONS_SHOWN = 8


def summary_table(summary: RunSummary, title: str | None = None) -> Group:
    """Per-metric aggregates (mean, 95% CI, n, how many without a value) as a rich table, followed
    by why values are missing: each metric's reasons (the precise ones, e.g. ``judge failure:
    invalid reply — turn(s) [1] are not assistant turns``) one under the other, indented, so they
    stay readable in narrow terminals."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    # figures never wrap; a metric key too long for the terminal folds onto a second line instead of
    # squeezing the figures' columns to nothing (a long @model key at 80 columns)
    t = Table(title=title, show_lines=False, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    t.add_column("metric", style="bold", overflow="fold", min_width=12)
    t.add_column("mean", justify="right", no_wrap=True)
    t.add_column("95% CI", justify="right", no_wrap=True)
    t.add_column("n", justify="right", no_wrap=True)
    t.add_column("no value", justify="right", no_wrap=True)
    t.add_column("dir", no_wrap=True)
    why: list[Any] = []
    corpus = Text()
    for m, a in summary.items():
        if a.extra.get("corpus_score") is not None:
            ci = (f" [{fmt(a.extra['corpus_ci_low'])}, {fmt(a.extra['corpus_ci_high'])}]"
                  if a.extra.get("corpus_ci_low") is not None else "")
            corpus.append(f"{m}: corpus {fmt(a.extra['corpus_score'])}{ci} (the mean above is the sentence mean)\n")
        ci = f"[{fmt(a.ci_low)}, {fmt(a.ci_high)}]" if a.ci_low is not None else "—"
        t.add_row(m, fmt(a.mean), ci, str(a.n), str(a.n_missing), "↑" if a.direction == "higher" else "↓")
        reasons = list(a.missing_reasons.items())
        if reasons:
            why.append(Text(f"{m}:", style="bold"))
            why += [Padding(Text(f"{r} ({c})"), (0, 0, 0, 2), expand=False) for r, c in reasons[:_REASONS_SHOWN]]
            if len(reasons) > _REASONS_SHOWN:
                more = f"and {len(reasons) - _REASONS_SHOWN} more (ragmeter show RUN --json)"
                why.append(Padding(Text(more), (0, 0, 0, 2), expand=False))
    parts: list[Any] = [t]
    if corpus:
        parts += [Text("corpus-level scores (sacrebleu corpus_score, 95% segment-bootstrap CI):"), corpus]
    if why:
        parts += [Text("why no value:", style="yellow"), *why]
    return Group(*parts)


def exit_if_incomplete(result: Any) -> None:
    """Exit with status 3 (after the command printed its output) when an evaluation's run is
    incomplete, listing why on stderr; a complete run returns."""
    import typer

    if getattr(result, "status", "completed") != "incomplete":
        return
    import re

    err_console.print(f"[yellow]run {result.run_id} is incomplete (exit 3):[/yellow]")
    for reason in getattr(result, "incomplete", []):
        # the full no-value reason is in the summary ("why no value", or the JSON): once is enough
        # a long example is cut between words ("(f…" reads as a typo)
        reason = re.sub(r" \(e\.g\. (.{61,})\)$", lambda m: f" (e.g. {m.group(1)[:61].rsplit(None, 1)[0]} …)", reason)
        err_console.print(f"  {reason}", markup=False, highlight=False)
    raise typer.Exit(3)
