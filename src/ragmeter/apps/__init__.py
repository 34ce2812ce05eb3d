"""The present stage: what a person or a tool uses ragmeter through.

``cli`` (the ``ragmeter`` command, ``ragmeter trec`` the trec_eval drop-in among its commands),
``server`` (dashboard, annotation and review pages), ``report`` (the HTML report, CI summaries),
``export`` (a stored run's rows to CSV/Parquet/JSONL/Excel files, MLflow or Google Sheets) and
``pytest_plugin`` (``assert_scores`` in a project's tests). Apps read runs from the store and start
runs through :mod:`ragmeter.run`; nothing below this stage imports an app.
"""
