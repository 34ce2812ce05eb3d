"""The monitoring and trend pages in headless Chromium: plots drawn with size, thresholds shown,
no script errors, no request leaving the machine."""

from __future__ import annotations

import pytest

from monitor_support import Served
from test_browser import CHROMIUM, Watched
from test_monitor import _seed_calls

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")]


def test_monitoring_page_renders_its_plots(browser, db_url, tmp_path):  # noqa: F811
    import ragmeter

    _seed_calls(db_url, n=300)
    ragmeter.monitor.evaluate_window(ragmeter.store.Store(db_url), ragmeter.monitor.parse_duration("1d"),
                                     ["correct_keyword", "context_similarity"], sample=0.2)
    served = Served(db_url)
    w = Watched(browser, allow_origin=served.url)
    try:
        w.goto(served.url + "/monitor?window=1d&bucket=hour&max_p95_ms=900&max_error_rate=0.02")
        sizes = {name: (width, height, marks) for name, width, height, marks in w.plot_sizes()}
        for plot in ("mon-latency", "mon-traffic", "mon-errors", "mon-cost", "mon-quality-0"):
            width, height, marks = sizes[plot]
            assert width > 200 and height > 150 and marks > 0, (plot, sizes[plot])
        text = w.page.inner_text("#monitor-stats")
        assert "300" in text
        # the p95 threshold is drawn as a dashed shape on the latency plot
        assert w.page.locator("#mon-latency .shapelayer path").count() >= 1
        w.full_screenshot(tmp_path / "monitor.png")
        w.goto(served.url + "/trend/context_similarity")
        assert w.plot_sizes()[0][1] > 200
        w.assert_clean()
    finally:
        w.close()
        served.close()
