"""Core commands: eval, metrics, runs, show, export, example."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, fmt, get_store, summary_table
from ragmeter.apps.cli._outputs import check_output_name
from ragmeter.apps.cli._panel import COMBINE_HELP, PANEL_HELP, panel_options
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count
from ragmeter.core.redact import redact_obj


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
    app.command("metrics")(metrics_cmd)
    from ragmeter.apps.cli.runs import runs_app

    app.add_typer(runs_app, name="runs")
    app.command("show")(show_cmd)
    app.command("export")(export_cmd)
    app.command("example")(example_cmd)


def _split_metrics(values: list[Any] | None) -> list[Any]:
    out: list[Any] = []
    for v in values or []:
        if isinstance(v, dict):  # a resolved entry ({name, params, key}: --openai-eval's graders)
            out.append(v)
            continue
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def eval_cmd(
    data: Annotated[str | None, typer.Argument(help="Dataset file (.jsonl/.csv/.parquet/.xlsx) or 'example'. Optional with --resume, and with an openai/evals registry eval (its samples_jsonl).")] = None,
    metrics: Annotated[list[str] | None, typer.Option("--metrics", "-m", help="Comma-separated metric names (see `ragmeter metrics`).")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="JSON/YAML/TOML config: metrics (or metric_types), options.")] = None,
    map_: Annotated[list[str] | None, typer.Option("--map", help="field=column for columns the aliases miss (repeatable).")] = None,
    on_error: Annotated[str, typer.Option(help="What to do with a bad row: raise or skip.")] = "raise",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write per-sample results (JSONL).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run summary as one JSON object.")] = False,
    resume: Annotated[str | None, typer.Option(help="Finish an interrupted run (its id).")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the run.")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option passed to metrics (repeatable).")] = None,
    skip_unavailable: Annotated[bool, typer.Option(help="Record no value for metrics that cannot run here (e.g. no judge) instead of failing.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide progress bars.")] = False,
    judge: Annotated[list[str] | None, typer.Option("--judge", help="LLM judge as provider:model (openai:gpt-4o-mini, anthropic:..., google:..., ollama:...). Given more than once: a panel of judges (docs/panels.md).")] = None,
    panel: Annotated[Path | None, typer.Option("--panel", help=PANEL_HELP)] = None,
    panel_combine: Annotated[str | None, typer.Option("--panel-combine", help=COMBINE_HELP)] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible judge (vLLM, Ollama, llama.cpp, LM Studio, Azure ...).")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Name of the environment variable that holds the judge's API key.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the judge calls and estimated cost; call nothing, store nothing.")] = False,
    batch: Annotated[bool, typer.Option("--batch", help="Send the judge requests through the provider's batch API (OpenAI, Anthropic): half the price, results within 24 h (docs/judge.md#batch).")] = False,
    batch_fallback: Annotated[str | None, typer.Option("--batch-fallback", help="none (default: a request the batch did not answer has no value, with the provider's reason) or online (it is sent online).")] = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="With --batch: submit the batch, store the run as pending and exit 3; --resume RUN collects it.")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Stop judging once this many USD are spent.", parser=number(0))] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Judge requests in flight at most (default 16; lowered while the judge answers 429).", parser=number(1, 10_000, integer=True))] = None,
    rpm: Annotated[float | None, typer.Option("--rpm", help="Judge requests per minute (default: no limit).", parser=number(0, low_open=True))] = None,
    where: Annotated[list[str] | None, typer.Option("--where", help="Only samples whose metadata match field=value (repeatable), e.g. type=multi_hop.")] = None,
    method: Annotated[str | None, typer.Option("--method", help="Answer correctness method: keyword, semantic_fixed, semantic_dynamic, semantic_guarded, llm_judge, hybrid (adds metric correct_<method>).")] = None,
    max_missing: Annotated[float | None, typer.Option("--max-missing", help="Share of samples (0-1) a metric may lack a value on before the run is incomplete (exit 3). Default: incomplete only when a metric has no value at all.")] = None,
    language: Annotated[str | None, typer.Option("--language", help="Language of the texts (ISO code: en, pt, el, zh ...): tokenisation, stemming, stopwords and negation cues of lexical and correctness metrics. A sample's own `language` field wins.")] = None,
    engine: Annotated[str, typer.Option("--engine", help="local, or ray: score metrics in blocks, encode embeddings and send judge calls (under one limit and budget) on a Ray runtime (pip install 'ragmeter-eval[ray]').")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="ray://HOST:10001 of a Ray cluster (default: a local Ray runtime).")] = None,
    threshold: Annotated[list[str] | None, typer.Option("--threshold", "-t", help="METRIC=VALUE, METRIC>=VALUE or METRIC<=VALUE per-sample threshold (repeatable): a sample passes when its value meets it; exit 1 when the run rule fails (docs/ci.md). With --openai-eval a grader's per-sample rule is its pass_threshold: use --pass-rate-target for its pass rate.")] = None,
    pass_rule: Annotated[str | None, typer.Option("--pass-rule", help="With --threshold: 'all' samples pass (default), or a number the lower bound of each pass rate's Wilson 95% interval must reach, e.g. 0.9.")] = None,
    pass_rate_target: Annotated[list[str] | None, typer.Option("--pass-rate-target", help="METRIC=RATE (repeatable), or RATE for every thresholded metric: the share of samples that must pass (the rate itself, in place of --pass-rule; exit 1 below it). METRIC is a grader of --openai-eval or a metric with a --threshold.")] = None,
    openai_eval: Annotated[Path | None, typer.Option("--openai-eval", help="Run an exported OpenAI eval definition (data_source_config + testing_criteria, JSON or YAML) on DATA: one metric per grader, named after it, with its pass rate; or an eval of an openai/evals registry file (FILE.yaml, FILE.yaml#NAME) of the basic templates, on DATA or its samples_jsonl (docs/openai-evals.md).")] = None,
    allow_python_graders: Annotated[bool, typer.Option("--allow-python-graders", help="With --openai-eval (and --resume of such a run): run python graders, each call in an isolated sandbox (bubblewrap: no network, files, other processes or API keys) with a time, memory and process limit; refused without it. Not stored with the run.")] = False,
    per_span: Annotated[bool, typer.Option("--per-span", help="Score each agent trace per span: retrieval metrics on every retriever span, context metrics on every LLM span (with the documents retrieved before it), tool metrics on every tool span, agent metrics on the trace and on each agent; rows linked to their trace, intervals clustered by trace (docs/agent.md#per-span-scoring).")] = False,
    unisolated_python_graders: Annotated[bool, typer.Option("--unisolated-python-graders", help="Run python graders WITHOUT the sandbox (implies --allow-python-graders): they run as you, and can read your files, use the network and see other processes, ragmeter's API keys included (docs/openai-evals.md).")] = False,
) -> None:
    """Evaluate a dataset: score every sample with every metric, store the run, print the summary.

    Exits 3 when the run is incomplete (no samples, or a metric without values); the run is
    stored with status 'incomplete' and the reasons.
    """
    from ragmeter.run.eval_config import EvalConfig

    if on_error not in {"raise", "skip"}:
        raise typer.BadParameter(f"use 'raise' or 'skip', got {on_error!r}",
                                 param_hint="'--on-error'")
    if data is None and not resume and openai_eval is None:  # a registry eval names its samples
        raise typer.BadParameter("give a dataset file or 'example', e.g. `ragmeter eval data.jsonl "
                                 "-m token_f1`, or --resume RUN_ID", param_hint="'DATA'")
    if max_missing is not None and not 0 <= max_missing <= 1:
        raise typer.BadParameter(f"a share of the samples between 0 and 1 (0.2 = 20%), got {max_missing:g}",
                                 param_hint="'--max-missing'")
    check_output_name(out, "JSONL", (".jsonl", ".ndjson", ".json"), "--out",
                      f"or write that format after the run: ragmeter export RUN -o {out}")
    if method:
        from ragmeter.metrics.correctness import metric_for_method

        metrics = [*(metrics or []), metric_for_method(method)]
    opts: dict[str, Any] = {}
    for item in option or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise typer.BadParameter(f"use key=value, e.g. --option embedding_model=all-MiniLM-L6-v2; got {item!r}",
                                     param_hint="'--option'")
        opts[k.strip()] = _parse_value(v)
    opts.update({k: v for k, v in {"judge_base_url": judge_base_url,
                                   "judge_api_key_env": judge_api_key_env, "judge_max_cost": max_cost,
                                   "judge_concurrency": concurrency, "judge_rpm": rpm,
                                   "language": language}.items() if v is not None})
    opts.update(panel_options(judge, panel, panel_combine, engine))  # --judge twice or --panel: a panel
    if batch_fallback is not None and batch_fallback not in {"none", "online"}:
        raise typer.BadParameter(f"use none or online, got {batch_fallback!r}", param_hint="'--batch-fallback'")
    if batch:
        opts["judge_batch"] = True
    if batch_fallback is not None:
        opts["judge_batch_fallback"] = batch_fallback
    if batch or no_wait or resume:  # per invocation: a resumed pending run waits unless told not to
        opts["judge_batch_wait"] = not no_wait
    python_graders = "unisolated" if unisolated_python_graders else "isolated" if allow_python_graders else None
    if python_graders:  # this command's permission, never stored: a resume is given it again
        from ragmeter.core.config import PYTHON_GRADERS_OPTION

        opts[PYTHON_GRADERS_OPTION] = python_graders
    if openai_eval is not None:
        from ragmeter.apps.cli._openai_eval import eval_arguments

        args = eval_arguments(openai_eval, data, metrics=_split_metrics(metrics), threshold=threshold,
                              pass_rule=pass_rule, mapping=map_, options=opts, pass_rate_target=pass_rate_target,
                              allow_python_graders=python_graders or False, on_error=on_error)
        data, metrics, threshold, pass_rule, opts, map_ = (args["data"], args["metrics"], args["thresholds"],
                                                           args["pass_rule"], args["options"], args.get("mapping"))
    elif pass_rate_target:
        from ragmeter.core.errors import ConfigError
        from ragmeter.core.thresholds import parse_rate_targets, with_rate_targets

        if not threshold:
            raise ConfigError("--pass-rate-target is the share of samples that must pass a metric's per-sample "
                              "threshold: give that with --threshold METRIC>=VALUE (or run an eval with --openai-eval)")
        threshold = with_rate_targets(threshold, parse_rate_targets(pass_rate_target))
    run_config = EvalConfig(metrics=tuple(_split_metrics(metrics)), file=config, max_missing=max_missing,
                            mapping=map_ or None, on_error=on_error, db=db, resume=resume, name=name,
                            options=opts, progress=not no_progress and not as_json,
                            skip_unavailable=skip_unavailable, where=where or None, engine=engine,
                            ray_address=ray_address, thresholds=threshold or None, pass_rule=pass_rule,
                            per_span=per_span)
    if dry_run:
        if resume:
            raise typer.BadParameter("--dry-run plans a new evaluation; it cannot be combined with --resume")
        from ragmeter.apps.cli.judge import dry_run_report

        dry_run_report(data, run_config, as_json=as_json)
        return
    if opts.get("judge") and config is None:  # its client opens while the runner is imported
        from ragmeter.llm.runtime import warm_judge

        warm_judge(opts)
    from ragmeter.run.runner import run

    try:
        result = run(data, run_config)
    except Exception as exc:
        # --batch --no-wait: submitted and stored, not a failure (raised from ragmeter.llm.batch, so
        # that module is loaded then; a run without a judge does not import the judge package)
        batch = sys.modules.get("ragmeter.llm.batch")
        if batch is None or not isinstance(exc, batch.BatchPending):
            raise
        err_console.print(f"{exc} (exit 3)", style="yellow", markup=False, highlight=False)
        raise typer.Exit(3) from None
    if out:
        result.write_jsonl(out)
    skipped = result.extra.get("skipped_rows")
    if skipped:
        err_console.print(f"[yellow]skipped {skipped['count']} bad row(s):[/yellow]")
        for e in skipped["errors"][:20]:
            err_console.print(f"  {e}", markup=False, highlight=False)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), default=str))
    else:
        from ragmeter.conversations.scope import describe
        from ragmeter.run.spans import describe_rows

        shape = describe_rows(result.samples) if per_span else describe(result.samples)
        console.print(summary_table(result.summary, title=f"run {result.run_id} — {shape}"))
        _print_extra(result.extra)
        if out:
            console.print(f"per-sample results: {out}")
        for s in result.summary.values():
            if p := s.check:
                verdict = "" if p.get("checked") is False else " PASS" if p["ok"] else " FAIL"
                console.print(f"{p['threshold']}: {p['passed']}/{p['n']} passed, Wilson 95% "
                              f"[{p['rate_low']:.3f}, {p['rate_high']:.3f}]{verdict}",
                              markup=False, highlight=False, soft_wrap=True)
    if result.passed is False:  # a threshold failed: the check this command was asked for
        raise typer.Exit(1)
    from ragmeter.apps.cli._common import exit_if_incomplete

    exit_if_incomplete(result)


def _parse_value(v: str) -> Any:
    try:
        return json.loads(v)
    except (ValueError, RecursionError):  # not JSON (or a 5,000-digit number): the text itself
        return v


def _print_extra(extra: dict[str, Any]) -> None:
    emb = extra.get("embeddings")
    if emb:
        console.print(f"embeddings: computed {emb.get('computed', 0)}, cached {emb.get('cached', 0)}")
    judge = extra.get("judge")
    if judge:
        console.print("judge: " + ", ".join(f"{k} {fmt(v)}" for k, v in judge.items()
                                           if not isinstance(v, dict | list)))
    panel = extra.get("panel")
    if isinstance(panel, dict) and panel.get("judges"):  # a panel of judges (run/panel_record.py)
        alphas = ", ".join(f"{k} {fmt(m.get('alpha'))}" for k, m in (panel.get("metrics") or {}).items())
        console.print(f"judge panel: {len(panel['judges'])} judges ({', '.join(j['label'] for j in panel['judges'])}), "
                      f"values combined by {panel.get('combine')}; Krippendorff's alpha between them: {alphas}",
                      markup=False, highlight=False)


def metrics_cmd(
    family: Annotated[str | None, typer.Option(help="Only this family (llm = judge, its earlier name).")] = None,
    long: Annotated[bool, typer.Option("--long", "-l", help="Also print each metric's definition.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON list.")] = False,
    from_: Annotated[str | None, typer.Option("--from", help="ragas or deepeval: that tool's metrics, ragmeter's name for each and whether it is exact.")] = None,
) -> None:
    """List every metric with its family, direction, needed fields and range (--long: definitions)."""
    if from_ is not None:
        if family is not None or long:
            raise typer.BadParameter("lists a tool's metrics; --family and --long do not apply", param_hint="'--from'")
        from ragmeter.apps.cli.metrics_from import print_from

        print_from(from_, as_json)
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ragmeter.metrics.registry import all_metrics, family_name

    specs = [s for s in all_metrics() if family is None or s.family == family_name(family)]
    if family is not None and not specs:
        families = sorted({s.family for s in all_metrics()})
        raise typer.BadParameter(f"no metric family {family!r}; families: {', '.join(families)}",
                                 param_hint="'--family'")
    if as_json:
        typer.echo(json.dumps([s.info() for s in specs]))
        return
    ranges = {_range_text(s) for s in specs}
    # a few metrics off the common range are named in the title, so the table keeps its columns
    common = max(ranges, key=lambda r: sum(_range_text(s) == r for s in specs))
    odd = [s for s in specs if _range_text(s) != common]
    # a quarter of the metrics may be listed below the table: a range column leaves no room for the
    # needed fields at 80 columns once names reach 40 characters (ragas:agent_goal_accuracy_without_reference)
    one_range = len(odd) <= max(8, len(specs) // 4)
    title = f"{len(specs)} metrics" + (f", every score in {common}" if one_range else "")
    if odd and one_range:
        title += f" but {len(odd)} (below)"
    # names, families and directions never wrap or shrink; only the field lists wrap, so the
    # table reads at 80 columns (definitions are too long for a column: --long prints them below)
    t = Table(title=title,
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
              title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("family", no_wrap=True)
    t.add_column("better", no_wrap=True)
    if not one_range:
        t.add_column("range", no_wrap=True)
    t.add_column("needs", overflow="fold")
    for s in specs:
        uses = [x for x, f in (("+emb", s.needs_embeddings), ("+judge", s.needs_llm)) if f]
        row = [s.name + (f"@{s.param}" if s.param else ""), s.family,
               "higher" if s.higher_is_better else "lower"]
        if not one_range:
            row.append(_range_text(s))
        row.append(", ".join([*s.requires, *uses]))
        t.add_row(*row)
    console.print(t)
    if odd and one_range:
        console.print("Other ranges: " + ", ".join(f"{s.name} {_range_text(s)}" for s in odd)
                      + ".", markup=False, highlight=False)
    if any(s.needs_embeddings or s.needs_llm for s in specs):
        console.print("+emb: computes embeddings (offline default model); +judge: needs an LLM judge "
                      "(--judge). `ragmeter metrics --long` prints every definition.",
                      markup=False, highlight=False)
    if any(s.equals for s in specs):
        tools = sorted({(s.equals["tool"], s.equals["version"]) for s in specs if s.equals})
        console.print(", ".join(f"{t}:* equal {TOOL_LABELS.get(t, t)} {v}'s numbers" for t, v in tools)
                      + " given the same judge verdicts; `--long` says, for every judge metric, which "
                      "tool's number it equals and where it differs.", markup=False, highlight=False)
    if long:
        for s in specs:
            head = Text(s.name + (f"@{s.param}" if s.param else ""), style="bold")
            console.print(head)
            console.print(Text(s.info()["description"]), style=None, soft_wrap=False,
                          markup=False, highlight=False)
            if s.equals:
                console.print(Text(f"equals: {TOOL_LABELS.get(s.equals['tool'], s.equals['tool'])} "
                                   f"{s.equals['version']} {s.equals['metric']}, given the same verdicts"),
                              soft_wrap=False, markup=False, highlight=False)
            if s.parity_text():
                console.print(Text("parity: " + s.parity_text()), soft_wrap=False, markup=False, highlight=False)


TOOL_LABELS = {"ragas": "ragas", "deepeval": "DeepEval"}


def _range_text(spec: Any) -> str:
    if spec.range_for is not None:  # an OpenAI grader metric: its grader's definition sets it
        return "set by its definition"
    r = spec.range
    return f"{r[0]:g}-{r[1]:g}" if r[0] >= 0 else f"{r[0]:g} to {r[1]:g}"


def show_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or unique prefix, name, 'latest').")] = "latest",
    as_json: Annotated[bool, typer.Option("--json", help="JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Print a run's aggregates, config and service figures (embeddings, judge tokens and cost)."""
    store = get_store(db, must_exist=True)
    r = store.get_run(run)
    summary = store.run_summary(r)
    info = {"id": r.id, "name": r.name, "status": r.status, "created_at": r.created_at.isoformat(),
            "finished_at": r.finished_at.isoformat() if r.finished_at else None,
            "ragmeter_version": r.ragmeter_version, "dataset": r.dataset_source,
            "dataset_fingerprint": r.dataset_fingerprint, "n_samples": r.n_samples,
            "config": redact_obj(r.config), "timings": r.timings, "metrics": summary.to_dict(), **(r.extra or {})}
    from ragmeter.apps.cli import show_hooks

    sections = show_hooks.collect(store, r)
    if sections:
        info["sections"] = sections
    if as_json:
        typer.echo(json.dumps(info, default=str))
        return
    console.print(f"[bold]run {r.id}[/bold] {r.name or ''} — {r.status}, {count(r.n_samples, 'sample')}, "
                  f"dataset {r.dataset_source}, ragmeter {r.ragmeter_version}")
    if summary:
        console.print(summary_table(summary))
    else:
        console.print("(no summary: the run did not finish; `ragmeter eval --resume "
                      f"{r.id}` completes it)")
    _print_extra(r.extra or {})
    for title, body in sections.items():
        console.print(f"\n[bold]{title}[/bold]")
        table = show_hooks.render(title, body)
        if table is not None:
            console.print(table)
            continue
        console.print(body if isinstance(body, str) else json.dumps(body, indent=2, default=str),
                      markup=False, highlight=False)


