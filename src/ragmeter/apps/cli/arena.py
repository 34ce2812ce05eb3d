"""``ragmeter arena``: pairwise verdicts between the answers of two or more stored runs, each item
judged in both orders; win rates with intervals, the position-bias rate and Bradley-Terry strengths."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, fail, get_store
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count


def register(app: typer.Typer) -> None:
    app.command("arena")(arena_cmd)
    from ragmeter.apps.cli import show_hooks

    show_hooks.add(_show_section)


def _show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show`` of an arena run: its pairs, position bias and ranking."""
    from ragmeter.analysis.arena import stored_arena

    rec = stored_arena(run)
    return {} if rec is None else {"arena": "\n".join(lines(rec))}


def _ci(lo: Any, hi: Any, digits: int = 2) -> str:
    return "" if lo is None or hi is None else f" [{lo:.{digits}f}, {hi:.{digits}f}]"


def lines(rec: Mapping[str, Any]) -> list[str]:
    """The arena as text: one line per pair, the position bias, the Bradley-Terry ranking."""
    level = rec.get("level", 0.95)
    systems = [s["label"] for s in rec.get("systems") or []]
    dropped = {k: v for k, v in (rec.get("dropped") or {}).items() if v}
    out = [f"{' vs '.join(systems)}: {rec.get('n_items', 0)} shared items, judged by {rec.get('metric')} in both "
           f"orders" + (f"; dropped (not in every run): {', '.join(f'{k} {v}' for k, v in dropped.items())}"
                        if dropped else "; no item dropped")]
    out.append(f"win rate = (wins + ties/2) / judged, {level:.0%} CI; a tie = the two orders disagree")
    for p in rec.get("pairs") or []:
        w = p["win_rate"]
        rate = "—" if w["value"] is None else f"{w['value']:.3f}{_ci(w['ci_low'], w['ci_high'])}"
        b = p["position_bias"]
        bias = "—" if b["rate"] is None else f"{b['rate']:.2f}"
        nj = f", {p['n_not_judged']} not judged" if p["n_not_judged"] else ""
        out.append(f"  {p['a']} vs {p['b']}: {count(p['wins'], 'win')}, {count(p['ties'], 'tie')}, "
                   f"{count(p['losses'], 'loss', 'losses')} "
                   f"({p['n_judged']} judged{nj}); win rate of {p['a']} {rate}; position bias {bias}")
        for reason, n in (p.get("not_judged_reasons") or {}).items():
            out.append(f"    not judged ({n}): {reason}")
    pb = rec.get("position_bias") or {}
    if pb.get("rate") is not None:
        out.append(f"position bias: {pb['rate']:.2f}{_ci(pb['ci_low'], pb['ci_high'])} of {pb['n']} judged "
                   f"comparisons followed the position shown ({pb['first']} the first answer, {pb['second']} the "
                   "second, in both orders)")
    bt = rec.get("bradley_terry")
    if bt:
        out.append(f"Bradley-Terry log-strengths (mean 0; {level:.0%} bootstrap CI over items, "
                   f"{bt['n_bootstrap']} resamples" + (f", {bt['bootstrap_penalised']} of them penalised: no ML "
                                                       "estimate" if bt.get("bootstrap_penalised") else "")
                   + ")" + ("" if bt["maximum_likelihood"] else
                                                        f"; penalised, alpha {bt['prior_alpha']}: the ML "
                                                        "estimate does not exist"))
        for r in bt["strengths"]:
            out.append(f"  {r['rank']}. {r['system']}: {r['strength']:+.3f}{_ci(r['ci_low'], r['ci_high'], 3)}")
    elif rec.get("ranking"):
        out.append(f"ranking: {' > '.join(rec['ranking'])}")
    return out


def _options(option: list[str] | None, extra: dict[str, Any]) -> dict[str, Any]:
    from ragmeter.apps.cli.core import _parse_value

    opts: dict[str, Any] = {}
    for item in option or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise typer.BadParameter(f"use key=value; got {item!r}", param_hint="'--option'")
        opts[k.strip()] = _parse_value(v)
    opts.update({k: v for k, v in extra.items() if v is not None})
    return opts


