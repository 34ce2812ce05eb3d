"""OpenAI Evals in ragmeter: exported eval definitions (``data_source_config`` +
``testing_criteria``) run unchanged, and the openai/evals registry's basic templates.

- :mod:`.definition`: read and check an eval definition (errors name the field's path);
- :mod:`.items`: read the items (``{"item", "sample"}`` rows, flat rows, ``--map sample=COLUMN``);
- :mod:`.templates`: ``{{item.x}}`` / ``{{sample.output_text}}`` templates;
- :mod:`.graders`: the graders as metrics (``openai_string_check`` ... ``openai_multi``), one result
  column per grader, named after it; :mod:`.similarity` (text_similarity kernels), :mod:`.model`
  (score_model / label_model through the judge client), :mod:`.sandbox` (python graders in a
  child process), :mod:`.formula` (multi's ``calculate_output`` without ``eval``);
- :mod:`.basic`: the openai/evals basic templates ``match``, ``includes``, ``fuzzy_match``, ``json_match``;
- :mod:`.registry_file`: openai/evals registry files (YAML or JSON) of those templates, and the reader
  of every ``--openai-eval`` file (a definition in JSON or YAML, or a registry eval);
- :mod:`.run`: :func:`prepare_run`, what ``ragmeter eval --openai-eval`` and ``ragmeter test`` run.

docs/openai-evals.md maps every grader field to what ragmeter does with it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvalDefinition", "OpenAIEvalRun", "load_definition", "load_items", "parse_definition", "prepare_run"]

_WHERE = {"EvalDefinition": "definition", "load_definition": "definition", "parse_definition": "definition",
          "load_items": "items", "OpenAIEvalRun": "run", "prepare_run": "run"}


def __getattr__(name: str) -> Any:
    # the metric registry imports the grader metrics through this package: keep its import light
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"ragmeter.metrics.openai_evals.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'ragmeter.metrics.openai_evals' has no attribute {name!r}")
