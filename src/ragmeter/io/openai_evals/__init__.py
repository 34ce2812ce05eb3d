"""The files of OpenAI evals: the items an eval grades (:mod:`.items`) and the files ``--openai-eval``
names, exported definitions and openai/evals registry files, as JSON or YAML (:mod:`.registry_file`).
The graders they define are checked and scored in :mod:`ragmeter.metrics.openai_evals`."""
