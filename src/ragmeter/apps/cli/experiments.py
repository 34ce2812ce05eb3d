"""Experiment commands: grid, pipeline, correctness, compare, power, gate, baseline save."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, exit_if_incomplete, fmt, get_store
from ragmeter.apps.cli._outputs import check_output_name
from ragmeter.apps.cli._params import number


def _out() -> Any:
    """The console for wide tables: the terminal's width in a terminal; at least 140 columns when
    writing to a pipe or a CI log (where long lines do not wrap and truncated cells would hide figures)."""
    if console.is_terminal:
        return console
    from ragmeter.core.terminal import console as escaping_console

    return escaping_console(width=max(console.size.width, 140))


baseline_app = typer.Typer(name="baseline", no_args_is_help=True,
                           help="Baseline files for the regression gate.")


def register(app: typer.Typer) -> None:
    app.command("grid")(grid_cmd)
    app.command("pipeline")(pipeline_cmd)
    app.command("correctness")(correctness_cmd)
    app.command("compare")(compare_cmd)
    app.command("power")(power_cmd)
    app.command("gate")(gate_cmd)
    baseline_app.command("save")(baseline_save_cmd)
    app.add_typer(baseline_app, name="baseline")
    from ragmeter.apps.cli import show_hooks

    if _method_section not in show_hooks._HOOKS:
        show_hooks.add(_method_section)


def _kv(items: list[str] | None, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        k, _, v = item.partition("=")
        if "=" not in item or not k.strip():
            raise typer.BadParameter(f"{what} expects key=value, got {item!r}")
        try:
            out[k.strip()] = json.loads(v)
        except (ValueError, RecursionError):
            out[k.strip()] = v
    return out


def _p(v: float | None) -> str:
    if v is None:
        return "—"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _metrics(values: list[str] | None) -> list[str]:
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


# ---- grid ----------------------------------------------------------------------------------------

def grid_cmd(
    config: Annotated[Path, typer.Argument(help="Grid config (YAML/JSON): dataset, pipeline, grid, method, metrics, experiment.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept the judge cost estimate without asking (CI).")] = False,
    top_n: Annotated[int | None, typer.Option("--top-n", help="Configurations re-ranked by the LLM judge (default 5; 0 = none).", parser=number(0, 1000, integer=True))] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="LLM judge as provider:model for the top-N phase.")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible judge.")] = None,
    method: Annotated[str | None, typer.Option("--method", help="Correctness method (overrides the config).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="param=value fixed for every configuration (removes it from the grid; repeatable).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Threads running the pipeline.", parser=number(1, 1024, integer=True))] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Run the pipeline even for cached (configuration, question) pairs.")] = False,
    halving: Annotated[bool, typer.Option("--halving", help="Successive halving (eta 3) unless the config sets it.")] = False,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option, e.g. judge_api_key_env=MY_KEY (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored grid record as JSON.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="local, or ray: score metrics in blocks, encode embeddings and send judge calls (under one limit and budget) on a Ray runtime (pip install 'ragmeter-eval[ray]'). Default: the config's experiment.engine, else local.")] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="ray://HOST:10001 of a Ray cluster (default: a local Ray runtime).")] = None,
) -> None:
    """Grid search: run the pipeline for every configuration, score, rank with CIs, re-rank the top N with the judge."""
    from ragmeter.analysis.grid import HalvingConfig, parse_grid_config, run_grid

    overrides: dict[str, Any] = {"top_n": top_n, "judge": judge, "workers": workers, "engine": engine,
                                 "ray_address": ray_address}
    if no_cache:
        overrides["cache"] = False
    if set_:
        overrides["set"] = _kv(set_, "--set")
    cfg = parse_grid_config(config, overrides=overrides)
    if judge_base_url:
        cfg.options["judge_base_url"] = judge_base_url
    cfg.options.update(_kv(option, "--option"))
    from ragmeter.run.option_keys import check_option_keys

    check_option_keys(cfg.options, "run options")  # before any pipeline call: a misspelt key would be ignored
    if method:
        from ragmeter.metrics.correctness import metric_for_method

        metric_for_method(method)
        cfg.method = method.replace("correct_", "")
    if halving and cfg.halving is None:
        cfg.halving = HalvingConfig()

    def confirm(est: dict[str, Any]) -> bool:
        try:
            return typer.confirm("Spend these judge calls?", default=False, err=True)
        except (typer.Abort, EOFError):  # no terminal to answer: no consent (--yes gives it)
            err_console.print("no answer: judge phase skipped (pass --yes to accept the estimate)")
            return False

    log = (lambda m: err_console.print(m, highlight=False)) if as_json else (lambda m: console.print(m, highlight=False))
    res = run_grid(cfg, db=db, yes=yes, confirm=confirm, log=log, log_rankings=False)
    if as_json:
        typer.echo(json.dumps(res.record(), default=str))
        return
    _ranking_table(res.ranking, f"ranking by {cfg.method} ({res.n_questions} questions)")
    if res.judge_ranking:
        _ranking_table(res.judge_ranking, f"final ranking: top {len(res.judge_ranking['rows'])} by the LLM judge")
    console.print(f"grid id: {res.grid_id}")


def _ranking_table(ranking: dict[str, Any], title: str, limit: int = 30) -> None:
    from rich.table import Table

    extra = list(dict.fromkeys(k for row in ranking["rows"] for k in (row.get("metrics") or {})))[:3]
    t = Table(title=title)
    for col in ("#", "configuration", "mean", "95% CI", "p vs #1", *extra, "run"):
        t.add_column(col, justify="left" if col in ("configuration", "run") else "right")
    for row in ranking["rows"][:limit]:
        p = row["p_vs_winner_holm"]
        noise = " ~" if row["rank"] > 1 and row["within_noise_of_winner"] else ""
        p_text = "—" if p is None else _p(p)
        t.add_row(str(row["rank"]), row["name"], fmt(row["mean"]),
                  f"[{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]", p_text + noise,
                  *(fmt((row.get("metrics") or {}).get(k), 3) for k in extra), row.get("run_id") or "")
    _out().print(t)
    if len(ranking["rows"]) > limit:
        console.print(f"({len(ranking['rows']) - limit} more in the stored record: `--json`)")
    console.print("p vs #1: paired permutation test against the winner on the per-question scores, "
                  "Holm-adjusted; ~ = not significantly different from #1.")
    if ranking.get("runner_up_p") is not None:
        if ranking["winner_within_noise"]:
            console.print(f"[yellow]the winner is within noise of the runner-up[/yellow] (p = "
                          f"{ranking['runner_up_p']:.3g}); {len(ranking['within_noise'])} configuration(s) "
                          "are not significantly different from #1")
        else:
            console.print(f"the winner is significantly better than the runner-up (p = {ranking['runner_up_p']:.3g})")


# ---- pipeline ------------------------------------------------------------------------------------

def pipeline_cmd(
    data: Annotated[str, typer.Argument(help="Dataset with questions and ground truth (file or 'example').")] = "example",
    pipeline: Annotated[str, typer.Option("--pipeline", "-p", help="module:function(question, **params) -> {answer, contexts}.")] = "ragmeter.pipeline:rag",
    param: Annotated[list[str] | None, typer.Option("--param", help="Pipeline parameter key=value (repeatable), e.g. top_k=1.")] = None,
    method: Annotated[str, typer.Option("--method", help="Correctness method ('none' for metrics only).")] = "semantic_guarded",
    metrics: Annotated[list[str] | None, typer.Option("--metrics", "-m", help="More metrics (comma-separated).")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the run.")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option (repeatable).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached pipeline outputs.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run summary as JSON.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Run a pipeline over a dataset's questions and evaluate its answers and contexts (one stored run)."""
    from ragmeter.analysis.grid import evaluate_pipeline
    from ragmeter.apps.cli._common import summary_table

    res = evaluate_pipeline(data, pipeline, _kv(param, "--param"),
                            method=None if method == "none" else method, metrics=_metrics(metrics),
                            name=name, db=db, options=_kv(option, "--option"), cache=not no_cache)
    if as_json:
        typer.echo(json.dumps(res.to_dict(), default=str))
    else:
        console.print(summary_table(res.summary, title=f"run {res.run_id} — {len(res.samples)} questions"))
    exit_if_incomplete(res)


