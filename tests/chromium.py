"""Headless Chromium for the browser tests: Debian's ``chromium`` package, driven by Playwright
without its own browser download (the ``browser`` fixture is in conftest.py)."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
