"""``ragmeter monitor ...`` (production calls: stats, online evaluation, checks, import, prune)
and ``ragmeter trend METRIC`` (a metric across stored runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, fmt, get_store
from ragmeter.apps.cli._params import confirm, number
from ragmeter.core.counts import count

monitor_app = typer.Typer(name="monitor", no_args_is_help=True,
                          help="Production calls: aggregates (p50/p95/p99, cost, errors, feedback), "
                               "online evaluation of sampled calls, threshold checks, OpenTelemetry import.")


def register(app: typer.Typer) -> None:
    app.add_typer(monitor_app, name="monitor")
    app.command("trend")(trend_cmd)


@monitor_app.command("stats")
def stats_cmd(
    window: Annotated[str, typer.Option("--window", "-w", help="How far back: 15m, 1h, 1d, 7d ...")] = "1d",
    by: Annotated[str | None, typer.Option("--by", help="Also per model or metadata key (route, version ...).")] = None,
    bucket: Annotated[str | None, typer.Option("--bucket", help="Also per minute, hour or day.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Aggregates of the calls logged in the last --window: calls, queries per hour, latency
    p50/p95/p99 (exact, numpy's linear method), error rate, cost per query, feedback, tokens; and
    of the agent traces among them: traces, tool calls, tool errors and their rate, steps and cost
    per trace."""
    from ragmeter.monitor.aggregate import parse_duration, series, window_stats

    span = parse_duration(window)
    if bucket is not None and bucket not in {"minute", "hour", "day"}:
        raise typer.BadParameter("--bucket must be minute, hour or day")
    store = get_store(db, must_exist=True)
    out = window_stats(store, span, by=by)
    if bucket:
        out["series"] = series(store, span, bucket)
    if as_json:
        typer.echo(json.dumps(out, default=str))
        return
    _print_stats(out)


def _print_stats(out: dict[str, Any]) -> None:
    from rich.table import Table

    w = out["window"]
    console.print(f"{count(out['calls'], 'call')} from {w['start'][:19].replace('T', ' ')} to "
                  f"{w['end'][:19].replace('T', ' ')} UTC")
    rows = [("", out)]
    if "by" in out:
        rows += [(k, v) for k, v in out["by"]["groups"].items()]
    from rich import box

    # at 80 columns the figures and their headers read whole and a long group name folds (headers
    # were cut to 'cal…', 'USD/qu…' beside a service name)
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    t.add_column((out.get("by") or {}).get("field", ""), justify="left", overflow="fold")
    for col in ("calls", "p50 ms", "p95 ms", "p99 ms", "errors", "USD/query", "satisf."):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for label, s in rows:
        lat = s["latency_ms"]
        t.add_row(label or "all", str(s["calls"]), fmt(lat["p50"], 1), fmt(lat["p95"], 1), fmt(lat["p99"], 1),
                  fmt(s["error_rate"], 3), fmt(s["cost_per_query_usd"], 5),
                  fmt(s["feedback"]["satisfaction"], 3))
    console.print(t)
    if out.get("traces"):
        console.print(f"agent traces {out['traces']}: tool calls {out['tool_calls']}, tool errors "
                      f"{out['tool_errors']} (rate {fmt(out['tool_error_rate'], 3)}), steps/trace "
                      f"{fmt(out['steps_per_trace'], 2)}, USD/trace {fmt(out['cost_per_trace_usd'], 5)}",
                      markup=False, highlight=False)
    for p in out.get("series", []):
        console.print(f"  {p['start'][:16].replace('T', ' ')}  calls {p['calls']:>6}  p95 "
                      f"{fmt(p['latency_ms']['p95'], 1):>8} ms  errors {fmt(p['error_rate'], 3)}"
                      + (f"  traces {p['traces']}  tool errors {p['tool_errors']}" if p.get("traces") else ""))