# ---- correctness -----------------------------------------------------------------------------------

def correctness_cmd(
    data: Annotated[str, typer.Argument(help="Dataset with answers, references and (ideally) human labels.")] = "example",
    method: Annotated[list[str] | None, typer.Option("--method", help="Method(s) to run (repeatable; default: the offline ones).")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option (repeatable).")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="LLM judge (for llm_judge / hybrid).")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="OpenAI-compatible judge endpoint.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the run.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    language: Annotated[str | None, typer.Option("--language", help="Language of the texts (ISO code: en, pt, es, fr, de, it ...): negation and \"I don't know\" cues, stemming. A sample's own `language` field wins.")] = None,
) -> None:
    """Score answer correctness with one or more methods and, where human labels exist, report each
    method's accuracy/precision/recall/F1 against them (on all labelled samples and on the
    samples semantic_dynamic held out)."""
    from ragmeter.analysis.correctness import label_agreement
    from ragmeter.metrics.correctness import metric_for_method
    from ragmeter.run.runner import evaluate

    methods = method or ["keyword", "semantic_fixed", "semantic_dynamic", "semantic_guarded"]
    keys = [metric_for_method(m) for m in methods]
    opts = _kv(option, "--option")
    if judge:
        opts["judge"] = judge
    if judge_base_url:
        opts["judge_base_url"] = judge_base_url
    if language:
        opts["language"] = language
    res = evaluate(data, keys, db=db, name=name, options=opts)
    table = label_agreement(res)
    if as_json:
        typer.echo(json.dumps({"run_id": res.run_id, "status": res.status, "incomplete": res.incomplete,
                               "methods": table, "method": res.extra.get("method"),
                               "calibration": res.extra.get("calibration")}, default=str))
        exit_if_incomplete(res)
        return
    from rich.table import Table

    t = Table(title=f"correctness methods vs human labels — run {res.run_id}")
    for col in ("method", "mean", "n", "acc", "P/R", "F1", "acc held-out"):
        t.add_column(col, justify="left" if col == "method" else "right", no_wrap=True)
    for row in table:
        a, h = row["all"], row["held_out"]
        t.add_row(row["method"].removeprefix("correct_"), fmt(row["mean"], 3), str(row["n"]),
                  fmt(a.get("accuracy"), 3), f"{fmt(a.get('precision'), 2)}/{fmt(a.get('recall'), 2)}",
                  fmt(a.get("f1"), 3), f"{fmt(h.get('accuracy'), 3)} (n={h.get('n', 0)})")
    _out().print(t)
    console.print("acc, P/R (precision/recall), F1: against the human labels on every labelled sample the "
                  "method scored; acc held-out: on the samples semantic_dynamic did not use for calibration.")
    cal = res.extra.get("calibration")
    if cal:
        console.print(f"semantic_dynamic: threshold {cal['chosen']} chosen by {cal['objective']} on "
                      f"{cal['n_validation']} validation samples ({cal['label_source']} labels, "
                      f"{len(cal['thresholds'])} candidate thresholds); the validation samples have no value.")
        _print_curve(cal)
        if cal.get("circular"):
            console.print("[yellow]warning: no human labels — the calibration used the similarity "
                          "proxy (similarity > 0.9 counts as correct) and is circular[/yellow]")
    rec = (res.extra.get("method") or {}).get("methods", {}).get("hybrid")
    if rec:
        console.print(f"hybrid: {rec.get('judge_calls')} judge calls, {rec.get('judge_calls_saved')} saved"
                      + (f", agreement with judging everything {fmt(rec.get('agreement_with_judge_all'))}"
                         if rec.get("agreement_with_judge_all") is not None else ""))
    exit_if_incomplete(res)


def _print_curve(cal: dict[str, Any]) -> None:
    """The calibration curve at every 0.05 (the stored curve has every candidate threshold)."""
    ts = cal["thresholds"]
    picks = [min(range(len(ts)), key=lambda i: abs(ts[i] - x / 100)) for x in range(0, 101, 5)]
    cells = [f"{ts[i]:.2f}: {cal['accuracy'][i]:.2f}/{cal['f1'][i]:.2f}" for i in dict.fromkeys(picks)]
    console.print("validation curve, threshold: accuracy/F1 (every candidate in `--json` / `ragmeter show --json`):")
    for k in range(0, len(cells), 4):
        console.print("  " + "   ".join(cells[k:k + 4]))
    held = cal.get("held_out") or {}
    if held.get("chosen"):
        fixed = next((v for key, v in held.items() if key.startswith("fixed_")), {})
        console.print(f"held-out accuracy: chosen threshold {held['chosen']['accuracy']:.3f} vs fixed 0.75 "
                      f"{fixed.get('accuracy', float('nan')):.3f} on the same {held['chosen']['n']} samples")


# ---- compare -----------------------------------------------------------------------------------------

def compare_cmd(
    runs: Annotated[list[str], typer.Argument(help="Two or more runs (id, prefix, name) or baseline files; the first is the reference.")],
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.", parser=number(0, 1, low_open=True, high_open=True))] = 0.05,
    metric: Annotated[list[str] | None, typer.Option("--metric", "-m", help="Only these metrics (comma-separated or repeated).")] = None,
    all_pairs: Annotated[bool, typer.Option("--all-pairs", help="Compare every pair, not only each run with the first.")] = False,
    correction: Annotated[str, typer.Option("--correction", help="holm (default) or none.")] = "holm",
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """A/B comparison: paired by sample id, per metric both means, the difference with its 95%
    CI (inside [-1, 1] for a 0-1 metric), the paired permutation p-value (Holm-adjusted), Wilcoxon, win/tie/loss and
    a winner only when significant."""
    from ragmeter.analysis.compare import compare_runs

    res = compare_runs(runs, metrics=_metrics(metric) or None, alpha=alpha, correction=correction,
                       all_pairs=all_pairs, store=get_store(db))
    if as_json:
        typer.echo(json.dumps(res.to_dict(), default=str))
        _exit_if_unpaired(res)
        return
    from rich import box
    from rich.table import Table

    # a letter per position: a run given twice (compare X X) is A and B, not B twice
    letters = {}
    for i, r in enumerate(res.runs):
        same = letters.get(r.label, [])
        console.print(f"{chr(ord('A') + i)} = {r.label}" + (f" (the same run as {same[0]})" if same else ""))
        letters.setdefault(r.label, []).append(chr(ord("A") + i))
    pairs = list(dict.fromkeys((row.a, row.b) for row in res.rows))
    for a_label, b_label in pairs:
        a = letters[a_label][0]
        b = next((x for x in letters[b_label] if x != a), letters[b_label][0])
        t = Table(title=f"{a} vs {b}: paired by sample id (alpha {alpha:g}, {correction} correction)",
                  box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("metric", f"{a} → {b}", f"{b}-{a} [95% CI]", "p (adj)", "wilcoxon", "W/T/L", "winner"):
            # at 80 columns a cell wraps between words (the CI under the difference) or folds; never
            # an ellipsis in a figure
            t.add_column(col, justify="left" if col in ("metric", "winner") else "right", overflow="fold")
        for row in (x for x in res.rows if (x.a, x.b) == (a_label, b_label)):
            ci = f" [{fmt(row.ci_low, 3)}, {fmt(row.ci_high, 3)}]" if row.ci_low is not None else ""
            win = {"a": a, "b": b}.get(row.winner or "", "—")
            if row.note:
                win = row.note
            t.add_row(row.metric + ("" if row.direction == "higher" else " ↓"),
                      f"{fmt(row.mean_a, 3)} → {fmt(row.mean_b, 3)}", fmt(row.diff, 3) + ci,
                      f"{_p(row.pvalue)} ({_p(row.pvalue_adjusted)})", _p(row.wilcoxon_pvalue),
                      f"{row.wins}/{row.ties}/{row.losses}", win)
        _out().print(t)
    console.print("p: paired permutation test (two-sided), (adj): Holm-adjusted over every test shown; "
                  "W/T/L: samples where B is higher / equal / lower; winner only when p (adj) < alpha.")
    unpaired = {r.metric: r.n_unpaired for r in res.rows if r.n_unpaired}
    if unpaired:
        console.print(f"not paired (value in only one run): {unpaired}")
    _exit_if_unpaired(res)


def _exit_if_unpaired(res: Any) -> None:
    """Exit 3 (incomplete, as gate does) when a compared metric has no sample with a value in both
    runs (runs of different datasets, or a metric without values): nothing was compared for it."""
    empty = [r for r in res.rows if r.n == 0]
    if not empty:
        return
    err_console.print("comparison incomplete (exit 3): no sample has a value in both runs for "
                      + ", ".join(f"{r.metric} ({r.a} vs {r.b})" for r in empty)
                      + "; pairs are made by sample id: give the rows of both files the same ids",
                      markup=False, highlight=False)
    raise SystemExit(3)


# ---- power -----------------------------------------------------------------------------------------

def power_cmd(
    run: Annotated[str, typer.Argument(help="A stored run (or baseline file) whose per-sample values set the variance.")],
    metric: Annotated[str, typer.Option("--metric", "-m", help="The metric.")],
    drop: Annotated[float, typer.Option("--drop", help="The drop to detect (absolute, in the metric's units).", parser=number(0, low_open=True))],
    against: Annotated[str | None, typer.Option("--against", help="A second run on the same samples: use the observed paired differences.")] = None,
    rho: Annotated[float, typer.Option("--rho", help="Assumed correlation between versions (without --against).", parser=number(-1, 1))] = 0.5,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.", parser=number(0, 1, low_open=True, high_open=True))] = 0.05,
    power: Annotated[float, typer.Option("--power", help="Wanted power.", parser=number(0, 1, low_open=True, high_open=True))] = 0.8,
    two_sided: Annotated[bool, typer.Option("--two-sided", help="Two-sided test (default one-sided: 'did it drop?').")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """How many samples a paired test needs to detect a drop of X in metric M (with its assumptions)."""
    from ragmeter.analysis.power import power_for_run

    res = power_for_run(run, metric, drop, against=against, rho=rho, alpha=alpha, power=power,
                        alternative="two-sided" if two_sided else "one-sided", store=get_store(db))
    if as_json:
        typer.echo(json.dumps(res.to_dict(), default=str))
        return
    console.print(f"[bold]{res.n_required}[/bold] paired samples detect a drop of {drop:g} in {metric} "
                  f"with power {power:g} at alpha {alpha:g} ({res.alternative}).")
    console.print(f"sd of the paired differences: {res.sd_diff:.4f} — {res.sd_source}")
    if res.power_at_current_n is not None:
        console.print(f"with the run's {res.n_current} samples the power is {res.power_at_current_n:.3f}")
    console.print("assumptions:")
    for a in res.assumptions:
        console.print(f"  - {a}")


# ---- gate ------------------------------------------------------------------------------------------

def gate_cmd(
    run: Annotated[str, typer.Argument(help="The run to check (id, prefix, name, 'latest').")],
    baseline: Annotated[str, typer.Option("--baseline", "-b", help="Baseline run or baseline JSON file.")],
    max_drop: Annotated[float, typer.Option("--max-drop", help="Tolerated drop (absolute; relative with --relative).", parser=number(0))] = 0.05,
    metric: Annotated[list[str] | None, typer.Option("--metric", "-m", help="Only these metrics (default: all in both).")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level of the one-sided paired test.", parser=number(0, 1, low_open=True, high_open=True))] = 0.05,
    relative: Annotated[bool, typer.Option("--relative", help="--max-drop is a fraction of the baseline mean (e.g. 0.05 = 5% worse).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Regression gate: exit 1 when a metric dropped by more than --max-drop and the drop is
    significant (one-sided paired permutation test), else 0; prints what moved.

    Exits 2 when the gate is misconfigured (unknown run or baseline, metric not in both, bad
    --max-drop or --alpha) and 3 when it is incomplete (a gated metric without values, or a run
    stored as incomplete) and nothing regressed.
    """
    from ragmeter.analysis.gate import gate

    res = gate(run, baseline, max_drop=max_drop, metrics=_metrics(metric) or None, alpha=alpha,
               relative=relative, store=get_store(db))
    if as_json:
        typer.echo(json.dumps(res.to_dict(), default=str))
    else:
        from rich import box
        from rich.table import Table

        t = Table(title=f"gate: {res.current} vs baseline {res.baseline}", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("metric", "baseline", "current", "drop [95% CI]", "p worse (Holm)", "n", "status"):
            # as compare's: at 80 columns a cell wraps between words (the CI under the drop) or folds,
            # never an ellipsis in a figure (the means showed as '0.…')
            t.add_column(col, justify="left" if col in ("metric", "status") else "right",
                         no_wrap=col == "status", overflow="fold")
        style = {"REGRESSED": "[red]REGRESSED[/red]", "improved": "[green]improved[/green]",
                 "noise": "[yellow]noise[/yellow]"}
        for r in res.rows:
            sign = -1.0 if r.direction != "lower" else 1.0
            ci = (f" [{fmt(sign * r.ci_high + 0.0, 3)}, {fmt(sign * r.ci_low + 0.0, 3)}]"
                  if r.ci_low is not None and r.ci_high is not None and sign < 0 else
                  f" [{fmt(r.ci_low, 3)}, {fmt(r.ci_high, 3)}]" if r.ci_low is not None else "")
            drop = "—" if r.drop is None else f"{r.drop + 0.0:.3f}"
            t.add_row(r.metric + ("" if r.direction == "higher" else " ↓"), fmt(r.baseline, 3), fmt(r.current, 3),
                      drop + ci, _p(r.pvalue if r.pvalue_adjusted is None else r.pvalue_adjusted), str(r.n),
                      style.get(r.status, r.status) + (f" ({r.note})" if r.note else ""))
        _out().print(t)
        verdict = ("[red]FAIL[/red]: significant regression" if res.failed else
                   "[yellow]INCOMPLETE[/yellow]: not every metric could be checked" if res.incomplete else
                   "[green]PASS[/green]")
        console.print(f"{verdict} (max drop {max_drop:g}{' relative' if relative else ''}, alpha {alpha:g})")
        for reason in res.incomplete:
            err_console.print(f"  {reason}", markup=False, highlight=False)
    if res.exit_code:
        # SystemExit, not typer.Exit: the console entry point runs click with standalone_mode=False,
        # which turns typer.Exit(n) into a return value and would lose the status
        raise SystemExit(res.exit_code)


# ---- baseline ----------------------------------------------------------------------------------------

def baseline_save_cmd(
    run: Annotated[str, typer.Argument(help="The run to save as the baseline.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Baseline JSON file.")] = Path("baseline.json"),
    metric: Annotated[list[str] | None, typer.Option("--metric", "-m", help="Only these metrics.")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Write a run's per-sample values to a baseline file (the gate's paired test works against it)."""
    from ragmeter.analysis.runs import from_store, save_baseline

    check_output_name(output, "JSON", (".json",), "--output")

    values = from_store(get_store(db), run)
    path = save_baseline(values, output, metrics=_metrics(metric) or None)
    console.print(f"wrote {path} ({len(_metrics(metric) or values.metrics)} metrics, run {values.run_id})")


# ---- show hook ---------------------------------------------------------------------------------------

def _method_section(_store: Any, run: Any) -> dict[str, Any]:
    extra = run.extra or {}
    out: dict[str, Any] = {}
    rec = extra.get("method")
    if isinstance(rec, dict) and rec.get("methods"):
        lines = []
        for name, r in rec["methods"].items():
            figures = ", ".join(f"{k} {v}" for k, v in r.items() if k != "params" and not isinstance(v, dict | list))
            lines.append(f"{name}: {figures}")
        out["correctness method"] = "\n".join(lines)
    cal = extra.get("calibration")
    if isinstance(cal, dict) and cal.get("thresholds"):
        held = (cal.get("held_out") or {}).get("chosen") or {}
        fixed = next((v for k, v in (cal.get("held_out") or {}).items() if k.startswith("fixed_")), {}) or {}
        out["threshold calibration"] = (
            f"chosen {cal['chosen']} by {cal['objective']} over {len(cal['thresholds'])} thresholds on "
            f"{cal.get('n_validation')} validation samples ({cal.get('label_source')} labels"
            f"{', CIRCULAR' if cal.get('circular') else ''}); held-out accuracy {fmt(held.get('accuracy'))} "
            f"vs fixed 0.75 {fmt(fixed.get('accuracy'))}")
    return out
