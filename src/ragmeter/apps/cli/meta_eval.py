"""``ragmeter meta-eval`` (how well each metric agrees with human labels, beside the raters' own
agreement) and ``ragmeter calibrate`` (a judge metric's mean corrected by human labels with
prediction-powered inference)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, fmt, get_store
from ragmeter.apps.cli._panel import COMBINE_HELP, PANEL_HELP, panel_options
from ragmeter.core.counts import count

if TYPE_CHECKING:  # the analysis loads when a command runs, not at start-up
    from ragmeter.analysis.meta_eval.records import MetaComparison, MetaEvaluation, Statistic


def register(app: typer.Typer) -> None:
    app.command("meta-eval")(meta_eval_cmd)
    app.command("calibrate")(calibrate_cmd)
    from ragmeter.apps.cli import show_hooks

    show_hooks.add(_show_section)


def _show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show`` of a meta-evaluation run: its ranking with the human ceiling."""
    from ragmeter.analysis.meta_eval.evaluation import stored_meta_eval

    rec = stored_meta_eval(run)
    if rec is None:
        return {}
    stat = rec.sort
    lines = [f"{rec.kind}, {count(rec.n_items, 'item')}, {count(len(rec.raters), 'rater')}, label {rec.label!r}; "
             f"{stat} with the human label ({rec.level:.0%} CI):"]
    lines += [f"  {k}: {_stat(rec.metrics[k].stat(stat))}" for k in rec.ranking]
    c = rec.human_ceiling or {}
    for part, title in (("rater_vs_rater", "human, rater vs rater"), ("leave_one_out", "human, one vs the rest")):
        if c.get(part):
            lines.append(f"  {title}: {_stat(c[part].get(stat))}")
    return {"meta-evaluation": "\n".join(lines)}


def _errors_exit(fn: Any) -> Any:
    """Run a command so that an error the user caused is one line and its exit status (2 for bad
    input), also when the app is called without :func:`ragmeter.apps.cli.main` (a test's CliRunner)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rich.markup import escape

        from ragmeter.core.errors import RagmeterError

        try:
            return fn(*args, **kwargs)
        except RagmeterError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except ValueError as exc:  # numeric checks of the statistics (a label that is not finite ...)
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def _split(values: list[str] | None) -> list[str]:
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


def _statistic(e: Statistic | Mapping[str, Any] | None) -> Statistic | None:
    """A statistic of a metric, or one of the human ceiling's (kept as stored: a mapping)."""
    from ragmeter.analysis.meta_eval.records import Statistic

    if isinstance(e, Mapping):
        return Statistic.from_dict(e)
    return e


def _stat(e: Statistic | Mapping[str, Any] | None, digits: int = 3, sep: str = " ") -> str:
    """``value [low, high]`` (``sep`` between them: a newline in the table)."""
    s = _statistic(e)
    if s is None or s.value is None:
        return "—"
    ci = f"{sep}[{s.ci_low:.{digits}f}, {s.ci_high:.{digits}f}]" if s.ci_low is not None else ""
    return f"{s.value:.{digits}f}{ci}"


def _cell(e: Statistic | Mapping[str, Any] | None) -> str:
    """A table cell: the value, and its interval (low–high) below it."""
    s = _statistic(e)
    if s is None or s.value is None:
        return "—"
    ci = f"\n{s.ci_low:.2f}–{s.ci_high:.2f}" if s.ci_low is not None else ""
    return f"{s.value:.3f}{ci}"


