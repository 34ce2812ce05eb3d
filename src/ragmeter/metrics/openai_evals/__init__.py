"""OpenAI Evals in ragmeter: exported eval definitions (``data_source_config`` +
``testing_criteria``) run unchanged, and the openai/evals registry's basic templates.

- :mod:`.definition`: check an eval definition (errors name the field's path);
- :mod:`.templates`: ``{{item.x}}`` / ``{{sample.output_text}}`` templates;
- :mod:`.graders`: the graders as metrics (``openai_string_check`` ... ``openai_multi``), one result
  column per grader, named after it; :mod:`.similarity` (text_similarity kernels), :mod:`.model`
  (score_model / label_model through the judge client), :mod:`.formula` (multi's
  ``calculate_output`` without ``eval``); python graders run in the scoring context's sandbox
  service (:mod:`ragmeter.sandbox`), never in the metric's process;
- :mod:`.basic`: the openai/evals basic templates ``match``, ``includes``, ``fuzzy_match``, ``json_match``.

The files (definitions, registry files, items) are read by :mod:`ragmeter.io.openai_evals`, and
:mod:`ragmeter.apps.openai_eval` puts a run together (what ``ragmeter eval --openai-eval`` and
``ragmeter test`` run).
docs/openai-evals.md maps every grader field to what ragmeter does with it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvalDefinition", "parse_definition"]

_WHERE = {"EvalDefinition": "definition", "parse_definition": "definition"}


def __getattr__(name: str) -> Any:
    # the metric registry imports the grader metrics through this package: keep its import light
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"ragmeter.metrics.openai_evals.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'ragmeter.metrics.openai_evals' has no attribute {name!r}")