@monitor_app.command("evaluate")
def evaluate_cmd(
    metrics: Annotated[list[str], typer.Option("--metrics", "-m", help="Comma-separated metrics to score.")],
    since: Annotated[str, typer.Option("--since", help="The window: calls of the last 1h, 1d, 7d ...")] = "1d",
    sample: Annotated[float, typer.Option("--sample", help="Share of the calls to score, in (0, 1].", parser=number(0, 1, low_open=True))] = 1.0,
    max_calls: Annotated[int | None, typer.Option("--max-calls", help="Score at most this many calls.", parser=number(1, integer=True))] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random sample.", parser=number(0, integer=True))] = 0,
    name: Annotated[str | None, typer.Option(help="A name for the run.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="LLM judge as provider:model.")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible judge.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Environment variable holding the judge's key.")] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Stop judging once this many USD are spent.", parser=number(0))] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value run option passed to metrics (repeatable), e.g. agent_preset=credit_risk or agent={\"expected_tools\": [\"search\"]} for the agent metrics of agent traces.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run summary as JSON.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide progress bars.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    engine: Annotated[str, typer.Option("--engine", help="local, or ray: score metrics in blocks, encode embeddings and send judge calls (under one limit and budget) on a Ray runtime (pip install 'ragmeter-eval[ray]').")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="ray://HOST:10001 of a Ray cluster (default: a local Ray runtime).")] = None,
) -> None:
    """Score a random sample of the calls logged in the window with any metrics (judge metrics
    stay under --max-cost, on this machine) and store it as a run linked to its window; the agent
    traces received over OTLP are scored with their whole trace (agent metrics). Exits 3
    when the run is incomplete (a metric without any value, e.g. token_f1 on calls without a
    reference)."""
    from ragmeter.apps.cli._common import exit_if_incomplete, summary_table
    from ragmeter.monitor.aggregate import parse_duration
    from ragmeter.monitor.online import evaluate_window

    names = [x.strip() for v in metrics for x in v.split(",") if x.strip()]
    opts: dict[str, Any] = {}
    for item in option or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise typer.BadParameter(f"use key=value, e.g. --option agent_preset=credit_risk; got {item!r}",
                                     param_hint="'--option'")
        try:
            opts[k.strip()] = json.loads(v)
        except (ValueError, RecursionError):  # not JSON: the text itself
            opts[k.strip()] = v
    opts |= {k: v for k, v in {"judge": judge, "judge_base_url": judge_base_url,
                              "judge_api_key_env": judge_api_key_env, "judge_max_cost": max_cost}.items()
            if v is not None}
    store = get_store(db, must_exist=True)
    result = evaluate_window(store, parse_duration(since, option="--since"), names, sample=sample,
                             max_calls=max_calls, seed=seed, options=opts, name=name,
                             progress=not no_progress and not as_json, engine=engine, ray_address=ray_address)
    rec = store.get_run(result.run_id).extra.get("monitor", {})
    if as_json:
        typer.echo(json.dumps({"run_id": result.run_id, "monitor": rec, "summary": result.summary.to_dict(),
                               "status": result.status, "incomplete": result.incomplete}, default=str))
    else:
        console.print(f"run {result.run_id}: {rec.get('n_scored')} of {rec.get('n_calls')} calls scored "
                      f"({rec.get('start', '')[:16]} – {rec.get('end', '')[:16]} UTC)")
        console.print(summary_table(result.summary))
    exit_if_incomplete(result)


