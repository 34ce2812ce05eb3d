"""Agent traces as trees in the report file and the dashboard's trace page, in headless Chromium:
each span with its kind, name, latency, tokens, tool arguments and results, and that span's scores
and reasons (a run scored per span); `<script>` and `onerror` payloads in tool arguments and
results, queries, documents and outputs never run."""

from __future__ import annotations

import json

import pytest

from dashboard_server import serving
from judge_server import judge_options, server_fixtures
from ragmeter.apps.report import write_report
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from test_browser import CHROMIUM, Watched

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed"),
]
judge_server_module, server = server_fixtures()

ARGS = {"q": "</pre><script>window.__pwned = 1; alert('args')</script>",
        "filter": "<img src=x onerror=\"window.__pwned = 2; alert('args img')\">"}
RESULT = "<script>window.__pwned = 3</script><img src=x onerror=\"window.__pwned = 4; alert('result')\">"
DOC = "The ferry leaves at 7. <img src=x onerror=\"alert('doc')\">"
OUTPUT = "The ferry leaves at 7."
TOOL_NAME = "search<script>alert('name')</script>"


def xss_trace() -> dict:
    return {"id": "xss-trace", "question": "When does the ferry leave? <script>alert('q')</script>",
            "answer": OUTPUT, "relevant": [{"id": "d1"}],
            "metadata": {"expected_tools": [TOOL_NAME]},
            "trace": {"trace_id": "tr-<b>1</b>", "spans": [
                {"span_id": "root", "kind": "agent", "name": "invoke_agent <i>bot</i>", "agent": "ferry<script>",
                 "start_ms": 0, "latency_ms": 950.5},
                {"span_id": "r1", "parent_id": "root", "kind": "retriever", "name": "retrieve", "start_ms": 5,
                 "latency_ms": 12.25, "query": "<script>alert('query')</script> ferry",
                 "documents": [{"id": "d1", "text": DOC}]},
                {"span_id": "t1", "parent_id": "root", "kind": "tool", "name": "execute_tool", "start_ms": 30,
                 "latency_ms": 40.0, "tool_name": TOOL_NAME, "tool_arguments": ARGS, "tool_result": RESULT},
                {"span_id": "t2", "parent_id": "root", "kind": "tool", "name": "execute_tool", "start_ms": 80,
                 "latency_ms": 5.0, "tool_name": "book", "tool_arguments": {"seat": "<svg onload=alert('svg')>"},
                 "status": "error", "error": "<b>refused</b> <script>alert('err')</script>"},
                {"span_id": "l1", "parent_id": "root", "kind": "llm", "name": "chat", "start_ms": 100,
                 "latency_ms": 700.0, "model": "gpt-4o-mini", "input_tokens": 120, "output_tokens": 30,
                 "input": [{"role": "user", "content": "<script>alert('input')</script>"}],
                 "output": [{"role": "assistant", "content": OUTPUT}]},
            ]}}


@pytest.fixture
def trace_run(server, tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(xss_trace()) + "\n")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    res = evaluate(str(p), ["mrr", "faithfulness", "tool_choice_correctness"], db=db, per_span=True,
                   options=judge_options(server))
    return open_store(db), res.run_id


def _check_tree(page, root) -> None:
    """The tree drawn under ``root`` (a locator) holds every span with its facts and scores."""
    spans = root.locator("li.span")
    assert spans.count() == 5
    top = root.locator("ul.span-tree > li.span")
    assert top.count() == 1 and top.first.get_attribute("data-span") == "root"
    children = top.first.locator(":scope > ul.span-children > li.span")
    assert [children.nth(i).get_attribute("data-span") for i in range(children.count())] == ["r1", "t1", "t2", "l1"]
    head = top.first.locator(".span-head").first.inner_text()
    assert "invoke_agent <i>bot</i>" in head and "agent ferry<script>" in head and "950.5 ms" in head

    tool = root.locator('li.span[data-span="t1"]')
    texts = tool.locator("pre.span-text").all_inner_texts()
    assert json.loads(texts[0]) == ARGS and texts[1] == RESULT  # shown as text, exactly
    assert TOOL_NAME in tool.locator("code").first.inner_text()
    assert "tool_choice_correctness 1.000" in tool.locator(".span-scores").inner_text()
    failed = root.locator('li.span[data-span="t2"]')
    assert "error: <b>refused</b> <script>alert('err')</script>" in failed.locator(".span-head").inner_text()
    assert "tool_choice_correctness 0.000" in failed.locator(".span-scores").inner_text()

    retr = root.locator('li.span[data-span="r1"]')
    assert "<script>alert('query')</script> ferry" in retr.inner_text()
    assert "mrr 1.000" in retr.locator(".span-scores").inner_text()
    retr.locator("details summary").first.click()
    assert DOC in retr.locator("details ol").inner_text()

    llm = root.locator('li.span[data-span="l1"]')
    head = llm.locator(".span-head").inner_text()
    assert "gpt-4o-mini" in head and "tokens 120 in / 30 out" in head and "700.0 ms" in head
    faith = llm.locator(".span-scores").inner_text()
    assert "faithfulness 1.000" in faith and "supported" in faith  # the verdicts (reasons) of that span
    assert page.evaluate("window.__pwned") is None


def test_report_file_draws_the_trace_tree_and_runs_no_script(browser, trace_run, tmp_path):
    store, run_id = trace_run
    out = write_report(store, [run_id], tmp_path / "r.html")
    w = Watched(browser)
    try:
        w.goto(out.resolve().as_uri())
        trace = w.page.locator(".agent-trace").first
        trace.locator("summary").first.click()
        _check_tree(w.page, trace)
        w.full_screenshot(tmp_path / "report-trace.png")
        w.assert_clean()
    finally:
        w.close()


def test_dashboard_trace_page_draws_the_tree_and_runs_no_script(browser, trace_run, tmp_path):
    store, run_id = trace_run
    with serving(store) as base:
        w = Watched(browser, allow_origin=base)
        try:
            w.goto(f"{base}/runs/{run_id}")
            link = w.page.locator("table.trace-index a").first
            assert link.inner_text() == "xss-trace"
            link.click()
            w.page.wait_for_load_state("load")
            assert w.page.url == f"{base}/runs/{run_id}/traces/xss-trace"
            _check_tree(w.page, w.page.locator(".trace-page"))
            w.full_screenshot(tmp_path / "dashboard-trace.png")
            w.assert_clean()
            w.goto(f"{base}/runs/{run_id}/traces/no-such-trace")
            assert "has no agent trace" in w.page.inner_text("body")
        finally:
            w.close()
