"""Shared fixtures. Feature-specific fixtures live next to their tests."""

from __future__ import annotations

import os
import re

import pytest

from references import MISSING, Missing

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def db_url(tmp_path):
    """A fresh SQLite store for one test."""
    return f"sqlite:///{tmp_path / 'ragmeter.db'}"


@pytest.fixture(autouse=True)
def _isolated_default_store(tmp_path, monkeypatch):
    # never write to the developer's .ragmeter/ from tests
    monkeypatch.setenv("RAGMETER_DB", f"sqlite:///{tmp_path / 'default.db'}")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium (a persistent context with its own profile) per test module."""
    from playwright.sync_api import sync_playwright

    from chromium import CHROMIUM, FLAGS

    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=FLAGS, viewport={"width": 1400, "height": 900})
        yield ctx
        ctx.close()


def pytest_runtest_setup(item):
    """In CI a package missing at a test module's top is a stand-in (tests/references.py): fail
    every test of that module, naming the package, before it runs."""
    module = getattr(item, "module", None)
    for value in vars(module).values() if module is not None else ():
        if isinstance(value, Missing):
            pytest.fail(value.message, pytrace=False)


def _missing_packages(terminalreporter) -> dict[str, int]:
    """``{package: tests skipped}`` for the skips tests/references.py made (a module counts once)."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        m = re.search(rf"{MISSING}: (\S+) \(", reason)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def pytest_terminal_summary(terminalreporter):
    """Print how many registered metrics tests/test_common_metrics.py checked (the count travels as
    a user property of its report, so it is printed with and without xdist), and, loudly, which
    reference or extra packages were missing, so a green local run does not pass for a checked one."""
    for report in terminalreporter.stats.get("passed", []):
        for key, value in getattr(report, "user_properties", ()):
            if key == "common_metrics_checked":
                terminalreporter.write_line(
                    f"test_common_metrics: checked {value} registered metrics (range, determinism, "
                    "batch splitting, order, missing fields)")
    missing = _missing_packages(terminalreporter)
    if missing:
        terminalreporter.section(MISSING + "S", sep="!", red=True, bold=True)
        for package, n in sorted(missing.items()):
            terminalreporter.write_line(f"{package}: {n} test(s) or module(s) skipped, NOT checked", red=True)
        terminalreporter.write_line("make test installs them (.[dev]); with CI set these skips are failures",
                                    red=True)
