"""Joint judge requests (ragmeter.metrics.judge.joint, ragmeter.llm.joint): faithfulness and
context_recall of a sample share one request carrying its contexts once; each metric gets exactly
the values and reasons the separate requests give against the same verdicts, online, with
``--batch`` and from the cache; a failed joint request gives both metrics its reason;
``judge_joint=false`` sends them apart; the ragas:* metrics keep their own requests."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from batch_server import BatchServer
from judge_server import Forced
from ragmeter.apps.cli import app
from ragmeter.store import open_store

runner = CliRunner()
N = 5


@pytest.fixture(scope="module")
def module_server():
    srv = BatchServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(module_server, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    monkeypatch.setenv("RAGMETER_BATCH_POLL", "0.05")
    module_server.reset()
    yield module_server
    module_server.reset()


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "data.jsonl"
    with p.open("w") as fh:
        for i in range(N):
            fh.write(json.dumps({"id": f"q{i}", "question": f"When does ferry {i} leave?",
                                 "answer": f"Ferry {i} leaves at nine. It docks at noon. It serves tea{' BAD' if i == 1 else ''}.",
                                 "reference": f"Ferry {i} leaves at nine. It has a blue hull.",
                                 "contexts": [f"Ferry {i} leaves at nine and docks at noon.", "Tickets cost 5 EUR."]}) + "\n")
    (tmp_path / "prices.json").write_text(json.dumps({"test-model": {"input": 0.5, "output": 1.5}}))
    return p


def _eval(server, data, db, *extra, judges=("openai:test-model",)):
    args = ["eval", str(data), "--db", str(db), "--no-progress", "--json", "--judge-base-url", f"{server.url}/v1",
            "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY", "--option", f"judge_prices={data.parent / 'prices.json'}"]
    for j in judges:
        args += ["--judge", j]
    r = runner.invoke(app, [*args, *extra], catch_exceptions=False)
    assert r.exit_code in (0, 3), r.output
    return json.loads(r.stdout)


def _scores(db, run_id):
    store = open_store(f"sqlite:///{db}")
    try:
        return {(k, sid): (s.value, s.reason, s.details) for k, col in store.score_table(run_id).items()
                for sid, s in col.items()}
    finally:
        store.close()


def _bodies(server):
    return [r["body"] for r in server.requests]


def test_three_metrics_one_request_per_sample_with_the_values_of_separate_requests(server, data, tmp_path):
    metrics = "faithfulness,answer_relevancy,context_recall,hallucination"
    apart = _eval(server, data, tmp_path / "a.db", "-m", metrics, "--option", "judge_joint=false")
    assert server.n_requests == 3 * N  # hallucination reads faithfulness' verdict
    server.reset()
    joint = _eval(server, data, tmp_path / "j.db", "-m", metrics)
    assert server.n_requests == N
    assert _scores(tmp_path / "a.db", apart["run_id"]) == _scores(tmp_path / "j.db", joint["run_id"])
    user = _bodies(server)[0]["messages"][1]["content"]
    assert user.count("QUESTION:") == user.count("ANSWER:") == 1
    assert _bodies(server)[0]["response_format"]["json_schema"]["schema"]["required"] == [
        "faithfulness", "context_recall", "answer_relevancy"]


def test_one_request_per_sample_with_the_values_and_reasons_of_separate_requests(server, data, tmp_path):
    apart = _eval(server, data, tmp_path / "a.db", "-m", "faithfulness,context_recall", "--option", "judge_joint=false")
    assert server.n_requests == 2 * N
    server.reset()
    joint = _eval(server, data, tmp_path / "j.db", "-m", "faithfulness,context_recall")
    assert server.n_requests == N  # one request per sample instead of two
    sa, sj = _scores(tmp_path / "a.db", apart["run_id"]), _scores(tmp_path / "j.db", joint["run_id"])
    assert sa == sj and len(sj) == 2 * N
    assert any(v is not None and 0 < v < 1 for v, _, _ in sj.values())  # not trivially equal
    # the joint request: each metric's instructions as a task, the contexts once, the union schema
    body = _bodies(server)[0]
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert '(its reply goes under the key "faithfulness")' in system and '(its reply goes under the key "context_recall")' in system
    assert user.count("Tickets cost 5 EUR.") == 1 and "ANSWER:" in user and "REFERENCE:" in user
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["faithfulness", "context_recall"]
    assert schema["properties"]["faithfulness"]["required"] == ["claims"]
    assert schema["properties"]["context_recall"]["required"] == ["statements"]
    # the cost: the run's total is the joint calls'; each metric gets half of it
    usage = joint["judge"]
    assert usage["calls"] == N
    store = open_store(f"sqlite:///{tmp_path / 'j.db'}")
    from ragmeter.llm.accounting import run_judge_usage

    per = run_judge_usage(store, joint["run_id"])["per_metric"]
    store.close()
    assert set(per) == {"faithfulness", "context_recall"}
    assert per["faithfulness"]["joint_calls"] == N and per["faithfulness"]["calls"] == N
    assert per["faithfulness"]["cost_usd"] + per["context_recall"]["cost_usd"] == pytest.approx(usage["cost_usd"], abs=2e-6)
    assert per["faithfulness"]["cost_usd"] == pytest.approx(per["context_recall"]["cost_usd"])


def test_cached_rerun_and_a_later_run_of_one_metric_send_nothing(server, data, tmp_path):
    db = tmp_path / "c.db"
    _eval(server, data, db, "-m", "faithfulness,context_recall")
    assert server.n_requests == N
    server.reset()
    again = _eval(server, data, db, "-m", "faithfulness,context_recall")
    alone = _eval(server, data, db, "-m", "context_recall")
    apart = _eval(server, data, db, "-m", "faithfulness,hallucination", "--option", "judge_joint=false")
    assert server.n_requests == 0 and not server.pings  # no call, not even a pre-flight
    assert again["judge"]["calls"] == alone["judge"]["calls"] == apart["judge"]["calls"] == 0
    first = _scores(db, again["run_id"])
    assert {k: v for k, v in _scores(db, alone["run_id"]).items()} == {
        k: v for k, v in first.items() if k[0] == "context_recall"}


def test_batch_sends_the_joint_bodies_and_stores_the_online_values(server, data, tmp_path):
    online = _eval(server, data, tmp_path / "o.db", "-m", "faithfulness,context_recall")
    server.reset()
    batched = _eval(server, data, tmp_path / "b.db", "-m", "faithfulness,context_recall", "--batch")
    assert len(server.batches) == 1 and len(server.batched) == N and server.n_requests == N
    assert _scores(tmp_path / "o.db", online["run_id"]) == _scores(tmp_path / "b.db", batched["run_id"])
    assert batched["judge"]["cost_usd"] == pytest.approx(online["judge"]["cost_usd"] / 2, abs=1e-6)
    server.reset()
    _eval(server, data, tmp_path / "b.db", "-m", "faithfulness,context_recall", "--batch")
    assert (len(server.files), len(server.batches), server.n_requests) == (0, 0, 0)


def test_a_failed_joint_request_gives_each_metric_its_reason(server, data, tmp_path):
    server.by_marker["BAD"] = Forced(text="this is not JSON")
    res = _eval(server, data, tmp_path / "f.db", "-m", "faithfulness,context_recall")
    scores = _scores(tmp_path / "f.db", res["run_id"])
    for metric in ("faithfulness", "context_recall"):
        value, reason, details = scores[(metric, "q1")]
        assert value is None and reason.startswith("judge failure: invalid reply"), reason
        assert details["judge_raw_reply"] == "this is not JSON"
        assert scores[(metric, "q0")][0] is not None


def test_dry_run_counts_the_joint_calls(server, data, tmp_path):
    plan = _eval(server, data, tmp_path / "d.db", "-m", "faithfulness,context_recall", "--dry-run")
    apart = _eval(server, data, tmp_path / "d.db", "-m", "faithfulness,context_recall", "--dry-run",
                  "--option", "judge_joint=false")
    assert plan["planned_calls"] == N and apart["planned_calls"] == 2 * N
    assert plan["est_input_tokens"] < apart["est_input_tokens"]
    assert plan["per_metric"]["context_recall"]["joint_calls"] == N
    assert server.n_requests == 0


def test_namespaced_metrics_keep_their_own_requests(server, data, tmp_path):
    _eval(server, data, tmp_path / "n.db", "-m", "ragas:faithfulness,ragas:context_recall,deepeval:contextual_recall")
    schemas = [b["response_format"]["json_schema"]["name"] for b in _bodies(server)]
    assert schemas and not any(s.startswith("Joint") for s in schemas)


def test_each_judge_of_a_panel_sends_its_own_joint_request(server, data, tmp_path):
    res = _eval(server, data, tmp_path / "p.db", "-m", "faithfulness,context_recall",
                judges=("openai:test-model", "openai:other-model"))
    models = sorted(b["model"] for b in _bodies(server))
    assert models == ["other-model"] * N + ["test-model"] * N
    assert all(b["response_format"]["json_schema"]["name"].startswith("Joint") for b in _bodies(server))
    assert any(v is not None for v, _, _ in _scores(tmp_path / "p.db", res["run_id"]).values())
