"""``--openai-eval``: the arguments of ``ragmeter eval`` for an exported OpenAI eval (JSON or YAML)
or an eval of an openai/evals registry file, and the ``openai_eval:`` key of a ``ragmeter test``
suite (docs/openai-evals.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError


def split_thresholds(raw: Any, graders: list[str], *, given_as: str, rate_hint: str) -> list[dict[str, Any]]:
    """The per-sample thresholds, checked: none may name a grader, whose per-sample rule is its
    ``pass_threshold`` in the definition. A threshold naming a grader meant its pass-rate target
    before ``--threshold`` had one meaning; the error names where that target goes now
    (``given_as`` and ``rate_hint`` are formatted with the grader and the value).

    Raises:
        ConfigError: a threshold naming a grader (exit 2).
    """
    from ragmeter.core.thresholds import parse_thresholds

    rest: list[dict[str, Any]] = []
    for t in parse_thresholds(raw).values():
        if t.metric in graders:
            where = {"grader": t.metric, "value": f"{t.value:g}", "op": t.op}
            raise ConfigError(f"{given_as.format(**where)} names a grader of the eval: a threshold is a per-sample "
                              "threshold, and a grader's per-sample rule is its pass_threshold in the definition. "
                              "For the share of samples that must pass it (what a grader's threshold meant before), "
                              f"use {rate_hint.format(**where)}")
        rest.append(t.to_dict())
    return rest


def _grader_rates(targets: dict[str | None, float], names: list[str]) -> dict[str, float]:
    """The graders' pass-rate targets among ``--pass-rate-target``'s (``None``: every grader)."""
    every = targets.get(None)
    return {n: targets.get(n, every) for n in names if n in targets or every is not None}  # type: ignore[misc]


def eval_arguments(openai_eval: Path, data: str | None, *, metrics: list[str], threshold: list[str] | None,
                   pass_rule: str | None, mapping: list[str] | None, options: dict[str, Any],
                   pass_rate_target: list[str] | None = None,
                   allow_python_graders: bool | str, on_error: str) -> dict[str, Any]:
    """``evaluate`` keyword arguments (``data``, ``metrics``, ``thresholds``, ``pass_rule``,
    ``options``) for ``ragmeter eval DATA --openai-eval EVAL.json``.

    Without ``--pass-rule``, a pass-rate target or a threshold, the run reports each grader's pass
    rate and checks nothing (exit 0); ``--pass-rate-target GRADER=RATE`` (or ``RATE`` for every
    grader) makes a grader's pass rate a check (exit 1 below it), ``--pass-rule`` a check on every
    grader. ``--threshold`` is a per-sample threshold of the other metrics (``--metrics``): one
    naming a grader is refused with the flag to use instead.
    """
    from ragmeter.apps.openai_eval import load_eval_file, prepare_run
    from ragmeter.core.thresholds import parse_rate_targets, with_rate_targets
    from ragmeter.io.openai_evals.registry_file import RegistryEval

    defn = load_eval_file(openai_eval)
    if isinstance(defn, RegistryEval):
        return _registry_arguments(defn, data, metrics=metrics, threshold=threshold, pass_rule=pass_rule,
                                   mapping=mapping, options=options, pass_rate_target=pass_rate_target)
    if data is None:
        raise ConfigError("give the items file: ragmeter eval ITEMS.jsonl --openai-eval EVAL.json")
    names = [g["name"] for g in defn.graders]
    rest = split_thresholds(threshold or [], names, given_as="--threshold {grader}{op}{value}",
                            rate_hint="--pass-rate-target {grader}={value}")
    targets = parse_rate_targets(pass_rate_target)
    stray = [k for k in targets if k is not None and k not in names and k not in {t["metric"] for t in rest}]
    if stray:
        raise ConfigError(f"--pass-rate-target {stray[0]}={targets[stray[0]]:g}: {stray[0]!r} is neither a grader of "
                          f"the eval ({', '.join(names)}) nor a metric with a --threshold")
    rates = _grader_rates(targets, names)
    rest = with_rate_targets(rest, {k: v for k, v in targets.items() if k not in names})
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


def _registry_arguments(reg: Any, data: str | None, *, metrics: list[str], threshold: list[str] | None,
                        pass_rule: str | None, mapping: list[str] | None, options: dict[str, Any],
                        pass_rate_target: list[str] | None) -> dict[str, Any]:
    """``evaluate`` keyword arguments for an eval of an openai/evals registry file: its template's
    metrics (:data:`~ragmeter.io.openai_evals.registry_file.TEMPLATES`) on DATA, or on its
    ``samples_jsonl`` when no DATA is given; ``--map answer=COLUMN`` names the completions, the
    thresholds are the metrics' own (per sample)."""
    from ragmeter.core.thresholds import parse_rate_targets, with_rate_targets

    names = [m["name"] for m in reg.metrics]
    taken = set(names) & {m for m in metrics if isinstance(m, str)}
    if taken:
        raise ConfigError(f"--metrics {', '.join(sorted(taken))}: already scored by the registry eval's template")
    thresholds: list[Any] = list(threshold or [])
    if pass_rate_target:
        if not thresholds:
            raise ConfigError(f"--pass-rate-target is the share of samples that must pass a metric's per-sample "
                              f"threshold: give that with --threshold, e.g. --threshold {names[0]}>=1")
        thresholds = with_rate_targets(thresholds, parse_rate_targets(pass_rate_target))
    return {"data": data if data is not None else str(reg.samples_path()), "metrics": [*metrics, *reg.metrics],
            "thresholds": thresholds, "pass_rule": pass_rule, "mapping": mapping,
            "options": {**options, "openai_eval": reg.record()}}


