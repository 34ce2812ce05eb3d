"""Sinks: send a stored run to a system outside ragmeter (an MLflow tracking server, Google Sheets).

Each sink reads only from the store and is imported lazily by ``ragmeter export --to``; its client
library is an optional extra (``pip install 'ragmeter-eval[mlflow]'``, ``'ragmeter-eval[sheets]'``).
"""

from __future__ import annotations

SINKS = ("mlflow", "sheets")
