"""The command line starts without loading what only some commands need: `ragmeter --help`,
`ragmeter metrics` and usage errors never import SQLAlchemy, pandas or torch."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_leaves_heavy_modules_unloaded():
    code = ("import sys, ragmeter.apps.cli; "
            "print(sorted(m for m in ('sqlalchemy', 'pandas', 'torch', 'sentence_transformers', 'openai', "
            "'plotly', 'fastapi') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