def _print_record(rec: MetaEvaluation) -> None:
    from rich.table import Table

    raters = rec.raters
    who = f"{len(raters)} raters ({', '.join(raters[:6])}{', ...' if len(raters) > 6 else ''})" \
        if len(raters) > 1 else "1 rater"
    console.print(f"[bold]meta-evaluation[/bold] of {rec.dataset} ({rec.kind}): {rec.n_items} items, "
                  f"{rec.n_ratings} labels by {who}, label {rec.label!r} — run {rec.run_id}",
                  highlight=False, soft_wrap=True)
    pairwise = rec.kind == "pairwise"
    binary = rec.binary
    pct = f"{rec.level:.0%}"
    from rich import box

    t = Table(title=f"agreement with the human label, sorted by {rec.sort} ({pct} bootstrap CIs over items)",
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    cols = ["metric", "n", "Pearson", "Spearman", "Kendall"]
    cols += ["pair acc", "tie-cal"] if pairwise else []
    cols += ["AUROC", "F1 (cv)"] if binary else []
    for col in cols:
        t.add_column(col, no_wrap=col == "metric", justify="left" if col == "metric" else "right",
                     min_width=9 if col not in ("metric", "n") else None)
    for key in rec.ranking:
        m = rec.metrics[key]
        row = [key + (" ↓" if m.direction == "lower" else "") + (" (cv)" if m.cross_validation else ""), str(m.n),
               *(_cell(m.stat(c)) for c in ("pearson", "spearman", "kendall"))]
        if pairwise:
            row += [_cell(m.stat("pairwise_accuracy")), _cell(m.stat("pairwise_accuracy_tie_calibrated"))]
        if binary:
            f1 = m.stat("f1")
            threshold = f1.extra.get("threshold") if f1 is not None else None
            row += [_cell(m.stat("auroc")), _cell(f1) + (f"\nat {threshold:.3g}" if threshold is not None else "")]
        t.add_row(*row)
    ceiling = rec.human_ceiling
    if ceiling:
        for part, title in (("rater_vs_rater", "human pairs"), ("leave_one_out", "human 1 vs rest")):
            c = ceiling.get(part)
            if not c:
                continue
            row = [title, str(ceiling["n_items"]), *(_cell(c[s]) for s in ("pearson", "spearman", "kendall"))]
            if pairwise:
                row += [_cell(c.get("pairwise_accuracy")), ""]
            if binary:
                row += ["", ""]
            t.add_row(*row, style="italic")
    console.print(t)
    if ceiling:
        console.print("human ceiling: the same statistics between people; 'human pairs' = each pair of raters, "
                      "'human 1 vs rest' = each rater against the mean of the others. A metric at or above them "
                      "agrees with people as well as they agree with each other.", highlight=False, soft_wrap=True)
    else:
        console.print("one rater: no human ceiling (give two or more raters per item to have one)", highlight=False)
    for key in rec.ranking:
        cv = rec.metrics[key].cross_validation
        if cv:
            console.print(f"{key} (cv): fitted to these labels, so each item is scored by a model fitted on the other "
                          f"{cv.get('folds', 0) - 1} of {cv.get('folds')} folds (grouped by {cv.get('groups')}): "
                          "its agreement on items it never saw", highlight=False, soft_wrap=True)
        pearson = rec.metrics[key].stat("pearson")
        if pearson is not None and pearson.undefined:
            console.print(f"{key}: undefined (pearson: {pearson.undefined})", highlight=False)


def _print_comparison(cmp: MetaComparison) -> None:
    from rich.table import Table

    # the title names which run is a and which is b: "B vs A" over columns a, b read the wrong way round
    t = Table(title=f"meta-evaluation: a = {cmp.a} (--compare), b = {cmp.b}; difference b - a"
                    + (f", paired {cmp.level:.0%} bootstrap CI" if cmp.paired else ""), title_justify="left")
    for col in ("metric", "statistic", "a", "b", "difference"):
        t.add_column(col, justify="left" if col in ("metric", "statistic") else "right")
    for key, row in cmp.metrics.items():
        for s, v in row.items():
            d = v.difference
            diff = "—" if d is None else f"{d:+.3f}" + (
                f" [{v.ci_low:+.3f}, {v.ci_high:+.3f}]" if v.ci_low is not None else "")
            t.add_row(key, s, fmt(v.a, 3), fmt(v.b, 3), diff)
    console.print(t)
    if cmp.note:
        console.print(cmp.note, highlight=False)


def _is_data(data: str) -> bool:
    from ragmeter.io.readers import BUNDLED

    return data in BUNDLED or Path(data).exists()


@_errors_exit
def meta_eval_cmd(
    data: Annotated[str, typer.Argument(help="Human-labelled file (.jsonl/.json/.csv/.parquet, gzipped or not), "
                                             "'example-human', or a stored meta-evaluation run to show again.")],
    metrics: Annotated[list[str] | None, typer.Option("--metrics", "-m", help="Comma-separated metrics to measure "
                                                      "(any of `ragmeter metrics`); 'offline' = every metric that "
                                                      "runs from its name alone, without a judge or a download, "
                                                      "and gives values on the data.")] = None,
    pairwise: Annotated[bool, typer.Option("--pairwise", help="Rows compare two answers (A, B) with a "
                                           "preference: RAGChecker's model1/model2 layout, answer_a/answer_b, "
                                           "response_a/response_b; a positive label prefers B.")] = False,
    label: Annotated[str | None, typer.Option("--label", help="The human label column, or several "
                                              "(one per rater), comma-separated. Default: human, human_score, "
                                              "label ... (pairwise: preference, overall_label, label ...).")] = None,
    rater: Annotated[str | None, typer.Option("--rater", help="Column naming the rater in a long layout "
                                              "(one row per item and rater). Default: rater, annotator, "
                                              "worker_id ... if present; else rows of one id are raters in order.")] = None,
    map_: Annotated[list[str] | None, typer.Option("--map", help="field=column for columns the aliases miss "
                                                   "(repeatable); pairwise files also take answer_a=, answer_b=.")] = None,
    fmt_: Annotated[str | None, typer.Option("--format", help="File format when the suffix does not say: "
                                             "jsonl, json, csv, tsv, parquet.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over items (0: no intervals).")] = 1000,
    level: Annotated[float, typer.Option("--level", help="Confidence level of the intervals.")] = 0.95,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the resamples.")] = 20261122,
    sort: Annotated[str, typer.Option("--sort", help="Order the table by kendall, spearman, pearson, "
                                      "pairwise_accuracy, auroc or f1 (sign flipped for lower-is-better metrics).")] = "kendall",
    compare: Annotated[str | None, typer.Option("--compare", help="A stored meta-evaluation run to compare "
                                                "with (paired intervals when both have the same items and labels).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="A name for the run.")] = None,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option (repeatable), as in `ragmeter eval`.")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", help="LLM judge as provider:model for judge metrics; given more than once: a panel of judges (docs/panels.md).")] = None,
    panel: Annotated[Path | None, typer.Option("--panel", help=PANEL_HELP)] = None,
    panel_combine: Annotated[str | None, typer.Option("--panel-combine", help=COMBINE_HELP)] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible judge.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Environment variable holding the judge's API key.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the judge calls and estimated cost; call nothing, store nothing.")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Stop judging once this many USD are spent.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Judge requests in flight at most.")] = None,
    rpm: Annotated[float | None, typer.Option("--rpm", help="Judge requests per minute.")] = None,
    batch: Annotated[bool, typer.Option("--batch", help="Send the judge requests through the provider's batch API (OpenAI, Anthropic): the batch price, results within 24 h (docs/judge.md#batch).")] = False,
    batch_fallback: Annotated[str | None, typer.Option("--batch-fallback", help="none (default: a request the batch did not answer has no value, with the provider's reason) or online (it is sent online).")] = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="With --batch: submit the batch and exit 3; the same command run again collects it.")] = False,
    skip_unavailable: Annotated[bool, typer.Option(help="Record no value for metrics that cannot run here instead of failing.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide progress bars.")] = False,
) -> None:
    """How well each metric agrees with human judgement: Pearson, Spearman and Kendall tau-b with
    the human label (pairwise: of the metric's B - A with the preference, and the pairwise accuracy
    with ties as in Deutsch et al. 2023), each with a bootstrap interval over items; AUROC and a
    cross-validated F1 for 0/1 labels; and the human ceiling (the same statistics between raters)
    when items have two or more raters. Judge metrics go through the configured judge (cache,
    budget, --dry-run). The result is stored with its run (tag meta-eval): `ragmeter report RUN`
    draws one plot per metric, `ragmeter meta-eval RUN --compare OTHER` compares two.
    """
    from ragmeter.analysis.meta_eval.evaluation import (
        SORT_KEYS,
        compare_meta_evals,
        load_meta_eval,
        meta_evaluate,
    )
    from ragmeter.apps.cli.core import _parse_value

    if sort not in SORT_KEYS:
        raise typer.BadParameter(f"use one of {', '.join(SORT_KEYS)}; got {sort!r}", param_hint="'--sort'")
    if bootstrap < 0:
        raise typer.BadParameter(f"a number of resamples >= 0, got {bootstrap}", param_hint="'--bootstrap'")
    if not 0 < level < 1:
        raise typer.BadParameter(f"a level between 0 and 1 (0.95), got {level:g}", param_hint="'--level'")
    opts: dict[str, Any] = {}
    for item in option or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise typer.BadParameter(f"use key=value; got {item!r}", param_hint="'--option'")
        opts[k.strip()] = _parse_value(v)
    opts.update({k: v for k, v in {"judge_base_url": judge_base_url,
                                   "judge_api_key_env": judge_api_key_env, "judge_max_cost": max_cost,
                                   "judge_concurrency": concurrency, "judge_rpm": rpm}.items() if v is not None})
    opts.update(panel_options(judge, panel, panel_combine))  # --judge twice or --panel: a panel of judges
    from ragmeter.apps.cli.batches import batch_options

    opts.update(batch_options(batch, batch_fallback, no_wait))
    names = _split(metrics)
    if not _is_data(data):
        from ragmeter.core.errors import DatasetError, StoreError

        try:
            rec = load_meta_eval(get_store(db, must_exist=True), data)
        except StoreError as exc:
            raise DatasetError(f"file not found, nor a stored meta-evaluation ({exc})", file=data) from None
        if names:
            raise typer.BadParameter(f"{data!r} is a stored meta-evaluation: --metrics applies to a file")
    else:
        if not names:
            raise typer.BadParameter("name the metrics to measure, e.g. --metrics token_f1,semantic_similarity "
                                     "(or --metrics offline)", param_hint="'--metrics'")
        if dry_run:
            _dry_run(data, names, pairwise=pairwise, label=label, rater=rater, mapping=map_, fmt=fmt_, db=db,
                     options=opts, as_json=as_json)
            return
        from ragmeter.llm.batch import BatchPending

        try:
            rec = meta_evaluate(data, names, pairwise=pairwise, label=label, rater=rater, mapping=map_ or None,
                                fmt=fmt_, db=db, options=opts or None, name=name, n_bootstrap=bootstrap,
                                level=level, seed=seed, sort=sort, progress=not no_progress and not as_json,
                                skip_unavailable=skip_unavailable)
        except BatchPending as exc:  # --batch --no-wait: submitted and stored, not a failure
            err_console.print(f"judge batch {', '.join(exc.batch_ids)} submitted: `ragmeter batches` shows it; "
                              "this command run again collects it (exit 3)", style="yellow", markup=False,
                              highlight=False)
            raise typer.Exit(3) from None
    if compare:
        rec.comparison = compare_meta_evals(get_store(db), compare, str(rec.run_id), n_bootstrap=bootstrap, seed=seed)
    if as_json:
        typer.echo(json.dumps({k: v for k, v in rec.to_dict().items() if k != "items"}, default=str))
    else:
        _print_record(rec)
        if rec.comparison is not None:
            _print_comparison(rec.comparison)
    if rec.status == "incomplete":
        err_console.print(f"[yellow]run {rec.run_id} is incomplete (exit 3):[/yellow]")
        for reason in rec.incomplete:
            err_console.print(f"  {reason}", markup=False, highlight=False)
        raise typer.Exit(3)


