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
