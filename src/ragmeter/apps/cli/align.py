"""``ragmeter align``: tune a judge metric to human labels and measure it on labels it was not tuned on."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count


def register(app: typer.Typer) -> None:
    app.command("align")(align_cmd)


def align_cmd(
    metric: Annotated[str, typer.Argument(help="The judge metric to tune (faithfulness, answer_relevancy, context_recall ...).")],
    labels: Annotated[str, typer.Option("--labels", help="Human-labelled items, as `ragmeter meta-eval` reads them (.jsonl/.csv/.parquet: the sample's fields and a label column; 'example-human').")],
    judge: Annotated[str | None, typer.Option("--judge", help="The judge as provider:model (also the model that rewrites the rubric).")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible judge.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Environment variable holding the judge's API key.")] = None,
    holdout: Annotated[float, typer.Option("--holdout", help="Share of the items held out from the tuning (stratified by label); agreement is reported on them only.", parser=number(0, 1, low_open=True, high_open=True))] = 0.5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split and of the bootstrap resamples (recorded).", parser=number(0, integer=True))] = 20261128,
    shots: Annotated[int, typer.Option("--shots", help="Few-shot examples to add, from the judge's disagreements with people on the tuning part (closest to the decision boundary first).", parser=number(1, 100, integer=True))] = 8,
    rewrite_rubric: Annotated[bool, typer.Option("--rewrite-rubric", help="Also let the judge model rewrite the metric's instructions from those disagreements.")] = False,
    name: Annotated[str | None, typer.Option("--name", help="The tuned template's name (default METRIC-aligned); used as --metrics METRIC@NAME.")] = None,
    label: Annotated[str | None, typer.Option("--label", help="The human label column (default: human, human_score, label ...).")] = None,
    map_: Annotated[list[str] | None, typer.Option("--map", help="field=column for columns the aliases miss (repeatable).")] = None,
    fmt_: Annotated[str | None, typer.Option("--format", help="File format when the suffix does not say: jsonl, json, csv, tsv, parquet.")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over held-out items.", parser=number(0, 100_000, integer=True))] = 1000,
    level: Annotated[float, typer.Option("--level", help="Confidence level of the intervals.", parser=number(0, 1, low_open=True, high_open=True))] = 0.95,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option (repeatable), as in `ragmeter eval`.")] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Stop judging once this many USD are spent.", parser=number(0))] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Judge requests in flight at most.", parser=number(1, 10_000, integer=True))] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the judge calls and estimated cost; send nothing, store nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide progress bars.")] = False,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
) -> None:
    """Tune a judge metric to human labels: split the labelled items (stratified by label, seeded)
    into a tuning part and a held-out part, judge the tuning part, add few-shot examples from the
    judge's disagreements with people (optionally a rewritten rubric), judge the held-out part
    again, and report agreement before and after on the held-out part only (the meta-eval
    statistics) with a paired bootstrap interval of the change. The tuned template is stored as a
    named, versioned template used as --metrics METRIC@NAME; it becomes NAME's default only when
    the change's interval lies above 0 (docs/align.md)."""
    from ragmeter.analysis.align import align
    from ragmeter.apps.cli._common import get_store
    from ragmeter.apps.cli.core import _parse_value

    opts: dict[str, Any] = {}
    for item in option or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise typer.BadParameter(f"use key=value; got {item!r}", param_hint="'--option'")
        opts[k.strip()] = _parse_value(v)
    opts.update({k: v for k, v in {"judge": judge, "judge_base_url": judge_base_url,
                                   "judge_api_key_env": judge_api_key_env, "judge_max_cost": max_cost,
                                   "judge_concurrency": concurrency}.items() if v is not None})
    if not opts.get("judge"):
        raise typer.BadParameter("align needs a judge, e.g. --judge openai:gpt-4o-mini, or --judge openai:MODEL "
                                 "--judge-base-url URL for an OpenAI-compatible server (docs/judge.md)",
                                 param_hint="'--judge'")
    out = align(labels, metric, options=opts, db=get_store(db), holdout=holdout, seed=seed, shots=shots,
                rewrite=rewrite_rubric, name=name, dry_run=dry_run, label=label, mapping=map_ or None, fmt=fmt_,
                n_bootstrap=bootstrap, level=level, progress=not no_progress and not as_json)
    if isinstance(out, dict):  # --dry-run
        if as_json:
            typer.echo(json.dumps(out, default=str))
            return
        _print_plan(out)
        return
    if as_json:
        typer.echo(json.dumps(out.to_dict(), default=str))
        return
    _print_alignment(out)


