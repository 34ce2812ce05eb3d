"""Judge commands: ``judge-prices``, and the ``--dry-run`` estimate of ``ragmeter eval``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import console


def register(app: typer.Typer) -> None:
    app.command("judge-prices")(judge_prices_cmd)


def judge_prices_cmd(
    prices: Annotated[Path | None, typer.Option("--prices", help="A price file (JSON/YAML) that extends or overrides the genai-prices table.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Show the price used for this provider:model.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
) -> None:
    """List judge prices (USD per million input/output tokens, from the genai-prices package's
    bundled data, no network); extend or override them with a file passed as
    --option judge_prices=FILE to `ragmeter eval`."""
    from ragmeter.llm.config import parse_judge
    from ragmeter.llm.prices import PriceTable

    table = PriceTable.load(prices)
    if model:
        provider, name, base_url = parse_judge(model)
        p = table.get(provider, name, base_url)
        if as_json:
            typer.echo(json.dumps({"model": model, **(_price_json(p) if p else {"input": None, "output": None})}))
        elif p is None:
            import difflib

            names = list(dict.fromkeys(k.partition(":")[2] or k for k, _ in table.rows()))
            close = difflib.get_close_matches(name, names, n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            console.print(f"no price for {model}: its cost would be unknown and --max-cost refused.{hint} Add it "
                          "to a price file (--prices here, --option judge_prices=FILE on eval; docs/judge.md)",
                          highlight=False, markup=False)
        else:
            console.print(f"{model}: ${p.input:g} input, ${p.output:g} output per 1M tokens{_tiers_text(p)}")
        if p is None:
            raise typer.Exit(3)  # asked for one price and there is none: incomplete, not done
        return
    rows = table.rows()
    if as_json:
        typer.echo(json.dumps({k: _price_json(p) for k, p in rows}))
        return
    from rich.table import Table

    t = Table(title=f"judge prices (genai-prices {_library_version()}), USD per 1M tokens"
                    f"{f' (+ {prices})' if prices else ''}")
    for col in ("model", "input", "output"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for k, p in rows:
        t.add_row(k, f"{p.input:g}" + ("+" if p.input_tiers else ""), f"{p.output:g}" + ("+" if p.output_tiers else ""))
    console.print(t)
    console.print("+: a higher rate once a request's input passes a size (`--model NAME` shows it)")


def _price_json(p: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"input": p.input, "output": p.output}
    if p.input_tiers or p.output_tiers:
        out["tiers"] = {"input": [list(t) for t in p.input_tiers], "output": [list(t) for t in p.output_tiers]}
    return out


def _tiers_text(p: Any) -> str:
    steps = [f"{side} ${rate:g} above {start:,} input tokens"
             for side, tiers in (("input", p.input_tiers), ("output", p.output_tiers)) for start, rate in tiers]
    return f" ({'; '.join(steps)})" if steps else ""


def _library_version() -> str:
    from importlib.metadata import version

    return version("genai-prices")


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
    batch = plan.get("est_batch_cost_usd")
    console.print("estimated cost: " + (f"${cost:.4f}" if cost is not None else
                                         f"unknown ({plan.get('price', 'no price for this model')})")
                  + (f" online, ${batch:.4f} with --batch (the provider's batch API: 50%)" if batch is not None else ""))
    for label, j in (plan.get("judges") or {}).items():  # a panel: each judge's share
        jc = j.get("est_cost_usd")
        console.print(f"  judge {label}: {j.get('planned_calls', 0)} calls, "
                      + (f"${jc:.4f}" if jc is not None else "cost unknown (no price)"),
                      markup=False, highlight=False, emoji=False)
    for metric, m in sorted((plan.get("per_metric") or {}).items()):
        console.print(f"  {metric:<26} {m['calls']:>6} calls  {m['input_tokens']:>10,} in  "
                      f"{m['output_tokens']:>9,} out", markup=False, highlight=False)
