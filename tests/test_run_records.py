"""Typed, versioned run summaries (store/records.py): written with their format version, and runs
stored before versions existed (no version, an older shape) still read."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import ragmeter
from ragmeter import StoreError
from ragmeter.store import open_store
from ragmeter.store.records import FORMAT_VERSION, MetricSummary, RunSummary

DATA = Path(__file__).parent / "data"


def test_a_new_run_is_stored_with_its_format_version(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    res = ragmeter.evaluate("example", ["token_f1", "bleu", "mrr"], db=url, thresholds={"token_f1": 0.3})
    store = open_store(url)
    run = store.get_run(res.run_id)
    assert run.summary_format == FORMAT_VERSION == 1
    record = store.run_summary(res.run_id)
    assert isinstance(record, RunSummary) and record.format_version == 1
    assert isinstance(record["token_f1"], MetricSummary)
    assert record["token_f1"].n == 145 and record["token_f1"].mean == res["token_f1"]
    assert record["token_f1"].direction == "higher" and record["token_f1"].family == "lexical"
    assert record["token_f1"].check is not None and record["token_f1"].pass_rate == res.summary["token_f1"]["pass_rate"]
    assert "corpus_score" in record["bleu"].extra  # figures beyond the conventional keys are kept
    # the stored JSON keeps the shape every reader knows, and equals what evaluate returned
    assert run.summary == res.summary == record.to_dict() == res.record.to_dict()
    assert list(record) == ["token_f1", "bleu", "mrr"] and len(record) == 3


def test_round_trip_is_lossless():
    stored = {"m": {"n": 2, "n_missing": 1, "missing_reasons": {"missing field: reference": 1}, "mean": 0.5,
                    "std": 0.1, "min": 0.4, "max": 0.6, "ci_low": 0.3, "ci_high": 0.7, "ci_method": "t",
                    "direction": "lower", "family": "agent", "range": [0.0, 1.0], "corpus_note": "x",
                    "pass": {"threshold": "m<=0.5", "ok": True}, "pass_rate": 0.5},
              "empty": {"n": 0, "n_missing": 3, "missing_reasons": {"no value": 3}, "mean": None, "std": None,
                        "min": None, "max": None, "ci_low": None, "ci_high": None, "ci_method": None,
                        "direction": "higher", "family": "lexical", "range": [0.0, 1.0]}}
    assert RunSummary.from_dict(stored).to_dict() == stored
    assert json.loads(json.dumps(RunSummary.from_dict(stored).to_dict())) == stored


def test_runs_stored_by_the_old_code_still_read(tmp_path):
    """``tests/data/store_v0.db`` was written before summaries had a version (no ``ci_method``,
    no ``range``): opening it migrates the schema, and every run's summary reads as version 0."""
    db = tmp_path / "old.db"
    shutil.copy(DATA / "store_v0.db", db)
    raw = sqlite3.connect(db)
    stored = {rid: json.loads(s) for rid, s in raw.execute("SELECT id, summary FROM runs")}
    raw.close()
    store = open_store(f"sqlite:///{db}")
    assert stored
    for rid, summary in stored.items():
        assert store.get_run(rid).summary_format is None
        record = store.run_summary(rid)
        assert record.format_version == 0
        assert set(record) == set(summary)
        for key, old in summary.items():
            m = record[key]
            assert m.mean == old["mean"] and m.n == old["n"] and m.ci_low == old["ci_low"]
            assert m.direction == old.get("direction", "higher") and m.range is None and m.ci_method is None


