"""``--openai-eval``: the arguments of ``ragmeter eval`` for an exported OpenAI eval, and the
``openai_eval:`` key of a ``ragmeter test`` suite (docs/openai-evals.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError


def split_thresholds(raw: Any, graders: list[str]) -> tuple[dict[str, float], list[Any]]:
    """Thresholds that name a grader are its pass-rate target (the share of samples that must pass
    it; the per-sample rule comes from the definition); the others stay per-sample thresholds."""
    from ragmeter.core.thresholds import parse_thresholds

    rates: dict[str, float] = {}
    rest: list[Any] = []
    for t in parse_thresholds(raw).values():
        if t.metric in graders:
            if t.op not in {"=", ">="}:
                raise ConfigError(f"threshold {t.metric}{t.op}{t.value:g}: a grader's threshold is the share of "
                                  f"samples that must pass it, e.g. {t.metric}=0.9")
            rates[t.metric] = t.value
        else:
            rest.append(t.to_dict())
    return rates, rest


def eval_arguments(openai_eval: Path, data: str | None, *, metrics: list[str], threshold: list[str] | None,
                   pass_rule: str | None, mapping: list[str] | None, options: dict[str, Any],
                   allow_python_graders: bool | str, on_error: str) -> dict[str, Any]:
    """``evaluate`` keyword arguments (``data``, ``metrics``, ``thresholds``, ``pass_rule``,
    ``options``) for ``ragmeter eval DATA --openai-eval EVAL.json``.

    Without ``--pass-rule`` or a threshold, the run reports each grader's pass rate and checks
    nothing (exit 0); ``--threshold GRADER=RATE`` makes a grader's pass rate a check (exit 1 below
    it), ``--pass-rule`` a check on every grader.
    """
    from ragmeter.metrics.openai_evals.definition import load_definition
    from ragmeter.metrics.openai_evals.run import prepare_run

    if data is None:
        raise ConfigError("give the items file: ragmeter eval ITEMS.jsonl --openai-eval EVAL.json")
    defn = load_definition(openai_eval)
    names = [g["name"] for g in defn.graders]
    rates, rest = split_thresholds(threshold or [], names)
    run = prepare_run(defn, data, allow_python_graders=allow_python_graders, mapping=mapping,
                      options=options, pass_rates=rates, on_error=on_error)
    taken = set(names) & set(metrics)
    if taken:
        raise ConfigError(f"--metrics {', '.join(sorted(taken))}: named like a grader of the eval; each grader's "
                          "results are stored under its name")
    rule: Any = pass_rule
    if rule is None and not rest:
        rule = "none"  # report the pass rates; no check unless asked for
    return {"data": run.dataset, "metrics": [*metrics, *run.metrics], "thresholds": [*run.thresholds, *rest],
            "pass_rule": rule, "options": {**options, **run.options, **run.config}}


def suite_arguments(spec: Any, data: str, suite_dir: Path, *, thresholds: dict[str, Any],
                    options: dict[str, Any], on_error: str) -> dict[str, Any]:
    """``evaluate`` keyword arguments for one dataset of a suite with ``openai_eval:``.

    ``openai_eval`` is the definition's path, or ``{path, pass_rate, allow_python_graders,
    unisolated_python_graders, sample}``
    (paths relative to the working directory, else to the suite file)
    (``pass_rate``: one target for every grader or ``{grader: target}``; ``sample``: the column with
    the model's output). A suite threshold naming a grader is that grader's pass-rate target.
    """
    from ragmeter.metrics.openai_evals.definition import load_definition
    from ragmeter.metrics.openai_evals.run import prepare_run

    if isinstance(spec, str | Path):
        spec = {"path": str(spec)}
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
        raise ConfigError("openai_eval: give the definition's path, or {path: EVAL.json, pass_rate: 0.9, "
                          "allow_python_graders: true, sample: COLUMN}")
    unknown = set(spec) - {"path", "pass_rate", "allow_python_graders", "unisolated_python_graders", "sample"}
    if unknown:
        raise ConfigError(f"openai_eval: unknown key(s) {sorted(unknown)}; keys: path, pass_rate, "
                          "allow_python_graders, unisolated_python_graders, sample")
    path = Path(spec["path"])
    defn = load_definition(path if path.is_absolute() or path.exists() else suite_dir / path)
    names = [g["name"] for g in defn.graders]
    rates, rest = split_thresholds(thresholds, names)
    given = spec.get("pass_rate")
    if given is not None:
        if isinstance(given, dict):
            rates = {**{str(k): v for k, v in given.items()}, **rates}
        else:
            rates = {**dict.fromkeys(names, given), **rates}
    try:
        rates = {k: float(v) for k, v in rates.items()}
    except (TypeError, ValueError):
        raise ConfigError(f"openai_eval.pass_rate: expected a share between 0 and 1, got {given!r}") from None
    for key in ("allow_python_graders", "unisolated_python_graders"):
        if not isinstance(spec.get(key, False), bool):
            raise ConfigError(f"openai_eval.{key}: expected true or false, got {spec[key]!r}")
    allow: bool | str = "unisolated" if spec.get("unisolated_python_graders") else bool(spec.get("allow_python_graders"))
    if not Path(data).exists() and (suite_dir / data).exists():  # a path relative to the suite file
        data = str(suite_dir / data)
    run = prepare_run(defn, data, allow_python_graders=allow,
                      mapping={"sample": str(spec["sample"])} if spec.get("sample") else None,
                      options=options, pass_rates=rates or None, on_error=on_error)
    return {"data": run.dataset, "metrics": run.metrics, "thresholds": [*run.thresholds, *rest],
            "options": {**run.options, **run.config}}
