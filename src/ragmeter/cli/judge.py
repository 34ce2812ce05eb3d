"""Judge commands: ``judge-prices``, and the ``--dry-run`` estimate of ``ragmeter eval``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.cli._common import console


def register(app: typer.Typer) -> None:
    app.command("judge-prices")(judge_prices_cmd)


def judge_prices_cmd(
    prices: Annotated[Path | None, typer.Option("--prices", help="A price file (JSON/YAML) that extends the built-in table.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Show the price used for this provider:model.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
) -> None:
    """List judge prices (USD per million input/output tokens); extend them with a file passed as
    --option judge_prices=FILE to `ragmeter eval`."""
    from ragmeter.llm.config import parse_judge
    from ragmeter.llm.prices import PriceTable

    table = PriceTable.load(prices)
    if model:
        provider, name, _ = parse_judge(model)
        p = table.get(provider, name)
        if as_json:
            typer.echo(json.dumps({"model": model, "input": p.input if p else None,
                                   "output": p.output if p else None}))
        elif p is None:
            console.print(f"no price for {model}: add it to a price file (see docs/judge.md)")
        else:
            console.print(f"{model}: ${p.input:g} input, ${p.output:g} output per 1M tokens")
        return
    rows = table.rows()
    if as_json:
        typer.echo(json.dumps({k: {"input": i, "output": o} for k, i, o in rows}))
        return
    from rich.table import Table

    t = Table(title=f"judge prices, USD per 1M tokens{f' (+ {prices})' if prices else ''}")
    for col in ("model", "input", "output"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for k, i, o in rows:
        t.add_row(k, f"{i:g}", f"{o:g}")
    console.print(t)


def dry_run_report(data: Any, config: Any, *, as_json: bool) -> None:
    """Print the estimate of ``ragmeter eval --dry-run`` (``config``: the run's
    :class:`~ragmeter.run.eval_config.EvalConfig`)."""
    from ragmeter.run.estimate import estimate_run_cost

    plan = estimate_run_cost(data, config=config)
    if as_json:
        typer.echo(json.dumps(plan, default=str))
        return
    console.print("[bold]dry run[/bold]: no judge call made, no run stored")
    if not plan.get("planned_calls") and plan.get("note"):
        console.print(plan["note"])
        return
    console.print(f"judge {plan.get('judge', '?')}: {plan['planned_calls']} calls would be made"
                  f" ({plan.get('cached', 0)} verdicts already in the cache)", emoji=False)
    console.print(f"estimated tokens: {plan['est_input_tokens']:,} in, {plan['est_output_tokens']:,} out "
                  f"(input: {plan.get('token_estimate', 'script-aware estimate')}; output: an assumed "
                  "size per metric)", highlight=False)
    cost = plan.get("est_cost_usd")
    console.print("estimated cost: " + (f"${cost:.4f}" if cost is not None else
                                         f"unknown ({plan.get('price', 'no price for this model')})"))
    for metric, m in sorted((plan.get("per_metric") or {}).items()):
        console.print(f"  {metric:<26} {m['calls']:>6} calls  {m['input_tokens']:>10,} in  "
                      f"{m['output_tokens']:>9,} out", markup=False, highlight=False)