def _dry_run(data: str, names: list[str], *, db: str | None, options: dict[str, Any], as_json: bool,
             **read: Any) -> None:
    from ragmeter.analysis.meta_eval.evaluation import expand_metrics
    from ragmeter.analysis.meta_eval.reader import read_labels
    from ragmeter.apps.cli.judge import dry_run_report
    from ragmeter.io.readers import Dataset
    from ragmeter.run.eval_config import EvalConfig

    labels = read_labels(data, pairwise=read["pairwise"], label=read["label"], rater=read["rater"],
                         mapping=read["mapping"], fmt=read["fmt"])
    run_config = EvalConfig(metrics=tuple(expand_metrics(names, labels.samples)), db=db, options=options)
    dry_run_report(Dataset(labels.samples, source=labels.source), run_config, as_json=as_json)


def _range(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"use LO,HI (e.g. 1,5), got {text!r}", param_hint="'--label-range'") from None
    if not lo < hi:
        raise typer.BadParameter(f"LO must be below HI, got {text!r}", param_hint="'--label-range'")
    return lo, hi


@_errors_exit
def calibrate_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or prefix, name, 'latest') holding the metric.")],
    metric: Annotated[str, typer.Option("--metric", help="The metric to calibrate (usually a judge metric).")],
    labels: Annotated[Path | None, typer.Option("--labels", help="CSV (or JSONL) with columns sample_id,label: "
                                                "human labels of some of the run's samples, on the metric's scale.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="An annotation task with the labels instead "
                                             "(`ragmeter annotate`).")] = None,
    scale: Annotated[str | None, typer.Option("--scale", help="The task's numeric scale to use (its raters' "
                                              "mean, mapped to [0, 1]).")] = None,
    label_range: Annotated[str | None, typer.Option("--label-range", help="LO,HI: the file's labels are on "
                                                    "this scale; mapped to [0, 1].")] = None,
    level: Annotated[float, typer.Option("--level", help="Confidence level.")] = 0.95,
    lam: Annotated[float | None, typer.Option("--lam", help="PPI's lambda: 1 = classic PPI, 0 = labels only; "
                                              "default: power-tuned (PPI++).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
) -> None:
    """A judge metric's mean over a run, the human labels' mean, and the calibrated estimate of
    prediction-powered inference (Angelopoulos et al., Science 2023; power-tuned PPI++), each with
    its interval: the judge scores every sample, people some; the estimate is unbiased and its
    interval narrower than the labels' alone when the judge tracks them. Needs at least 50 labelled
    samples with a metric value (the interval is a normal approximation; docs/meta-eval.md)."""
    from ragmeter.human.calibrated import (
        calibrated_estimate,
        calibration_lines,
        read_labels_file,
        task_labels,
    )

    if (labels is None) == (task is None):
        raise typer.BadParameter("give either --labels FILE or --task TASK --scale SCALE", param_hint="'--labels'")
    if task is not None and scale is None:
        raise typer.BadParameter("--task needs --scale (the task's numeric scale to use)", param_hint="'--scale'")
    if not 0 < level < 1:
        raise typer.BadParameter(f"a level between 0 and 1, got {level:g}", param_hint="'--level'")
    store = get_store(db, must_exist=True)
    if labels is not None:
        got: dict[str, Any] = read_labels_file(labels, label_range=_range(label_range))
        source, flip = str(labels), False
    else:
        got = task_labels(store, task, scale)  # type: ignore[arg-type]
        source, flip = f"task {task}, scale {scale}", True
    res = calibrated_estimate(store, run, metric, got, level=level, lam=lam, source=source, flip_lower=flip)
    if as_json:
        for w in res["calibrated"].get("warnings") or []:  # stdout stays one JSON object
            err_console.print(f"warning: {w}", markup=False, highlight=False)
        typer.echo(json.dumps(res, default=str))
        return
    console.print(f"[bold]calibrated estimate[/bold] of {metric} in run {res['run_id']} ({source})", highlight=False)
    for line in calibration_lines(res):
        console.print(line, highlight=False, markup=False)
