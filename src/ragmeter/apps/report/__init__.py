"""The one-file HTML report: a run's (or several runs') aggregates, plots and samples.

>>> from ragmeter.apps.report import write_report                # doctest: +SKIP
>>> write_report(store, ["latest"], "report.html")           # doctest: +SKIP
"""

from ragmeter.apps.report.render import build_report, write_report

__all__ = ["build_report", "write_report"]
