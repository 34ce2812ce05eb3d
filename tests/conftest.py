"""Shared fixtures. Feature-specific fixtures live next to their tests."""

from __future__ import annotations

import os

import pytest

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


def pytest_terminal_summary(terminalreporter):
    """Print how many registered metrics tests/test_common_metrics.py checked (the count travels as
    a user property of its report, so it is printed with and without xdist)."""
    for report in terminalreporter.stats.get("passed", []):
        for key, value in getattr(report, "user_properties", ()):
            if key == "common_metrics_checked":
                terminalreporter.write_line(
                    f"test_common_metrics: checked {value} registered metrics (range, determinism, "
                    "batch splitting, order, missing fields)")
