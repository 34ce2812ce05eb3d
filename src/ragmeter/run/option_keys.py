"""Which run options (``--option KEY=VALUE``, a config file's ``options:``) ragmeter reads, so a
misspelt key (``patern``) is refused naming the key it is close to instead of being ignored.

The known keys are the run-wide ones below, the judge settings (:data:`ragmeter.llm.config.SETTINGS`)
and, from the metric registry, every metric's parameter names (an unset parameter of DeepEval's
metrics is read from the run option of the same name: ``--option pattern=...``) and the options its
spec declares (``MetricSpec.options``: ``g_eval_criteria`` ...), so a new metric is covered by what
it registers. A key close to none of them is passed on as before: a plugin's metric may read its
own option. tests/test_option_keys.py checks that every option key read in src/ragmeter is known.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import ConfigError

#: run-wide options and what reads them (the metric-specific ones come from the registry)
RUN_OPTIONS: dict[str, str] = {
    "judge": "the LLM judge, provider:model (llm/config.py)",
    "panel": "several judges for every judge metric (run/panel.py)",
    "panel_combine": "how a panel's values are combined (run/panel.py)",
    "language": "the samples' language (core/language.py)",
    "unicode_normalize": "false: compare texts without NFKC normalisation (metrics/lexical/texts.py)",
    "bands": "metrics given score bands besides the banded ones (analysis/composite.py)",
    "composite": "composite score weights (analysis/composite.py)",
    "agent": "agent expectations (metrics/agent/config.py)",
    "agent_preset": "a named set of agent expectations (metrics/agent/config.py)",
    "embedding_model": "the default embedding model (embed/service.py)",
    "embedding_model_paths": "local paths of embedding models (embed/service.py)",
    "embedding_backend": "the embedding backend (embed/service.py)",
    "embedding_base_url": "an OpenAI-compatible embedding endpoint (embed/service.py)",
    "embedding_api_key_env": "the variable holding the embedding endpoint's key (embed/service.py)",
    "embedding_device": "the device the encoder runs on (embed/service.py)",
    "embedding_batch_size": "texts encoded per batch (embed/service.py)",
    "python_graders": "permission to run python graders (sandbox/__init__.py)",
    "python_grader_timeout": "seconds per python grader call (sandbox/__init__.py)",
    "python_grader_memory_mb": "memory limit of a python grader (sandbox/__init__.py)",
    "python_grader_workers": "python grader threads (sandbox/__init__.py)",
    "python_grader_processes": "python grader processes (sandbox/__init__.py)",
    "openai_evals_judge_from_graders": "set by an OpenAI eval's run (metrics/openai_evals/model.py)",
}


def known_option_keys() -> frozenset[str]:
    """Every run option key ragmeter reads: the run-wide ones, the judge settings, and each
    registered metric's parameter names and declared options."""
    from ragmeter.llm.config import SETTINGS
    from ragmeter.metrics.registry import all_metrics

    keys = set(RUN_OPTIONS) | {f"judge_{s}" for s in SETTINGS}
    for spec in all_metrics():
        keys |= set(spec.defaults) | set(spec.options) | ({spec.param} if spec.param else set())
    return frozenset(keys)


def check_option_keys(options: Mapping[str, Any], where: str) -> None:
    """Refuse an option key close to a known one (a misspelling that would be ignored).

    Args:
        options: the run options.
        where: what gave them, for the message (``--option``, ``run.yaml: options``).

    Raises:
        ConfigError: naming the key and the known key it is close to (exit status 2 in the CLI).
    """
    cheap = set(RUN_OPTIONS)
    rest = [str(k) for k in options if k not in cheap and not str(k).startswith("judge")]
    if not rest:  # judge keys are checked by llm.config.check_judge_keys
        return
    known = known_option_keys()
    for key in rest:
        if key in known:
            continue
        near = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
        if near:
            raise ConfigError(f"{where}: unknown key {key!r}: did you mean {near[0]!r}? "
                              f"(docs/config-keys.md lists the run options)")