def suite_arguments(spec: Any, data: str, suite_dir: Path, *, thresholds: dict[str, Any],
                    options: dict[str, Any], on_error: str) -> dict[str, Any]:
    """``evaluate`` keyword arguments for one dataset of a suite with ``openai_eval:``.

    ``openai_eval`` is the definition's path, or ``{path, pass_rate, allow_python_graders,
    unisolated_python_graders, sample}``
    (paths relative to the working directory, else to the suite file)
    (``pass_rate``: one target for every grader or ``{grader: target}``; ``sample``: the column with
    the model's output). A suite threshold is a per-sample threshold of the suite's other metrics:
    one naming a grader is refused, naming ``pass_rate``.
    """
    from ragmeter.apps.openai_eval import load_eval_file, prepare_run
    from ragmeter.io.openai_evals.registry_file import RegistryEval

    if isinstance(spec, str | Path):
        spec = {"path": str(spec)}
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
        raise ConfigError("openai_eval: give the definition's path, or {path: EVAL.json, pass_rate: 0.9, "
                          "allow_python_graders: true, sample: COLUMN}")
    unknown = set(spec) - {"path", "pass_rate", "allow_python_graders", "unisolated_python_graders", "sample"}
    if unknown:
        raise ConfigError(f"openai_eval: unknown key(s) {sorted(unknown)}; keys: path, pass_rate, "
                          "allow_python_graders, unisolated_python_graders, sample")
    path = Path(spec["path"].partition("#")[0])
    defn = load_eval_file(spec["path"] if path.is_absolute() or path.exists() else suite_dir / spec["path"])
    if not Path(data).exists() and (suite_dir / data).exists():  # a path relative to the suite file
        data = str(suite_dir / data)
    if isinstance(defn, RegistryEval):  # the template's metrics on the suite's dataset
        if set(spec) != {"path"}:
            raise ConfigError(f"openai_eval: {', '.join(sorted(set(spec) - {'path'}))} apply to an eval definition's "
                              f"graders; {spec['path']} is an openai/evals registry eval (give its metrics "
                              "thresholds under thresholds:)")
        return {"data": data, "metrics": defn.metrics, "thresholds": list(thresholds),
                "options": {"openai_eval": defn.record()}}
    names = [g["name"] for g in defn.graders]
    suite_rate = "openai_eval: {{path: " + spec["path"].replace("{", "{{").replace("}", "}}") + \
        ", pass_rate: {{{grader}: {value}}}}} in the suite"
    rest = split_thresholds(thresholds, names, given_as="threshold {grader}: {value}", rate_hint=suite_rate)
    rates: dict[str, Any] = {}
    given = spec.get("pass_rate")
    if given is not None:
        rates = {str(k): v for k, v in given.items()} if isinstance(given, dict) else dict.fromkeys(names, given)
    try:
        rates = {k: float(v) for k, v in rates.items()}
    except (TypeError, ValueError):
        raise ConfigError(f"openai_eval.pass_rate: expected a share between 0 and 1, got {given!r}") from None
    for key in ("allow_python_graders", "unisolated_python_graders"):
        if not isinstance(spec.get(key, False), bool):
            raise ConfigError(f"openai_eval.{key}: expected true or false, got {spec[key]!r}")
    allow: bool | str = "unisolated" if spec.get("unisolated_python_graders") else bool(spec.get("allow_python_graders"))
    run = prepare_run(defn, data, allow_python_graders=allow,
                      mapping={"sample": str(spec["sample"])} if spec.get("sample") else None,
                      options=options, pass_rates=rates or None, on_error=on_error)
    return {"data": run.dataset, "metrics": run.metrics, "thresholds": [*run.thresholds, *rest],
            "options": {**run.options, **run.config}}
