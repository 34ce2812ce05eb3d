"""pytest plugin (entry point ``pytest11``; installed packages load it automatically, or pass
``-p ragmeter.apps.pytest_plugin``).

- ``@pytest.mark.ragmeter_dataset("example")`` on a test taking a ``ragmeter_sample`` argument runs
  it once per sample of the dataset (any source :func:`ragmeter.load` accepts).
- At the end of the session, a table of every :func:`ragmeter.testing.assert_scores` check.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ragmeter_dataset(source, limit=None): parametrise the `ragmeter_sample` "
                   "argument over the samples of a dataset (ragmeter.load source)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("ragmeter_dataset")
    if marker is None or "ragmeter_sample" not in metafunc.fixturenames:
        return
    from ragmeter.io import load

    source = marker.args[0] if marker.args else marker.kwargs.get("source", "example")
    samples = load(source).samples
    limit = marker.kwargs.get("limit")
    if limit is not None:
        samples = samples[: int(limit)]
    metafunc.parametrize("ragmeter_sample", samples, ids=[s.id for s in samples])


def _fmt(v: Any) -> str:
    return "no value" if v is None else f"{v:.3f}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from ragmeter.testing import recorded_checks

    checks = recorded_checks()
    if not checks:
        return
    tr = terminalreporter
    tr.write_sep("=", "ragmeter checks")
    width = max(len(c["sample"]) for c in checks)
    mwidth = max(len(c["metric"]) for c in checks)
    for c in checks:
        status = "PASS" if c["passed"] else "FAIL"
        tr.write_line(f"{status}  {c['sample']:<{width}}  {c['metric']:<{mwidth}}  {_fmt(c['value']):>8}  "
                      f"{c['threshold']}" + (f"  ({c['reason']})" if c["reason"] and not c["passed"] else ""))
    n_fail = sum(1 for c in checks if not c["passed"])
    tr.write_line(f"{len(checks) - n_fail} passed, {n_fail} failed of {len(checks)} sample x metric checks")
