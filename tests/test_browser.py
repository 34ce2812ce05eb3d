"""The report file and the dashboard in a real browser: headless Chromium (Debian's package,
driven by Playwright without its own browser download) loads them, takes screenshots, and checks
that the charts are drawn, the tables sort and filter, and evaluated text never runs as script."""

from __future__ import annotations

from pathlib import Path

import pytest

from chromium import CHROMIUM
from dashboard_server import serving
from ragmeter.apps.report import write_report
from ragmeter.store import Store
from test_report_support import XSS_ANSWER, make_store

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                       "(apt-get install chromium; `make test` does it when run as root)"),
]


class Watched:
    """A page with everything that must not happen recorded: dialogs, page errors, console
    errors, and requests that leave the machine."""

    def __init__(self, ctx, allow_origin: str | None = None):
        self.page = ctx.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.external: list[str] = []

        def on_dialog(d):
            self.dialogs.append(d.message)
            d.dismiss()

        def on_request(route):
            url = route.request.url
            if url.startswith(("file:", "data:", "blob:")) or (allow_origin and url.startswith(allow_origin)):
                route.continue_()
            else:
                self.external.append(url)
                route.abort()

        self.page.on("dialog", on_dialog)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}")
                     if m.type == "error" else None)
        self.page.route("**/*", on_request)

    def goto(self, url: str) -> None:
        self.page.goto(url, wait_until="load")
        self.page.wait_for_function("document.querySelectorAll('.plot').length === 0 || "
                                    "Array.from(document.querySelectorAll('.plot'))"
                                    ".every(d => d.querySelector('svg.main-svg'))", timeout=30_000)

    def plot_sizes(self) -> list[tuple[str, float, float]]:
        return self.page.evaluate(
            "Array.from(document.querySelectorAll('.plot')).map(d => {"
            " const s = d.querySelector('svg.main-svg'); const r = s ? s.getBoundingClientRect() : null;"
            " return [d.id, r ? r.width : 0, r ? r.height : 0,"
            "         d.querySelectorAll('.bars path, .point, .heatmaplayer image, .scatterlayer path').length]; })")

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"a script ran: {self.dialogs}"
        assert self.errors == [], self.errors
        assert self.external == [], f"network requests: {self.external}"

    def full_screenshot(self, path: Path) -> None:
        self.page.evaluate("window.scrollTo(0, 0)")  # the sticky top bar then sits at the top
        self.page.screenshot(path=str(path), full_page=True)

    def close(self) -> None:
        self.page.close()


def _column_values(page, table_id: str, col: int) -> list[str]:
    return page.evaluate(
        f"Array.from(document.querySelectorAll('#{table_id} tbody tr.rm-row'))"
        f".filter(r => !r.hidden).map(r => r.cells[{col}].getAttribute('data-value'))")


def _header_index(page, table_id: str, text: str) -> int:
    return page.evaluate(
        f"Array.from(document.querySelectorAll('#{table_id} thead th'))"
        f".findIndex(th => th.textContent.trim().startsWith({text!r}))")


def _check_sorting(page, table_id: str, header: str, min_rows: int = 5) -> None:
    """Click a numeric header twice: the rows follow its direction each time (the first click on
    the column already sorted ascending sorts it descending), and rows without a value stay last."""
    col = _header_index(page, table_id, header)
    assert col >= 0
    th = page.locator(f"#{table_id} thead th").nth(col)
    seen = set()
    for _ in range(2):
        th.click()
        direction = th.get_attribute("aria-sort")
        seen.add(direction)
        vals = _column_values(page, table_id, col)
        nums = [float(v) for v in vals if v]
        assert len(nums) >= min_rows and nums[0] != nums[-1]
        assert nums == sorted(nums, reverse=direction == "descending")
        assert all(v == "" for v in vals[len(nums):])  # no value: at the bottom
    assert seen == {"ascending", "descending"}


@pytest.fixture(scope="module")
def store_two_runs(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'b.db'}"
    ids = make_store(url, runs=2)
    return Store(url), ids