def test_a_summary_written_in_the_old_shape_reads(tmp_path):
    """A run row as the old code wrote it: the summary JSON without a version and with only some keys."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    res = ragmeter.evaluate("example", ["token_f1"], db=url)
    old = {"token_f1": {"n": 145, "n_missing": 0, "missing_reasons": {}, "mean": 0.48, "ci_low": 0.43,
                        "ci_high": 0.53}}
    con = sqlite3.connect(tmp_path / "s.db")
    con.execute("UPDATE runs SET summary = ?, summary_format = NULL WHERE id = ?", (json.dumps(old), res.run_id))
    con.commit()
    con.close()
    record = open_store(url).run_summary(res.run_id)
    assert record.format_version == 0
    m = record["token_f1"]
    assert (m.n, m.mean, m.ci_low, m.ci_high, m.std, m.direction, m.family, m.check) == \
        (145, 0.48, 0.43, 0.53, None, "higher", None, None)


def test_a_newer_format_is_refused_with_a_reason(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    res = ragmeter.evaluate("example", ["token_f1"], db=url)
    open_store(url).update_run(res.run_id, summary_format=FORMAT_VERSION + 1)
    with pytest.raises(StoreError, match="format version 2"):
        open_store(url).run_summary(res.run_id)


def test_evaluation_result_summary_is_the_record_and_reads_as_its_json(tmp_path):
    """``EvaluationResult.summary`` is the RunSummary the store keeps: MetricSummary values read by
    attribute and, as the public API documents, as a read-only mapping of the stored JSON."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    res = ragmeter.evaluate("example", ["token_f1", "bleu"], db=url, thresholds={"token_f1": 0.3})
    assert isinstance(res.summary, RunSummary) and res.record is res.summary
    m = res.summary["token_f1"]
    assert isinstance(m, MetricSummary)
    assert m["mean"] == m.mean == res["token_f1"] and m.get("ci_low") == m.ci_low and m["n"] == m.n == 145
    assert m["pass"] == m.check and m["pass_rate"] == m.pass_rate and "pass" in m and "corpus_score" not in m
    assert list(m) == list(m.to_dict()) and dict(m) == m.to_dict() and len(m) == len(m.to_dict())
    assert res.summary["bleu"]["corpus_score"] == res.summary["bleu"].extra["corpus_score"]
    assert m.get("no such field") is None
    with pytest.raises(KeyError):
        m["no such field"]
    with pytest.raises(TypeError):  # a read-only view: the record is changed by making a new one
        m["mean"] = 0.0  # type: ignore[index]
    assert json.loads(json.dumps(res.to_dict()))["metrics"] == res.summary.to_dict()
    updated = m.updated({"mean": 0.5, "corpus_note": "x"})
    assert updated.mean == 0.5 and updated.extra["corpus_note"] == "x" and m.mean != 0.5 and "corpus_note" not in m


def test_summarise_builds_the_complete_record_without_patching(tmp_path):
    """The summary's steps return fields: the aggregate record is not changed by them."""
    import numpy as np

    from ragmeter.core.thresholds import apply, parse_rule, parse_thresholds
    from ragmeter.metrics.registry import resolve_all
    from ragmeter.run.runner import summarise

    samples = ragmeter.load("example").samples[:20]
    requests = resolve_all(["token_f1", "bleu"])
    values = np.linspace(0.0, 1.0, len(samples))
    columns = {r.key: (values, [None] * len(samples)) for r in requests}
    bare = summarise(columns, requests)
    assert set(bare) == {"token_f1", "bleu"} and "corpus_score" not in bare["bleu"] and bare["token_f1"].check is None
    checks = apply(parse_thresholds({"token_f1": 0.5}), parse_rule(None), {k: values.tolist() for k in columns},
                   {"token_f1": True, "bleu": True})
    full = summarise(columns, requests, samples, {}, checks)
    assert full["bleu"].extra["corpus_score"] is not None and full["token_f1"].check["threshold"]
    assert full["token_f1"].pass_rate == checks["token_f1"]["rate"]
    assert full["token_f1"].mean == bare["token_f1"].mean and bare["token_f1"].check is None


def test_show_compare_gate_report_and_dashboard_read_through_run_summary(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from ragmeter.apps.cli import app
    from ragmeter.apps.server import create_app
    from ragmeter.store import Store

    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    a = ragmeter.evaluate("example", ["token_f1", "mrr"], db=url, name="a")
    b = ragmeter.evaluate("example", ["token_f1", "mrr"], db=url, name="b")
    read: list[str] = []
    real = Store.run_summary

    def spy(self, run):
        read.append(run if isinstance(run, str) else run.id)
        return real(self, run)

    monkeypatch.setattr(Store, "run_summary", spy)
    cli = CliRunner()
    for args in (["show", a.run_id], ["show", a.run_id, "--json"], ["compare", a.run_id, b.run_id],
                 ["gate", b.run_id, "--baseline", a.run_id], ["report", a.run_id, b.run_id, "-o", str(tmp_path / "r.html")]):
        read.clear()
        r = cli.invoke(app, [*args, "--db", str(db)])
        assert r.exit_code == 0, (args, r.output)
        assert a.run_id in read, args
    read.clear()
    client = TestClient(create_app(open_store(url)), base_url="http://127.0.0.1")
    assert client.get(f"/runs/{a.run_id}").status_code == 200 and a.run_id in read
    read.clear()
    assert client.get("/").status_code == 200 and {a.run_id, b.run_id} <= set(read)
