"""Export: a stored run's rows out of ragmeter. ``ragmeter export RUN -f FORMAT`` writes files
(:mod:`.files`: CSV, Parquet, JSONL, Excel); ``ragmeter export RUN --to SINK`` sends the run to a
system outside ragmeter, a *sink* (:mod:`.mlflow`: an MLflow tracking server, :mod:`.sheets`:
Google Sheets; :mod:`.dispatch` picks one).

Each sink reads only from the store and is imported lazily by ``ragmeter export --to``; its client
library is an optional extra (``pip install 'ragmeter-eval[mlflow]'``, ``'ragmeter-eval[sheets]'``).
"""

from __future__ import annotations

SINKS = ("mlflow", "sheets")
