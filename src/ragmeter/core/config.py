"""Run configuration files (JSON or YAML), including rag-experiment-accelerator's ``{"metric_types": [...]}``."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.redact import CREDENTIALS_ENV, SECRET_HELP, find_secrets

#: the run option that permits python graders (OpenAI Evals): ``isolated`` (in a sandbox) or
#: ``unisolated``. Given by ``--allow-python-graders`` / ``--unisolated-python-graders``.
PYTHON_GRADERS_OPTION = "python_graders"
#: run options that grant a permission to the process that was given them: never stored with a run,
#: so ``eval --resume`` needs them given again
GRANT_OPTIONS = frozenset({PYTHON_GRADERS_OPTION})

#: keys a config file may hold; a key close to one of them (a misspelling) is an error naming it,
#: any other is kept under ``extra`` (rag-experiment-accelerator's search config works as is).
KNOWN_KEYS = {
    "metrics", "metric_types", "options", "dataset", "datasets", "map", "on_error", "name", "judge",
    "embedding_model", "method", "grid", "pipeline", "experiment", "composite", "agent",
    "thresholds", "pass_rule", "baseline", "gate",
}

#: keys of rag-experiment-accelerator's search config that are close to one of ours, kept aside as
#: its other keys are (not taken for a misspelling)
_ACCELERATOR_KEYS = frozenset({"embedding_models"})

#: what each top-level key means (docs/config-keys.md is generated from this and the metric registry).
KEY_HELP: dict[str, str] = {
    "metrics": "metric names to compute: a list (or a comma-separated text) of names, `name@value` "
               "shorthands (`ndcg@10`) or `{name, params, key}` mappings",
    "metric_types": "synonym of `metrics` (rag-experiment-accelerator's search config); give one of the two",
    "options": "run options passed to every metric: judge settings (`judge_*`), embedding settings, "
               "`agent`, `agent_preset`, `composite` ...",
    "dataset": "the dataset to evaluate (a file path or `example`); used by `ragmeter grid` and `pipeline`",
    "datasets": "`ragmeter test`: several datasets, a list of what `dataset` takes; the suite runs on each",
    "map": "field mapping `{field: column}`, as `--map field=column`",
    "on_error": "`raise` (default: a bad row stops the run) or `skip` (score the rest, report what was skipped)",
    "name": "the run's (or grid's) name",
    "judge": "the LLM judge, `provider:model` (copied into `options.judge`)",
    "embedding_model": "the sentence-transformers model for semantic metrics (copied into `options`)",
    "method": "grid search: the correctness method (`keyword`, `semantic_fixed`, `semantic_dynamic`, "
              "`llm_judge`, `hybrid`, `semantic_guarded`)",
    "grid": "grid search: the parameters to combine (`{param: [values]}` or a list of combinations)",
    "pipeline": "grid search: the user's pipeline as `module:function`",
    "experiment": "grid search: settings of the search (method, judge re-ranking, successive halving ...)",
    "composite": "composite score weights (copied into `options.composite`)",
    "agent": "agent expectations: expected tools, trajectory, rubrics (copied into `options.agent`)",
    "thresholds": "per-metric thresholds `{metric: 0.7}` or `{metric: \"<=0.2\"}`; each sample passes or "
                  "fails (`ragmeter test`, `--threshold`)",
    "pass_rule": "when a thresholded metric passes for the run: `all` samples (default) or a pass-rate "
                 "target its Wilson 95% lower bound must reach (`0.8`)",
    "baseline": "`ragmeter test`: a baseline file or run id the regression gate compares against",
    "gate": "`ragmeter test`: regression gate settings `{max_drop, alpha, relative}`",
}


def load_config(source: str | Path | dict[str, Any] | None) -> dict[str, Any]:
    """Read a config file or mapping and normalise it to ``{"metrics": [...], "options": {...}, ...}``.

    ``metric_types`` (rag-experiment-accelerator's search config) is accepted as a synonym of ``metrics``.
    The group name ``rouge`` expands to the ROUGE-1/2/L F-measures. Unknown top-level keys of its
    search_config (``chunking``, ``embedding_models`` ...) are
    kept under ``"extra"`` rather than rejected, so such a file works as is.
    """
    if source is None:
        return {"metrics": [], "options": {}}
    if isinstance(source, dict):
        raw = dict(source)
        where = "<config>"
    else:
        path = Path(source)
        where = str(path)
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        from ragmeter.core.files import read_text

        text = read_text(path, "config file")
        try:
            if path.suffix.lower() in {".yaml", ".yml"}:
                import yaml

                raw = yaml.safe_load(text) or {}
            elif path.suffix.lower() == ".toml":  # pyproject-style users write TOML (it was read as JSON)
                import tomllib

                raw = tomllib.loads(text)
            else:
                raw = json.loads(text)
        except (json.JSONDecodeError, Exception) as exc:  # noqa: BLE001 - yaml errors vary
            raise ConfigError(f"{where}: cannot parse config: {parse_error_text(exc)}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a config must be a mapping at the top level")
    secrets = list(find_secrets(raw))
    if secrets:
        # a key in a config file ends up committed, copied and stored with runs
        raise ConfigError(f"{where}: {', '.join(secrets)} holds a secret, and a config never may. "
                          f"Remove it: {SECRET_HELP}")
    metrics = raw.get("metrics")
    if metrics is None:
        metrics = raw.get("metric_types", [])
    elif "metric_types" in raw:
        raise ConfigError(f"{where}: give either 'metrics' or 'metric_types', not both")
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    if not isinstance(metrics, list):
        raise ConfigError(f"{where}: 'metrics' must be a list")
    options = dict(raw.get("options") or {})
    for k in ("judge", "embedding_model", "agent", "composite"):
        if k in raw:
            options.setdefault(k, raw[k])
    for k in raw:
        near = [] if k in KNOWN_KEYS or k in _ACCELERATOR_KEYS else difflib.get_close_matches(
            str(k), sorted(KNOWN_KEYS), n=1, cutoff=0.85)
        if near:  # a misspelt key would be kept aside silently, its thresholds or options never applied
            raise ConfigError(f"{where}: unknown key {k!r}: did you mean {near[0]!r}? "
                              f"(keys: {', '.join(sorted(KNOWN_KEYS))})")
    out = {k: v for k, v in raw.items() if k in KNOWN_KEYS and k not in {"metric_types"}}
    out["metrics"] = metrics
    out["options"] = options
    out["extra"] = {k: v for k, v in raw.items() if k not in KNOWN_KEYS}
    out["source"] = where
    return out


def env_secret(name: str | None) -> str | None:
    """The secret held by environment variable ``name``, else by the line ``name=value`` of the
    credentials file that ``$RAGMETER_CREDENTIALS`` names (``None`` when neither has it)."""
    import os

    if not name:
        return None
    value = os.environ.get(name)
    if value:
        return value
    path = os.environ.get(CREDENTIALS_ENV)
    if not path:
        return value
    from pathlib import Path

    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"${CREDENTIALS_ENV} names {path}, which cannot be read: {exc.strerror}") from None
    for line in text.splitlines():
        k, sep, v = line.strip().removeprefix("export ").partition("=")
        if sep and not k.lstrip().startswith("#") and k.strip() == name:
            return v.strip().strip("'\"") or None
    return value


def parse_error_text(exc: Exception) -> str:
    """One line for a YAML or JSON parse error: the problem and where (PyYAML's own message spans
    several lines and repeats the offending text with a caret)."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())[:300]