@monitor_app.command("check")
def check_cmd(
    window: Annotated[str, typer.Option("--window", "-w", help="The calls of the last 15m, 1h, 1d ...")] = "1h",
    max_p95_ms: Annotated[float | None, typer.Option("--max-p95-ms", help="Fail when p95 latency is above this.", parser=number(0))] = None,
    max_p99_ms: Annotated[float | None, typer.Option("--max-p99-ms", help="Fail when p99 latency is above this.", parser=number(0))] = None,
    max_error_rate: Annotated[float | None, typer.Option("--max-error-rate", help="Fail when the error rate is above this.", parser=number(0, 1))] = None,
    max_cost_per_query: Annotated[float | None, typer.Option("--max-cost-per-query", help="Fail when the mean cost per call (USD) is above this.", parser=number(0))] = None,
    min_metric: Annotated[list[str] | None, typer.Option("--min-metric", help="metric=value: fail when the newest online evaluation in the window has a lower mean (repeatable).")] = None,
    min_calls: Annotated[int, typer.Option("--min-calls", help="Fewer calls than this in the window: exit 3 (nothing to check).", parser=number(0, integer=True))] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Check the last --window against thresholds, for cron and CI. Exit 0: all within;
    1: a threshold is crossed (each is printed); 2: bad options; 3: too few calls to check."""
    from ragmeter.core.errors import ConfigError
    from ragmeter.monitor.aggregate import now_utc, parse_duration, window_stats
    from ragmeter.monitor.online import quality_in_window

    span = parse_duration(window)
    minimums: dict[str, float] = {}
    for item in min_metric or []:
        key, sep, value = item.partition("=")
        try:
            minimums[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--min-metric expects metric=value (e.g. faithfulness=0.8), got {item!r}") from None
        if not sep or not key.strip():
            raise ConfigError(f"--min-metric expects metric=value (e.g. faithfulness=0.8), got {item!r}")
    if all(v is None for v in (max_p95_ms, max_p99_ms, max_error_rate, max_cost_per_query)) and not minimums:
        raise ConfigError("give at least one threshold: --max-p95-ms, --max-p99-ms, --max-error-rate, "
                          "--max-cost-per-query or --min-metric")
    store = get_store(db, must_exist=True)
    for m, limit in minimums.items():
        _check_minimum(store, m, limit)
    until = now_utc()
    st = window_stats(store, span, until=until)
    checks: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, worse_if: str, note: str = "") -> None:
        failed = value is not None and (value > limit if worse_if == "above" else value < limit)
        checks.append({"check": name, "value": value, "limit": limit, "worse_if": worse_if,
                       "status": "no data" if value is None else ("FAIL" if failed else "ok"),
                       "note": note})

    if max_p95_ms is not None:
        add("p95 latency (ms)", st["latency_ms"]["p95"], max_p95_ms, "above")
    if max_p99_ms is not None:
        add("p99 latency (ms)", st["latency_ms"]["p99"], max_p99_ms, "above")
    if max_error_rate is not None:
        add("error rate", st["error_rate"], max_error_rate, "above")
    if max_cost_per_query is not None:
        add("cost per query (USD)", st["cost_per_query_usd"], max_cost_per_query, "above")
    for m, limit in minimums.items():
        q = quality_in_window(store, m, until - span, until)
        if q is None:
            add(m, None, limit, "below", "no online evaluation with this metric in the window")
        else:
            worse = "above" if q["direction"] == "lower" else "below"
            add(m, q["mean"], limit, worse, f"run {q['run_id']}, n {q['n']}, 95% CI "
                                             f"[{fmt(q['ci_low'])}, {fmt(q['ci_high'])}]")
    failed = [c for c in checks if c["status"] == "FAIL"]
    too_few = st["calls"] < min_calls
    code = 1 if failed else (3 if too_few or any(c["status"] == "no data" for c in checks) else 0)
    if as_json:
        typer.echo(json.dumps({"window": st["window"], "calls": st["calls"], "checks": checks,
                               "exit_code": code}, default=str))
    else:
        console.print(f"{count(st['calls'], 'call')} in the last {window}")
        for c in checks:
            style = {"FAIL": "red", "ok": "green"}.get(c["status"], "yellow")
            rel = ">" if c["worse_if"] == "above" else "<"
            line = (f"[{style}]{c['status']:<7}[/{style}] {c['check']}: {fmt(c['value'])} "
                    f"(fails if {rel} {c['limit']:g})" + (f"  {c['note']}" if c["note"] else ""))
            console.print(line, highlight=False)
        if too_few and not failed:
            err_console.print(f"only {count(st['calls'], 'call')} in the window (--min-calls {min_calls}): "
                              "nothing to check")
    raise typer.Exit(code)


def _check_minimum(store: Any, name: str, limit: float) -> None:
    """A --min-metric that can never be checked is a usage error (exit 2), not 'no data' (exit 3)
    or a check that always passes: a name that is no metric and no online evaluation's key (a typo),
    a value that is not a number (nan passed every check), or one outside the metric's range
    (faithfulness=80)."""
    import difflib
    import math

    from ragmeter.core.errors import ConfigError
    from ragmeter.metrics.registry import declared_range, resolve
    from ragmeter.monitor.online import monitor_runs

    if not math.isfinite(limit):
        raise ConfigError(f"--min-metric {name}={limit}: the value must be a finite number")
    try:
        rng = declared_range(resolve(name).spec.range)
    except ConfigError as exc:
        scored = sorted({str(k) for rec in monitor_runs(store).values() for k in rec.get("metrics") or []})
        if name in scored:
            return  # a key of an online evaluation that is not a registry name (a plugin's, gone since)
        close = difflib.get_close_matches(name, scored, n=3, cutoff=0.6)
        raise ConfigError(f"--min-metric: {exc}" + (f" The online evaluations here scored: {', '.join(close)}."
                                                    if close else "")) from None
    if rng is not None and not rng[0] <= limit <= rng[1]:
        raise ConfigError(f"--min-metric {name}={limit:g}: outside the metric's range [{rng[0]:g}, {rng[1]:g}] "
                          "(a check that could never pass, or never fail)")


@monitor_app.command("import")
def import_cmd(
    files: Annotated[list[Path], typer.Argument(help="OTLP/JSON files (Collector file exporter), OTLP protobuf files (.pb) or ConsoleSpanExporter output.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Import OpenTelemetry traces (GenAI semantic conventions or OpenInference) as logged calls:
    one call per trace (an agent's trace also kept whole, as the OTLP receiver keeps it); importing
    a file twice stores its traces once. Every file is read and
    checked before anything is stored: a bad file stores nothing (exit 2)."""
    from ragmeter.core.errors import DatasetError
    from ragmeter.monitor import agents
    from ragmeter.monitor.calls import Privacy, normalise_call
    from ragmeter.monitor.otel import calls_from_spans, read_spans

    read: list[tuple[Path, int, list[dict[str, Any]], int]] = []
    kept: list[dict[str, Any]] = []  # the agent traces among them, kept whole (monitor/agents.py)
    for f in files:
        try:
            _only_opentelemetry(f)
            spans = read_spans(f)
            nameless = next((s for s in spans if not s.trace_id or not s.span_id), None)
            if nameless is not None:  # its call would be stored under the id "otel:"
                raise DatasetError(f"{f}: span {nameless.name or '(no name)'!r} has no "
                                   f"{'trace id' if not nameless.trace_id else 'span id'}")
            calls, leftover = calls_from_spans(spans)
            rows = [normalise_call(c, where=f"{f}: trace {c['call_id']}", source="otlp") for c in calls]
            waiting = {id(s) for s in leftover}
            kept += agents.attach(rows, agents.traces_of([s for s in spans if id(s) not in waiting]), Privacy())
        except DatasetError as exc:
            raise DatasetError(str(exc) if str(f) in str(exc) else f"{f}: {exc}") from None
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError) as exc:
            # the file parsed as JSON but a span's values have shapes no span has
            raise DatasetError(f"{f}: not OpenTelemetry spans ({type(exc).__name__}: {exc})") from None
        read.append((f, len(spans), rows, len({s.trace_id for s in leftover})))
    rows = [r for _, _, file_rows, _ in read for r in file_rows]
    if rows:
        agents.insert_calls(get_store(db), rows, kept)  # one transaction for every file
    for f, n_spans, file_rows, skipped in read:
        note = f" ({count(skipped, 'trace')} without a root span skipped)" if skipped else ""
        console.print(f"{f}: {count(n_spans, 'span')} → {count(len(file_rows), 'call')}{note}")
    if not rows:
        err_console.print("no complete trace found: nothing imported")
        raise typer.Exit(3)


