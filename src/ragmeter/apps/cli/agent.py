"""Agent, consistency and composite commands: ``consistency``, ``composite``, ``agent-stats``;
and the ``ragmeter show`` sections for composites, hints and agent execution statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, fmt, get_store
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count


def register(app: typer.Typer) -> None:
    app.command("consistency")(consistency_cmd)
    app.command("composite")(composite_cmd)
    app.command("agent-stats")(agent_stats_cmd)
    from ragmeter.apps.cli import show_hooks

    show_hooks.add(_show_composites)
    show_hooks.add(_show_agent_stats)


def _show_composites(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show``: the composites that apply to the run, each metric's band, and the hints."""
    from collections.abc import Mapping

    from ragmeter.analysis.composite import PRESETS, band, band_action, bands_apply, composite_scores, hints
    from ragmeter.core.errors import ConfigError

    out: dict[str, Any] = {}
    custom = ((run.config or {}).get("options") or {}).get("composite")
    names = list(PRESETS) + (list(custom) if isinstance(custom, Mapping) else [])
    lines = []
    for name in dict.fromkeys(names):
        try:
            res = composite_scores(store, run.id, name)
        except ConfigError as exc:
            lines.append(f"{name}: {exc}")
            continue
        if res is None:
            continue
        mean = "—" if res["mean"] is None else f"{res['mean']:.4f}"
        extra = []
        if res["absent"]:
            extra.append(f"absent: {', '.join(res['absent'])}")
        if res["n_renormalised"]:
            extra.append(f"{res['n_renormalised']} renormalised")
        if res["n_missing"]:
            extra.append(f"{res['n_missing']} without value")
        lines.append(f"{name}: {mean} ({res['band'] or 'no value'}), n={res['n']}"
                     + (f" — {'; '.join(extra)}" if extra else ""))
    if lines:
        out["composite scores"] = "\n".join(lines)
    bands = []
    options = (run.config or {}).get("options") or {}
    for key, agg in (run.summary or {}).items():
        if (isinstance(agg, Mapping) and agg.get("mean") is not None and 0 <= agg["mean"] <= 1
                and bands_apply(key, agg.get("family"), options)):
            b = band(agg["mean"], agg.get("direction") != "lower")
            if b is not None:
                bands.append(f"{key}: {agg['mean']:.4f} {b} — {band_action(b).lower()}")
    if bands:
        out["score bands"] = "\n".join(bands)
    hs = hints(run.summary or {})
    if hs:
        out["hints"] = "\n".join(h["message"] for h in hs)
    return out