def _print_plan(p: dict[str, Any]) -> None:
    c = p["calls"]
    console.print("[bold]dry run[/bold]: no judge request sent, nothing stored", highlight=False)
    console.print(f"align {p['metric']} with {p['judge']}: {p['n_items']} items, {p['tuning']} to tune on, "
                  f"{p['held_out']} held out", markup=False, highlight=False)
    console.print(f"calls: {c['before']} before tuning ({c['cached_before']} already in the cache), "
                  f"{c['rewrite']} rubric rewrite, {c['after']} on the held-out part after tuning = "
                  f"{p['planned_calls']}", markup=False, highlight=False)
    cost = p.get("est_cost_usd")
    console.print(f"estimated tokens: {p['est_input_tokens']:,} in, {p['est_output_tokens']:,} out; cost "
                  + (f"${cost:.4f}" if cost is not None else "unknown (no price for this model)"),
                  markup=False, highlight=False)
    console.print(p["note"], markup=False, highlight=False)


def _num(x: Any, signed: bool = False) -> str:
    if x is None:
        return "—"
    x = round(float(x), 3) + 0.0  # no "-0.000"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _print_alignment(a: Any) -> None:
    say = lambda text: console.print(text, markup=False, highlight=False)  # noqa: E731
    say(f"align {a.metric} as {a.name} with {a.judge} ({a.labels}: {a.n_items} items; {len(a.tuning)} to tune on, "
        f"{len(a.held_out)} held out, stratified by label, seed {a.seed})")
    if a.label_scale:
        say(a.label_scale)
    shown = f"{count(len(a.examples), 'few-shot example')} from {count(a.n_disagreements, 'disagreement')} with people on the tuning part"
    say(shown + (" and a rewritten rubric" if a.rewritten else "") + " (closest to the decision boundary first)")
    if a.note:
        say(a.note)
    say(f"agreement with people on the {len(a.held_out)} held-out items only:")
    say(f"  {'statistic':<16}{'before':>8}{'after':>8}{'change':>9}  95% CI of the change (paired)")
    for stat, c in a.changes.items():
        ci = (f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]" if c.get("ci_low") is not None else "—")
        say(f"  {stat:<16}{_num(c['before']):>8}{_num(c['after']):>8}{_num(c['change'], True):>9}  {ci}")
    stat = {"kendall": "Kendall's tau-b", "agreement_rate": "the agreement rate"}.get(a.statistic or "", a.statistic)
    if a.version is None:
        say(f"nothing tuned: {a.metric}@{a.name} keeps " + (f"version {a.default}" if a.default else
                                                             f"{a.metric}'s own template"))
    elif a.helped:
        say(f"the tuning helped: the change in {stat} has its interval above 0; {a.metric}@{a.name} now uses "
            f"version {a.version} (use it as --metrics {a.metric}@{a.name})")
    else:
        kept = f"version {a.default}" if a.default else f"{a.metric}'s own template"
        say(f"the tuning did not help: the interval of the change in {stat} includes 0 (or lies below it); "
            f"version {a.version} is stored but {a.metric}@{a.name} keeps {kept} as its default "
            f"({a.metric}@{a.name}:{a.version} uses the new one)")