def _only_opentelemetry(path: Path) -> None:
    """A span export of another format (Agents SDK, Phoenix, LangSmith, MLflow, Langfuse) is named,
    with the command that reads it, instead of 'neither OTLP/JSON nor a ConsoleSpanExporter span'."""
    from ragmeter.core.errors import DatasetError
    from ragmeter.io.spans import SPAN_FORMATS, detect_span_format

    fmt = detect_span_format(path) if path.is_file() else None
    if fmt is not None and fmt not in ("otlp", "otlp-proto"):
        what = SPAN_FORMATS[fmt].split(" (")[0]
        raise DatasetError(f"{path}: {what}, not OpenTelemetry spans: monitor import reads OTLP (JSON or "
                           f"protobuf) and ConsoleSpanExporter output; score this file with `ragmeter eval {path}`")


@monitor_app.command("prune")
def prune_cmd(
    older_than: Annotated[str, typer.Option("--older-than", help="Delete calls logged before now minus this (e.g. 90d).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Delete logged calls older than --older-than (runs and their scores are kept)."""
    from ragmeter.monitor.aggregate import now_utc, parse_duration
    from ragmeter.monitor.calls import count_calls, prune_calls

    span = parse_duration(older_than, option="--older-than")
    store = get_store(db, must_exist=True)
    n = count_calls(store, until=now_utc() - span)
    if n == 0:
        console.print("no call older than that")
        return
    if not yes and not confirm(f"delete {count(n, 'call')} logged before {now_utc() - span:%Y-%m-%d %H:%M} UTC?"):
        raise typer.Exit(1)
    deleted = prune_calls(store, span)
    console.print(f"deleted {count(deleted, 'call')}")


def trend_cmd(
    metric: Annotated[str, typer.Argument(help="A metric key as stored in runs (e.g. mrr, faithfulness).")],
    name: Annotated[str | None, typer.Option(help="Only runs whose name starts with this.")] = None,
    dataset: Annotated[str | None, typer.Option(help="Only runs whose dataset fingerprint starts with this.")] = None,
    limit: Annotated[int, typer.Option(help="The newest N runs.", parser=number(2, 100_000, integer=True))] = 50,
    max_drop: Annotated[float, typer.Option("--max-drop", help="Tolerated drop before a significant change counts as a regression.", parser=number(0))] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """A metric across the stored runs, oldest first: mean with 95% CI, git commit, and a
    regression mark where the paired gate against the previous run fails."""
    from rich.table import Table

    from ragmeter.monitor.online import trend

    if limit < 2:
        raise typer.BadParameter("--limit must be at least 2")
    rows = trend(get_store(db, must_exist=True), metric, name=name, dataset=dataset, limit=limit, max_drop=max_drop)
    if as_json:
        typer.echo(json.dumps({"metric": metric, "runs": rows}, default=str))
        return
    t = Table(title=f"{metric} over runs (oldest first)", box=None, padding=(0, 1),
              header_style="bold")
    cols = ["run", "created", "mean", "95% CI", "n", "vs previous"]
    with_commit = any(r["git_commit"] for r in rows)
    if with_commit:
        cols.insert(2, "commit")
    for col in cols:
        t.add_column(col, no_wrap=True, justify="right" if col in {"mean", "n"} else "left")
    for r in rows:
        mark = ("[red]▼ regression[/red]" if r["regression"] else
                ("ok" if r["regression"] is False else "—"))
        cells = [r["run_id"], r["created_at"][5:16].replace("T", " "), fmt(r["mean"], 3),
                 f"[{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}]", str(r["n"]), mark]
        if with_commit:
            cells.insert(2, (r["git_commit"] or "—")[:7])
        t.add_row(*cells)
    console.print(t)
