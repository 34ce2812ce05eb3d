"""``ragmeter metrics --from ragas|deepeval``: a tool's metrics, ragmeter's name for each, and
whether it gives the tool's number (the catalogue of :mod:`ragmeter.metrics.catalogue`)."""

from __future__ import annotations

import json

import typer

from ragmeter.apps.cli._common import console

_LABELS = {"ragas": "ragas", "deepeval": "DeepEval"}


def print_from(tool: str, as_json: bool) -> None:
    """Print the table (or the JSON list) of ``tool``'s metrics; an unknown tool is a usage error."""
    from ragmeter.metrics.catalogue import TOOLS, coverage

    key = tool.strip().lower()
    if key not in TOOLS:
        raise typer.BadParameter(f"no tool {tool!r}; choose one of: {', '.join(TOOLS)}", param_hint="'--from'")
    entries = coverage(key)
    if as_json:
        typer.echo(json.dumps([e.to_dict() for e in entries]))
        return
    from rich import box
    from rich.table import Table

    label = _LABELS[key]
    missing = sum(e.ragmeter is None for e in entries)
    exact = sum(e.exact for e in entries)
    title = (f"{label} {entries[0].version}: {len(entries)} metrics, {exact} exact in ragmeter"
             + (f", {missing} missing" if missing else ""))
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
              title_justify="left")
    # ragmeter's names are what a user copies: they never wrap; a long tool class name folds at 80 columns
    t.add_column(f"{label} metric", overflow="fold")
    t.add_column("ragmeter metric", no_wrap=True)
    t.add_column("exact", no_wrap=True, min_width=5)
    for e in entries:
        t.add_row(e.metric, e.ragmeter or "missing", "yes" if e.exact else "no")
    console.print(t)
    console.print(f"exact: the same number as {label} {entries[0].version} given the same judge verdicts "
                  "and embeddings (`ragmeter metrics --long` says how each is computed).",
                  markup=False, highlight=False)
