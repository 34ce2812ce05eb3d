"""``ragmeter arena``: pairwise verdicts in both orders between stored runs, against the scripted
judge (tests/judge_server.py: it prefers the longer answer; a marker makes it pick whichever
answer is shown first). Bradley-Terry strengths are compared with ``choix``'s maximum-likelihood
estimate on the same comparisons."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_runner import run_main
from judge_server import Forced, server_fixtures
from ragmeter.analysis.arena import PairOutcomes, bradley_terry, bt_stats, ml_exists, pair_stats, wins_matrix
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from references import require_reference

judge_server_module, server = server_fixtures()

#: answer lengths (in words) per system and item: long > mid > short on most items, with upsets
#: (item 0: mid beats long; item 1: short beats both; item 2: short beats mid) so that every system
#: wins and loses somewhere and the maximum-likelihood strengths exist
LENGTHS = {"short": [10 + i for i in range(12)], "mid": [20 + i for i in range(12)], "long": [30 + i for i in range(12)]}
LENGTHS["mid"][0] = 50
LENGTHS["short"][1] = 60
LENGTHS["mid"][2], LENGTHS["short"][2] = 22, 23
FIRST = "PICKFIRST"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")


def _rows(system, marker="", extra=0):
    rows = [{"id": f"q{i}", "question": f"What do we know about topic {i}? {marker}".strip(),
             "answer": " ".join(["word"] * n), "reference": "word"} for i, n in enumerate(LENGTHS[system])]
    rows += [{"id": f"only-{system}-{k}", "question": "?", "answer": "x", "reference": "x"} for k in range(extra)]
    return rows


def _store_runs(db, marker="", extra=None):
    for system in LENGTHS:
        evaluate(_rows(system, marker, (extra or {}).get(system, 0)), ["token_f1"], db=db, name=system)


def _judge(server):
    return ["--judge", "openai:test-model", "--judge-base-url", f"{server.url}/v1",
            "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY", "--option", "judge_backoff_base=0.01",
            "--option", "judge_backoff_max=0.02"]


def _arena(db, server, *args):
    code, out, err = run_main("arena", *args, *_judge(server), "--db", db, "--no-progress")
    return code, out, err


def _choix_strengths(systems, pairs):
    """choix's ML estimate on the same comparisons: a decisive item as two wins, a tie as one win
    each way (the same likelihood up to a factor 2, so the same maximum)."""
    choix = require_reference("choix")
    idx = {s: i for i, s in enumerate(systems)}
    data = []
    for p in pairs:
        i, j = idx[p["a"]], idx[p["b"]]
        for o in p["outcomes"]:
            data += {"a": [(i, j)] * 2, "b": [(j, i)] * 2, "tie": [(i, j), (j, i)]}[o]
    theta = choix.ilsr_pairwise(len(systems), data, alpha=0.0, max_iter=100_000, tol=1e-13)
    return theta - theta.mean()


@pytest.mark.contract
def test_longer_answer_judge_ranks_by_length_and_strengths_equal_choix(server, db_url):
    _store_runs(db_url, extra={"long": 2, "short": 1})
    code, out, err = _arena(db_url, server, "short", "mid", "long", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["n_items"] == 12 and rec["dropped"] == {"short": 1, "mid": 0, "long": 2}
    bt = rec["bradley_terry"]
    assert bt["maximum_likelihood"] is True
    assert rec["ranking"] == bt["ranking"] == ["long", "mid", "short"]  # by mean length
    # the per-item outcomes the strengths were fitted on, read back from the stored pair samples
    store = open_store(db_url)
    table = store.score_table(rec["run_id"])
    pairs = []
    for p in rec["pairs"]:
        outcomes = [table["pairwise"][f"q{i}::{p['a']} vs {p['b']}"].details["outcome"] for i in range(12)]
        longer = ["a" if LENGTHS[p["a"]][i] > LENGTHS[p["b"]][i] else "b" for i in range(12)]
        assert outcomes == longer  # the longer answer wins in both orders: no tie
        assert p["ties"] == 0 and p["wins"] == longer.count("a") and p["n_judged"] == 12
        assert p["position_bias"]["rate"] == 0.0
        pairs.append({**p, "outcomes": outcomes})
    ours = {r["system"]: r["strength"] for r in bt["strengths"]}
    want = _choix_strengths(["short", "mid", "long"], pairs)
    assert np.allclose([ours["short"], ours["mid"], ours["long"]], want, atol=1e-6, rtol=0)
    for r in bt["strengths"]:  # bootstrap intervals over items, around the estimate
        assert r["ci_low"] < r["strength"] < r["ci_high"]
    assert bt["n_bootstrap"] == 1000 and rec["position_bias"]["rate"] == 0.0
    short_mid = rec["pairs"][0]
    assert (short_mid["a"], short_mid["b"]) == ("short", "mid")
    assert short_mid["win_rate"]["value"] == pytest.approx(2 / 12)
    assert 0 < short_mid["win_rate"]["ci_low"] < 2 / 12 < short_mid["win_rate"]["ci_high"] < 1
    # two orders per item and pair, each request a verdict request (no tie invented)
    assert server.n_requests == 2 * 12 * 3


def test_first_position_judge_gives_position_bias_1_and_every_item_a_tie(server, db_url):
    _store_runs(db_url, marker=FIRST)
    server.by_marker[FIRST] = Forced(text=json.dumps({"reason": "the first answer reads better", "winner": "1"}))
    code, out, err = _arena(db_url, server, "short", "mid", "long", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["position_bias"]["rate"] == 1.0 and rec["position_bias"]["first"] == 36
    for p in rec["pairs"]:
        assert (p["wins"], p["ties"], p["losses"], p["n_judged"]) == (0, 12, 0, 12)
        assert p["win_rate"]["value"] == 0.5 and p["position_bias"]["rate"] == 1.0
        assert p["position_bias"]["ci_low"] > 0.7
    assert {r["strength"] for r in rec["bradley_terry"]["strengths"]} == {0.0}
    code, out, _ = run_main("show", rec["run_id"], "--json", "--db", db_url)
    shown = json.loads(out)
    assert shown["arena"]["position_bias"]["rate"] == 1.0
    assert "position bias: 1.00" in shown["sections"]["arena"]
    assert "arena" in open_store(db_url).get_run(rec["run_id"]).tags


def test_dry_run_gives_calls_and_cost_and_sends_nothing(server, db_url, monkeypatch):
    _store_runs(db_url)
    monkeypatch.delenv("RAGMETER_TEST_JUDGE_KEY")  # no key is needed to plan
    before = open_store(db_url).list_runs()
    code, out, err = _arena(db_url, server, "short", "mid", "long", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["planned_calls"] == 2 * 12 * 3 and plan["est_input_tokens"] > 0
    assert plan["arena"]["n_items"] == 12 and plan["arena"]["pairs"] == [["short", "mid"], ["short", "long"],
                                                                           ["mid", "long"]]
    assert server.n_requests == 0 and server.pings == []
    assert len(open_store(db_url).list_runs()) == len(before)
    code, out, _ = _arena(db_url, server, "short", "mid", "--dry-run", "--metric", "deepeval:arena_g_eval")
    assert code == 0 and "25 calls" in out and "dry run" in out  # the steps call + 2 x 12
    assert server.n_requests == 0


def test_a_failed_verdict_is_not_judged_never_a_tie(server, db_url):
    for system in ("short", "mid"):
        rows = _rows(system)
        rows[3]["answer"] = "GARBLE " + rows[3]["answer"]  # the scripted judge answers malformed JSON
        evaluate(rows, ["token_f1"], db=db_url, name=system)
    code, out, err = _arena(db_url, server, "short", "mid", "--json", "--option", "judge_parse_retries=0")
    assert code == 0, (out, err)  # finished: one pair of twelve has no value
    rec = json.loads(out)
    p = rec["pairs"][0]
    assert p["n_judged"] == 11 and p["n_not_judged"] == 1 and p["ties"] == 0
    (reason, n), = p["not_judged_reasons"].items()
    assert n == 1 and reason.startswith("not judged: judge failure") and "invalid" in reason
    assert rec["bradley_terry"] is None and rec["ranking"] == ["mid", "short"]


def test_prompt_fixed_part_first_and_a_repeated_arena_is_served_from_the_cache(server, db_url):
    _store_runs(db_url)
    code, out, err = _arena(db_url, server, "short", "mid", "--criteria", "Longer is better.", "--json")
    assert code == 0, err
    bodies = [r["body"] for r in server.requests]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(bodies) == 24 and len(systems) == 1  # one fixed prefix: instructions, criteria, reply form
    (system,) = systems
    assert "Longer is better." in system and '"winner": "1" | "2" | "tie"' in system
    for b in bodies:  # the item last: question, answer 1, answer 2
        user = b["messages"][1]["content"]
        assert user.index("QUESTION:") < user.index("ANSWER 1:") < user.index("ANSWER 2:")
    shown: dict[str, list[tuple[str, str]]] = {}
    for b in bodies:
        q, answers = b["messages"][1]["content"].split("QUESTION:")[1].split("ANSWER 1:")
        one, two = answers.split("ANSWER 2:")
        shown.setdefault(q, []).append((one.strip(), two.strip()))
    assert len(shown) == 12 and all(sorted(v) == sorted([v[0], v[0][::-1]]) for v in shown.values())
    first = json.loads(out)
    code, out, err = _arena(db_url, server, "short", "mid", "--criteria", "Longer is better.", "--json")
    assert code == 0 and len(server.requests) == 24  # every verdict from the judge cache
    again = json.loads(out)
    assert again["pairs"] == first["pairs"] and again["judge"]["cached"] == 24 and again["run_id"] != first["run_id"]


def test_nothing_judged_is_incomplete_with_no_ranking(server, db_url):
    for system in ("short", "mid"):
        evaluate([{**r, "answer": "GARBLE " + r["answer"]} for r in _rows(system)], ["token_f1"], db=db_url, name=system)
    code, out, err = _arena(db_url, server, "short", "mid", "--json", "--option", "judge_parse_retries=0")
    assert code == 3 and "incomplete" in err
    rec = json.loads(out)
    assert rec["status"] == "incomplete" and rec["ranking"] == [] and rec["pairs"][0]["n_judged"] == 0
    assert rec["pairs"][0]["win_rate"]["value"] is None and rec["position_bias"]["rate"] is None
    code, out, _ = run_main("show", rec["run_id"], "--db", db_url)
    assert code == 0 and "12 not judged" in out


def test_deepeval_arena_g_eval_through_the_command(server, db_url):
    _store_runs(db_url)
    code, out, err = _arena(db_url, server, "short", "long", "--metric", "deepeval:arena_g_eval",
                            "--criteria", "The more complete answer wins.", "--json")
    assert code == 0, err
    rec = json.loads(out)
    p = rec["pairs"][0]
    assert rec["metric"] == "deepeval:arena_g_eval" and (p["wins"], p["losses"]) == (1, 11)
    assert rec["criteria"] == "The more complete answer wins."
    detail = open_store(db_url).score_table(rec["run_id"])["deepeval:arena_g_eval"]["q0::short vs long"].details
    assert detail["verdicts"][0]["reason"].startswith("short has")  # $Alice$ -> the system shown first


def test_report_and_dashboard_escape_the_arena(server, db_url, tmp_path):
    from ragmeter.apps.report.render import write_report

    for system, name in (("short", "<script>alert(1)</script>"), ("long", "long")):
        evaluate(_rows(system), ["token_f1"], db=db_url, name=name)
    code, out, err = _arena(db_url, server, "<script>alert(1)</script>", "long", "--criteria",
                            "<img src=x onerror=alert(2)>", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    html = write_report(open_store(db_url), [run_id], tmp_path / "r.html").read_text()
    assert "Arena" in html and "&lt;script&gt;alert(1)&lt;/script&gt; vs long" in html
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    from fastapi.testclient import TestClient

    from ragmeter.apps.server.app import create_app

    page = TestClient(create_app(db_url), base_url="http://127.0.0.1").get(f"/runs/{run_id}").text
    assert "Bradley-Terry" not in page and "win rate of A" in page  # two systems: no strengths
    assert "<script>alert(1)" not in page and "&lt;img src=x" in page


@pytest.mark.parametrize("args, says", [
    (["short"], "two runs or more"),
    (["short", "short"], "given twice"),
    (["short", "nope"], "no run 'nope'"),
    (["short", "mid", "--metric", "faithfulness"], "not a pairwise metric"),
    (["short", "mid", "--criteria", " "], "criteria"),
    (["short", "mid", "--level", "2"], "level"),
    (["short", "other"], "share no sample id"),
])
def test_bad_input_exits_2(server, db_url, args, says):
    _store_runs(db_url)
    evaluate([{"id": "z", "question": "?", "answer": "a"}], ["token_f1"], db=db_url, name="other")
    code, out, err = _arena(db_url, server, *args)
    assert code == 2 and says in err and "Traceback" not in err, (code, out, err)
    assert server.n_requests == 0


def test_no_judge_is_a_usage_error(db_url):
    _store_runs(db_url)
    code, _, err = run_main("arena", "short", "mid", "--db", db_url)
    assert code == 2 and "needs a judge: --judge" in err and len(err.strip().splitlines()) <= 2


# ---- the statistics alone -------------------------------------------------------------------------
@pytest.mark.contract
def test_bradley_terry_equals_choix_on_random_comparisons():
    choix = require_reference("choix")
    rng = np.random.default_rng(7)
    true = np.array([1.0, 0.3, 0.0, -0.4, -1.2])
    data = []
    for _ in range(400):
        i, j = rng.choice(5, 2, replace=False)
        data.append((i, j) if rng.random() < 1 / (1 + np.exp(true[j] - true[i])) else (j, i))
    w = wins_matrix(5, [(i, j, 1.0) for i, j in data])
    assert ml_exists(w)
    want = choix.ilsr_pairwise(5, data, alpha=0.0, max_iter=100_000, tol=1e-13)
    assert np.allclose(bradley_terry(w), want - want.mean(), atol=1e-8, rtol=0)
    # a system that never loses has no ML strength: the prior (choix's alpha) is used and said
    w2 = wins_matrix(3, [(0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0), (2, 1, 1.0)])
    assert not ml_exists(w2)
    penalised = choix.opt_pairwise(3, [(0, 1), (0, 2), (1, 2), (2, 1)], alpha=0.01, tol=1e-12)
    assert np.allclose(bradley_terry(w2, alpha=0.01), penalised - penalised.mean(), atol=1e-5)
    bt = bt_stats(["a", "b", "c"], [PairOutcomes("a", "b", ["a"], ["first"]), PairOutcomes("a", "c", ["a"], [None]),
                                    PairOutcomes("b", "c", ["tie"], [None])], n_bootstrap=50)
    assert bt["maximum_likelihood"] is False and bt["ranking"][0] == "a" and "penalised" in bt["method"]


def test_pair_statistics():
    p = PairOutcomes("x", "y", ["a", "a", "tie", "b", None, "tie"], ["first", None, "second", None, None, "first"],
                     [None, None, None, None, "not judged: judge failure — timeout", None])
    s = pair_stats(p)
    assert (s["wins"], s["ties"], s["losses"], s["n_judged"], s["n_not_judged"]) == (2, 2, 1, 5, 1)
    assert s["win_rate"]["value"] == pytest.approx(0.6) and s["win_rate"]["ci_method"] == "quasi_score"
    assert 0 <= s["win_rate"]["ci_low"] < 0.6 < s["win_rate"]["ci_high"] <= 1
    assert s["position_bias"]["rate"] == pytest.approx(3 / 5) and s["position_bias"]["first"] == 2
    assert s["not_judged_reasons"] == {"not judged: judge failure — timeout": 1}
