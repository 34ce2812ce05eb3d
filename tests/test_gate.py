"""Regression gate, baseline files and ragmeter.testing.assert_no_regression."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ragmeter
from ragmeter.analysis.gate import gate
from ragmeter.analysis.runs import from_store, load_baseline, save_baseline
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError, StoreError
from ragmeter.store import open_store
from ragmeter.testing import assert_no_regression


def _rows(n=40, wrong_every=4, extra_wrong=()):
    return [{"id": f"s{i}", "answer": "lyon" if (i % wrong_every == 0 or i in extra_wrong) else "paris",
             "reference": "paris"} for i in range(n)]


METRICS = ["correct_keyword", "exact_match"]


@pytest.fixture
def runs(db_url):
    good = ragmeter.evaluate(_rows(), METRICS, db=db_url, name="good")
    worse = ragmeter.evaluate(_rows(extra_wrong=range(1, 40, 3)), METRICS, db=db_url, name="worse")
    slight = ragmeter.evaluate(_rows(extra_wrong=(1,)), METRICS, db=db_url, name="slight")
    return good, worse, slight


def test_gate_fails_on_a_significant_drop_beyond_the_tolerance(runs, db_url):
    good, worse, slight = runs
    store = open_store(db_url)
    res = gate(worse.run_id, good.run_id, max_drop=0.05, store=store)
    row = next(r for r in res.rows if r.metric == "correct_keyword")
    assert res.failed and res.exit_code == 1 and row.regressed and row.status == "REGRESSED"
    assert row.drop == pytest.approx(good["correct_keyword"] - worse["correct_keyword"]) and row.pvalue < 0.05
    assert "REGRESSED" in res.report()
    same = gate(good.run_id, good.run_id, store=store)
    assert not same.failed and same.exit_code == 0 and all(r.status == "ok" for r in same.rows)
    # one more wrong answer: a drop of 0.025 -- within tolerance, and not significant either
    small = gate(slight.run_id, good.run_id, max_drop=0.05, store=store)
    assert not small.failed
    # a drop beyond a tiny tolerance that is not significant is "noise", not a failure
    noisy = gate(slight.run_id, good.run_id, max_drop=0.01, store=store)
    r = next(x for x in noisy.rows if x.metric == "correct_keyword")
    assert r.status == "noise" and not noisy.failed
    better = gate(good.run_id, worse.run_id, store=store)
    assert not better.failed and next(x for x in better.rows if x.metric == "correct_keyword").status == "improved"


def test_gate_relative_tolerance_and_lower_is_better(db_url):
    store = open_store(db_url)
    base = [{"id": f"s{i}", "answer": "a b c", "reference": "a b c" if i % 2 else "a b d"} for i in range(30)]
    worse = [dict(r, answer="x y z") if i < 12 else r for i, r in enumerate(base)]
    a = ragmeter.evaluate(base, ["levenshtein"], db=db_url)
    b = ragmeter.evaluate(worse, ["levenshtein"], db=db_url)
    direction = store.get_run(a.run_id).summary["levenshtein"]["direction"]
    res = gate(b.run_id, a.run_id, max_drop=0.1, relative=True, store=store)
    row = res.rows[0]
    expected = (a["levenshtein"] - b["levenshtein"]) if direction == "higher" else (b["levenshtein"] - a["levenshtein"])
    assert row.drop == pytest.approx(expected / abs(a["levenshtein"]))
    assert res.failed == (row.drop > 0.1 and row.pvalue < 0.05)
    with pytest.raises(ConfigError):
        gate(b.run_id, a.run_id, max_drop=-1, store=store)
    with pytest.raises(ConfigError, match="not in both"):
        gate(b.run_id, a.run_id, metrics=["bleu"], store=store)


def test_baseline_file_round_trip_and_paired_gate_against_it(runs, db_url, tmp_path):
    good, worse, _ = runs
    store = open_store(db_url)
    path = save_baseline(from_store(store, "good"), tmp_path / "baseline.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "ragmeter-baseline" and doc["run_id"] == good.run_id
    assert doc["metrics"]["correct_keyword"]["values"]["s0"] == 0.0 and doc["metrics"]["correct_keyword"]["n"] == 40
    back = load_baseline(path)
    assert back.values["correct_keyword"] == from_store(store, good.run_id).values["correct_keyword"]
    res = gate(worse.run_id, str(path), store=store)
    assert res.failed and res.rows[0].pvalue is not None  # paired test against a file
    assert not gate(good.run_id, str(path), store=store).failed


def test_seed_004_means_only_baseline_is_gated_without_a_test(runs, db_url, tmp_path):
    good, worse, _ = runs
    p = tmp_path / "baseline_metrics.json"
    p.write_text(json.dumps({"date": "2024-01-01", "metrics": {"correct_keyword": good["correct_keyword"]}}))
    res = gate(worse.run_id, str(p), store=open_store(db_url))
    row = res.rows[0]
    assert row.pvalue is None and "means only" in row.note and row.regressed
    for bad in ("{", json.dumps({"metrics": 3}), json.dumps({"metrics": {"m": {"values": {"a": "x"}}}})):
        p.write_text(bad)
        with pytest.raises(ConfigError):
            load_baseline(p)
    with pytest.raises(StoreError):
        load_baseline(tmp_path / "missing.json")


def test_cli_gate_exit_status_and_baseline_save(runs, db_url, tmp_path):
    out = tmp_path / "b.json"
    r = CliRunner().invoke(app, ["baseline", "save", "good", "-o", str(out), "--db", db_url])
    assert r.exit_code == 0 and out.exists(), r.output
    fail = CliRunner().invoke(app, ["gate", "worse", "--baseline", "good", "--max-drop", "0.05", "--db", db_url])
    assert fail.exit_code == 1 and "REGRESSED" in fail.output and "FAIL" in fail.output
    ok = CliRunner().invoke(app, ["gate", "good", "--baseline", str(out), "--db", db_url])
    assert ok.exit_code == 0 and "PASS" in ok.output
    js = CliRunner().invoke(app, ["gate", "worse", "--baseline", str(out), "-m", "exact_match", "--json", "--db", db_url])
    assert js.exit_code == 1 and json.loads(js.stdout)["failed"] is True


def test_cli_gate_real_process_exit_status(runs, db_url):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "ragmeter.apps.cli", "gate", "worse", "--baseline", "good", "--db", db_url]
    assert subprocess.run(cmd, capture_output=True).returncode == 1
    cmd[4:6] = ["good", "--baseline"]
    assert subprocess.run(cmd, capture_output=True).returncode == 0


def test_assert_no_regression(runs, db_url, tmp_path):
    good, worse, _ = runs
    assert assert_no_regression(good, good).failed is False  # results in memory
    with pytest.raises(AssertionError, match="quality regression in correct_keyword"):
        assert_no_regression(worse, good, max_drop=0.05)
    path = save_baseline(from_store(open_store(db_url), good.run_id), tmp_path / "b.json")
    with pytest.raises(AssertionError, match="REGRESSED"):
        assert_no_regression("worse", str(path), db=db_url)
    assert_no_regression("worse", str(path), db=db_url, max_drop=0.5)  # tolerated


@pytest.mark.slow
def test_gate_on_the_bundled_pipeline_made_deliberately_worse(db_url):
    from ragmeter.analysis.grid import evaluate_pipeline

    metrics = ["recall@5", "ndcg@5"]
    evaluate_pipeline(params={"top_k": 5}, metrics=metrics, name="good-pipeline", db=db_url)
    evaluate_pipeline(params={"top_k": 1, "chunk_size": 120, "overlap": 0}, metrics=metrics, name="worse-pipeline",
                      db=db_url)
    fail = CliRunner().invoke(app, ["gate", "worse-pipeline", "--baseline", "good-pipeline", "--db", db_url])
    assert fail.exit_code == 1, fail.output
    assert "REGRESSED" in fail.output
    ok = CliRunner().invoke(app, ["gate", "good-pipeline", "--baseline", "good-pipeline", "--db", db_url])
    assert ok.exit_code == 0, ok.output
