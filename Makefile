# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# a CPU build of this torch lies on the machine's disk; unpinned torch pulls a multi-GB CUDA build
TORCH  := torch==2.13.0
# judge-parity reference (tests/test_judge_parity.py), installed without its dependencies: it pins
# click<8.4, which huggingface_hub 2 (transformers 5) refuses; the rest of what it needs is in `dev`
DEEPEVAL := deepeval==4.3.1
# ragas' DataCompyScore reference (tests/test_parity_ragas_text.py) and ragas:datacompy_score's library:
# datacompy 0.16.8 (the last with datacompy.core.Compare, which ragas 0.4.3 imports) pins pandas<=2.3,
# numpy<=2.2.6, polars<=1.31; it runs on this venv's pandas 3 and numpy 2.4, so without its dependencies
DATACOMPY := datacompy==0.16.8 ordered-set==4.1.0 polars==1.31.0

.PHONY: demo test test-fast lint bench clean

# the real agents of tests/test_agent_frameworks.py (openai-agents, LangGraph, pydantic-ai and the
# OpenTelemetry / OpenInference instrumentations) conflict with the main venv: their own venv
AGENTS_VENV := .venv-agents
$(AGENTS_VENV)/.installed: tests/agents/requirements.txt
	$(PYTHON) -m venv $(AGENTS_VENV)
	$(AGENTS_VENV)/bin/python -m pip install -q -r tests/agents/requirements.txt
	touch $@

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.local-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[local]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps $(DEEPEVAL)
	$(PIP) install -q --no-deps $(DATACOMPY)
	touch $(VENV)/.local-installed $@

demo: $(VENV)/.local-installed
	HF_HUB_OFFLINE=1 $(BIN)/ragmeter eval example --config examples/demo.yaml --name demo
	$(BIN)/ragmeter report latest -o report.html

# every tier: fast, slow, contract (a missing reference package fails with CI set), browser, postgres
test: $(VENV)/.dev-installed $(AGENTS_VENV)/.installed
	./scripts/ensure-test-system-deps.sh
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n 2 -q

# the developer's loop: everything but the slow, browser and PostgreSQL tiers (docs/internals.md)
test-fast: $(VENV)/.dev-installed
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n 2 -q -m "not slow and not browser and not postgres"

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check src tests benchmarks

bench: $(VENV)/.dev-installed
	for b in benchmarks/[!_]*.py; do HF_HUB_OFFLINE=1 $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(AGENTS_VENV) .ragmeter report.html
