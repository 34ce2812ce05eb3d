"""Every import path a user may have written keeps working after the package moved into stage
folders (docs/internals.md, "Moved modules"): the ones README.md and docs/ show today, the ones they
showed before the move, and every old dotted path of ``ragmeter._compat.MOVED``, which must give
the very module object of its new path (classes, functions and module state shared) and, on its
first import, a ``FutureWarning`` that names the new path and belongs to the importing line. The
repository itself uses no old path."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ragmeter._compat import MOVED, REMOVED_IN, deprecation_message, new_name

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


#: the text every old path's warning has (the rest names the two paths)
_DEPRECATED = re.escape(f"is deprecated and will be removed in ragmeter {REMOVED_IN}")


def _forget(old: str) -> None:
    """Drop an old path (and old paths under it) from ``sys.modules``, so that the next import is
    its first in this process again; the module at the new path stays loaded."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        if new_name(name) is not None:
            del sys.modules[name]


def _module_of(statement: str) -> str:
    return statement.split()[1]


def test_the_docs_show_import_statements():
    assert len(documented_now()) >= 15


def test_the_docs_show_no_old_path():
    old = [s for s in documented_now() if new_name(_module_of(s)) is not None]
    assert not old, f"README.md / docs/ show deprecated import paths: {old}"


@pytest.mark.parametrize("statement", sorted(set(DOCUMENTED_BEFORE_THE_MOVE) | set(documented_now())))
def test_a_documented_import_works(statement):
    """A current path imports without the deprecation warning; an old one with it, naming the new."""
    new = new_name(_module_of(statement))
    if new is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=f".* {_DEPRECATED}", category=FutureWarning)
            exec(statement, {})  # noqa: S102 - the statement is one of the documented imports above
    else:
        _forget(_module_of(statement))
        with pytest.warns(FutureWarning, match=f"{_DEPRECATED}; import {re.escape(new)} instead"):
            exec(statement, {})  # noqa: S102


def test_every_old_path_is_the_module_at_its_new_path_and_warns_once():
    for old, new in sorted(MOVED.items()):
        _forget(old)
        with pytest.warns(FutureWarning) as caught:
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert sys.modules[old] is sys.modules[new]
        ours = [w for w in caught if str(w.message) == deprecation_message(old, new)]
        assert len(ours) == 1, (old, [str(w.message) for w in caught])
        # the importing line's warning, not ragmeter's: pyproject's error::FutureWarning:ragmeter
        # (ragmeter's own FutureWarnings are errors) leaves a user's old import a warning
        assert ours[0].filename == __file__, (old, ours[0].filename)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            assert importlib.import_module(old) is module  # the second use is silent


def test_the_message_names_the_new_path():
    assert deprecation_message("ragmeter.context", "ragmeter.core.context") == (
        f"ragmeter.context is deprecated and will be removed in ragmeter {REMOVED_IN}; "
        "import ragmeter.core.context instead")


def test_an_import_statement_of_an_old_path_warns_at_its_line(monkeypatch):
    import ragmeter

    _forget("ragmeter.context")
    monkeypatch.delattr(ragmeter, "context", raising=False)  # else ``from ragmeter import`` reads it
    with pytest.warns(FutureWarning, match="import ragmeter.core.context instead") as caught:
        from ragmeter import context  # noqa: F401 - the old path under test
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, sys._getframe().f_lineno - 1)]


def test_an_old_submodule_follows_its_moved_package():
    _forget("ragmeter.cli")
    with pytest.warns(FutureWarning) as caught:
        import ragmeter.cli.core as old  # ragmeter.cli moved, ragmeter.cli.core follows it

    import ragmeter.apps.cli.core as new

    assert old is new and old.__name__ == "ragmeter.apps.cli.core"
    assert {str(w.message) for w in caught} == {deprecation_message("ragmeter.cli", "ragmeter.apps.cli"),
                                                deprecation_message("ragmeter.cli.core", "ragmeter.apps.cli.core")}


def test_the_old_attribute_ragmeter_agreement_warns_too(monkeypatch):
    import ragmeter

    _forget("ragmeter.agreement")
    monkeypatch.delattr(ragmeter, "agreement", raising=False)  # set by ``import ragmeter.agreement``
    with pytest.warns(FutureWarning, match="import ragmeter.stats.agreement instead") as caught:
        module = ragmeter.agreement
    assert module is importlib.import_module("ragmeter.stats.agreement")
    assert caught[0].filename == __file__


