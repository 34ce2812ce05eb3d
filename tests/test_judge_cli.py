"""End to end: `ragmeter eval` with a judge on the local scripted server, `ragmeter show`, judge
failures counted as missing, fail-fast without a judge, --dry-run, --max-cost, cache reuse."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from judge_server import judge_options, server_fixtures
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store

runner = CliRunner()

judge_server_module, server = server_fixtures()


@pytest.fixture
def prices(tmp_path):
    p = tmp_path / "prices.json"
    p.write_text(json.dumps({"test-model": {"input": 0.5, "output": 1.5}}))
    return str(p)


def dataset(n=10, garble=()):
    rows = []
    for i in range(n):
        answer = f"Paris is the capital of France. Fact number {i} is invented."
        if i in garble:
            answer = "GARBLE " + answer
        rows.append({"id": f"q{i}", "question": "What is the capital of France?", "answer": answer,
                     "contexts": ["Paris is the capital of France.", f"Unrelated text {i}."],
                     "reference": "Paris is the capital of France."})
    return rows


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args], catch_exceptions=True)
    return result


def test_eval_example_with_local_judge_then_show_tokens_and_cost(server, db_url, prices):
    r = invoke("eval", "example", "--metrics", "faithfulness,context_recall", "--judge", "openai:test-model",
               "--judge-base-url", f"{server.url}/v1", "--option", f"judge_prices={prices}", "--db", db_url,
               "--no-progress", "--concurrency", "16")
    assert r.exit_code == 0, r.output
    assert "judge: judge openai:test-model" in r.output and "calls" in r.output
    store = open_store(db_url)
    run = store.list_runs()[0]
    assert run.status == "completed"
    n = run.n_samples
    summary = run.summary
    assert summary["faithfulness"]["n"] + summary["faithfulness"]["n_missing"] == n
    assert summary["faithfulness"]["n"] > 0 and summary["context_recall"]["n"] > 0
    rows = {r.sample_id: r for r in store.scores(run.id, "faithfulness")}
    scored = [r for r in rows.values() if r.value is not None]
    for row in scored[:20]:  # the judge's per-claim verdicts are stored with the score
        claims = row.details["claims"]
        assert claims and all({"claim", "verdict", "reason"} <= set(c) for c in claims)
        assert row.value == pytest.approx(row.details["supported"] / row.details["total"])
    from ragmeter.llm.accounting import run_judge_usage

    usage = run_judge_usage(store, run.id)
    assert usage["calls"] == run.extra["judge"]["calls"] > 0
    assert usage["cached"] == run.extra["judge"]["cached"]
    assert set(usage["per_metric"]) == {"faithfulness", "context_recall"}
    show = invoke("show", run.id, "--db", db_url)
    assert show.exit_code == 0, show.output
    assert "judge tokens and cost" in show.output
    assert f"tokens: {usage['input_tokens']:,} in, {usage['output_tokens']:,} out" in show.output
    assert f"cost ${usage['cost_usd']:.6f}" in show.output and usage["cost_usd"] > 0
    shown = json.loads(invoke("show", run.id, "--db", db_url, "--json").output)
    assert "judge tokens and cost" in shown["sections"]
    assert shown["judge"]["input_tokens"] == usage["input_tokens"]
    store.close()


def test_garbage_replies_are_missing_not_zero(server, db_url):
    garbled = {2, 5, 7}
    res = evaluate(dataset(10, garbled), ["faithfulness", "answer_relevancy"], db=db_url,
                   options=judge_options(server, judge_parse_retries=1))
    f = res.scores["faithfulness"]
    assert [i for i, s in enumerate(f) if s.value is None] == sorted(garbled)
    assert all(f[i].reason.startswith("judge failure: invalid reply — not valid JSON (") for i in garbled)
    assert all("not json" in f[i].details["judge_raw_reply"] for i in garbled)
    summ = res.summary["faithfulness"]
    assert (summ["n"], summ["n_missing"]) == (7, 3)
    assert summ["missing_reasons"] == {f[min(garbled)].reason: 3}  # one precise reason, three samples
    kept = [s.value for s in f if s.value is not None]
    assert summ["mean"] == pytest.approx(sum(kept) / 7) and 0 not in kept
    # one joint request per sample (faithfulness and answer_relevancy read its question and answer)
    assert res.extra["judge"]["failed"] == 3


def test_llm_metric_without_judge_fails_fast_with_how_to(server, db_url):
    path = db_url.removeprefix("sqlite:///").replace("ragmeter.db", "data.jsonl")
    with open(path, "w") as fh:
        for row in dataset(3):
            fh.write(json.dumps(row) + "\n")
    r = invoke("eval", path, "--metrics", "faithfulness,answer_relevancy", "--db", db_url, "--no-progress")
    assert r.exit_code != 0
    msg = str(r.exception)
    assert isinstance(r.exception, ConfigError)
    assert "faithfulness: it needs an LLM judge" in msg and "--judge openai:gpt-4o-mini" in msg
    assert "--judge-base-url" in msg and "--judge-api-key-env" in msg
    assert server.n_requests == 0
    store = open_store(db_url)
    assert all(not store.scores(run.id) for run in store.list_runs())  # no work was done
    store.close()


def test_dry_run_prints_calls_and_cost_and_calls_nothing(server, db_url, prices, tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in dataset(8)))
    args = ["eval", path, "--metrics", "faithfulness,context_recall,hallucination,rouge1_fmeasure",
            "--judge", "openai:test-model", "--judge-base-url", f"{server.url}/v1",
            "--option", f"judge_prices={prices}", "--db", db_url, "--dry-run"]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    # per sample one joint request: faithfulness (hallucination reads its verdict) with context_recall
    assert "dry run" in r.output and "8 calls would be made" in r.output
    assert "estimated cost: $" in r.output and "estimated tokens:" in r.output
    assert server.n_requests == 0
    assert json.loads(invoke("runs", "--db", db_url, "--json").output) == []  # nothing stored
    plan = json.loads(invoke(*args, "--json").output)
    assert plan["planned_calls"] == 8 and plan["per_metric"]["faithfulness"]["calls"] == 8
    assert plan["per_metric"]["context_recall"]["joint_calls"] == 8
    assert plan["est_cost_usd"] == pytest.approx(
        (plan["est_input_tokens"] * 0.5 + plan["est_output_tokens"] * 1.5) / 1e6, rel=1e-6)
    # after a real run the same plan costs nothing: every verdict is cached
    assert invoke(*args[:-1], "--no-progress").exit_code == 0
    again = json.loads(invoke(*args, "--json").output)
    assert again["planned_calls"] == 0 and again["cached"] == 24


def test_max_cost_says_what_was_left_unscored(server, db_url, prices, tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in dataset(12)))
    r = invoke("eval", path, "--metrics", "faithfulness", "--judge", "openai:test-model",
               "--judge-base-url", f"{server.url}/v1", "--option", f"judge_prices={prices}",
               "--max-cost", "0.0012", "--db", db_url, "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    judge = out["judge"]
    f = out["metrics"]["faithfulness"]
    left = f["missing_reasons"].get("budget exhausted (max_cost=0.0012)", 0)
    assert left > 0 and f["n"] > 0 and judge["left_unscored"] == {"faithfulness": left}
    assert judge["cost_usd"] <= 0.0012 and server.n_requests == f["n"]
    r2 = invoke("eval", path, "--metrics", "faithfulness", "--judge", "openai:test-model",
                "--judge-base-url", f"{server.url}/v1", "--option", f"judge_prices={prices}",
                "--max-cost", "0.0001", "--db", db_url, "--no-progress")
    assert "left unscored" in r2.output.replace("\n", " ")


def test_one_run_shares_calls_runs_metrics_concurrently_and_reruns_free(server, db_url):
    server.delay = 0.3
    data = dataset(5)
    metrics = ["faithfulness", "hallucination", "bias", "toxicity", "answer_relevancy"]
    res = evaluate(data, metrics, db=db_url, options=judge_options(server, judge_concurrency=32))
    # per sample: one joint request (claims for 2 metrics with statements), opinions (2 metrics)
    assert server.n_requests == 2 * 5
    assert server.max_inflight > 5  # the metrics' calls were in flight together, not metric by metric
    assert res.extra["judge"]["calls"] == 10 and res.extra["judge"]["cached"] == 5
    for i in range(5):
        assert res.scores["faithfulness"][i].value + res.scores["hallucination"][i].value == pytest.approx(1)
    server.delay = 0.0
    res2 = evaluate(data, metrics, db=db_url, options=judge_options(server))
    assert server.n_requests == 10 and res2.extra["judge"]["calls"] == 0
    assert all(res2.summary[m]["mean"] == res.summary[m]["mean"] for m in metrics)


def test_rubric_dimensions_share_one_call_per_sample(server, db_url):
    res = evaluate(dataset(4), ["rubric", "rubric@accuracy", "rubric@actionability"], db=db_url,
                   options=judge_options(server))
    assert server.n_requests == 4
    assert set(res.summary) == {"rubric", "rubric@accuracy", "rubric@actionability"}
    assert res.summary["rubric@accuracy"]["mean"] == pytest.approx(0.8)


def test_keys_are_never_stored(server, db_url, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_SECRET", "sk-very-secret-1234")
    evaluate(dataset(2), ["faithfulness"], db=db_url,
             options={**judge_options(server), "judge_api_key_env": "MY_JUDGE_SECRET"})
    raw = b""
    for suffix in ("", "-wal"):  # the database and its write-ahead log
        try:
            with open(db_url.removeprefix("sqlite:///") + suffix, "rb") as fh:
                raw += fh.read()
        except FileNotFoundError:
            pass
    assert b"sk-very-secret-1234" not in raw and b"MY_JUDGE_SECRET" in raw


def test_judge_prices_command(tmp_path):
    r = invoke("judge-prices", "--model", "openai:gpt-4o-mini-2024-07-18")
    assert r.exit_code == 0 and "$0.15 input, $0.6 output per 1M tokens" in r.output
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"openai:llama3.1": {"input": 0, "output": 0}}))
    listed = json.loads(invoke("judge-prices", "--prices", f, "--json").output)
    assert listed["openai:llama3.1"] == {"input": 0.0, "output": 0.0} and "gpt-4o" in listed
    assert "no price" in invoke("judge-prices", "--model", "ollama:mystery").output


def test_judge_prices_lists_genai_prices_and_its_tiers(tmp_path):
    listed = json.loads(invoke("judge-prices", "--json").output)
    assert listed["o1-mini"] == {"input": 1.1, "output": 4.4}
    assert listed["gemini-2.5-pro"]["tiers"] == {"input": [[200000, 2.5]], "output": [[200000, 15.0]]}
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"gpt-4o": {"input": 9, "output": 9}}))
    assert json.loads(invoke("judge-prices", "--prices", f, "--json").output)["gpt-4o"] == {"input": 9.0, "output": 9.0}
    r = invoke("judge-prices", "--model", "google:gemini-2.5-pro")
    assert "$1.25 input, $10 output per 1M tokens (input $2.5 above 200,000 input tokens" in " ".join(r.output.split())
    table = invoke("judge-prices").output
    assert "genai-prices" in table and "claude-haiku-4-5" in table
    assert json.loads(invoke("judge-prices", "--model", "ollama:mystery", "--json").output)["input"] is None
