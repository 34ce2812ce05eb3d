"""The packages the tests need beyond ragmeter's own: reference implementations that contract tests
compare ragmeter with, and extras of ``.[dev]`` some tests drive. One rule for both: a missing one
FAILS the tests that need it when the environment variable ``CI`` is set (``CI=true make test``:
a green CI run must have compared against every reference), and skips them locally with a loud
reason (conftest.py repeats the list at the end of the run).

A test gets such a package from :func:`require_reference` or :func:`require_extra`, at module level
(``rouge_scorer = require_reference("rouge_score.rouge_scorer")``) or in its body, never from an
import statement or ``pytest.importorskip`` (tests/test_test_tiers.py checks it). Missing at module
level, the module is skipped locally; in CI the name is bound to a stand-in and conftest.py fails
every test of that module before it runs. A test that compares with a reference is marked
``contract`` (``pytest -m contract`` runs them all).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, NoReturn

import pytest

#: import name -> the distribution `pip install` wants, for every reference a contract test compares
#: with (pyproject.toml's ``dev`` extra installs them; deepeval is installed by the Makefile)
REFERENCES = {
    "bert_score": "bert-score",
    "choix": "choix",
    "datacompy": "datacompy",
    "deepeval": "deepeval",
    "ppi_py": "ppi-python",
    "pytrec_eval": "pytrec-eval-terrier",
    "ragas": "ragas",
    "ranx": "ranx",
    "rouge_score": "rouge-score",
    "sklearn": "scikit-learn",
    "statsmodels": "statsmodels",
    "textdistance": "textdistance",
}

#: extras of ``.[dev]`` that some tests drive (not references: ragmeter itself imports them)
EXTRAS = {
    "datasets": "datasets",
    "gspread": "gspread",
    "mlflow": "mlflow",
    "openpyxl": "openpyxl",
    "psycopg": "psycopg[binary]",
    "ray": "ray[data]",
}

#: how a skip for a missing package begins (conftest.py collects these reasons for its summary)
MISSING = "MISSING TEST PACKAGE"


def in_ci() -> bool:
    """Whether ``CI`` is set to something other than empty, ``0``, ``false`` or ``no``."""
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


class Missing(ModuleType):
    """Stands for a package missing at module level in CI: conftest.py fails every test of a module
    that holds one, and its use (at collection) fails too."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(name)
        self.message = message

    def __getattr__(self, attr: str) -> NoReturn:
        if attr.startswith("__"):
            raise AttributeError(attr)
        pytest.fail(self.message, pytrace=False)


def _require(name: str, table: dict[str, str], what: str) -> ModuleType:
    top = name.partition(".")[0]
    if top not in table:
        raise KeyError(f"{top} is not listed in tests/references.py ({what}s: {', '.join(sorted(table))})")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = (f"{MISSING}: {table[top]} ({what}) cannot be imported ({exc}); install it with "
                   f"`pip install '{table[top]}'` (make test installs .[dev])")
        if in_ci():
            message += ". CI is set, so this fails instead of skipping"
            if _at_module_level():
                return Missing(name, message)
            pytest.fail(message, pytrace=False)
        pytest.skip(message + ". Not checked here; with CI set this fails", allow_module_level=True)


def _at_module_level() -> bool:
    import sys

    frame: Any = sys._getframe(3)  # the caller of require_reference / require_extra
    return frame is not None and frame.f_code.co_name == "<module>"


def require_reference(name: str) -> ModuleType:
    """The reference package (or its submodule) ``name`` a contract test compares with."""
    return _require(name, REFERENCES, "reference implementation")


def require_extra(name: str) -> ModuleType:
    """The ``.[dev]`` extra (or its submodule) ``name`` a test drives."""
    return _require(name, EXTRAS, "extra of .[dev]")
