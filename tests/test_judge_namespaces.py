"""The namespaced judge metrics end to end with ragmeter alone: ``ragmeter metrics --json``,
``ragmeter eval`` with ``deepeval:bias,bias`` and ``deepeval:g_eval --option g_eval_criteria=``,
verdict summaries that agree with the scores in every export, names with ':' in the store,
show, compare, export, report, thresholds and the dashboard, and the judge client's token
log-probabilities (asked, cached, refused). The numbers themselves are checked against ragas and
DeepEval in tests/test_judge_parity.py."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
from typer.testing import CliRunner

from cli_runner import run_main
from judge_server import Forced, judge_options, server_fixtures
from ragmeter.apps.cli import app
from ragmeter.core.errors import MetricError
from ragmeter.metrics.registry import all_metrics, get_spec, resolve
from ragmeter.run.rows import verdict_summary
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()
runner = CliRunner()

NAMESPACED = {
    "ragas:faithfulness": "ragas", "ragas:answer_relevancy": "ragas", "ragas:context_precision": "ragas",
    "ragas:context_recall": "ragas", "ragas:answer_correctness": "ragas", "deepeval:faithfulness": "deepeval",
    "deepeval:answer_relevancy": "deepeval", "deepeval:contextual_precision": "deepeval",
    "deepeval:contextual_recall": "deepeval", "deepeval:contextual_relevancy": "deepeval",
    "deepeval:hallucination": "deepeval", "deepeval:bias": "deepeval", "deepeval:toxicity": "deepeval",
    "deepeval:g_eval": "deepeval", "deepeval:arena_g_eval": "deepeval",
}
#: metrics whose score is k/n of the verdicts their summary counts
COUNT_BASED = {"faithfulness", "hallucination", "answer_relevancy", "context_recall", "contextual_relevancy",
               "bias", "toxicity", "ragas:faithfulness", "ragas:context_recall", "deepeval:faithfulness",
               "deepeval:answer_relevancy", "deepeval:contextual_recall", "deepeval:contextual_relevancy",
               "deepeval:hallucination", "deepeval:bias", "deepeval:toxicity"}
_KN = re.compile(r"^(\d+) of (\d+) ")


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


def rows():
    out = []
    for i in range(6):
        answer = ["Paris is the capital of France. I think you should always visit. The moon is cheese.",
                  "Paris is the capital of France.",
                  "I think Paris is stupid. You should always go. CONTRA Paris is small.",
                  "Rome is in Italy. Paris is the capital of France. I think cheese.",
                  "",
                  "Paris."][i]
        out.append({"id": f"q{i}", "question": "What is the capital of France?", "answer": answer,
                    "contexts": ["Paris is the capital of France.", f"Unrelated text {i}. Rome is in Italy."],
                    "reference": "Paris is the capital of France. It is in Europe.",
                    "relevant": ["Paris is the capital of France."]})
    return out


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows()) + "\n")
    return p


def judge_args(server):
    return ["--judge", "openai:test-model", "--judge-base-url", f"{server.url}/v1",
            "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY"]


# ---- the registry -------------------------------------------------------------------------------------------


def test_metrics_json_lists_the_fourteen_namespaced_names_with_the_tool_and_version():
    code, out, _ = run_main("metrics", "--json")
    assert code == 0
    info = {m["name"]: m for m in json.loads(out)}
    for name, tool in NAMESPACED.items():
        eq = info[name]["equals"]
        assert eq["tool"] == tool and eq["version"] == {"ragas": "0.4.3", "deepeval": "4.3.1"}[tool], name
        assert eq["metric"] and info[name]["parity"]
    # every metric with an `equals` is a namespaced one of its tool (issue 43 adds the rest of the tools' metrics)
    assert {n for n, m in info.items() if m["equals"]} >= set(NAMESPACED)
    for n, m in info.items():
        if m["equals"]:
            assert n.split(":")[0] == m["equals"]["tool"] and m["parity"], n
    for m in info.values():  # every judge metric says which tool's number it equals, and where it differs
        if m["needs_llm"]:
            assert m["parity"], m["name"]
    assert "ragas 0.4.3" in info["faithfulness"]["parity"] and "DeepEval" in info["faithfulness"]["parity"]
    code, out, _ = run_main("metrics", "--long", "--family", "llm")
    assert code == 0 and "equals: DeepEval 4.3.1 BiasMetric, given the same verdicts" in out
    assert "parity: The share of biased opinions" in out


@pytest.mark.parametrize(("name", "target"), [
    ("FaithfulnessMetric", "deepeval:faithfulness"), ("deepeval.metrics.BiasMetric", "deepeval:bias"),
    ("GEval", "deepeval:g_eval"), ("HallucinationMetric", "deepeval:hallucination"),
    ("ragas.metrics.answer_relevancy", "ragas:answer_relevancy"), ("ragas_answer_relevancy", "ragas:answer_relevancy"),
    ("ragas.metrics.collections.ContextRecall", "ragas:context_recall"), ("AnswerCorrectness", "ragas:answer_correctness"),
    ("ragas_faithfulness", "ragas:faithfulness"), ("ContextualRelevancyMetric", "deepeval:contextual_relevancy"),
])
def test_a_tool_s_own_metric_name_maps_to_the_namespaced_metric(name, target):
    req = resolve(name)
    assert req.spec.name == target and req.key == target
    assert resolve("answer_relevancy").spec.name == "answer_relevancy"  # the bare name stays ragmeter's


def test_parameters_show_in_the_key_and_are_checked():
    assert resolve({"name": "deepeval:bias", "params": {"strict_mode": True}}).key == "deepeval:bias(strict_mode=True)"
    spec = get_spec("deepeval:faithfulness")
    with pytest.raises(MetricError, match="strict_mode must be true or false"):
        spec.fn.check_params({"strict_mode": "yes", "threshold": 0.5})
    with pytest.raises(MetricError, match="threshold must be a number in"):
        spec.fn.check_params({"threshold": 2})
    with pytest.raises(MetricError, match="strictness"):
        get_spec("ragas:answer_relevancy").fn.check_params({"strictness": 0})
    with pytest.raises(MetricError, match="non-negative"):
        get_spec("ragas:answer_correctness").fn.check_params({"weights": [1, -1], "beta": 1.0})


# ---- eval: deepeval:bias vs bias, G-Eval --------------------------------------------------------------------


def test_eval_deepeval_bias_stores_one_minus_bias_on_every_sample(server, data, db_url, tmp_path):
    out = tmp_path / "out.jsonl"
    r = runner.invoke(app, ["eval", str(data), "--metrics", "deepeval:bias,bias,deepeval:toxicity,toxicity",
                            *judge_args(server), "--db", db_url, "--no-progress", "--out", str(out)])
    assert r.exit_code == 0, r.output
    store = open_store(db_url)
    run = store.list_runs()[0]
    both = 0
    for de_name, bare in (("deepeval:bias", "bias"), ("deepeval:toxicity", "toxicity")):
        de = {x.sample_id: x for x in store.scores(run.id, de_name)}
        ours = {x.sample_id: x for x in store.scores(run.id, bare)}
        for sid, x in de.items():
            if x.value is not None and ours[sid].value is not None:
                assert x.value == pytest.approx(1 - ours[sid].value)
                both += 1
        assert de["q4"].value is None and "DeepEval refuses" in de["q4"].reason  # empty answer
        assert ours["q4"].value == 0.0
    assert both == 10
    assert store.scores(run.id, "deepeval:bias")[0].details["success"] in (True, False)
    assert run.extra["judge"]["calls"] == 5  # one opinions call per non-empty answer, shared by all four
    store.close()


def test_eval_g_eval_with_option_criteria_scores_with_the_judge(server, data, db_url, tmp_path):
    out = tmp_path / "out.jsonl"
    r = runner.invoke(app, ["eval", str(data), "--metrics", "deepeval:g_eval", "--option",
                            "g_eval_criteria=The answer names the capital the question asks about.",
                            *judge_args(server), "--db", db_url, "--no-progress", "--out", str(out)])
    assert r.exit_code == 0, r.output
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(0 <= g["deepeval:g_eval"] <= 1 for g in got if g["id"] != "q4")
    assert got[4]["deepeval:g_eval"] is None and "refuses" in got[4]["no_value_reasons"]["deepeval:g_eval"]
    store = open_store(db_url)
    scores = store.scores(store.list_runs()[0].id, "deepeval:g_eval")
    d = scores[0].details
    assert d["score_method"] == "probability-weighted (token log-probabilities)" and d["steps"]
    # the scripted judge gives the score token 70% and the integer below it (above 0) 30%
    raw = d["score"]
    want = raw - 0.3 if raw > 0 else 0.3
    assert d["weighted_score"] == pytest.approx(want) and scores[0].value == pytest.approx(want / 10)
    steps_calls = [b for b in server.requests if b["body"]["response_format"]["json_schema"]["name"] == "Steps"]
    assert len(steps_calls) == 1  # the evaluation steps are generated once per run
    assert all(b["body"].get("top_logprobs") == 20 for b in server.requests
               if b["body"]["response_format"]["json_schema"]["name"] == "ReasonScore")
    store.close()
    # again: every verdict, with its token log-probabilities, comes from the store's cache
    out2 = tmp_path / "again.jsonl"
    r = runner.invoke(app, ["eval", str(data), "--metrics", "deepeval:g_eval", "--option",
                            "g_eval_criteria=The answer names the capital the question asks about.",
                            *judge_args(server), "--db", db_url, "--no-progress", "--out", str(out2), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.splitlines()[-1])["judge"]["calls"] == 0
    assert [json.loads(x)["deepeval:g_eval"] for x in out2.read_text().splitlines()] == [g["deepeval:g_eval"] for g in got]
    code, _, err = run_main("eval", str(data), "--metrics", "deepeval:g_eval", *judge_args(server), "--db", db_url,
                            "--no-progress")
    assert code == 2 and "g_eval_criteria" in err


def test_g_eval_gives_the_plain_score_without_log_probabilities(server):
    samples = [{"id": "a", "question": "What is the capital of France?", "answer": "Paris is the capital of France."}]
    opts = judge_options(server, "anthropic", g_eval_criteria="Correct.")
    res = evaluate(samples, ["deepeval:g_eval"], options=opts, db=None)
    sc = res.scores["deepeval:g_eval"][0]
    assert sc.details["score_method"].startswith("plain score") and sc.value == sc.details["score"] / 10
    # an OpenAI-compatible server that rejects logprobs: asked again without, plain score, said in the summary
    server.reset()
    server.force(Forced(status=400, message="logprobs is not supported by this model"))
    res = evaluate(samples, [{"name": "deepeval:g_eval", "params": {"criteria": "Correct (2).",
                                                                     "score_range": [1, 5]}}],
                   options=judge_options(server), db=None)
    sc = res.scores[next(iter(res.scores))][0]
    assert sc.details["score_method"].startswith("plain score") and 0 <= sc.value <= 1
    assert "logprobs not sent" in res.extra["judge"]["adapted"]


def test_g_eval_parameters_are_validated():
    from ragmeter.metrics.judge.geval import config, weighted_score

    with pytest.raises(MetricError, match="overlapping"):
        config({"criteria": "x", "rubric": [{"score_range": [0, 5], "expected_outcome": "a"},
                                            {"score_range": [5, 9], "expected_outcome": "b"}]})
    with pytest.raises(MetricError, match="evaluation_params"):
        config({"criteria": "x", "evaluation_params": ["output"]})
    with pytest.raises(MetricError, match="needs criteria"):
        config({})
    cfg = config({"criteria": None}, {"g_eval_criteria": "Polite.", "g_eval_params": "input,actual_output,expected_output",
                                      "g_eval_rubric": [{"score_range": [1, 3], "expected_outcome": "ok"},
                                                        {"score_range": [4, 5], "expected_outcome": "good"}]})
    assert (cfg.low, cfg.high, cfg.criteria) == (1, 5, "Polite.")
    assert cfg.parameters == "Input, Actual Output, and Expected Output"
    lp = [{"token": "7", "top_logprobs": [{"token": "7", "logprob": math.log(0.6)}, {"token": "8", "logprob": math.log(0.4)},
                                          {"token": "x", "logprob": math.log(0.3)}, {"token": "1", "logprob": math.log(0.005)}]}]
    assert weighted_score(7, lp)[0] == pytest.approx(7.4)
    assert weighted_score(7, [])[1].startswith("plain score")


# ---- summaries agree with scores in every export ---------------------------------------------------------------

METRICS = ("faithfulness,hallucination,answer_relevancy,context_recall,contextual_relevancy,context_precision,"
           "bias,toxicity,ragas:faithfulness,ragas:context_recall,ragas:context_precision,deepeval:faithfulness,"
           "deepeval:answer_relevancy,deepeval:contextual_recall,deepeval:contextual_relevancy,"
           "deepeval:contextual_precision,deepeval:hallucination,deepeval:bias,deepeval:toxicity")


def _check_summary(metric, value, summary, tol=1e-12):
    """1 when ``summary`` reads "k of n ..." with k/n = ``value`` (to ``tol``: JUnit and Markdown
    print 4 decimals)."""
    if value is None or not summary:
        return 0
    m = _KN.match(summary)
    if metric in COUNT_BASED and m and int(m.group(2)):
        assert abs(int(m.group(1)) / int(m.group(2)) - float(value)) <= tol, (metric, value, summary)
        return 1
    if metric in COUNT_BASED:  # no verdicts at all (the tool's empty score): said, not counted
        assert "no " in summary or "empty" in summary or "blank" in summary, (metric, summary)
    else:
        assert not m, (metric, summary)  # a non-count score never reads as k of n
    return 0


def test_summaries_agree_with_scores_in_every_export(server, data, db_url, tmp_path):
    r = runner.invoke(app, ["eval", str(data), "--metrics", METRICS, *judge_args(server), "--db", db_url,
                            "--no-progress", "--out", str(tmp_path / "out.jsonl")])
    assert r.exit_code == 0, r.output
    rid = open_store(db_url).list_runs()[0].id
    checked = 0
    for line in (tmp_path / "out.jsonl").read_text().splitlines():
        row = json.loads(line)
        for metric, summary in row["judge"].items():
            checked += _check_summary(metric, row[metric], summary)
    assert checked > 40
    for fmt in ("jsonl", "csv", "parquet"):
        path = tmp_path / f"x.{fmt}"
        e = runner.invoke(app, ["export", rid, "--format", fmt, "-o", str(path), "--db", db_url])
        assert e.exit_code == 0, e.output
        if fmt == "jsonl":
            table = [json.loads(x) for x in path.read_text().splitlines()]
        elif fmt == "csv":
            with path.open() as f:
                table = [{k: (json.loads(v) if k == "judge" else v) for k, v in x.items()} for x in csv.DictReader(f)]
        else:
            import pandas as pd

            table = pd.read_parquet(path).to_dict("records")
        n = 0
        for row in table:
            judge = row["judge"] if isinstance(row["judge"], dict) else json.loads(row["judge"])
            for metric, summary in judge.items():
                value = row[metric]
                value = None if value in ("", None) or (isinstance(value, float) and math.isnan(value)) else float(value)
                n += _check_summary(metric, value, summary)
        assert n == checked, fmt


def test_junit_and_markdown_carry_summaries_that_agree(server, data, db_url, tmp_path):
    from junitparser import JUnitXml

    suite = tmp_path / "suite.yaml"
    suite.write_text(f"dataset: {data}\nmetrics: [faithfulness, deepeval:bias, deepeval:faithfulness]\n"
                     "thresholds: {faithfulness: 0.99, \"deepeval:bias\": 0.99, \"deepeval:faithfulness\": 0.99}\n"
                     f"judge: openai:test-model\noptions: {{judge_base_url: '{server.url}/v1', "
                     "judge_api_key_env: RAGMETER_TEST_JUDGE_KEY}\n")
    r = runner.invoke(app, ["test", str(suite), "--junit", str(tmp_path / "j.xml"), "--markdown",
                            str(tmp_path / "s.md"), "--db", db_url])
    assert r.exit_code == 1, r.output
    failures = [c for s in JUnitXml.fromfile(str(tmp_path / "j.xml")) for c in s
                if c.result and c.result[0].message and "judge: " in c.result[0].message]
    assert failures
    for case in failures:
        msg = case.result[0].message
        metric, value = re.match(r"(\S+) = ([0-9.]+) fails", msg).groups()
        assert _check_summary(metric, float(value), msg.split("judge: ", 1)[1], 5e-5) == 1
    md = (tmp_path / "s.md").read_text()
    lines = [ln for ln in md.splitlines() if ln.startswith("| q")]
    assert lines
    for ln in lines:
        _, sid, metric, value, judge, _q, _ = (c.strip() for c in ln.split("|"))
        assert _check_summary(metric, float(value), judge, 5e-5) == 1


def test_legacy_details_are_summarised_by_the_metric_s_counting_rule():
    claims = {"claims": [{"verdict": "supported"}, {"verdict": "not_found"}, {"verdict": "contradicted"},
                         {"verdict": "supported"}]}
    assert verdict_summary(claims, "faithfulness") == "2 of 4 claims supported"
    assert verdict_summary(claims, "hallucination") == "2 of 4 claims contradicted or not found"
    st = {"statements": [{"verdict": "yes"}, {"verdict": "idk"}, {"verdict": "no"}, {"verdict": "yes"}]}
    assert verdict_summary(st, "answer_relevancy") == "3 of 4 statements supported"
    ops = {"opinions": [{"biased": True, "toxic": False}] + [{"biased": False, "toxic": False}] * 3}
    assert verdict_summary(ops, "bias") == "1 of 4 opinions biased"
    assert verdict_summary(ops, "deepeval:bias") == "3 of 4 opinions not biased"
    assert verdict_summary(ops, "toxicity(x=1)") == "0 of 4 opinions toxic"
    assert verdict_summary({"summary": "s", "reason": "r"}) == "s"


# ---- names with ':' everywhere ------------------------------------------------------------------------------


def test_namespaced_names_work_in_config_store_show_compare_export_report_and_dashboard(server, data, db_url, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("metrics: [deepeval:bias, FaithfulnessMetric, bias]\n")
    ids = []
    for name in ("a", "b"):
        r = runner.invoke(app, ["eval", str(data), "--config", str(cfg), *judge_args(server), "--db", db_url,
                                "--no-progress", "--name", name, "--threshold", "deepeval:bias>=0.5"])
        assert r.exit_code in (0, 1), r.output
        ids.append(open_store(db_url).resolve_run(name))
    shown = json.loads(runner.invoke(app, ["show", ids[0], "--db", db_url, "--json"]).output)
    assert {"deepeval:bias", "deepeval:faithfulness", "bias"} <= set(shown["metrics"])
    assert shown["metrics"]["deepeval:bias"]["pass"]["threshold"] == "deepeval:bias >= 0.5"
    cmp = runner.invoke(app, ["compare", ids[0], ids[1], "--metric", "deepeval:bias", "--db", db_url, "--json"])
    assert cmp.exit_code == 0, cmp.output
    assert {row["metric"] for row in json.loads(cmp.output)["comparisons"]} == {"deepeval:bias"}
    path = tmp_path / "x.csv"
    e = runner.invoke(app, ["export", ids[0], "-f", "csv", "-o", str(path), "--db", db_url,
                            "--columns", "id,deepeval:bias,deepeval:bias__pass,judge"])
    assert e.exit_code == 0, e.output
    assert path.read_text().splitlines()[0] == "id,deepeval:bias,deepeval:bias__pass,judge"
    html = tmp_path / "r.html"
    rep = runner.invoke(app, ["report", ids[0], "-o", str(html), "--db", db_url])
    assert rep.exit_code == 0, rep.output
    assert "deepeval:bias" in html.read_text()

    from fastapi.testclient import TestClient

    from ragmeter.apps.server import create_app

    store = open_store(db_url)
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    assert client.get(f"/runs/{ids[0]}").status_code == 200
    page = client.get(f"/api/runs/{ids[0]}/samples", params={"sort": "worst", "metric": "deepeval:bias"})
    assert page.status_code == 200, page.text
    assert all("deepeval:bias" in s["values"] for s in page.json()["items"])
    assert client.get("/trend/deepeval%3Abias").status_code == 200
    trend = client.get("/api/v1/trend/deepeval:bias")
    assert trend.status_code == 200 and len(trend.json()["runs"]) == 2
    store.close()


def test_every_namespaced_metric_has_its_description_and_a_judge_check():
    for spec in all_metrics():
        if spec.name in NAMESPACED:
            assert spec.needs_llm and spec.check is not None and spec.family == "judge"
            assert NAMESPACED[spec.name] in spec.description.lower() and spec.description.strip()
