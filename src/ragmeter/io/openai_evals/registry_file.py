"""openai/evals registry files (``evals/registry/evals/*.yaml``) of the basic templates, and the one
reader of the files ``--openai-eval`` is given: an exported eval definition or a registry file,
each as JSON or YAML (:func:`read_eval_file`; the definition's graders are checked by
:func:`ragmeter.metrics.openai_evals.definition.parse_definition`, both put together by
:func:`ragmeter.apps.openai_eval.load_eval_file`).

A registry file maps an eval's name to its spec id, and the id to the template class and its
arguments (openai/evals ``evals/registry.py``)::

    test-match:
      id: test-match.s1.simple-v0
      metrics: [accuracy]
    test-match.s1.simple-v0:
      class: evals.elsuite.basic.match:Match
      args:
        samples_jsonl: test_match/samples.jsonl

Each basic template is scored by the metrics of :mod:`ragmeter.metrics.openai_evals.basic` that
compute what it records.
``samples_jsonl`` is found next to the file, then in the registry's ``data`` folder (the file in
``REGISTRY/evals/``, its samples in ``REGISTRY/data/``, where openai/evals looks), then from the
working directory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError

#: openai/evals basic template class -> the metrics that compute what it records (``accuracy``;
#: FuzzyMatch also records ``f1_score``), with the template arguments they take
TEMPLATES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "evals.elsuite.basic.match:Match": (("evals_match",), ()),
    "evals.elsuite.basic.includes:Includes": (("evals_includes",), ("ignore_case",)),
    "evals.elsuite.basic.fuzzy_match:FuzzyMatch": (("evals_fuzzy_match", "evals_f1"), ()),
    "evals.elsuite.basic.json_match:JsonMatch": (("evals_json_match",), ()),
}


@dataclass
class RegistryEval:
    """One eval of an openai/evals registry file.

    Attributes:
        name: the eval's name (its key in the file).
        spec_id: its ``id`` (``NAME.SPLIT.VERSION``), the key of its class and arguments.
        cls: the template class (a key of :data:`TEMPLATES`).
        metrics: metric entries ``{name, params}`` that score the template.
        samples_jsonl: ``args.samples_jsonl`` as written.
        source: the file.
        line: the line of ``args.samples_jsonl`` (for errors).
        others: the other evals of the file.
    """

    name: str
    spec_id: str
    cls: str
    metrics: list[dict[str, Any]]
    samples_jsonl: str
    source: str
    line: int | None = None
    others: list[str] = field(default_factory=list)

    def samples_path(self) -> Path:
        """``samples_jsonl``: next to the file, else in the registry's ``data`` folder, else from the
        working directory.

        Raises:
            ConfigError: found in none of them (naming the file, line, field and the places tried).
        """
        given = Path(self.samples_jsonl)
        here = Path(self.source).parent
        tried = [given] if given.is_absolute() else [here / given, here.parent / "data" / given, given]
        for p in tried:
            if p.is_file():
                return p
        raise _fail(self.source, self.line, f"{self.spec_id}.args.samples_jsonl",
                    f"{self.samples_jsonl!r} not found (looked for {', '.join(map(str, dict.fromkeys(tried)))})")

    def record(self) -> dict[str, Any]:
        """What the run records about the eval (``Run.config``, option ``openai_eval``)."""
        return {"source": self.source, "name": self.name, "registry_id": self.spec_id, "class": self.cls,
                "metrics": [m["name"] for m in self.metrics]}


def _fail(source: str, line: int | None, where: str, msg: str) -> ConfigError:
    at = f", line {line}" if line is not None else ""
    return ConfigError(f"{source}{at}, field '{where}': {msg}")


def _lines(node: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """``{key path: 1-based line}`` of every mapping key of a composed YAML node."""
    import yaml

    out: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            path = (*prefix, str(k.value))
            out[path] = k.start_mark.line + 1
            out.update(_lines(v, path))
    return out


def read_eval_file(path: str | Path) -> tuple[Any, dict[tuple[str, ...], int]]:
    """A ``--openai-eval`` file's content (JSON, or YAML for ``.yaml``/``.yml``) and the line of
    each key (YAML; empty for JSON).

    Raises:
        ConfigError: missing, not UTF-8, not JSON / not YAML (with the line).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"eval definition not found: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text: {exc}") from None
    if p.suffix.lower() not in {".yaml", ".yml"}:
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}, line {exc.lineno}: not JSON: {exc.msg} at column {exc.colno} (a registry "
                              "or definition written in YAML needs a .yaml or .yml name)") from None
        except RecursionError:
            raise ConfigError(f"{p}: nested too deeply to read") from None
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{p}{at}: not YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{p}: nested too deeply to read") from None
    return raw, _lines(node)


