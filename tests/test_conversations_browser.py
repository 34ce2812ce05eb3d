"""Conversations in the report file and the dashboard, in headless Chromium: each conversation is
a thread with its per-turn scores and the conversation metrics' verdicts; evaluated text never
runs as script."""

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

XSS_USER = "Hi </script><script>alert('user')</script> when is the ferry?"
XSS_ASSISTANT = '<img src=x onerror="alert(\'assistant\')"> The ferry leaves at 10:00, lol.'


@pytest.fixture
def conversation_run(server, tmp_path):
    conv = {"id": "xss-chat", "chatbot_role": "<b>ferry</b> assistant <script>alert('role')</script>",
            "turns": [{"role": "user", "content": XSS_USER},
                      {"role": "assistant", "content": XSS_ASSISTANT, "reference": "The ferry leaves at 10:00."},
                      {"role": "user", "content": "And the next one?"},
                      {"role": "assistant", "content": "Which ferry do you mean?", "reference": "At 11:00."}]}
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(conv) + "\n")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    res = evaluate("example-chat", ["knowledge_retention", "role_adherence", "token_f1"], db=db,
                   options=judge_options(server))
    res2 = evaluate(str(p), ["knowledge_retention", "role_adherence", "token_f1"], db=db,
                    options=judge_options(server))
    return open_store(db), res.run_id, res2.run_id


def test_report_file_shows_conversations_as_threads(browser, conversation_run, tmp_path):
    store, example_run, xss_run = conversation_run
    out = write_report(store, [xss_run], tmp_path / "r.html")
    w = Watched(browser)
    try:
        w.goto(out.resolve().as_uri())
        conv = w.page.locator(".conversation").first
        conv.locator("summary").click()
        turns = conv.locator(".turn")
        assert turns.count() == 4
        assert turns.nth(0).locator(".turn-text").inner_text() == XSS_USER
        assert turns.nth(1).locator(".turn-text").inner_text() == XSS_ASSISTANT
        assert "token_f1" in turns.nth(1).locator(".turn-scores").inner_text()
        # the conversation metrics' verdicts sit on the turns they concern
        notes = turns.nth(3).locator(".turn-note").all_inner_texts()
        assert any("knowledge_retention yes" in n for n in notes)
        assert any("role_adherence out of character" in n for n in turns.nth(1).locator(".turn-note").all_inner_texts())
        assert "<script>" in conv.locator(".conv-role").inner_text()
        w.full_screenshot(tmp_path / "report-conversation.png")
        w.assert_clean()
    finally:
        w.close()
    out = write_report(store, [example_run], tmp_path / "e.html")
    w = Watched(browser)
    try:
        w.goto(out.resolve().as_uri())
        assert w.page.locator(".conversation").count() == 23
        w.assert_clean()
    finally:
        w.close()


def test_dashboard_conversation_page(browser, conversation_run, tmp_path):
    store, example_run, xss_run = conversation_run
    with serving(store) as base:
        _conversation_pages(browser, base, example_run, xss_run, tmp_path)


def _conversation_pages(browser, base, example_run, xss_run, tmp_path):
    w = Watched(browser, allow_origin=base)
    try:
        w.goto(f"{base}/runs/{example_run}")
        links = w.page.locator(".conv-index a")
        assert links.count() == 23
        w.page.locator(".conv-index a", has_text="chat-pirate").click()
        w.page.wait_for_selector(".thread")
        assert "/conversations/chat-pirate" in w.page.url
        turns = w.page.locator(".turn")
        assert turns.count() == 6
        assert "role_adherence out of character" in turns.nth(3).inner_text()
        w.goto(f"{base}/runs/{xss_run}/conversations/xss-chat")
        assert w.page.locator(".turn-text").first.inner_text() == XSS_USER
        w.full_screenshot(tmp_path / "dashboard-conversation.png")
        w.assert_clean()
        w.page.goto(f"{base}/runs/{xss_run}/conversations/nope")
        assert "no conversation" in w.page.inner_text("body")
    finally:
        w.close()
