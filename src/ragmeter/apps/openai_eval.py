"""Running an exported OpenAI eval or an openai/evals registry eval: ``ragmeter eval DATA
--openai-eval EVAL.json`` and ``openai_eval:`` in a ``ragmeter test`` suite.

:func:`load_eval_file` reads what ``--openai-eval`` names (:mod:`ragmeter.io.openai_evals.registry_file`)
and checks a definition's graders (:func:`ragmeter.metrics.openai_evals.definition.parse_definition`);
:func:`prepare_run` reads the items (:mod:`ragmeter.io.openai_evals.items`) and returns the metric
entries (one per grader, stored under the grader's name,
:mod:`ragmeter.metrics.openai_evals.graders`), the per-sample pass thresholds and the run options;
the runner does the rest, so the run is a normal run (show, compare, gate, export, report).
docs/openai-evals.md maps every grader field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.io.openai_evals.items import load_items
from ragmeter.io.openai_evals.registry_file import RegistryEval, is_registry, parse_registry, read_eval_file
from ragmeter.io.readers import Dataset
from ragmeter.metrics.openai_evals.definition import EvalDefinition, parse_definition, uses_python, walk


def load_eval_file(path: str | Path) -> EvalDefinition | RegistryEval:
    """What ``--openai-eval PATH`` names: an exported definition (JSON or YAML) or one eval of an
    openai/evals registry file (``PATH#NAME`` picks one of several).

    Raises:
        ConfigError: naming the file, the line (YAML) and the field of the first problem.
    """
    p, _, name = str(path).partition("#") if not Path(path).exists() and "#" in str(path) else (str(path), "", "")
    raw, lines = read_eval_file(p)
    if is_registry(raw):
        return parse_registry(raw, p, name or None, lines)
    if name:
        raise ConfigError(f"{p}: #{name} picks an eval of an openai/evals registry file; this is an eval definition")
    return parse_definition(raw, p)


def load_definition(path: str | Path) -> EvalDefinition:
    """Read and check an exported eval definition file (JSON, or YAML for ``.yaml``/``.yml``).

    Raises:
        ConfigError: the file is missing or unreadable, a registry file, or a field is wrong (named by
            its path).
    """
    defn = load_eval_file(path)
    if isinstance(defn, RegistryEval):
        raise ConfigError(f"{path}: an openai/evals registry file, not an exported eval definition")
    return defn


@dataclass
class OpenAIEvalRun:
    """What a run of an OpenAI eval needs.

    Attributes:
        definition: the checked eval definition.
        dataset: the items as samples.
        metrics: metric entries ``{name, params, key}``, one per grader.
        thresholds: ``[{metric, op, value[, pass_rate]}]``: each grader's per-sample pass rule
            (``value >= pass_threshold``) and its pass-rate target when one was given.
        options: run options to add (the judge taken from the graders' models when none is set; the
            permission to run python graders, never stored with the run).
        config: what the run records about the eval (``Run.config["extra"]["openai_eval"]``).
    """

    definition: EvalDefinition
    dataset: Dataset
    metrics: list[dict[str, Any]]
    thresholds: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def grader_names(self) -> list[str]:
        return [g["name"] for g in self.definition.graders]


def sample_column(mapping: Mapping[str, str] | Iterable[str] | None) -> str | None:
    """The column ``--map sample=COLUMN`` names (the only ``--map`` an OpenAI eval takes).

    Raises:
        ConfigError: another target, or a malformed entry.
    """
    if not mapping:
        return None
    items = list(mapping.items()) if isinstance(mapping, Mapping) else [tuple(str(m).split("=", 1)) for m in mapping]
    col = None
    for it in items:
        if len(it) != 2 or not str(it[0]).strip() or not str(it[1]).strip():
            raise ConfigError(f"--map {'='.join(map(str, it))}: use --map sample=COLUMN")
        target, c = str(it[0]).strip(), str(it[1]).strip()
        if target != "sample":
            raise ConfigError(f"--map {target}={c}: with --openai-eval the item is the row itself and --map "
                              "names only the sample: --map sample=COLUMN (the column with the model's output)")
        col = c
    return col


def _needs_sample(defn: EvalDefinition) -> bool:
    from ragmeter.metrics.openai_evals.templates import variables

    def texts(g: Mapping[str, Any]) -> list[str]:
        out = [g[k] for k in ("input", "reference") if isinstance(g.get(k), str)]
        for m in g.get("input") if isinstance(g.get("input"), list) else []:
            c = m["content"]
            parts = c if isinstance(c, list) else [c]
            out += [p if isinstance(p, str) else str(p.get("text", "")) for p in parts]
        return out

    return any(path[0] == "sample" for g in defn.graders for sub in walk(g) for t in texts(sub)
               for path in variables(t))


def prepare_run(definition: str | Path | EvalDefinition, data: Any, *, allow_python_graders: bool | str = False,
                mapping: Mapping[str, str] | Iterable[str] | None = None, options: Mapping[str, Any] | None = None,
                pass_rates: Mapping[str, float] | float | None = None, on_error: str = "raise") -> OpenAIEvalRun:
    """Read an eval definition and its items and say how to run them (see :class:`OpenAIEvalRun`).

    Args:
        definition: the exported definition file (JSON or YAML) or a checked definition.
        data: the items file (or a :class:`~ragmeter.io.Dataset` already read).
        allow_python_graders: run ``python`` graders (else they are refused: exit 2): ``True`` (or
            ``"isolated"``) in the bubblewrap sandbox, ``"unisolated"`` as plain child processes.
            The permission goes to ``options`` (the run option ``python_graders``), which a run
            never stores.
        mapping: ``sample=COLUMN`` (``--map``).
        options: the run options as given (a judge among them answers every model grader).
        pass_rates: a pass-rate target for every grader, or ``{grader: target}``.
        on_error: ``raise`` or ``skip`` bad rows.

    Raises:
        ConfigError: a bad definition (naming the field), python graders without
            ``allow_python_graders``, a pass-rate target for an unknown grader.
        DatasetError: a bad row, or graders that read the sample and no row has one.
    """
    from ragmeter.metrics.openai_evals.graders import metric_entry, pass_threshold
    from ragmeter.metrics.openai_evals.model import FROM_GRADERS

    defn = definition if isinstance(definition, EvalDefinition) else load_definition(definition)
    from ragmeter.core.config import PYTHON_GRADERS_OPTION
    from ragmeter.sandbox import ISOLATED, UNISOLATED

    python = [g["name"] for g in defn.graders if uses_python(g)]
    if python and not allow_python_graders:
        raise ConfigError(f"{defn.source}: grader(s) {', '.join(map(repr, python))} run Python code; ragmeter "
                          "runs python graders only with --allow-python-graders (each call in an isolated sandbox "
                          "with a time limit, python_grader_timeout, a memory limit, python_grader_memory_mb, "
                          "and a process limit, python_grader_processes; docs/openai-evals.md)")
    col = sample_column(mapping)
    if isinstance(data, Dataset):
        dataset = data
    elif isinstance(data, str | Path):
        dataset = load_items(data, sample_column=col, item_schema=defn.item_schema, on_error=on_error)
    else:
        raise DatasetError("with --openai-eval, DATA is the items file (.jsonl, .json, .csv, .parquet)")
    if dataset.samples and _needs_sample(defn) and not any(
            (s.metadata or {}).get("openai_sample") is not None for s in dataset.samples):
        raise DatasetError("the graders read the sample ({{sample.output_text}} ...) and no row has one: give each "
                           "row a `sample` object ({\"item\": {...}, \"sample\": {\"output_text\": ...}}) or name the "
                           "column with the model's output: --map sample=COLUMN", file=dataset.source)
    names = [g["name"] for g in defn.graders]
    rates: dict[str, float] = {}
    if isinstance(pass_rates, Mapping):
        unknown = [k for k in pass_rates if k not in names]
        if unknown:
            raise ConfigError(f"pass-rate target for {', '.join(map(repr, unknown))}, which the eval does not have; "
                              f"its graders: {', '.join(map(repr, names))}")
        rates = {k: float(v) for k, v in pass_rates.items()}
    elif pass_rates is not None:
        rates = dict.fromkeys(names, float(pass_rates))
    for k, v in rates.items():
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"pass-rate target of {k!r} is {v:g}: give a share between 0 and 1")
    thresholds = []
    for g in defn.graders:
        t: dict[str, Any] = {"metric": g["name"], "op": ">=", "value": pass_threshold(g)}
        if g["name"] in rates:
            t["pass_rate"] = rates[g["name"]]
        thresholds.append(t)
    opts = dict(options or {})
    extra: dict[str, Any] = {}
    models = [sub["model"] for g in defn.graders for sub in walk(g) if "model" in sub]
    if models and not opts.get("judge"):
        extra = {"judge": f"openai:{models[0]}", FROM_GRADERS: True}
    if python:
        extra[PYTHON_GRADERS_OPTION] = UNISOLATED if allow_python_graders == UNISOLATED else ISOLATED
    return OpenAIEvalRun(
        definition=defn, dataset=dataset,
        metrics=[metric_entry(g) for g in defn.graders], thresholds=thresholds,
        options=extra,
        config={"openai_eval": {"source": defn.source, "name": defn.name, "graders": names,
                                "data_source_type": defn.data_source_type}})