def test_report_file_in_browser(browser, store_two_runs, tmp_path):
    store, ids = store_two_runs
    path = write_report(store, ids, tmp_path / "report.html")
    w = Watched(browser)
    try:
        w.goto(path.as_uri())
        sizes = w.plot_sizes()
        assert len(sizes) == 8
        for pid, width, height, marks in sizes:
            assert width > 100 and height > 100, pid
            assert marks > 0, f"{pid} drew no bar, point or cell"
        w.page.screenshot(path=str(tmp_path / "report-top.png"))
        w.full_screenshot(tmp_path / "report-full.png")

        # the XSS sample is shown as text
        cell = w.page.locator("#r0-samples tr[data-id='xss'] td").nth(3)
        assert cell.inner_text().strip() == XSS_ANSWER
        injected = w.page.evaluate("Array.from(document.scripts).filter(s => s.textContent.includes('alert(')).length")
        assert injected == 0 and w.page.locator("img[onerror]").count() == 0

        # sorting: a metric column, both directions, no-value rows kept last
        _check_sorting(w.page, "r0-samples", "rmtest_judge")
        _check_sorting(w.page, "r1-samples", "rmtest_unsupported")
        _check_sorting(w.page, "cmp-differences", "Δ", min_rows=3)

        # filtering by text and by band
        w.page.fill(".rm-filter[data-table='r0-samples']", "eiffel")
        assert w.page.locator("#r0-samples tr.rm-row:visible").count() == 1
        assert "1 shown of" in w.page.locator(".rm-count[data-table='r0-samples']").inner_text()
        w.page.fill(".rm-filter[data-table='r0-samples']", "")
        w.page.select_option(".rm-band-filter[data-table='r1-samples']", "critical")
        bands = w.page.evaluate("Array.from(document.querySelectorAll('#r1-samples tr.rm-row'))"
                                ".filter(r => !r.hidden).map(r => r.dataset.band)")
        assert bands and set(bands) == {"critical"}

        # a row opens on click and shows the sample's contexts and verdicts
        row = w.page.locator("#r0-samples tr[data-id='xss']")
        row.locator("td").nth(4).click()
        detail = w.page.locator("#r0-samples tr[data-id='xss'] + tr.rm-detail")
        assert detail.is_visible()
        assert "</script><script>alert(4)</script>" in detail.inner_text()
        row.evaluate("el => el.scrollIntoView({block: 'start'})")
        w.page.screenshot(path=str(tmp_path / "report-detail.png"))
        w.assert_clean()
    finally:
        w.close()
    assert (tmp_path / "report-full.png").stat().st_size > 50_000


@pytest.fixture(scope="module")
def dashboard(store_two_runs):
    store, ids = store_two_runs
    with serving(store) as base:
        yield base, ids


def test_dashboard_in_browser(browser, dashboard, tmp_path):
    base, ids = dashboard
    w = Watched(browser, allow_origin=base)
    shots = Path(tmp_path)
    try:
        w.goto(base + "/")
        assert w.page.locator("#runs-table tbody tr").count() == 2
        w.page.screenshot(path=str(shots / "dash-runs.png"))
        # tick both runs and compare
        w.page.locator("input[name='runs']").nth(1).check()
        w.page.locator("input[name='runs']").nth(0).check()
        w.page.click("#compare-button")
        w.page.wait_for_url("**/compare?**")
        w.goto(w.page.url)
        sizes = w.plot_sizes()
        assert [s[0] for s in sizes] == ["cmp-bars", "cmp-diffs"]
        assert all(s[1] > 100 and s[2] > 100 and s[3] > 0 for s in sizes), sizes
        _check_sorting(w.page, "cmp-changes", "Δ")
        w.full_screenshot(shots / "dash-compare.png")

        # the run page: the report's content, live from the store
        w.goto(f"{base}/runs/{ids[0]}")
        sizes = w.plot_sizes()
        assert len(sizes) == 3 and all(s[1] > 100 and s[2] > 100 and s[3] > 0 for s in sizes), sizes
        _check_sorting(w.page, "r0-samples", "rmtest_overlap")
        assert w.page.locator("#r0-samples tr[data-id='xss'] td").nth(3).inner_text().strip() == XSS_ANSWER
        w.full_screenshot(shots / "dash-run.png")

        # the sample page, reached through its link
        w.page.click("#r0-samples a[href$='/samples/xss']")
        w.page.wait_for_url("**/samples/xss")
        text = w.page.inner_text("main")
        assert XSS_ANSWER in text and "</script><script>alert(4)</script>" in text
        assert "SCORES AND VERDICTS" in text.upper()
        w.full_screenshot(shots / "dash-sample.png")
        w.assert_clean()
    finally:
        w.close()
