"""The test tiers hold (docs/internals.md, "Test tiers"): a test gets a reference implementation or a
``.[dev]`` extra only through tests/references.py, so that a missing one fails the run when ``CI`` is
set and skips loudly otherwise; every test comparing with a reference is marked ``contract``;
``make test`` runs every tier and ``make test-fast`` leaves out the slow ones."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from references import EXTRAS, MISSING, REFERENCES, in_ci

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
PACKAGES = {**REFERENCES, **EXTRAS}


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    return [(p.name, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(TESTS.glob("*.py"))
            if p.name != "references.py"]


def _calls(node: ast.AST, name: str) -> list[str]:
    """The first arguments (string constants) of calls to ``name(...)`` under ``node``."""
    return [c.args[0].value for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            and c.func.id == name and c.args and isinstance(c.args[0], ast.Constant)]


def _is_contract(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(node, ast.Attribute) and node.attr == "contract"


def _module_marked_contract(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            values = stmt.value.elts if isinstance(stmt.value, ast.List | ast.Tuple) else [stmt.value]
            if any(_is_contract(v) for v in values):
                return True
    return False


def _top_level_required(tree: ast.Module) -> set[str]:
    """The packages a module requires at module level (``x = require_reference("x")``)."""
    names: set[str] = set()
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names |= {n.partition(".")[0] for n in _calls(stmt, "require_reference") + _calls(stmt, "require_extra")}
    return names


def test_no_test_calls_importorskip():
    found = [f"{name}:{c.lineno}" for name, tree in _modules() for c in ast.walk(tree)
             if isinstance(c, ast.Attribute) and c.attr == "importorskip"]
    assert not found, f"use tests/references.py's require_reference / require_extra instead: {found}"


def test_reference_packages_come_from_the_helper():
    """An import statement of a reference package is allowed only in a module that required it at
    the top (the module is then skipped, or failed in CI, before any of its tests runs). (An extra
    imported directly fails its test wherever it is missing, which is also no silent skip.)"""
    found = []
    for name, tree in _modules():
        allowed = _top_level_required(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [a.name.partition(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.partition(".")[0]]
            else:
                continue
            found += [f"{name}:{node.lineno}: {top}" for top in tops if top in REFERENCES and top not in allowed]
    assert not found, f"import these through require_reference: {found}"


def test_tests_that_use_a_reference_are_marked_contract():
    unmarked = []
    for name, tree in _modules():
        module_contract = _module_marked_contract(tree)
        if _top_level_required(tree) & set(REFERENCES) and not module_contract:
            unmarked.append(f"{name} (module level): pytestmark = pytest.mark.contract")
        functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
        helpers = {f.name for f in functions if not f.name.startswith("test_") and _calls(f, "require_reference")}
        for f in functions:
            if not f.name.startswith("test_") or module_contract or any(_is_contract(d) for d in f.decorator_list):
                continue
            uses_helper = any(isinstance(n, ast.Name) and n.id in helpers for n in ast.walk(f))
            if _calls(f, "require_reference") or uses_helper:
                unmarked.append(f"{name}:{f.lineno} {f.name}")
    assert not unmarked, f"mark these @pytest.mark.contract: {unmarked}"


def test_every_listed_package_is_installed_by_make_test():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    dev = pyproject[pyproject.index("\ndev = ["):]
    dev = dev[:dev.index("\n]")]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for dist in PACKAGES.values():
        bare = re.split(r"[\[<>=]", dist)[0]
        assert f'"{bare}' in dev or f"{bare}==" in makefile or _in_an_extra(pyproject, bare), dist


def _in_an_extra(pyproject: str, dist: str) -> bool:
    """``dist`` is in an optional extra that the dev extra includes (``ragmeter-eval[...,ray,...]``)."""
    included = re.search(r'"ragmeter-eval\[([^\]]+)\]"', pyproject[pyproject.index("\ndev = ["):])
    extras = included.group(1).split(",") if included else []
    return any(re.search(rf'^{re.escape(e)} = \[[^\]]*"{re.escape(dist)}', pyproject, re.M) for e in extras)


def test_make_test_runs_every_tier_and_make_test_fast_leaves_out_the_slow_ones():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    test = re.search(r"^test: .*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    fast = re.search(r"^test-fast: .*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "pytest" in test and not re.search(r"pytest.* (-m|-k|--deselect|--ignore) ", test)
    assert '-m "not slow and not browser and not postgres"' in fast


#: one contract test whose reference is imported at module level, one in the test's body (by file
#: and -k: a module skipped at collection has no test ids)
_HIDDEN = ["tests/test_lexical_reference.py", "tests/test_fast_paths.py", "-k",
           "test_rouge_tokens_match_rouge_score_tokenizer or test_rouge_column_equals_rouge_score"]


def _pytest_without_rouge_score(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """Runs two contract tests in a child pytest where ``import rouge_score`` fails (a package on
    PYTHONPATH ahead of site-packages raises ImportError), as if rouge-score were not installed."""
    hide = tmp_path / "hide"
    (hide / "rouge_score").mkdir(parents=True, exist_ok=True)
    (hide / "rouge_score" / "__init__.py").write_text('raise ImportError("rouge-score hidden by the test")\n')
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"}}
    env["PYTHONPATH"] = os.pathsep.join([str(hide), env.get("PYTHONPATH", "")])
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_HIDDEN],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_missing_reference_fails_in_ci_and_skips_loudly_elsewhere(tmp_path):
    ci = _pytest_without_rouge_score(tmp_path, "true")
    assert ci.returncode == 1, ci.stdout[-3000:]
    # the module-level reference fails its test at set-up, the one in the body fails the test
    assert "1 failed" in ci.stdout and "1 error" in ci.stdout, ci.stdout[-3000:]
    assert f"{MISSING}: rouge-score" in ci.stdout and "CI is set, so this fails" in ci.stdout
    local = _pytest_without_rouge_score(tmp_path, None)
    assert local.returncode == 0, local.stdout[-3000:]
    assert "2 skipped" in local.stdout, local.stdout[-3000:]
    assert f"{MISSING}S" in local.stdout and "rouge-score: 2 test(s) or module(s) skipped, NOT checked" in local.stdout


@pytest.mark.parametrize("value, ci", [("true", True), ("1", True), ("yes", True), ("", False), ("0", False),
                                       ("false", False), ("False", False), ("no", False), (None, False)])
def test_what_counts_as_ci(monkeypatch, value, ci):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is ci