def test_warnings_as_errors_make_an_old_import_fail_naming_the_new_path():
    out = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", "import ragmeter.context"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "FutureWarning: ragmeter.context is deprecated" in out.stderr
    assert "import ragmeter.core.context instead" in out.stderr


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
    new = new_name(module)
    if new is None:
        assert "deprecated" not in out.stderr
    else:
        assert deprecation_message(module, new) in out.stderr


def test_an_old_child_path_leaves_the_name_its_package_exports():
    """``ragmeter.metrics.agent`` exports the function ``lookup``; importing the old module path
    ``ragmeter.agent.lookup`` (the module ``metrics/agent/lookup.py``) must not replace it."""
    import ragmeter.metrics.agent as agent

    before = agent.lookup
    _forget("ragmeter.agent.lookup")
    with pytest.warns(FutureWarning, match="import ragmeter.metrics.agent.lookup instead"):
        old = importlib.import_module("ragmeter.agent.lookup")
    assert agent.lookup is before and callable(agent.lookup)
    assert old is importlib.import_module("ragmeter.metrics.agent.lookup")


#: files whose job is to name the old paths: the table, its tests, the changelog's history, and
#: docs/internals.md's "Moved modules" section (dropped from the text before the scan below)
_NAMES_OLD_PATHS = {"src/ragmeter/_compat.py", "tests/test_compat_paths.py", "CHANGELOG.md"}
_SCANNED = ("README.md", "pyproject.toml", "Makefile", ".ci", "src", "tests", "benchmarks", "docs", "examples",
            "scripts")
_SUFFIXES = {".py", ".md", ".toml", ".ipynb", ".yaml", ".yml", ".json", ".jsonl", ".cfg", ".ini", ".sh", ".txt", ""}
_DOTTED = re.compile(r"(?<![\w.])ragmeter(?:\.[A-Za-z_]\w*)+")


def _repository_files():
    for top in _SCANNED:
        path = ROOT / top
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            rel = file.relative_to(ROOT).as_posix()
            if file.suffix in _SUFFIXES and "__pycache__" not in rel and rel not in _NAMES_OLD_PATHS \
                    and file.stat().st_size < 2_000_000:
                yield rel, file


def _without_moved_modules_section(text: str) -> str:
    return re.sub(r"^### Moved modules.*?(?=^##)", "", text, flags=re.S | re.M)


def _old_paths_in(line: str) -> list[str]:
    """The old dotted paths a line uses (an old package's child counts as its package's path)."""
    found = []
    # a comment that records a move ("# moved from OLD") names the old path on purpose
    line = line.split("# moved from ", 1)[0]
    for m in _DOTTED.finditer(line):
        parts = m.group(0).split(".")
        prefixes = (".".join(parts[:n]) for n in range(len(parts), 1, -1))
        old = next((p for p in prefixes if p in MOVED), None)
        if old is not None:
            found.append(old)
    return found


def test_the_repository_uses_no_old_path():
    """The entry point, tests, benchmarks, docs, examples, scripts and the notebook use new paths."""
    found = []
    for rel, file in _repository_files():
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if rel == "docs/internals.md":
            text = _without_moved_modules_section(text)
        for lineno, line in enumerate(text.splitlines(), 1):
            found += [f"{rel}:{lineno}: {old} (now {MOVED[old]})" for old in _old_paths_in(line)]
    assert not found, "old import paths in use:\n" + "\n".join(found)


def test_the_scan_sees_an_old_path():
    assert _old_paths_in("import ragmeter.schema; from ragmeter.retrieval.trec_io import x") == [
        "ragmeter.schema", "ragmeter.retrieval.trec_io"]
    assert _old_paths_in('["-m", "ragmeter.cli.core"] ragmeter.metrics.retrieval ragmeter.apps.cli') == [
        "ragmeter.cli"]
    assert _old_paths_in('x = "ragmeter.apps.pytest_plugin"  # moved from ragmeter.pytest_plugin') == []
    assert "ragmeter.schema" not in _without_moved_modules_section(
        "## a\n### Moved modules\nragmeter.schema\n## b\nragmeter.apps.cli\n")