def export_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or prefix, name, 'latest').")],
    format: Annotated[str | None, typer.Option("--format", "-f", help="csv, parquet, jsonl, or excel (also: xlsx) for an .xlsx workbook (default: the one --output's suffix names, else csv).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Output file (default RUN.FORMAT).")] = None,
    columns: Annotated[str | None, typer.Option(
        "--columns", help="Comma-separated columns to keep, in order (default: all).")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    to: Annotated[str | None, typer.Option("--to", help="Send the run to a sink instead of a file: mlflow (MLFLOW_TRACKING_URI) or sheets (Google Sheets).")] = None,
    experiment: Annotated[str | None, typer.Option("--experiment", help="MLflow experiment name (with --to mlflow; default 'ragmeter').")] = None,
    spreadsheet: Annotated[str | None, typer.Option("--spreadsheet", help="Google spreadsheet id (with --to sheets).")] = None,
) -> None:
    """Write a run's per-sample rows to a file: id, question, answer, reference, contexts and their
    ids, every metric's value, METRIC__pass (thresholded metrics), no-value reasons, judge verdicts;
    or send the run to MLflow or Google Sheets (--to)."""
    from ragmeter.apps.export.files import export_run, format_for

    format = format_for(format, output)
    store = get_store(db, must_exist=True)
    rid = store.resolve_run(run)
    if to is not None:
        from ragmeter.apps.export.dispatch import export_to

        console.print(export_to(store, rid, to, experiment=experiment, spreadsheet=spreadsheet))
        return
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    path = export_run(store, rid, format, output or Path(f"{rid}.{'xlsx' if format == 'excel' else format}"), columns=cols)
    console.print(f"wrote {path}")


def example_cmd(
    write: Annotated[Path, typer.Option("--write", help="Copy the bundled example's files to this folder.")],
) -> None:
    """Copy the bundled example dataset (corpus + samples) out, to read and imitate."""
    from ragmeter.io.readers import example_path

    src = example_path().parent
    write.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in src.rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            dest = write / p.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest)
            n += 1
    console.print(f"copied {n} files to {write}")
