"""Runner and store: aggregates, no-value bookkeeping, resume after SIGKILL, CLI commands."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragmeter
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Score
from ragmeter.stats import aggregate, bootstrap_ci

PLUGINS = Path(__file__).parent / "plugins"
sys.path.insert(0, str(PLUGINS))
import rm_testmetrics  # noqa: E402,F401  (registers t_len_ratio, t_slow, t_flaky)


def _rows(n=30):
    return [{"id": f"s{i:03d}", "question": f"q{i}", "answer": "a" * (i % 7),
             "reference": "a" * 5} for i in range(n)]


def test_evaluate_aggregates_and_missing(db_url):
    rows = _rows(10) + [{"id": "nor", "question": "q", "answer": "x"}]
    res = ragmeter.evaluate(rows, ["t_len_ratio", "t_flaky"], db=db_url)
    s = res.summary["t_len_ratio"]
    assert s["n"] == 10 and s["n_missing"] == 1
    assert s["missing_reasons"] == {"missing field: reference": 1}
    assert s["ci_low"] <= s["mean"] <= s["ci_high"]
    f = res.summary["t_flaky"]
    assert f["n_missing"] == 5 and f["mean"] == 0.5  # missing values are not zeros
    df = res.to_pandas()
    # inputs first, then one column per metric (issue: results leave with their inputs)
    assert list(df.columns) == ["id", "question", "answer", "references", "contexts",
                                "t_len_ratio", "t_flaky", "no_value_reasons", "judge"]
    assert df["t_flaky"].isna().sum() == 5
    assert res.rows()[-1]["no_value_reasons"] == {"t_len_ratio": "missing field: reference"}
    assert res.rows()[1]["no_value_reasons"] == {"t_flaky": "refused: odd id"}


def test_unknown_metric_lists_closest(db_url):
    with pytest.raises(ConfigError, match="t_len_ratio"):
        ragmeter.evaluate(_rows(2), ["t_len_ration"], db=db_url)


def test_bootstrap_ci_properties():
    assert bootstrap_ci([1.0]) is None
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    lo, hi = bootstrap_ci([0, 1] * 50)
    assert lo < 0.5 < hi and 0.35 < lo and hi < 0.65
    agg = aggregate([Score(1.0), Score.missing("x"), Score(0.0)])
    assert agg["n"] == 2 and agg["n_missing"] == 1 and agg["mean"] == 0.5


def test_config_seed002_metric_types(tmp_path, db_url):
    (tmp_path / "c.json").write_text(json.dumps({"metric_types": ["t_len_ratio"], "chunking": {"x": 1}}))
    (tmp_path / "c.yaml").write_text("metric_types:\n  - t_len_ratio\n  - t_flaky\n")
    a = ragmeter.evaluate(_rows(4), config=tmp_path / "c.json", db=db_url)
    b = ragmeter.evaluate(_rows(4), config=tmp_path / "c.yaml", db=db_url)
    assert a.metrics == ["t_len_ratio"] and b.metrics == ["t_len_ratio", "t_flaky"]
    (tmp_path / "bad.yaml").write_text("metric_types: [t_len_ratioo, nonsense_metric_xyz]\n")
    with pytest.raises(ConfigError) as ei:
        ragmeter.evaluate(_rows(4), config=tmp_path / "bad.yaml", db=db_url)
    assert "t_len_ratio" in str(ei.value) and "nonsense_metric_xyz" in str(ei.value)


def _cli(args, env_extra=None, **kw):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), *sys.path]), "RAGMETER_PLUGINS": "rm_testmetrics",
           **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args], env=env,
                          capture_output=True, text=True, **kw)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cli_broken_line_7(tmp_path, db_url):
    rows = [json.dumps(r) for r in _rows(12)]
    rows[6] = rows[6][:-5]
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(rows) + "\n")
    r = _cli(["eval", str(p), "--metrics", "t_len_ratio", "--db", db_url])
    assert r.returncode != 0 and "line 7" in r.stderr
    r = _cli(["eval", str(p), "--metrics", "t_len_ratio", "--db", db_url, "--on-error", "skip",
              "--json", "--out", str(tmp_path / "res.jsonl")])
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["metrics"]["t_len_ratio"]["n"] == 11
    assert summary["skipped_rows"]["count"] == 1 and "line 7" in summary["skipped_rows"]["errors"][0]
    assert "skipped 1 bad row" in r.stderr
    out = [json.loads(x) for x in (tmp_path / "res.jsonl").read_text().splitlines()]
    assert len(out) == 11 and {"id", "question", "answer", "references", "t_len_ratio", "no_value_reasons"} <= set(out[0])


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(tmp_path):
    data = _jsonl(tmp_path / "d.jsonl", _rows(60))
    db_a, db_b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    metrics = "t_len_ratio,t_slow"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), *sys.path]), "RAGMETER_PLUGINS": "rm_testmetrics",
           "RM_TEST_DELAY": "0.15"}
    proc = subprocess.Popen([sys.executable, "-m", "ragmeter.apps.cli", "eval", str(data), "--metrics",
                             metrics, "--db", db_a, "--no-progress"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dbfile = tmp_path / "a.db"
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if dbfile.exists():
            try:
                with sqlite3.connect(dbfile) as con:
                    stored = con.execute("select count(*) from scores join metric_names on metric_names.id = scores.metric_id "
                                         "where metric_names.name = 't_slow'").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if stored >= 20:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 20 <= stored < 60, "the run should have been killed halfway"
    run_id = json.loads(_cli(["runs", "--json", "--db", db_a]).stdout)[0]["id"]
    assert json.loads(_cli(["runs", "--json", "--db", db_a]).stdout)[0]["status"] == "running"

    r = _cli(["eval", "--resume", run_id, "--db", db_a, "--json"])
    assert r.returncode == 0, r.stderr
    resumed = json.loads(r.stdout.strip().splitlines()[-1])
    r = _cli(["eval", str(data), "--metrics", metrics, "--db", db_b, "--json"])
    full = json.loads(r.stdout.strip().splitlines()[-1])
    assert resumed["run_id"] == run_id
    for m in ("t_len_ratio", "t_slow"):
        for k in ("mean", "n", "n_missing", "ci_low", "ci_high"):
            assert resumed["metrics"][m][k] == full["metrics"][m][k]
    with sqlite3.connect(tmp_path / "a.db") as con:
        n, distinct = con.execute("select count(*), count(distinct position || '|' || metric_id) "
                                  "from scores where run_id=?", (run_id,)).fetchone()
    assert n == distinct == 120
    for fmt in ("csv", "jsonl"):
        out_a, out_b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        assert _cli(["export", run_id, "--format", fmt, "-o", str(out_a), "--db", db_a]).returncode == 0
        assert _cli(["export", full["run_id"], "--format", fmt, "-o", str(out_b), "--db", db_b]).returncode == 0
        assert out_a.read_text() == out_b.read_text()


def test_resume_refuses_other_dataset(tmp_path, db_url):
    res = ragmeter.evaluate(_rows(5), ["t_len_ratio"], db=db_url)
    with pytest.raises(ragmeter.StoreError, match="dataset differs"):
        ragmeter.evaluate(_rows(6), resume=res.run_id, db=db_url)


def test_cli_runs_show_export_metrics(tmp_path, db_url, monkeypatch):
    res = ragmeter.evaluate(_rows(8), ["t_len_ratio", "t_flaky"], db=db_url, name="first")
    ragmeter.evaluate(_rows(3), ["t_flaky"], db=db_url, name="second")
    runner = CliRunner()
    out = runner.invoke(app, ["runs", "--json", "--db", db_url])
    assert out.exit_code == 0, out.output
    runs = json.loads(out.output)
    assert [r["name"] for r in runs] == ["second", "first"]
    assert set(runs[0]) >= {"id", "status", "created_at", "metrics"} and runs[1]["metrics"] == ["t_len_ratio", "t_flaky"]
    out = runner.invoke(app, ["show", res.run_id[:6], "--json", "--db", db_url])
    info = json.loads(out.output)
    assert info["metrics"]["t_flaky"]["n_missing"] == 4 and info["ragmeter_version"] == ragmeter.__version__
    out = runner.invoke(app, ["show", "first", "--db", db_url])
    assert "t_len_ratio" in out.output and "refused: odd id" in out.output
    for fmt in ("csv", "parquet", "jsonl"):
        p = tmp_path / f"x.{fmt}"
        out = runner.invoke(app, ["export", res.run_id, "--format", fmt, "-o", str(p), "--db", db_url])
        assert out.exit_code == 0 and p.exists()
    import pandas as pd

    df = pd.read_parquet(tmp_path / "x.parquet")
    assert list(df.columns) == ["id", "question", "answer", "references", "contexts",
                                "t_len_ratio", "t_flaky", "no_value_reasons", "judge"] and len(df) == 8
    out = runner.invoke(app, ["metrics", "--json"])
    names = {m["name"] for m in json.loads(out.output)}
    assert "t_len_ratio" in names
    out = runner.invoke(app, ["show", "nope-run", "--db", db_url])
    assert out.exit_code != 0


def test_store_url_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", str(tmp_path / "env.db"))
    res = ragmeter.evaluate(_rows(2), ["t_len_ratio"])
    assert (tmp_path / "env.db").exists() and res.store_url.endswith("env.db")


def test_unavailable_metric_fails_before_a_run_is_created(db_url):
    from ragmeter.store import open_store

    with pytest.raises(ConfigError, match="--judge"):
        ragmeter.evaluate(_rows(3), ["t_len_ratio", "faithfulness"], db=db_url)
    assert open_store(db_url).list_runs() == []
    rows = [{**r, "contexts": ["some context"]} for r in _rows(3)]
    res = ragmeter.evaluate(rows, ["t_len_ratio", "faithfulness"], db=db_url, skip_unavailable=True)
    assert res.summary["t_len_ratio"]["n"] == 3
    assert res.summary["faithfulness"]["n"] == 0
    assert all(r.startswith("unavailable:") for r in res.summary["faithfulness"]["missing_reasons"])
