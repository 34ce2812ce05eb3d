"""Consistency: same-model figures over repeated runs, cross-model agreement, semantic agreement,
stored runs and one-file inputs, the kv record used by the unified composite, and the CLI."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragmeter import evaluate
from ragmeter.analysis import consistency as C
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.schema import Sample
from ragmeter.store import open_store

EXAMPLE = Path(str(resources.files("ragmeter"))) / "data" / "agent_example"


# ---- the figures ----------------------------------------------------------------------------------

def test_label_agreement_and_score_consistency():
    assert C.label_agreement(["low", "low", "high"]) == 2 / 3
    assert C.label_agreement(["a"]) == 1.0
    assert C.label_agreement(["a", "b", "c", "d"]) == 0.25
    assert C.score_consistency([80, 90], 0, 100) == pytest.approx(0.9)
    assert C.score_consistency([0, 1, 0, 1]) == 0.0
    assert C.score_consistency([0.3, 0.3]) == 1.0
    with pytest.raises(ValueError):
        C.label_agreement([])
    with pytest.raises(ValueError, match="outside the scale"):
        C.score_consistency([50, 60])
    with pytest.raises(ValueError, match="high > low"):
        C.score_consistency([1], 1, 1)


@settings(max_examples=300, deadline=None)
@given(vals=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=9))
def test_score_consistency_properties(vals):
    c = C.score_consistency(vals, 0, 100)
    assert 0 <= c <= 1
    assert c == pytest.approx(max(0.0, 1 - np.std(vals) / 50), abs=1e-12)
    assert C.score_consistency([vals[0]] * len(vals), 0, 100) == pytest.approx(1.0)


@settings(max_examples=200, deadline=None)
@given(labels=st.lists(st.sampled_from("abc"), min_size=1, max_size=10))
def test_label_agreement_is_the_modal_share(labels):
    a = C.label_agreement(labels)
    assert 1 / len(labels) <= a <= 1
    assert a == max(labels.count(x) for x in set(labels)) / len(labels)


def test_semantic_agreement_pairs_and_groups():
    v = np.array([[1, 0], [1, 0], [0, 1], [-1, 0]], dtype=float)
    # pairs: (0,1)=1, (0,2)=0, (0,3)=-1->0, (1,2)=0, (1,3)=0, (2,3)=0
    assert C.semantic_agreement(v) == pytest.approx(1 / 6)
    assert C.semantic_agreement(v, ["m1", "m1", "m2", "m2"]) == pytest.approx(0.0)  # cross-group pairs only
    with pytest.raises(ValueError):
        C.semantic_agreement(v[:2], ["m", "m"])
    with pytest.raises(ValueError):
        C.semantic_agreement(v[:1])


# ---- same model ------------------------------------------------------------------------------------

def S(sid, answer=None, **meta):
    return Sample(id=sid, answer=answer, metadata=meta)


def three_runs():
    return C.Inputs({
        "r1": [S("s1", "Low risk.", risk="low", x=0.2), S("s2", "A", risk="a", x=0.5), S("s3", "alone", risk="z", x=1)],
        "r2": [S("s1", "low  RISK.", risk="low", x=0.4), S("s2", "A", risk="A", x=0.5)],
        "r3": [S("s1", "High risk!", risk="high", x=0.6)],
    })


class FakeEncoder:
    """Fixed vectors per normalised text, counting calls."""

    def __init__(self, table):
        self.table = table
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def test_same_model_figures_by_hand():
    enc = FakeEncoder({"Low risk.": [1, 0], "low  RISK.": [0.8, 0.6], "High risk!": [0, 1], "A": [0.6, 0.8],
                       "alone": [1, 0]})
    r = C.same_model_consistency(three_runs(), label="risk", scores=["x"], encoder=enc)
    assert r["n_groups"] == 3 and r["n_samples"] == 2  # s3 is in one run only
    s1, s2 = r["per_sample"]["s1"], r["per_sample"]["s2"]
    assert s1["label_agreement"] == 2 / 3 and s1["modal_label"] == "low"
    assert s2["label_agreement"] == 1.0  # labels are case- and space-normalised
    std1 = np.std([0.2, 0.4, 0.6])
    assert s1["std:x"] == pytest.approx(std1) and s1["consistency:x"] == pytest.approx(1 - std1 / 0.5)
    assert s2["std:x"] == 0 and s2["consistency:x"] == 1.0
    sem1 = np.mean([0.8, 0.0, 0.6])  # cos of the three answers' vectors, pairwise
    assert s1["semantic_agreement"] == pytest.approx(sem1)
    assert s2["semantic_agreement"] == pytest.approx(1.0)
    assert s1["overall"] == pytest.approx(np.mean([2 / 3, 1 - std1 / 0.5, sem1]))
    assert r["label_agreement"] == pytest.approx((2 / 3 + 1) / 2)
    assert r["score_std"] == pytest.approx(std1 / 2)
    assert r["overall_consistency"] == pytest.approx((s1["overall"] + s2["overall"]) / 2)
    assert enc.calls == 1  # every text embedded in one batch


def test_same_model_without_labels_scores_or_semantics():
    r = C.same_model_consistency(three_runs(), label=None, scores=[], semantic=False)
    assert r["label_agreement"] is None and r["overall_consistency"] is None and r["n_overall"] == 0
    r = C.same_model_consistency(three_runs(), label="answer", semantic=False)
    assert r["per_sample"]["s1"]["label_agreement"] == 2 / 3  # "Low risk." == "low  RISK."


def test_semantic_failure_is_a_note_not_a_crash():
    class Broken:
        def encode(self, texts):
            raise RuntimeError("no model here")

    r = C.same_model_consistency(three_runs(), label="risk", encoder=Broken())
    assert r["semantic_agreement"] is None and "no model here" in r["notes"][0]
    assert r["label_agreement"] is not None


def test_errors():
    with pytest.raises(ConfigError, match="at least two runs"):
        C.same_model_consistency(C.Inputs({"r1": [S("a")]}))
    with pytest.raises(ConfigError, match="--score-range"):
        C.same_model_consistency(C.Inputs({"r1": [S("a", x=50)], "r2": [S("a", x=60)]}), scores=["x"], semantic=False)
    r = C.same_model_consistency(C.Inputs({"r1": [S("a", x=50)], "r2": [S("a", x=60)]}), scores=["x"],
                                 score_range=(0, 100), semantic=False)
    assert r["scores"]["x"]["consistency"] == pytest.approx(0.9)


# ---- cross model -----------------------------------------------------------------------------------

def test_cross_model_reduces_each_models_runs_first():
    inp = C.Inputs(
        {"m1/r1": [S("s", "x", risk="low", score=80, confidence=0.9)],
         "m1/r2": [S("s", "x", risk="low", score=90, confidence=0.7)],
         "m1/r3": [S("s", "x", risk="high", score=70, confidence=0.8)],
         "m2/r1": [S("s", "y", risk="high", score=40, confidence=0.4)],
         "m3/r1": [S("s", "x", risk="low", score=60)]},
        parents={"m1/r1": "m1", "m1/r2": "m1", "m1/r3": "m1", "m2/r1": "m2", "m3/r1": "m3"})
    enc = FakeEncoder({"x": [1, 0], "y": [0, 1]})
    r = C.cross_model_consistency(inp, label="risk", scores=["score"], score_range=(0, 100), encoder=enc)
    s = r["per_sample"]["s"]
    assert r["models"] == ["m1", "m2", "m3"] and s["n_models"] == 3
    assert s["label_agreement"] == 2 / 3  # m1's modal label is low; m2 high; m3 low
    assert s["range:score"] == pytest.approx(80 - 40) and s["normalised_range:score"] == pytest.approx(0.4)
    assert s["confidence_agreement"] == pytest.approx(1 - np.std([0.8, 0.4]) / 0.5)  # m3 has none
    # answers of different models: m1's three "x" vs m2 "y" (0) and m3 "x" (1); m2 vs m3 (0)
    pairs = [0, 0, 0, 1, 1, 1, 0]
    assert s["semantic_agreement"] == pytest.approx(np.mean(pairs))
    assert s["overall"] == pytest.approx(np.mean([2 / 3, 0.6, s["confidence_agreement"], np.mean(pairs)]))
    assert r["score_range"] == pytest.approx(40)


def test_cross_model_needs_two_models():
    with pytest.raises(ConfigError, match="two models"):
        C.cross_model_consistency(C.Inputs({"a": [S("s")], "b": [S("s")]}, parents={"a": "m", "b": "m"}))


# ---- inputs: one file, stored runs ------------------------------------------------------------------

def test_example_file_by_model():
    r = C.consistency_from_file(EXAMPLE / "runs.jsonl", by="model", label="risk_level", scores=["credit_score"],
                                score_range=(0, 100), semantic=False)
    assert r["models"] == ["gpt-4o-mini", "llama-3.3-70b", "claude-sonnet"] and r["n_samples"] == 4
    same = r["per_model"]["gpt-4o-mini"]
    assert same["n_groups"] == 3 and list(r["per_model"]) == ["gpt-4o-mini"]
    # xyz-private: gpt-4o-mini said moderate, moderate, high
    rows = [json.loads(x) for x in (EXAMPLE / "runs.jsonl").read_text().splitlines()]
    xyz = [x for x in rows if x["id"] == "xyz-private" and x["model"] == "gpt-4o-mini"]
    scores = [x["credit_score"] for x in xyz]
    r_same = C.consistency_from_file(EXAMPLE / "runs.jsonl", by="run", label="risk_level", scores=["credit_score"],
                                     score_range=(0, 100), semantic=False)
    assert r_same["n_groups"] == 5
    inp = C.inputs_from_file(EXAMPLE / "runs.jsonl", by="model")
    gpt = C.Inputs({g: v for g, v in inp.groups.items() if g.startswith("gpt-4o-mini/")})
    sub = C.same_model_consistency(gpt, label="risk_level", scores=["credit_score"], score_range=(0, 100),
                                   semantic=False)
    assert sub["per_sample"]["xyz-private"]["std:credit_score"] == pytest.approx(np.std(scores))
    assert sub["per_sample"]["xyz-private"]["label_agreement"] == 2 / 3
    assert same["overall_consistency"] == pytest.approx(sub["overall_consistency"])


def test_file_errors(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"id": "a", "run": 1}) + "\n" + json.dumps({"id": "a"}) + "\n")
    with pytest.raises(DatasetError) as exc:
        C.inputs_from_file(p)
    assert exc.value.line == 2 and exc.value.field == "run"
    p.write_text(json.dumps({"id": "a", "run": 1}) + "\n" + json.dumps({"id": "a", "run": 1}) + "\n")
    with pytest.raises(DatasetError, match="appears twice"):
        C.inputs_from_file(p)
    with pytest.raises(DatasetError, match="file not found"):
        C.inputs_from_file(tmp_path / "none.jsonl")
    with pytest.raises(ConfigError, match="--by"):
        C.inputs_from_file(p, by="team")
    c = tmp_path / "r.csv"
    c.write_text("run,id,answer,score\nA,q1,yes,0.5\nB,q1,yes,0.7\n")
    r = C.consistency_from_file(c, scores=["score"], semantic=False)
    assert r["per_sample"]["q1"]["std:score"] == pytest.approx(0.1) and r["label_agreement"] == 1.0


def _three_stored_runs(db_url):
    answers = {"r1": ["Paris is the capital.", "Blue", "4"],
               "r2": ["Paris is the capital.", "It is blue", "four"],
               "r3": ["The capital is Lyon.", "Blue", "4"]}
    ids = []
    for name, ans in answers.items():
        rows = [{"id": f"q{i}", "question": "q", "answer": a, "reference": ref}
                for i, (a, ref) in enumerate(zip(ans, ["Paris is the capital.", "Blue", "4"], strict=True))]
        ids.append(evaluate(rows, ["rouge1_fmeasure", "exact_match"], db=db_url, name=name).run_id)
    return ids


def test_stored_runs_same_model_and_record(db_url):
    ids = _three_stored_runs(db_url)
    store = open_store(db_url)
    r = C.consistency_from_runs(store, ids, semantic=False)
    assert r["n_groups"] == 3 and r["n_samples"] == 3 and set(r["scores"]) == {"rouge1_fmeasure", "exact_match"}
    tables = [store.score_table(i) for i in ids]
    for sid in ("q0", "q1", "q2"):
        vals = [t["rouge1_fmeasure"][sid].value for t in tables]
        assert r["per_sample"][sid]["std:rouge1_fmeasure"] == pytest.approx(np.std(vals))
        assert r["per_sample"][sid]["consistency:rouge1_fmeasure"] == pytest.approx(1 - np.std(vals) / 0.5)
    assert r["per_sample"]["q0"]["label_agreement"] == 2 / 3
    assert r["scores"]["rouge1_fmeasure"]["range"] == [0.0, 1.0]
    rec = store.kv_get("consistency", ids[0])["same_model"]
    assert rec["runs"] == ids and rec["overall"] == pytest.approx(r["overall_consistency"])
    assert rec["per_sample"]["q1"] == pytest.approx(r["per_sample"]["q1"]["overall"])
    # by run name too, and cross-model with runs named as models
    x = C.consistency_from_runs(store, ["r1", "r2", "r3"], cross_model=True, semantic=False, scores=["exact_match"])
    assert x["models"] == ["r1", "r2", "r3"] and x["scores"]["exact_match"]["n"] == 3
    with pytest.raises(ConfigError, match="twice"):
        C.consistency_from_runs(store, [ids[0], ids[0]])


def test_cli_consistency_runs(db_url):
    """Must-show: `ragmeter consistency RUN1 RUN2 RUN3` prints the same-model figures."""
    ids = _three_stored_runs(db_url)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["consistency", *ids, "--db", db_url, "--no-semantic"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    for text in ("same-model consistency — 3 runs, 3 paired samples", "label agreement (answer)",
                 "score std (rouge1_fmeasure)", "score consistency (exact_match)", "overall consistency"):
        assert text in out, text
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["consistency", *ids, "--db", db_url, "--no-semantic", "--json", "-s", "exact_match"])
    data = json.loads(r.output)
    assert list(data["scores"]) == ["exact_match"]
    assert data["overall_consistency"] == pytest.approx(
        C.consistency_from_runs(open_store(db_url), ids, semantic=False, scores=["exact_match"])["overall_consistency"])
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["consistency", ids[0], "--db", db_url])
    assert r.exit_code != 0


def test_cli_consistency_file_by_model():
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["consistency", "--file", str(EXAMPLE / "runs.jsonl"), "--by", "model",
                                 "--label", "risk_level", "-s", "credit_score", "--score-range", "0,100",
                                 "--no-semantic"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "cross-model agreement — 3 models" in out and "confidence agreement (confidence)" in out
    assert "gpt-4o-mini (its own runs)" in out and "same-model consistency — 3 runs" in out
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["consistency", "--file", str(EXAMPLE / "runs.jsonl"), "--score-range", "9"])
    assert r.exit_code != 0


@pytest.mark.slow
def test_semantic_agreement_with_the_bundled_encoder(db_url):
    r = C.same_model_consistency(C.Inputs({
        "r1": [S("a", "The capital of France is Paris."), S("b", "Water boils at 100 degrees.")],
        "r2": [S("a", "The capital of France is Paris."), S("b", "I like green apples.")]}), label=None)
    a, b = r["per_sample"]["a"]["semantic_agreement"], r["per_sample"]["b"]["semantic_agreement"]
    assert a == pytest.approx(1.0, abs=1e-5) and 0 <= b < 0.5 and not math.isnan(b)
