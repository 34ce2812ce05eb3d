"""Thresholds, `ragmeter test` (JUnit/Markdown), assert_scores and the pytest plugin, exports with
inputs, the notebook display (issue: CI and notebook workflow)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import ragmeter
from ragmeter.core.errors import ConfigError
from ragmeter.core.thresholds import Threshold, parse_rule, parse_thresholds, pass_rate, passes, wilson

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SMALLEST_SUITE = "dataset: example\nmetrics: [token_f1, mrr]\nthresholds: {token_f1: 0.3}\n"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=600)


# ---- thresholds -------------------------------------------------------------------------------

def test_threshold_forms():
    t = parse_thresholds(["faithfulness=0.7", "hallucination<=0.2"])
    assert t["faithfulness"] == Threshold("faithfulness", 0.7, "=")
    assert t["hallucination"] == Threshold("hallucination", 0.2, "<=")
    assert parse_thresholds({"hallucination": "<=0.2"}) == {"hallucination": t["hallucination"]}
    assert passes(0.7, t["faithfulness"]) is True and passes(0.69, t["faithfulness"]) is False
    # "=" follows the metric's direction: at most for a lower-is-better metric
    assert passes(0.1, Threshold("x", 0.2), higher_is_better=False) is True
    assert passes(0.3, t["hallucination"]) is False
    assert passes(None, t["faithfulness"]) is None
    for bad in (["faithfulness"], ["f=abc"], {"f": "high"}):
        with pytest.raises(ConfigError):
            parse_thresholds(bad)


def test_wilson_matches_textbook_values():
    # Wilson (1927) 95% interval; reference values from Newcombe (1998), Table I
    lo, hi = wilson(81, 263)
    assert lo == pytest.approx(0.2553, abs=1e-4) and hi == pytest.approx(0.3662, abs=1e-4)
    lo, hi = wilson(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson(0, 0) == (None, None)


def test_run_rule_all_or_pass_rate():
    v = [True] * 95 + [False] * 5
    assert pass_rate(v)["ok"] is False                      # "all" by default
    assert pass_rate(v, parse_rule(0.85))["ok"] is True     # lower bound ~0.888
    assert pass_rate(v, parse_rule({"pass_rate": 0.95}))["ok"] is False
    assert pass_rate([True, None])["ok"] is False           # no value never passes
    with pytest.raises(ConfigError):
        parse_rule("most")


def test_evaluate_stores_thresholds_and_pass_rates(db_url):
    res = ragmeter.evaluate("example", ["token_f1", "mrr"], thresholds={"token_f1": 0.3}, db=db_url)
    p = res.summary["token_f1"]["pass"]
    values = [s.value for s in res.scores["token_f1"]]
    assert p["passed"] == sum(v >= 0.3 for v in values) and p["n"] == len(values)
    assert p["rate_low"] < p["rate"] < p["rate_high"]
    assert "pass" not in res.summary["mrr"]
    assert res.passed is (p["failed"] == 0)
    from ragmeter.store import open_store

    run = open_store(db_url).get_run(res.run_id)
    assert run.extra["thresholds"]["items"] == [{"metric": "token_f1", "op": "=", "value": 0.3}]
    with pytest.raises(ConfigError, match="threshold for rouge1"):
        ragmeter.evaluate("example", ["token_f1"], thresholds={"rouge1": 0.3}, db=db_url)


def test_rows_to_pandas_and_html_carry_inputs(db_url):
    res = ragmeter.evaluate("example", ["token_f1"], thresholds=["token_f1=0.3"], db=db_url)
    df = res.to_pandas()
    for col in ("id", "question", "answer", "references", "contexts", "relevant", "metadata", "token_f1",
                "token_f1__pass", "no_value_reasons", "judge"):
        assert col in df.columns
    assert list(res.to_pandas(columns=["id", "token_f1"]).columns) == ["id", "token_f1"]
    assert (df["token_f1__pass"] == (df["token_f1"] >= 0.3)).all()
    html = res._repr_html_()
    assert '<table class="ragmeter-summary">' in html and "token_f1 &gt;= 0.3" in html


# ---- ragmeter test --------------------------------------------------------------------------

def test_suite_exit_codes_and_junit(tmp_path):
    from junitparser import Error, Failure, JUnitXml

    (tmp_path / "suite.yaml").write_text(SMALLEST_SUITE)
    r = _cli("test", "suite.yaml", "--junit", "out.xml", "--markdown", "summary.md", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    xml = JUnitXml.fromfile(str(tmp_path / "out.xml"))
    cases = [(suite.name, case) for suite in xml for case in suite]
    failures = [(s, c) for s, c in cases if any(isinstance(x, Failure) for x in c.result)]
    assert not any(isinstance(x, Error) for _, c in cases for x in c.result)
    # independent count: token_f1 of the same samples below 0.3
    res = ragmeter.evaluate("example", ["token_f1"], db=f"sqlite:///{tmp_path / 'check.db'}")
    expected = {s.id for s, sc in zip(res.samples, res.scores["token_f1"], strict=True) if sc.value < 0.3}
    assert {c.name for _, c in failures} == expected and len(failures) == len(expected)
    assert all(s == "suite.token_f1" for s, _ in failures)
    n = len(res.samples)
    assert len(cases) == 2 * n                       # one testcase per sample x metric
    msg = failures[0][1].result[0].message
    assert "token_f1 = " in msg and "token_f1 >= 0.3" in msg
    md = (tmp_path / "summary.md").read_text()
    assert "| token_f1 |" in md and "❌ fail" in md

    (tmp_path / "ok.yaml").write_text(SMALLEST_SUITE.replace("0.3", "0.0"))
    r = _cli("test", "ok.yaml", "--junit", "ok.xml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    ok = JUnitXml.fromfile(str(tmp_path / "ok.xml"))
    assert sum(1 for s in ok for c in s for x in c.result if isinstance(x, Failure)) == 0
    # the command line overrides the suite's threshold
    r = _cli("test", "ok.yaml", "--threshold", "token_f1>=0.3", cwd=tmp_path)
    assert r.returncode == 1


def test_suite_user_errors_exit_2(tmp_path):
    (tmp_path / "suite.yaml").write_text(SMALLEST_SUITE)
    r = _cli("test", "suite.yaml", "--threshold", "token_f1", cwd=tmp_path)
    assert r.returncode == 2 and "METRIC=VALUE" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "nodata.yaml").write_text("metrics: [token_f1]\n")
    r = _cli("test", "nodata.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "no dataset" in r.stderr


def test_suite_pass_rate_rule(tmp_path):
    (tmp_path / "suite.yaml").write_text(SMALLEST_SUITE + "pass_rule: 0.5\n")
    assert _cli("test", "suite.yaml", cwd=tmp_path).returncode == 0   # ~73% pass, lower bound ~0.65
    assert _cli("test", "suite.yaml", "--pass-rule", "0.9", cwd=tmp_path).returncode == 1


# ---- assert_scores and the pytest plugin ------------------------------------------------------

def test_assert_scores_passes_and_fails():
    from ragmeter.testing import assert_scores

    got = assert_scores({"question": "Capital of France?", "answer": "Paris", "reference": "Paris"},
                        metrics=["token_f1"], thresholds={"token_f1": 0.5})
    assert got == {"token_f1": 1.0}
    with pytest.raises(AssertionError) as exc:
        assert_scores({"question": "Capital of France?", "answer": "Lyon", "reference": "Paris"},
                      metrics=["token_f1"], thresholds={"token_f1": 0.5})
    text = str(exc.value)
    assert "token_f1 = 0.0000" in text and "token_f1 >= 0.5" in text and "answer='Lyon'" in text


def _plugin_args() -> list[str]:
    eps = metadata.entry_points(group="pytest11")
    return [] if any(ep.value == "ragmeter.apps.pytest_plugin" for ep in eps) else ["-p", "ragmeter.apps.pytest_plugin"]


@pytest.mark.slow
def test_pytest_project_with_assert_scores(tmp_path):
    (tmp_path / "test_rag.py").write_text('''
import pytest
from ragmeter.testing import assert_scores


def test_good_answer():
    assert_scores({"question": "Capital of France?", "answer": "Paris", "reference": "Paris"},
                  metrics=["token_f1"], thresholds={"token_f1": 0.5})


def test_bad_answer():
    assert_scores({"question": "Capital of France?", "answer": "It is Lyon", "reference": "Paris"},
                  metrics=["token_f1"], thresholds={"token_f1": 0.5})


@pytest.mark.ragmeter_dataset("example", limit=3)
def test_dataset(ragmeter_sample):
    assert ragmeter_sample.question
''')
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(),
                        "test_rag.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "1 failed, 4 passed" in out
    assert "token_f1 = 0.0000, threshold token_f1 >= 0.5" in out
    assert "ragmeter checks" in out and "1 passed, 1 failed of 2" in out
    assert not (tmp_path / ".ragmeter").exists()          # nothing stored unless asked


# ---- exports --------------------------------------------------------------------------------

def test_export_has_inputs_columns_and_xlsx(tmp_path):
    r = _cli("eval", "example", "--metrics", "token_f1,mrr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _cli("export", "latest", "-f", "jsonl", "-o", "out.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert rows and all({"question", "answer", "references", "contexts", "relevant", "token_f1", "mrr"}
                        <= set(row) for row in rows)
    r = _cli("export", "latest", "-f", "csv", "-o", "few.csv", "--columns", "id,question,token_f1", cwd=tmp_path)
    assert (tmp_path / "few.csv").read_text().splitlines()[0] == "id,question,token_f1"
    r = _cli("export", "latest", "-f", "excel", "-o", "out.xlsx", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    import openpyxl

    sheet = openpyxl.load_workbook(tmp_path / "out.xlsx").active
    header = [c.value for c in next(sheet.iter_rows(max_row=1))]
    assert header[:4] == ["id", "question", "answer", "references"] and "token_f1" in header
    assert sheet.max_row == len(rows) + 1
    r = _cli("export", "latest", "--columns", "nope", cwd=tmp_path)
    assert r.returncode == 2 and "unknown column" in r.stderr


# ---- notebook --------------------------------------------------------------------------------

@pytest.mark.slow
def test_docs_notebook_runs(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    nb = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    # "python3" is ipykernel's native kernel: the interpreter running these tests
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute()
    html = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert any('<table class="ragmeter-summary">' in h and "token_f1 &gt;= 0.3" in h for h in html)


def test_public_evaluate_has_the_runner_signature(db_url):
    import inspect

    from ragmeter.run.eval_config import EvalConfig
    from ragmeter.run.runner import evaluate as runner_evaluate

    facade = inspect.signature(ragmeter.evaluate).parameters
    assert list(facade) == list(inspect.signature(runner_evaluate).parameters)
    # the options are the fields of the one EvalConfig, each documented in the facade
    fields = [f.name for f in dataclasses.fields(EvalConfig)]
    assert "thresholds" in fields and ragmeter.evaluate.__doc__.count("Args:") == 1
    assert all(f"``{f}``" in ragmeter.evaluate.__doc__ for f in fields if f not in {"file", "metrics"})
    res = ragmeter.evaluate("example", ["token_f1", "mrr"], thresholds={"token_f1": 0.3}, db=db_url)
    fig = res.figure("token_f1")
    assert len(fig.data[0].x) == res.summary["token_f1"]["n"]
    assert any(s["x0"] == 0.3 for s in fig.layout.shapes)       # the threshold line
    assert list(res.figure().data[0].x) == ["token_f1", "mrr"]
    with pytest.raises(ConfigError):
        res.figure("rouge1")


def test_report_plotly_modes(tmp_path, db_url):
    from ragmeter.apps.report.render import plotly_js, plotly_version
    from ragmeter.store import open_store

    res = ragmeter.evaluate("example", ["token_f1"], db=db_url)
    store = open_store(db_url)
    from ragmeter.apps.report import write_report

    inline = write_report(store, [res.run_id], tmp_path / "inline" / "r.html")
    cdn = write_report(store, [res.run_id], tmp_path / "cdn" / "r.html", plotly="cdn")
    local = write_report(store, [res.run_id], tmp_path / "file" / "r.html", plotly="file")
    js = f"plotly-{plotly_version()}.min.js"
    assert plotly_js() in inline.read_text() and "<script src=" not in inline.read_text()
    cdn_html = cdn.read_text()
    assert f'<script src="https://cdn.plot.ly/{js}"></script>' in cdn_html
    assert f"https://cdn.plot.ly/{js}" in cdn_html.split("Content-Security-Policy", 1)[1].split(">", 1)[0]
    assert (local.parent / js).read_text() == plotly_js() and f'<script src="{js}"></script>' in local.read_text()
    assert local.stat().st_size < inline.stat().st_size - len(plotly_js()) / 2
    with pytest.raises(ConfigError, match="--plotly"):
        write_report(store, [res.run_id], tmp_path / "x.html", plotly="bogus")


def test_eval_threshold_option_and_out_rows(tmp_path):
    r = _cli("eval", "example", "--metrics", "token_f1", "--threshold", "token_f1>=0.3", "--out", "o.jsonl",
             cwd=tmp_path)
    assert r.returncode == 1 and "token_f1 >= 0.3" in r.stdout and "FAIL" in r.stdout
    row = json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])
    assert {"question", "answer", "contexts", "token_f1", "token_f1__pass"} <= set(row)
    r = _cli("eval", "example", "--metrics", "token_f1", "--threshold", "token_f1>=0.3", "--pass-rule", "0.5",
             cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_comparison_html_and_suite_with_baseline_gate(tmp_path):
    from junitparser import JUnitXml

    from ragmeter.analysis.compare import compare_runs
    from ragmeter.store import open_store

    db = f"sqlite:///{tmp_path / 'g.db'}"
    base = ragmeter.evaluate("example", ["token_f1", "mrr"], db=db)
    cur = ragmeter.evaluate("example", ["token_f1", "mrr"], db=db)
    html = compare_runs([base.run_id, cur.run_id], store=open_store(db), n_resamples=200)._repr_html_()
    assert '<table class="ragmeter-compare">' in html and "token_f1" in html
    (tmp_path / "suite.yaml").write_text(SMALLEST_SUITE.replace("0.3", "0.0") + f"baseline: {base.run_id}\n")
    r = _cli("test", "suite.yaml", "--db", db, "--junit", "out.xml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr                   # same values: nothing regressed
    gate_suite = [s for s in JUnitXml.fromfile(str(tmp_path / "out.xml")) if s.name.endswith("regression_gate")]
    assert gate_suite and {c.name for c in gate_suite[0]} == {"token_f1", "mrr"}


def test_junit_failure_carries_the_judge_verdict():
    from ragmeter.apps.report.suite_outputs import junit_xml
    from ragmeter.run.rows import verdict_summary
    from ragmeter.store.records import RunSummary

    assert verdict_summary({"verdicts": [{"verdict": "yes"}, {"verdict": "no"}]}) == "1 of 2 verdicts supported"
    assert verdict_summary({"reason": "the answer names Lyon"}) == "the answer names Lyon"
    rows = [{"id": "s1", "question": "q", "answer": "a", "references": ["r"], "faithfulness": 0.4,
             "faithfulness__pass": False, "no_value_reasons": {}, "judge": {"faithfulness": "1 of 2 claims supported"}},
            {"id": "s2", "question": "q", "answer": "a", "references": ["r"], "faithfulness": None,
             "faithfulness__pass": None, "no_value_reasons": {"faithfulness": "judge failure: timeout"}, "judge": {}}]
    summary = RunSummary.from_dict({"faithfulness": {"pass": {"threshold": "faithfulness >= 0.7"}}})
    root = junit_xml("s", rows, summary).getroot()
    fail = root.find(".//failure")
    assert "faithfulness = 0.4000 fails threshold faithfulness >= 0.7; judge: 1 of 2 claims supported" == fail.get("message")
    assert "judge failure: timeout" in root.find(".//error").get("message")


def test_suite_incomplete_exits_3(tmp_path):
    rows = [{"id": "a", "question": "q", "answer": "Paris", "reference": "Paris"},
            {"id": "b", "question": "q", "answer": "Paris"}]              # no reference: no token_f1
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "suite.yaml").write_text("dataset: d.jsonl\nmetrics: [token_f1]\n")
    r = _cli("test", "suite.yaml", "--junit", "out.xml", cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "missing field: reference" in (tmp_path / "out.xml").read_text()
    # with a threshold, a sample without a value cannot pass: the check fails
    r = _cli("test", "suite.yaml", "--threshold", "token_f1=0.5", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
