"""Every import path a user may have written keeps working after the package moved into stage
folders (docs/internals.md, "Moved modules"): the ones README.md and docs/ show today, the ones they
showed before the move, and every old dotted path of ``ragmeter._compat.MOVED``, which must give
the very module object of its new path (classes, functions and module state shared)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: import statements README.md and docs/*.md showed before the stage packages (commit feda3ee)
DOCUMENTED_BEFORE_THE_MOVE = [
    "from ragmeter.agreement import cohen_kappa, krippendorff_alpha, fleiss_kappa, agreement, read_ratings",
    "from ragmeter.correctness import keyword_correct, semantic_fixed, semantic_guarded, calibrate_threshold",
    "from ragmeter.embed import get_encoder",
    "from ragmeter.llm import JudgeRequest",
    "from ragmeter.metrics import lexical",
    "from ragmeter.metrics.composite import PRESETS, composite_scores, composite_from_values, band, hints",
    "from ragmeter.metrics.judge import JudgedMetric, PromptTemplate, fence_blocks, register_judged",
    "from ragmeter.metrics.judge._common import Verdict",
    "from ragmeter.metrics.judge._common import judge_check",
    "from ragmeter.metrics.judge.qrels import fill_relevant, fill_relevant_from_llm, llm_relevance_labels, stored_labels",
    "from ragmeter.metrics.retrieval import precision_at_k, ndcg_at_k",
    "from ragmeter.metrics.semantic import semantic_similarity, context_similarity, separation_report",
    "from ragmeter.report import write_report, build_report",
    "from ragmeter.retrieval import evaluate",
    "from ragmeter.schema import Score",
    "from ragmeter.server import create_app",
    "from ragmeter.store import open_store",
    "from ragmeter.testing import assert_no_regression",
    "from ragmeter.testing import assert_scores",
    "import ragmeter",
    "import ragmeter.monitor as monitor",
    # public entry points named in pyproject.toml and the docs
    "import ragmeter.pytest_plugin",
    "from ragmeter.cli import app, main, entry",
    "from ragmeter.metrics.base import MetricSpec, register_metric, metric",
    "from ragmeter.runner import evaluate",
    "from ragmeter.export import export_run",
]

_STATEMENT = re.compile(
    r"^\s*(?:>>> )?(from ragmeter(?:\.[A-Za-z_][\w.]*)? import [A-Za-z_][\w, ]*(?: as \w+)?"
    r"|import ragmeter(?:\.[A-Za-z_][\w.]*)?(?: as \w+)?)", re.M)


def documented_now() -> list[str]:
    """The one-line import statements of README.md and docs/ (code blocks and doctests)."""
    found: set[str] = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in _STATEMENT.finditer(path.read_text(encoding="utf-8")):
            found.add(m.group(1).rstrip(", "))
    return sorted(found)


def test_the_docs_show_import_statements():
    assert len(documented_now()) >= 15


@pytest.mark.parametrize("statement", sorted(set(DOCUMENTED_BEFORE_THE_MOVE) | set(documented_now())))
def test_a_documented_import_works(statement):
    exec(statement, {})  # noqa: S102 - the statement is one of the documented imports above


def test_every_old_path_is_the_module_at_its_new_path():
    from ragmeter._compat import MOVED

    for old, new in sorted(MOVED.items()):
        assert importlib.import_module(old) is importlib.import_module(new), old
        assert sys.modules[old] is sys.modules[new]


def test_an_old_submodule_follows_its_moved_package():
    import ragmeter.cli.core as old  # ragmeter.cli moved, ragmeter.cli.core follows it

    import ragmeter.apps.cli.core as new

    assert old is new and old.__name__ == "ragmeter.apps.cli.core"


def test_a_name_that_never_existed_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ragmeter.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ragmeter.cli.no_such_command")


@pytest.mark.parametrize("module", ["ragmeter", "ragmeter.cli", "ragmeter.apps.cli"])
def test_python_dash_m_runs_the_command(module):
    out = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ragmeter ")


def test_an_old_child_path_leaves_the_name_its_package_exports():
    """``ragmeter.metrics.agent`` exports the function ``lookup``; importing the old module path
    ``ragmeter.agent.lookup`` (the module ``metrics/agent/lookup.py``) must not replace it."""
    import ragmeter.metrics.agent as agent

    before = agent.lookup
    old = importlib.import_module("ragmeter.agent.lookup")
    assert agent.lookup is before and callable(agent.lookup)
    assert old is importlib.import_module("ragmeter.metrics.agent.lookup")
