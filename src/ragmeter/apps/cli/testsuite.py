"""``ragmeter test SUITE.yaml``: run a suite file (datasets, metrics, thresholds, judge, baseline),
apply the thresholds and the regression gate, and write JUnit / Markdown for CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, get_store

SUITE_HELP = """Run a test suite: evaluate, apply thresholds and the regression gate; exit 1 when a check
fails.

A suite file (YAML or JSON). The smallest:

\b
    dataset: example
    metrics: [token_f1, mrr]
    thresholds: {token_f1: 0.3}

More keys: `datasets` (a list instead of one `dataset`), `pass_rule` (`all` or a pass-rate target
its Wilson lower bound must reach), `judge`, `options`, `baseline` (file or run id for the
regression gate) with `gate: {max_drop, alpha, relative}`, `name`, `map`, `openai_eval` (an
exported OpenAI eval definition run on the dataset, or `{path, pass_rate}` with the share of samples
that must pass each grader; thresholds are per-sample thresholds of the other metrics;
docs/openai-evals.md)."""


def register(app: typer.Typer) -> None:
    app.command("test", help=SUITE_HELP)(test_cmd)


def _datasets(suite: dict[str, Any]) -> list[str]:
    from ragmeter.core.errors import ConfigError

    if "datasets" in suite:
        ds = suite["datasets"]
        return [str(d) for d in (ds if isinstance(ds, list) else [ds])]
    if "dataset" in suite:
        return [str(suite["dataset"])]
    raise ConfigError("the suite names no dataset: add `dataset: FILE` (or `example`) or `datasets: [...]`")


def test_cmd(
    suite_file: Annotated[Path, typer.Argument(help="The suite file (YAML/JSON).", metavar="SUITE")],
    threshold: Annotated[list[str] | None, typer.Option(
        "--threshold", "-t", help="METRIC=VALUE, METRIC>=VALUE or METRIC<=VALUE; overrides the suite (repeatable).")] = None,
    pass_rule: Annotated[str | None, typer.Option(
        "--pass-rule", help="'all' samples, or a pass-rate target for the Wilson lower bound (e.g. 0.8).")] = None,
    baseline: Annotated[str | None, typer.Option(help="Baseline file or run id for the regression gate.")] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML (one testcase per sample x metric).")] = None,
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", help="Write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY).")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Run a test suite: evaluate, apply thresholds and the regression gate; exit 1 when a check fails."""
    from ragmeter.analysis.gate import gate
    from ragmeter.apps.report.suite_outputs import markdown as to_markdown
    from ragmeter.apps.report.suite_outputs import write_junit
    from ragmeter.core.config import load_config
    from ragmeter.core.thresholds import parse_rule, parse_thresholds
    from ragmeter.run.runner import evaluate

    cfg = load_config(suite_file)
    suite = {**cfg, **cfg.get("extra", {})}
    name = str(suite.get("name") or suite_file.stem)
    thr = {**parse_thresholds(suite.get("thresholds")), **parse_thresholds(threshold or [])}
    rule = parse_rule(pass_rule if pass_rule is not None else suite.get("pass_rule"))
    base = baseline or suite.get("baseline")
    gate_opts = dict(suite.get("gate") or {})
    store = get_store(db)
    run_cfg = {k: v for k, v in cfg.items() if k in {"metrics", "options", "map", "on_error"}}
    failed = incomplete = False
    md_parts: list[str] = []
    for i, data in enumerate(_datasets(suite)):
        label = name if len(_datasets(suite)) == 1 else f"{name}[{i}]"
        kw: dict[str, Any] = {"thresholds": [t.to_dict() for t in thr.values()]}
        if suite.get("openai_eval") is not None:  # an exported OpenAI eval's graders (docs/openai-evals.md)
            from ragmeter.apps.cli._openai_eval import suite_arguments

            kw = suite_arguments(suite["openai_eval"], data, suite_file.parent, thresholds=kw["thresholds"],
                                 options=dict(cfg.get("options") or {}), on_error=str(cfg.get("on_error", "raise")))
            data = kw.pop("data")
        res = evaluate(data, config=run_cfg, db=store, name=label, pass_rule=rule.to_dict(),
                       on_error=str(cfg.get("on_error", "raise")), **kw)
        rows = res.rows()
        gate_rows: list[Any] = []
        if base:
            g = gate(res, base, store=store, **{k: gate_opts[k] for k in ("max_drop", "alpha", "relative")
                                                  if k in gate_opts})
            gate_rows = g.rows
            failed |= g.failed
        failed |= res.passed is False
        incomplete |= not rows or any(s.n == 0 or s.n_missing for s in res.summary.values())
        for key, s in res.summary.items():
            p = s.check
            line = f"{label}  {key:<24} mean {s.mean:.4f}" if s.mean is not None else \
                f"{label}  {key:<24} no value"
            if p:
                line += (f"  {p['threshold']}: {p['passed']}/{p['n']} passed "
                         f"[{p['rate_low']:.3f}, {p['rate_high']:.3f}]  {'PASS' if p['ok'] else 'FAIL'}")
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        for g in gate_rows:
            console.print(f"{label}  gate {g.metric}: {g.status}", markup=False, highlight=False)
        if junit:
            write_junit(junit if i == 0 else junit.with_name(f"{junit.stem}-{i}{junit.suffix}"),
                        label, rows, res.summary, gate_rows)
        md_parts.append(to_markdown(label, res.run_id, rows, res.summary, rule.describe(), gate_rows))
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        with markdown.open("a", encoding="utf-8") as fh:  # append: $GITHUB_STEP_SUMMARY is shared by steps
            fh.write("\n".join(md_parts))
    if failed:
        err_console.print("FAILED: a threshold or the regression gate failed")
        raise typer.Exit(1)
    if incomplete:
        err_console.print("INCOMPLETE: some metrics have no value for some samples (see the table)")
        raise typer.Exit(3)