def _show_agent_stats(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show``: the execution statistics when the run scored agent traces."""
    from ragmeter.analysis.agent_execution import run_execution_stats, scores_traces

    if not scores_traces(run.summary or {}):
        return {}
    stats = run_execution_stats(store, run.id)  # of a run scored per span: its traces
    if not stats["n_traces"]:
        return {}
    return {"agent execution stats": stats_table_text(stats)}


def stats_table_text(stats: dict[str, Any]) -> str:
    """A plain-text table of :func:`~ragmeter.metrics.agent.execution.execution_stats` (``ragmeter show``)."""
    from ragmeter.analysis.agent_execution import STAT_FIGURES

    head = f"{'figure':<16}{'n':>6}{'mean':>12}{'p50':>12}{'p95':>12}{'p99':>12}"
    lines = [count(stats.get("n_traces", 0), "trace"), head]
    for name in STAT_FIGURES:
        d = stats.get(name) or {}
        cells = "".join(f"{'—' if d.get(k) is None else format(d[k], '.2f'):>12}"
                        for k in ("mean", "p50", "p95", "p99"))
        lines.append(f"{name:<16}{d.get('n', 0):>6}{cells}")
    rate = stats.get("tool_error_rate")
    lines.append(f"tool errors: {stats.get('tool_errors', 0)}"
                 + (f" ({rate:.1%} of calls)" if rate is not None else ""))
    return "\n".join(lines)


def _parse_range(text: str | None, what: str) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"{what} expects LOW,HIGH (e.g. 0,100), got {text!r}") from None
    if hi <= lo:
        raise typer.BadParameter(f"{what}: HIGH must be above LOW")
    return lo, hi


def _split(values: list[str] | None) -> list[str]:
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


def consistency_cmd(
    runs: Annotated[list[str] | None, typer.Argument(help="Stored runs of the same samples (ids, prefixes or names).")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="One file with a run (or model) column instead of stored runs.")] = None,
    by: Annotated[str, typer.Option(help="With --file: group rows by 'run' (same model) or 'model' (across models).")] = "run",
    run_column: Annotated[str, typer.Option(help="Column naming the run (with --file).")] = "run",
    model_column: Annotated[str, typer.Option(help="Column naming the model (with --file).")] = "model",
    cross_model: Annotated[bool, typer.Option("--cross-model", help="Stored runs are different models: print the cross-model figures.")] = False,
    label: Annotated[str, typer.Option(help="Where the label is read: answer, metadata.X, final_output.X or a field name; 'none' to skip.")] = "answer",
    score: Annotated[list[str] | None, typer.Option("--score", "-s", help="Score(s): a stored metric key or a numeric field (repeatable). Default with runs: every metric they share.")] = None,
    score_range: Annotated[str | None, typer.Option(help="LOW,HIGH scale of field scores (e.g. 0,100); metrics use their own range.")] = None,
    confidence: Annotated[str, typer.Option(help="Cross-model: where the confidence is read; 'none' to skip.")] = "confidence",
    semantic: Annotated[bool, typer.Option("--semantic/--no-semantic", help="Semantic agreement of the answers (loads the embedding model).")] = True,
    embedding_model: Annotated[str | None, typer.Option(help="Embedding model for semantic agreement (default all-MiniLM-L6-v2).")] = None,
    per_sample: Annotated[bool, typer.Option("--per-sample", help="Also print the figures of each sample.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Consistency of repeated runs (same model) or agreement across models.

    `ragmeter consistency RUN1 RUN2 RUN3` prints the same-model figures (label agreement, score std,
    normalised score consistency, semantic agreement, overall) and records them for the runs, so
    the `unified` composite can use them. `--file F --by model` reads one file instead.
    """
    from ragmeter.analysis import consistency as C

    lab = None if label.lower() == "none" else label
    conf = None if confidence.lower() == "none" else confidence
    rng = _parse_range(score_range, "--score-range")
    scores = _split(score) or None
    kw: dict[str, Any] = {"label": lab, "score_range": rng, "semantic": semantic,
                          "embedding_model": embedding_model}
    if file is not None:
        if runs:
            raise typer.BadParameter("give stored RUNS or --file, not both")
        if by == "model":
            kw.update(confidence=conf)
        result = C.consistency_from_file(file, by=by, run_column=run_column, model_column=model_column,
                                         scores=scores or (), **kw)
    else:
        if not runs or len(runs) < 2:
            raise typer.BadParameter("give at least two stored runs (or --file)")
        store = get_store(db, must_exist=True)
        if cross_model:
            kw.update(confidence=conf)
        result = C.consistency_from_runs(store, runs, cross_model=cross_model, scores=scores, **kw)
    if as_json:
        typer.echo(json.dumps(result, default=str))
    else:
        _print_consistency(result, per_sample)
        for model, sub in (result.get("per_model") or {}).items():
            console.print(f"\n[bold]{model}[/bold] (its own runs)")
            _print_consistency(sub, False)
    if not result.get("n_samples"):
        # nothing paired, nothing measured: incomplete
        if not as_json:
            err_console.print("nothing to measure (exit 3): samples pair by id, and no id is in two "
                              f"{'runs' if result.get('kind') == 'same_model' else 'models'}; the samples "
                              "of a span file are its trace ids, new in every run of the agent",
                              markup=False, highlight=False)
        raise typer.Exit(3)


def _print_consistency(r: dict[str, Any], per_sample: bool) -> None:
    from rich.table import Table

    same = r["kind"] == "same_model"
    who = f"{r['n_groups']} runs" if same else f"{r['n_models']} models ({', '.join(r['models'])})"
    t = Table(title=f"{'same-model consistency' if same else 'cross-model agreement'} — {who}, "
                    f"{count(r['n_samples'], 'paired sample')}")
    t.add_column("figure", style="bold")
    t.add_column("value", justify="right")
    t.add_column("n", justify="right")
    t.add_column("definition")
    if r.get("label"):
        t.add_row(f"label agreement ({r['label']})", fmt(r["label_agreement"]), str(r["n_label"]),
                  "share of " + ("runs" if same else "models") + " giving the modal label")
    for name, d in r["scores"].items():
        if same:
            t.add_row(f"score std ({name})", fmt(d["std"]), str(d["n"]), "population std across runs")
            t.add_row(f"score consistency ({name})", fmt(d["consistency"]), str(d["n"]),
                      f"1 - std / half the scale [{d['range'][0]:g}, {d['range'][1]:g}]")
        else:
            t.add_row(f"score range ({name})", fmt(d["range"]), str(d["n"]), "max - min across models")
            t.add_row(f"normalised range ({name})", fmt(d["normalised_range"]), str(d["n"]),
                      f"range / (scale {d['scale'][0]:g}-{d['scale'][1]:g})")
    if not same and r.get("confidence"):
        t.add_row(f"confidence agreement ({r['confidence']})", fmt(r["confidence_agreement"]),
                  str(r["n_confidence"]), "1 - std / half the [0, 1] scale")
    if r.get("semantic"):
        t.add_row("semantic agreement", fmt(r["semantic_agreement"]), str(r["n_semantic"]),
                  "mean pairwise cosine of the answers" + ("" if same else " of different models"))
    key = "overall_consistency" if same else "overall_agreement"
    t.add_row(key.replace("_", " "), fmt(r[key]), str(r["n_overall"]), "mean of the figures above, per sample")
    console.print(t)
    for note in r.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    if per_sample:
        pt = Table(title="per sample")
        cols = ["id"] + sorted({k for rec in r["per_sample"].values() for k in rec})
        for c in cols:
            pt.add_column(c)
        for sid, rec in r["per_sample"].items():
            pt.add_row(sid, *[fmt(rec.get(c)) for c in cols[1:]])
        console.print(pt)


def composite_cmd(
    run: Annotated[str | None, typer.Argument(help="Run id (or prefix, name, 'latest'); omit with --value.")] = None,
    preset: Annotated[list[str] | None, typer.Option("--preset", "-p", help="deepeval, openevals, accuracy, unified, or a YAML/JSON file (repeatable). Default: every preset that applies.")] = None,
    value: Annotated[list[str] | None, typer.Option("--value", help="metric=value to combine without a run (repeatable).")] = None,
    missing: Annotated[str | None, typer.Option(help="A missing component: 'renormalise' over the present ones (default) or 'none' (no value).")] = None,
    min_coverage: Annotated[float | None, typer.Option(help="With renormalise: no value when the present components weigh less than this share (default 0.5).", parser=number(0, 1))] = None,
    per_sample: Annotated[bool, typer.Option("--per-sample", help="Include each sample's composite (with --json).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Weighted overall scores (DeepEval, OpenEvals, unified or your own) with their bands.

    Of a stored run: each sample's composite, then the mean with a 95% CI. With `--value`:
    the composite of the given values (e.g. the agent-evaluation guide's DeepEval example gives 0.92).
    """
    from ragmeter.analysis import composite as K

    if missing is not None and missing not in K.MISSING_POLICIES:
        raise typer.BadParameter(f"--missing must be one of {', '.join(K.MISSING_POLICIES)}")
    names = preset or None
    if value:
        if run is not None:
            raise typer.BadParameter("give a RUN or --value, not both")
        values: dict[str, float] = {}
        for item in value:
            k, sep, v = item.partition("=")
            try:
                values[k.strip()] = float(v)
            except ValueError:
                raise typer.BadParameter(f"--value expects metric=number, got {item!r}") from None
            if not sep:
                raise typer.BadParameter(f"--value expects metric=number, got {item!r}")
        results = {p: K.composite_from_values(values, p, missing=missing, min_coverage=min_coverage)
                   for p in (names or ["deepeval"])}
        if as_json:
            typer.echo(json.dumps(results, default=str))
            return
        for p, res in results.items():
            console.print(_composite_line(p, res["value"], res["band"], res.get("missing"), res.get("reason")))
        return
    store = get_store(db, must_exist=True)
    rid = store.resolve_run(run or "latest")
    out: dict[str, Any] = {}
    for p in names or list(K.PRESETS):
        res = K.composite_scores(store, rid, p, missing=missing, min_coverage=min_coverage, per_sample=per_sample)
        if res is None:
            if names:
                out[p] = {"composite": p, "mean": None, "reason": "the run has none of its components"}
            continue
        out[p] = res
    if as_json:
        typer.echo(json.dumps({"run_id": rid, "composites": out}, default=str))
        return
    if not out:
        console.print(f"run {rid}: no composite applies (its metrics are none of the presets' components)")
        return
    for p, res in out.items():
        console.print(_composite_line(p, res.get("mean"), res.get("band"), res.get("absent"), res.get("reason")))
        if "weights" in res:
            ins = ", ".join(f"{k} {w:g}" + ("" if res["inputs"].get(k) else " (absent)")
                            for k, w in res["weights"].items())
            ci = (f"95% CI [{fmt(res['ci_low'])}, {fmt(res['ci_high'])}], " if res.get("ci_low") is not None else "")
            console.print(f"  {ci}n={res['n']}, no value {res['n_missing']}, renormalised {res['n_renormalised']}; "
                          f"weights: {ins}", highlight=False)


def _composite_line(name: str, value: float | None, band: str | None, missing: Any, reason: Any) -> str:
    s = f"[bold]{name}[/bold]: {fmt(value)} ({band or 'no value'})"
    if reason and value is None:  # why there is no value (it names the missing components)
        return s + f" — {reason}"
    if missing:
        s += f" — missing: {', '.join(missing)}"
    return s


def _short(v: float | None) -> str:
    """A figure in at most 8 characters: two decimals below 1,000, whole numbers above."""
    if v is None:
        return "—"
    return f"{v:.2f}" if abs(v) < 1000 else f"{v:.0f}"


def agent_stats_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or prefix, name, 'latest').")] = "latest",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Execution statistics of a run's agent traces: step count, tool calls, latency (mean, p50,
    p95, p99), tool-call latency and tool errors."""
    from rich.table import Table

    from ragmeter.analysis.agent_execution import STAT_FIGURES, run_execution_stats

    store = get_store(db, must_exist=True)
    rid = store.resolve_run(run)
    stats = run_execution_stats(store, rid)
    if not stats["n_traces"]:  # nothing to measure (a run of samples without traces): incomplete
        if as_json:
            typer.echo(json.dumps({"run_id": rid, **stats}))
        else:
            err_console.print(f"run {rid} has no agent traces: its samples carry no trace (exit 3)",
                              markup=False, highlight=False)
        raise typer.Exit(3)
    if as_json:
        typer.echo(json.dumps({"run_id": rid, **stats}))
        return
    from rich import box

    # no borders, and figures with as many decimals as they need: every name and number reads whole
    # at 80 columns (latencies in ms are large numbers)
    t = Table(title=f"run {rid} — {count(stats['n_traces'], 'agent trace')}", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, title_justify="left")
    for c in ("figure", "n", "mean", "p50", "p95", "p99", "min", "max"):
        t.add_column(c, justify="left" if c == "figure" else "right", no_wrap=True)
    for name in STAT_FIGURES:
        d = stats[name]
        t.add_row(name, str(d["n"]), *[_short(d[k]) for k in ("mean", "p50", "p95", "p99", "min", "max")])
    console.print(t)
    rate = stats["tool_error_rate"]
    console.print(f"tool errors: {stats['tool_errors']}" + (f" ({rate:.1%} of calls)" if rate is not None else ""))
