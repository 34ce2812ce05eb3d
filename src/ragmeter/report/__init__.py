"""The one-file HTML report: a run's (or several runs') aggregates, plots and samples.

>>> from ragmeter.report import write_report                # doctest: +SKIP
>>> write_report(store, ["latest"], "report.html")           # doctest: +SKIP
"""

from ragmeter.report.render import build_report, write_report

__all__ = ["build_report", "write_report"]
