"""Annotation tasks (sampling, tokens, labels, CSV round trip), the annotation API's protections,
labels flowing back into evaluation, the judge reliability card in `ragmeter show` and the
report, and two raters labelling through the page in headless Chromium."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ragmeter
from judge_server import judge_options, server_fixtures
from ragmeter.apps.cli import app
from ragmeter.human import tasks as T
from ragmeter.stats.agreement import cohen_kappa
from ragmeter.store import Store

judge_server_module, server = server_fixtures()
runner = CliRunner()
ANA = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
BRUNO = [1, 2, 3, 4, 5, 2, 2, 3, 5, 5]


def samples(n=10):
    out = []
    for i in range(n):
        ok = i % 2 == 0
        out.append({"id": f"s{i}", "question": f"Where is office {i}?",
                    "contexts": [f"Office {i} is in Lisbon near the river."],
                    "answer": f"Office {i} is in Lisbon." if ok else f"Office {i} is on the Moon.",
                    "reference": f"Office {i} is in Lisbon."})
    return out


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    ragmeter.evaluate(samples(), metrics=["token_f1"], db=url, name="base")
    return Store(url)


def test_create_task_sampling_tokens_and_order(store, tmp_path):
    task_id, tokens = T.create_task(store, "base", raters=["ana", "bruno"],
                                    scales=T.parse_scales("faithfulness,grounded:binary,topic:a|b"), n=6)
    items = [it.sample_id for it in T.task_items(store, task_id)]
    assert len(items) == 6 and len(set(items)) == 6
    # only hashes are stored; each token finds its rater
    raters = T.task_raters(store, task_id)
    assert all(len(r.token_hash) == 64 and r.token_hash not in tokens.values() for r in raters)
    assert T.rater_by_token(store, tokens["ana"])[1].name == "ana"
    assert T.rater_by_token(store, "nope") is None
    orders = [T.rater_order(store, task_id, r) for r in raters]
    assert sorted(orders[0]) == sorted(orders[1]) == sorted(items)
    task = T.get_task(store, task_id)
    with pytest.raises(ValueError, match="not a value"):
        T.save_label(store, task, "ana", items[0], "faithfulness", 7)
    with pytest.raises(ValueError, match="not an item"):
        T.save_label(store, task, "ana", "zzz", "faithfulness", 3)
    T.save_label(store, task, "ana", items[0], "faithfulness", 4.0)
    T.save_label(store, task, "ana", items[0], "faithfulness", 5)  # replaces
    labs = T.labels(store, task_id)
    assert [(x.value, x.value_num, x.task_version, x.rater) for x in labs] == [("5", 5.0, 1, "ana")]
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("faithfulness: new wording")
    res = runner.invoke(app, ["annotate", "rubric", task_id, "--file", str(rubric), "--db", store.url])
    assert res.exit_code == 0 and "version 2" in res.output
    T.save_label(store, T.get_task(store, task_id), "bruno", items[0], "grounded", 1)
    assert {x.rater: x.task_version for x in T.labels(store, task_id)} == {"ana": 1, "bruno": 2}
    res = runner.invoke(app, ["annotate", "status", "nope", "--db", store.url])
    assert res.exit_code == 2 and "no annotation task" in res.output
    res = runner.invoke(app, ["annotate", "create", "nope", "--raters", "a", "--db", store.url])
    assert res.exit_code == 2 and "no run" in res.output
    res = runner.invoke(app, ["annotate", "create", "base", "--raters", "a", "--scales", "x:9-1",
                              "--db", store.url])
    assert res.exit_code == 2 and "lo < hi" in res.output


def test_stratified_sampling_covers_bins(store):
    task_id, _ = T.create_task(store, "base", raters=["ana"], scales=T.parse_scales("overall"), n=4,
                               stratify="token_f1", strata=2)
    strata = {it.stratum for it in T.task_items(store, task_id)}
    assert len(strata) == 2


def test_csv_round_trip_and_labels_back(store, tmp_path):
    res = runner.invoke(app, ["annotate", "create", "base", "--raters", "ana,bruno", "--scales",
                              "correctness", "--n", "10", "--json", "--db", store.url])
    assert res.exit_code == 0, res.output
    task_id = json.loads(res.output)["task"]
    sheet = tmp_path / "sheet.csv"
    assert runner.invoke(app, ["annotate", "export", task_id, "-o", str(sheet), "--db", store.url]).exit_code == 0
    lines = sheet.read_text().splitlines()
    assert lines[0] == "item,rater,scale,label,question,answer" and len(lines) == 21
    filled = [lines[0]]
    for line in lines[1:]:
        item, rater, scale, _, *rest = line.split(",")
        i = int(item[1:])
        filled.append(",".join([item, rater, scale, str((ANA if rater == "ana" else BRUNO)[i]), *rest]))
    sheet.write_text("\n".join(filled) + "\n")
    res = runner.invoke(app, ["annotate", "import", task_id, str(sheet), "--db", store.url])
    assert res.exit_code == 0 and "stored 20 labels" in res.output
    bad = tmp_path / "bad.csv"
    bad.write_text("item,rater,scale,label\ns1,ana,correctness,9\n")
    res = runner.invoke(app, ["annotate", "import", task_id, str(bad), "--db", store.url])
    assert res.exit_code == 2 and "line 2" in res.output
    # majority with ties to the lower value, normalised to [0, 1]
    vals = T.human_labels(store, task_id, "correctness", "majority")
    assert vals["s5"] == 0.0 and vals["s8"] == 0.75 and vals["s4"] == 1.0
    out = tmp_path / "lab.jsonl"
    res = runner.invoke(app, ["annotate", "labels", task_id, "--scale", "correctness", "--threshold", "0.5",
                              "-o", str(out), "--db", store.url])
    assert res.exit_code == 0, res.output
    got = {json.loads(x)["id"]: json.loads(x)["label"] for x in out.read_text().splitlines()}
    assert got["s0"] == 0.0 and got["s2"] == 1.0 and len(got) == 10
    # human scores as a metric of the run: compare/show use them like any metric
    res = runner.invoke(app, ["annotate", "apply", task_id, "--db", store.url])
    assert res.exit_code == 0, res.output
    run = store.get_run("base")
    assert run.summary["human_correctness"]["n"] == 10
    assert store.score_table(run.id)["human_correctness"]["s4"].value == 1.0
    res = runner.invoke(app, ["annotate", "agreement", task_id, "--json", "--bootstrap", "100",
                              "--db", store.url])
    rows = {r["method"]: r for r in json.loads(res.output)["correctness"]}
    assert rows["kappa"]["value"] == pytest.approx(cohen_kappa(ANA, BRUNO, weights="quadratic"))


def _client(store, host="127.0.0.1"):
    from fastapi.testclient import TestClient

    from ragmeter.apps.server import create_app

    return TestClient(create_app(store), base_url="http://127.0.0.1:8000", client=(host, 5555))


def test_annotation_api_is_blind_and_protected(store):
    task_id, tokens = T.create_task(store, "base", raters=["ana", "bruno"], scales=T.parse_scales("overall"))
    T.save_label(store, T.get_task(store, task_id), "bruno", "s1", "overall", 2)
    c = _client(store)
    page = c.get("/annotate")
    assert page.status_code == 200 and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert c.get("/annotate/api/session", headers={"X-Annotate-Token": "bad"}).status_code == 401
    sess = c.get("/annotate/api/session", headers={"X-Annotate-Token": tokens["ana"]}).json()
    assert sess["rater"] == "ana" and len(sess["items"]) == 10
    text = json.dumps(sess)
    assert "token_f1" not in text and "bruno" not in text and all(not it["labels"] for it in sess["items"])
    ok = {"X-Annotate-Token": tokens["ana"], "Origin": "http://127.0.0.1:8000"}
    body = {"sample_id": "s1", "scale": "overall", "value": 4}
    assert c.post("/annotate/api/labels", json=body, headers=ok).json() == {"ok": True}
    assert c.post("/annotate/api/labels", json=body, headers={**ok, "Origin": "http://evil.test"}).status_code == 403
    assert c.post("/annotate/api/labels", json=body,
                  headers={"X-Annotate-Token": tokens["ana"]}).status_code == 403
    assert c.post("/annotate/api/labels", json=body, headers={**ok, "Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert c.post("/annotate/api/labels", content="sample_id=s1", headers={
        **ok, "Content-Type": "application/x-www-form-urlencoded"}).status_code == 415
    assert c.post("/annotate/api/labels", json={**body, "value": 9}, headers=ok).status_code == 400
    remote = _client(store, host="10.1.2.3")
    assert remote.post("/annotate/api/labels", json=body, headers=ok).status_code == 403
    mine = {x.sample_id: x.value for x in T.labels(store, task_id, "ana")}
    assert mine == {"s1": "4"}


def test_reliability_card_in_show_and_report(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    url = f"sqlite:///{tmp_path / 'j.db'}"
    # one more sample whose reply the judge server garbles: a judge failure, not a score
    garbled = [*samples(), {"id": "g", "question": "Where?", "contexts": ["Lisbon."],
                            "answer": "GARBLE Lisbon."}]
    res = ragmeter.evaluate(garbled, metrics=["faithfulness"], db=url, name="judged",
                            options=judge_options(server))
    store = Store(url)
    vals = {sid: sc.value for sid, sc in store.score_table(res.run_id)["faithfulness"].items()}
    assert vals["s0"] == 1.0 and vals["s1"] == 0.0
    task_id, _ = T.create_task(store, "judged", raters=["ana", "bruno"], scales=T.parse_scales("faithfulness"))
    task = T.get_task(store, task_id)
    for i in range(10):
        good = i % 2 == 0
        T.save_label(store, task, "ana", f"s{i}", "faithfulness", 5 if good else 1)
        T.save_label(store, task, "bruno", f"s{i}", "faithfulness", (5 if i != 4 else 4) if good else (1 if i != 3 else 2))
    from ragmeter.human.reliability import reliability_card

    card = reliability_card(store, res.run_id, "faithfulness")
    h = card["human"]
    assert h["n_items"] == 10 and h["spearman"] > 0.8 and h["mae"] < 0.1
    # majority ties go to the lower value: s3 (1 vs 2) -> 1, s4 (5 vs 4) -> 4
    m = h["confusion"]["matrix"]
    assert m[0][0] == 5 and m[4][4] == 4 and m[4][3] == 1
    assert "about as well as humans agree" in h["reading"] or "better than humans" in h["reading"]
    assert card["failures"] == {"n": 1, "of": 11, "share": pytest.approx(1 / 11)}
    out = runner.invoke(app, ["show", "judged", "--db", url])
    assert out.exit_code == 0, out.output
    assert "judge reliability: faithfulness" in out.output and "Spearman" in out.output
    from ragmeter.apps.report import write_report

    html = write_report(store, [res.run_id], tmp_path / "r.html").read_text()
    assert "Judge reliability" in html and "humans agree" in html
    # self-consistency over a repeated run (same judge): identical verdicts here
    # a repeat draw at temperature > 0 is not served from the cache
    before = server.n_requests
    rep = ragmeter.evaluate(samples(), metrics=["faithfulness"], db=url, name="judged-2",
                            options=judge_options(server, judge_draw=1, judge_temperature=0.7))
    assert server.n_requests > before
    out = runner.invoke(app, ["reliability", "judged", "--repeats", rep.run_id, "--db", url, "--json"])
    assert out.exit_code == 0, out.output
    sc = json.loads(out.output)["faithfulness"]["self_consistency"]
    assert sc["identical_share"] == 1.0 and sc["alpha_interval"] == pytest.approx(1.0)
    # a second judge model; remembered for show
    other = ragmeter.evaluate(samples(), metrics=["faithfulness"], db=url, name="other-judge",
                              options=judge_options(server, judge="openai:other-model"))
    out = runner.invoke(app, ["reliability", "judged", "--other-judge", other.run_id, "--db", url])
    assert out.exit_code == 0 and "second judge model: alpha 1.00 on 10 items" in out.output
    out = runner.invoke(app, ["show", "judged", "--db", url])
    assert "self-consistency over 2 runs" in out.output and "second judge model" in out.output
    # the dashboard's run page shows the card too
    from fastapi.testclient import TestClient

    from ragmeter.apps.server import create_app

    page = TestClient(create_app(store), base_url="http://127.0.0.1").get(f"/runs/{res.run_id}").text
    assert "Judge reliability" in page and "Spearman rho" in page
    # a run without judge metrics or labels has no card
    plain = ragmeter.evaluate(samples(), metrics=["token_f1"], db=url, name="plain")
    assert "judge reliability" not in runner.invoke(app, ["show", plain.run_id, "--db", url]).output
    out = runner.invoke(app, ["reliability", plain.run_id, "--db", url])
    assert out.exit_code == 2 and "no judge metric" in out.output


def test_compare_on_human_scores(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    ids = [ragmeter.evaluate(samples(), metrics=["token_f1"], db=url, name=n).run_id for n in ("A", "B")]
    store = Store(url)
    for rid, shift in zip(ids, (0, -1), strict=True):
        task_id, _ = T.create_task(store, rid, raters=["ana", "bruno"], scales=T.parse_scales("overall"))
        task = T.get_task(store, task_id)
        for i in range(10):
            for rater, vals in (("ana", ANA), ("bruno", BRUNO)):
                T.save_label(store, task, rater, f"s{i}", "overall", max(1, vals[i] + shift))
        assert runner.invoke(app, ["annotate", "apply", task_id, "--db", url]).exit_code == 0
    out = runner.invoke(app, ["compare", "A", "B", "--metric", "human_overall", "--json", "--db", url])
    assert out.exit_code == 0, out.output
    (cmp,) = json.loads(out.output)["comparisons"]
    # B's labels are one point lower (floored at 1) on 9 of 10 items
    assert cmp["metric"] == "human_overall" and cmp["n"] == 10 and cmp["winner"] == "a"
    assert (cmp["wins"], cmp["ties"], cmp["losses"]) == (0, 1, 9)


# ---- the page in a real browser ------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_two_raters_label_through_the_page(browser, store):
    from dashboard_server import serving

    task_id, tokens = T.create_task(store, "base", raters=["ana", "bruno"],
                                    scales=T.parse_scales("correctness"), n=10)
    with serving(store) as base:
        for rater, values in (("ana", ANA), ("bruno", BRUNO)):
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(f"{base}/annotate#{tokens[rater]}")
            page.wait_for_selector("body[data-ready='1']")
            assert page.locator("#who").inner_text().startswith(rater)
            seen = []
            for k in range(10):
                page.wait_for_function(f"document.getElementById('position').textContent.startsWith('item {k + 1} ')")
                sid = page.locator("#item").get_attribute("data-sample-id")
                seen.append(sid)
                if rater == "ana" and k == 5:
                    # resumable: leave and come back; the page reopens at the first unlabelled item
                    page.wait_for_function("document.getElementById('progress').textContent === '5 / 10'")
                    page.reload()
                    page.wait_for_selector("body[data-ready='1']")
                    assert page.locator("#item").get_attribute("data-sample-id") == sid
                page.keyboard.press(str(values[int(sid[1:])]))
            page.wait_for_function("document.getElementById('progress').textContent === '10 / 10'")
            assert not page.locator("#done").is_hidden() and not errors
            # no metric value and nobody else's label on the page
            assert "token_f1" not in page.content()
            page.close()
            assert sorted(seen) == sorted(f"s{i}" for i in range(10))
    labs = T.labels(store, task_id)
    assert len(labs) == 20 and {x.source for x in labs} == {"web"}
    a = {x.sample_id: x.value_num for x in labs if x.rater == "ana"}
    b = {x.sample_id: x.value_num for x in labs if x.rater == "bruno"}
    ids = sorted(a)
    # by hand: they agree on 8 of 10 items (p_o = 0.8); ana uses each value twice (0.2 each),
    # bruno 1,2,3,4,5 with shares .1,.3,.2,.1,.3, so p_e = 0.2 and kappa = (0.8-0.2)/(1-0.2) = 0.75
    assert cohen_kappa([a[i] for i in ids], [b[i] for i in ids]) == pytest.approx(0.75)
    assert [a[f"s{i}"] for i in range(10)] == ANA and [b[f"s{i}"] for i in range(10)] == BRUNO