def arena_cmd(
    runs: Annotated[list[str], typer.Argument(help="Two or more stored runs (id, prefix, name or 'latest'): "
                                                   "the systems whose answers are compared.",
                                              metavar="RUN")],
    judge: Annotated[str | None, typer.Option("--judge", help="LLM judge as provider:model.")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an "
                                                       "OpenAI-compatible judge.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Environment variable "
                                                          "holding the judge's API key.")] = None,
    criteria: Annotated[str | None, typer.Option("--criteria", help="What makes an answer better (default: "
                                                 "correct, complete, supported, on point).")] = None,
    metric: Annotated[str | None, typer.Option("--metric", help="The pairwise metric: pairwise (ragmeter's "
                                               "prompt, default) or deepeval:arena_g_eval (DeepEval's "
                                               "ArenaGEval prompts).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the judge calls and estimated cost; call "
                                          "nothing, store nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over items for the "
                                           "Bradley-Terry intervals (0: none).",
                                           parser=number(0, 100_000, integer=True))] = 1000,
    level: Annotated[float, typer.Option("--level", help="Confidence level of the intervals.",
                                         parser=number(0, 1, low_open=True, high_open=True))] = 0.95,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the resamples.", parser=number(0, integer=True))] = 20261128,
    name: Annotated[str | None, typer.Option("--name", help="A name for the arena's run.")] = None,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option (repeatable), "
                                                     "as in `ragmeter eval`.")] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Stop judging once this many USD are "
                                                   "spent.", parser=number(0))] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Judge requests in flight at "
                                                    "most.", parser=number(1, 10_000, integer=True))] = None,
    rpm: Annotated[float | None, typer.Option("--rpm", help="Judge requests per minute.",
                                              parser=number(0, low_open=True))] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide progress bars.")] = False,
) -> None:
    """Which system answers better: every item the runs share (matched by sample id) is judged
    for each pair of runs twice, A's answer shown first and then B's; an item whose two verdicts
    disagree is a tie (MT-Bench's rule, Zheng et al. 2023). Prints per pair the wins, ties and
    losses, the win rate (ties count half) with its interval, the position-bias rate (items whose
    two verdicts both picked the answer in the same position), and for three runs or more
    Bradley-Terry strengths with bootstrap intervals over items and the ranking. Stored as a run
    (tag arena): `ragmeter show RUN`, `ragmeter report RUN`, the dashboard."""
    from ragmeter.analysis.arena_run import metric_name, run_arena
    from ragmeter.core.errors import RagmeterError

    if criteria is not None and not criteria.strip():
        raise typer.BadParameter("the criteria cannot be empty", param_hint="'--criteria'")
    opts = _options(option, {"judge": judge, "judge_base_url": judge_base_url,
                             "judge_api_key_env": judge_api_key_env, "judge_max_cost": max_cost,
                             "judge_concurrency": concurrency, "judge_rpm": rpm})
    if not opts.get("judge"):
        raise fail("an arena needs a judge: --judge provider:model (e.g. openai:gpt-4o-mini, with "
                   "--judge-base-url for a local OpenAI-compatible server; docs/judge.md)")
    try:
        key = metric_name(metric)
        if dry_run:
            _dry_run(get_store(db, must_exist=True), runs, key, criteria, opts, db, as_json)
            return
        rec = run_arena(get_store(db, must_exist=True), runs, metric=key, criteria=criteria, options=opts or None,
                        name=name, n_bootstrap=bootstrap, level=level, seed=seed,
                        progress=not no_progress and not as_json)
    except RagmeterError as exc:
        raise fail(str(exc), exc.exit_code) from None
    if as_json:
        typer.echo(json.dumps(rec, default=str))
    else:
        console.print(f"[bold]arena[/bold] — run {rec['run_id']}", highlight=False)
        for ln in lines(rec):
            console.print(ln, markup=False, highlight=False)
    if rec["status"] == "incomplete":
        err_console.print(f"[yellow]run {rec['run_id']} is incomplete (exit 3):[/yellow]")
        for reason in rec["incomplete"]:
            err_console.print(f"  {reason}", markup=False, highlight=False)
        raise typer.Exit(3)


def _dry_run(store: Any, runs: list[str], key: str, criteria: str | None, opts: dict[str, Any], db: str | None,
             as_json: bool) -> None:
    from ragmeter.analysis.arena_run import arena_input, arena_options
    from ragmeter.apps.cli.judge import dry_run_report
    from ragmeter.io.readers import Dataset
    from ragmeter.run.estimate import estimate_run_cost
    from ragmeter.run.eval_config import EvalConfig

    inp = arena_input(store, runs)
    data = Dataset(inp.samples, source=f"arena {' vs '.join(inp.systems)}")
    config = EvalConfig(metrics=(key,), db=db, options=arena_options(opts, criteria))
    about = {"systems": inp.systems, "n_items": len(inp.items), "dropped": inp.dropped,
             "pairs": [list(p) for p in inp.pairs], "metric": key}
    if as_json:
        typer.echo(json.dumps({**estimate_run_cost(data, config=config), "arena": about}, default=str))
        return
    dropped = {k: v for k, v in inp.dropped.items() if v}
    console.print(f"arena of {', '.join(inp.systems)}: {count(len(inp.items), 'shared item')} x {count(len(inp.pairs), 'pair')} "
                  f"x 2 orders" + (f"; dropped (not in every run): {', '.join(f'{k} {v}' for k, v in dropped.items())}"
                                   if dropped else ""), markup=False, highlight=False, soft_wrap=True)
    dry_run_report(data, config, as_json=False)
