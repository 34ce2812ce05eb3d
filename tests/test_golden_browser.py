"""The dataset review page in headless Chromium: accept one sample with the keyboard, edit one
(question and a span chosen by selecting document text), reject one; `ragmeter dataset diff`
then shows exactly those three changes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from judge_server import server_fixtures
from monitor_support import Served
from ragmeter.golden import add_documents, generate
from ragmeter.io.stored import samples_of
from ragmeter.store import Store
from test_browser import CHROMIUM, Watched
from test_golden import CORPUS

judge_server_module, server = server_fixtures()
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")]


def test_review_page_accept_edit_reject(browser, server, db_url):  # noqa: F811
    store = Store(db_url)
    add_documents(store, "handbook", [CORPUS])
    generate(store, corpus="handbook", n=12, name="gold", judge="openai:test-model", types="single_hop=1",
             judge_options={"base_url": server.url + "/v1", "api_key_env": "RAGMETER_TEST_JUDGE_KEY"})
    ids = [d["id"] for d in samples_of(store, "gold")]
    served = Served(db_url)
    w = Watched(browser, allow_origin=served.url)
    p = w.page
    try:
        w.goto(served.url + "/datasets/gold/review")
        card = p.locator("#rv-card")
        assert card.get_attribute("data-sample") == ids[0]
        p.keyboard.press("a")  # accept the first: moves to the second
        p.wait_for_selector(f"#rv-card[data-sample='{ids[1]}']")
        # edit the second: new question, and a span chosen by selecting document text
        p.keyboard.press("e")
        p.fill("#rv-edit-question", "When may any member of staff stop an operation?")
        doc = p.evaluate("document.getElementById('rv-document').textContent")
        target = doc.index(" ") + 1
        p.evaluate("""([start, end]) => {
            const pre = document.getElementById('rv-document');
            const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
            let pos = 0, node, r = document.createRange(), s = null;
            while ((node = walker.nextNode())) {
              const len = node.textContent.length;
              if (s === null && start < pos + len) { r.setStart(node, start - pos); s = true; }
              if (end <= pos + len) { r.setEnd(node, end - pos); break; }
              pos += len;
            }
            const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);
        }""", [target, target + 40])
        p.click("#rv-use-selection")
        assert p.inner_text("#rv-span-info") == f"characters {target}–{target + 40}"
        p.click("#rv-save")
        p.wait_for_selector("#rv-card[data-review='edited']")
        p.click("#rv-next")
        p.wait_for_selector(f"#rv-card[data-sample='{ids[2]}']")
        p.keyboard.press("r")
        p.wait_for_selector(f"#rv-card[data-sample='{ids[3]}']")
        w.assert_clean()
    finally:
        w.close()
        served.close()
    out = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "dataset", "diff", "gold@1", "gold", "--json",
                          "--db", db_url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["added"] == [] and d["removed"] == [ids[2]] and d["rejected"] == [ids[2]]
    changed = {c["id"]: c for c in d["changed"]}
    assert set(changed) == {ids[0], ids[1]}
    assert changed[ids[0]]["review"] == ["pending", "accepted"] and changed[ids[0]]["fields"] == []
    assert changed[ids[1]]["fields"] == ["question", "relevant"]
    assert changed[ids[1]]["after"]["question"] == "When may any member of staff stop an operation?"
    span = changed[ids[1]]["after"]["relevant"][0]
    source_text = (CORPUS / span["source"]).read_text(encoding="utf-8")
    assert (span["start"], span["end"]) == (target, target + 40) and source_text[target:target + 40] == span["text"]