def is_registry(raw: Any) -> bool:
    """Whether a file's content is an openai/evals registry (not an exported definition)."""
    return (isinstance(raw, Mapping) and "testing_criteria" not in raw and "data_source_config" not in raw
            and any(isinstance(v, Mapping) and ("class" in v or "id" in v) for v in raw.values()))


def parse_registry(raw: Mapping[str, Any], source: str, name: str | None = None,
                   lines: Mapping[tuple[str, ...], int] | None = None) -> RegistryEval:
    """The eval ``name`` of a registry file's content (the only one when ``name`` is ``None``).

    Raises:
        ConfigError: naming the file, line and field.
    """
    lines = lines or {}
    evals = [k for k, v in raw.items() if isinstance(v, Mapping) and "id" in v and "class" not in v]
    if not evals:
        raise _fail(source, None, "(top level)", "no eval: a registry file maps an eval's name to {id: NAME.SPLIT.VERSION, "
                    "metrics: [...]} and that id to {class: ..., args: {samples_jsonl: ...}}")
    if name is None:
        if len(evals) > 1:
            raise ConfigError(f"{source} holds {len(evals)} evals ({', '.join(evals)}): name one, e.g. "
                              f"--openai-eval {source}#{evals[0]}")
        name = evals[0]
    elif name not in evals:
        spec_of = {str(raw[e]["id"]): e for e in evals}
        if name not in spec_of:
            raise ConfigError(f"{source}: no eval named {name!r}; its evals: {', '.join(evals)}")
        name = spec_of[name]
    spec_id = raw[name].get("id")
    if not isinstance(spec_id, str) or not spec_id:
        raise _fail(source, lines.get((name, "id")), f"{name}.id", f"expected the eval's spec id (text), got {spec_id!r}")
    spec = raw.get(spec_id)
    if not isinstance(spec, Mapping):
        raise _fail(source, lines.get((name, "id")), f"{name}.id",
                    f"{spec_id!r} is not defined in this file: add {spec_id}: {{class: ..., args: {{samples_jsonl: ...}}}}")
    cls = spec.get("class")
    if cls not in TEMPLATES:
        known = ", ".join(c.rsplit(":", 1)[1] for c in TEMPLATES)
        raise _fail(source, lines.get((spec_id, "class")), f"{spec_id}.class",
                    f"{cls!r} is not one of the basic templates ragmeter runs: {known} (evals.elsuite.basic.*); "
                    "model-graded and custom evals run code or prompts of openai/evals that ragmeter does not have")
    args = spec.get("args")
    if not isinstance(args, Mapping):
        raise _fail(source, lines.get((spec_id,)), f"{spec_id}.args", f"expected {{samples_jsonl: FILE}}, got {args!r}")
    samples = args.get("samples_jsonl")
    if not isinstance(samples, str) or not samples.strip():
        raise _fail(source, lines.get((spec_id, "args", "samples_jsonl"), lines.get((spec_id, "args"))),
                    f"{spec_id}.args.samples_jsonl", f"expected the samples file (text), got {samples!r}")
    names, takes = TEMPLATES[cls]
    params: dict[str, Any] = {}
    for arg in takes:
        if arg in args:
            if not isinstance(args[arg], bool):
                raise _fail(source, lines.get((spec_id, "args", arg)), f"{spec_id}.args.{arg}",
                            f"expected true or false, got {args[arg]!r}")
            params[arg] = args[arg]
    return RegistryEval(name=name, spec_id=spec_id, cls=str(cls),
                        metrics=[{"name": n, "params": dict(params)} for n in names],
                        samples_jsonl=samples, source=source, line=lines.get((spec_id, "args", "samples_jsonl")),
                        others=[e for e in evals if e != name])
