"""Composite scores, bands and hints: seed 001's DeepEval example, presets, inversion, missing
components, composites of stored runs, ``ragmeter composite`` and the ``show`` sections."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragmeter import evaluate
from ragmeter.analysis import composite as K
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Score
from ragmeter.metrics.registry import MetricSpec, register_metric
from ragmeter.store import open_store

EXAMPLE = Path(K.__file__).parent.parent / "data" / "agent_example"
SEED_DEEPEVAL = {"answer_relevancy": 0.95, "faithfulness": 0.90, "hallucination": 0.05,
                 "contextual_relevancy": 0.85, "bias": 0.10}


def test_seed_deepeval_example_is_exactly_092():
    res = K.composite_from_values(SEED_DEEPEVAL, "deepeval")
    assert res["value"] == 0.92 and f"{res['value']:.4f}" == "0.9200"
    assert res["band"] == "Excellent" and res["missing"] == [] and res["coverage"] == 1.0
    assert res["components"]["hallucination"]["inverted"] and res["components"]["bias"]["inverted"]
    assert not res["components"]["faithfulness"]["inverted"]


unit = st.floats(0, 1, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(ar=unit, f=unit, h=unit, cr=unit, b=unit)
def test_deepeval_formula(ar, f, h, cr, b):
    got = K.composite_from_values({"answer_relevancy": ar, "faithfulness": f, "hallucination": h,
                                   "contextual_relevancy": cr, "bias": b}, "deepeval")["value"]
    assert got == pytest.approx(ar * 0.25 + f * 0.30 + (1 - h) * 0.25 + cr * 0.10 + (1 - b) * 0.10, abs=1e-11)
    assert 0 <= got <= 1


@settings(max_examples=200, deadline=None)
@given(v=st.lists(unit, min_size=6, max_size=6))
def test_openevals_formula(v):
    names = ["intent_correctness", "plan_quality", "tool_choice_correctness", "tool_completeness",
             "trajectory_match", "final_answer_quality"]
    got = K.composite_from_values(dict(zip(names, v, strict=True)), "openevals")["value"]
    w = [0.15, 0.15, 0.20, 0.15, 0.15, 0.20]
    assert got == pytest.approx(sum(a * b for a, b in zip(v, w, strict=True)), abs=1e-11)


def test_openevals_seed_logging_example():
    # seed 001 logs overall_score=0.87 next to these inputs; its own formula gives 0.881
    vals = {"intent_correctness": 0.95, "plan_quality": 0.85, "tool_choice_correctness": 0.75,
            "tool_completeness": 1.0, "trajectory_match": 0.90, "final_answer_quality": 0.88}
    assert K.composite_from_values(vals, "openevals")["value"] == 0.881


def test_unified_nests_presets_and_takes_given_category_values():
    agent = {"intent_correctness": 1, "plan_quality": 1, "tool_choice_correctness": 1, "tool_completeness": 1,
             "trajectory_match": 1, "final_answer_quality": 1}
    acc = {"faithfulness": 0.8, "hallucination": 0.2, "answer_relevancy": 0.6, "answer_correctness": 0.4}
    res = K.composite_from_values({**agent, **acc, "consistency": 0.5}, "unified")
    accuracy = (0.8 + 0.8 + 0.6 + 0.4) / 4  # factual_accuracy falls back to answer_correctness
    assert res["components"]["accuracy"]["value"] == pytest.approx(accuracy)
    assert res["value"] == pytest.approx(0.35 * accuracy + 0.25 * 0.5 + 0.40 * 1.0)
    # a category given directly wins over computing it
    res = K.composite_from_values({"accuracy": 0.7, "consistency": 0.9, "agent_efficiency": 0.8}, "unified")
    assert res["value"] == pytest.approx(0.35 * 0.7 + 0.25 * 0.9 + 0.40 * 0.8)


def test_missing_components_renormalise_or_have_no_value():
    vals = dict(SEED_DEEPEVAL)
    del vals["contextual_relevancy"]
    r = K.composite_from_values(vals, "deepeval")
    expected = (0.95 * 0.25 + 0.9 * 0.3 + 0.95 * 0.25 + 0.9 * 0.1) / 0.9
    assert r["value"] == pytest.approx(expected) and r["renormalised"] and r["missing"] == ["contextual_relevancy"]
    assert r["coverage"] == 0.9
    r = K.composite_from_values(vals, "deepeval", missing="none")
    assert r["value"] is None and "policy: none" in r["reason"] and r["band"] is None
    r = K.composite_from_values({"faithfulness": 0.9}, "deepeval")  # 30% of the weight < min_coverage 50%
    assert r["value"] is None and "min_coverage" in r["reason"]
    assert K.composite_from_values({"faithfulness": 0.9}, "deepeval", min_coverage=0.3)["value"] == 0.9
    assert K.composite_from_values({}, "deepeval", min_coverage=0)["value"] is None


def test_user_weights_invert_lower_is_better_from_the_registry():
    # hallucination and bias are registered lower-is-better by the judge family
    r = K.composite_from_values({"faithfulness": 0.8, "hallucination": 0.3}, {"faithfulness": 1, "hallucination": 1})
    assert r["value"] == pytest.approx((0.8 + 0.7) / 2)
    r = K.composite_from_values({"x": 0.2, "y": 0.6}, {"x": 3, "y": 1}, directions={"x": "lower"})
    assert r["value"] == pytest.approx((3 * 0.8 + 0.6) / 4)
    r = K.composite_from_values({"x": 0.2}, {"components": {"x": {"weight": 1, "invert": True}}})
    assert r["value"] == pytest.approx(0.8)
    r = K.composite_from_values({"hallucination": 0.3}, {"components": {"hallucination": {"weight": 1, "invert": False}}})
    assert r["value"] == pytest.approx(0.3)


@pytest.mark.parametrize("preset, msg", [
    ("nope", "unknown composite 'nope'"),
    ({"a": -1}, "weight must be a number >= 0"),
    ({"a": 0}, "the weights add up to 0"),
    ({}, "has no components"),
    ({"components": {"a": {"weight": 1, "metrik": "b"}}}, "unknown key"),
    ({"components": {"a": {"weight": 1, "source": "elsewhere"}}}, "source must be 'consistency'"),
    ({"components": {"a": 1}, "missing": "zero"}, "missing policy must be one of"),
    ({"components": {"a": {"weight": 1, "preset": {"components": {"b": {"weight": 1, "preset": "nope"}}}}}},
     "unknown composite 'nope'"),
])
def test_bad_definitions(preset, msg):
    with pytest.raises(ConfigError, match=msg):
        K.composite_from_values({"a": 0.5}, preset)


def test_self_nesting_and_out_of_range_inputs():
    with pytest.raises(ConfigError, match="contains itself"):
        K.resolve_composite("loop", custom={"loop": {"components": {"x": {"weight": 1, "preset": "loop"}}}})
    with pytest.raises(ConfigError, match="not in \\[0, 1\\]"):
        K.composite_from_values({"faithfulness": 1.5}, "deepeval")


def test_definition_file(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("components:\n  faithfulness: 2\n  hallucination: {weight: 1}\nmissing: none\n")
    r = K.composite_from_values({"faithfulness": 0.9, "hallucination": 0.3}, str(f))
    assert r["composite"] == "mine" and r["value"] == pytest.approx((2 * 0.9 + 0.7) / 3)
    with pytest.raises(ConfigError, match="not found"):
        K.resolve_composite(str(tmp_path / "missing.yaml"))


# ---- bands and hints ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, name", [(1.0, "Excellent"), (0.9, "Excellent"), (0.7 - 2e-16, "Good"), (0.8999, "Good"), (0.7, "Good"),
                                         (0.6999, "Fair"), (0.5, "Fair"), (0.4999, "Poor"), (0.3, "Poor"),
                                         (0.2999, "Critical"), (0.0, "Critical"), (None, None),
                                         (float("nan"), None)])
def test_band_boundaries(value, name):
    assert K.band(value) == name


def test_band_of_lower_is_better_and_actions():
    assert K.band(0.05, higher_is_better=False) == "Excellent"
    assert K.band(0.6, higher_is_better=False) == "Poor"
    assert K.band_action("Fair") == "Review and improve"


def test_hints_from_a_summary():
    summary = {
        "faithfulness": {"mean": 0.42, "direction": "higher"},
        "hallucination": {"mean": 0.35, "direction": "lower"},
        "trajectory_match@strict": {"mean": 0.69},
        "tool_completeness": {"mean": 0.95, "direction": "higher"},
        "final_answer_quality": {"mean": None},
        "rouge1_fmeasure": {"mean": 0.1},
        "bias": {"mean": 0.05},
    }
    hs = K.hints(summary)
    assert [h["metric"] for h in hs] == ["faithfulness", "hallucination", "trajectory_match@strict"]  # worst first
    f, h, t = hs
    assert (f["cause"], f["fix"], f["band"]) == ("Answer contains unsupported claims", "Improve context retrieval", "Poor")
    assert (h["issue"], h["fix"], h["band"]) == ("High hallucination", "Add stricter grounding", "Fair")
    assert t["fix"] == "Review workflow graph" and t["from_seed"]
    assert "faithfulness 0.42" in f["message"]
    assert K.hints(summary, threshold=0.3) == []
    assert K.hints({}) == []


# ---- composites of stored runs --------------------------------------------------------------------

def _register_test_metrics() -> None:
    def const(values):
        def fn(samples, ctx, **_):
            return [Score(values.get(s.id)) if values.get(s.id) is not None else Score.missing("judge failure")
                    for s in samples]
        return fn

    specs = {"tcomp_good": ({"a": 0.9, "b": 0.5, "c": 0.7}, True),
             "tcomp_bad": ({"a": 0.1, "b": None, "c": 0.6}, False)}
    from ragmeter.metrics.registry import _REGISTRY

    for name, (vals, hib) in specs.items():
        if name not in _REGISTRY:
            register_metric(MetricSpec(name=name, family="test", fn=const(vals), higher_is_better=hib))


def test_composite_scores_of_a_run(db_url):
    _register_test_metrics()
    res = evaluate([{"id": x, "question": "q"} for x in "abc"], ["tcomp_good", "tcomp_bad"], db=db_url)
    store = open_store(db_url)
    preset = {"name": "mine", "components": {"tcomp_good": 1, "tcomp_bad": 1}}
    out = K.composite_scores(store, res.run_id, preset, per_sample=True)
    a = (0.9 + 0.9) / 2  # tcomp_bad is lower-is-better: 1 - 0.1
    c = (0.7 + 0.4) / 2
    assert out["per_sample"]["a"]["value"] == pytest.approx(a)
    assert out["per_sample"]["b"] == {"value": 0.5, "missing": ["tcomp_bad"]}  # renormalised
    assert out["mean"] == pytest.approx((a + 0.5 + c) / 3) and out["n"] == 3 and out["n_renormalised"] == 1
    assert out["inputs"] == {"tcomp_good": "tcomp_good", "tcomp_bad": "tcomp_bad"} and out["absent"] == []
    assert out["of_means"] == pytest.approx((0.7 + (1 - 0.35)) / 2)
    strict = K.composite_scores(store, res.run_id, preset, missing="none")
    assert strict["n"] == 2 and strict["n_missing"] == 1
    assert "tcomp_bad" in next(iter(strict["missing_reasons"]))
    assert K.composite_scores(store, res.run_id, "deepeval") is None  # none of its components


def test_openevals_composite_of_the_agent_example_and_unified_with_consistency(db_url):
    res = evaluate(str(EXAMPLE / "traces.jsonl"), config=str(EXAMPLE / "expectations.yaml"), db=db_url)
    store = open_store(db_url)
    out = K.composite_scores(store, res.run_id, "openevals", per_sample=True)
    for row in res.rows():
        vals = {k: v for k, v in row.items() if k != "no_value_reasons" and k != "id"}
        assert out["per_sample"][row["id"]]["value"] == pytest.approx(K.composite_from_values(vals, "openevals")["value"])
    assert out["inputs"]["trajectory_match"] == "trajectory_match"  # the exact key wins over @superset
    unified = K.composite_scores(store, res.run_id, "unified")
    assert unified["mean"] is None and set(unified["absent"]) == {"accuracy", "consistency"}  # 40% < 50%
    store.kv_put("consistency", res.run_id, {"same_model": {"overall": 0.8, "per_sample": {
        "apple": 1.0, "xyz-private": 0.5, "toyota": 0.75, "acme-startup": None}}})
    unified = K.composite_scores(store, res.run_id, "unified", per_sample=True)
    assert unified["absent"] == ["accuracy"] and unified["inputs"]["consistency"] == "consistency record"
    apple = out["per_sample"]["apple"]["value"]
    assert unified["per_sample"]["apple"]["value"] == pytest.approx((0.25 * 1.0 + 0.40 * apple) / 0.65)
    assert unified["per_sample"]["acme-startup"]["value"] is None  # 40% of the weight only
    assert unified["n"] == 3


def test_composite_and_show_cli(db_url, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["composite", "--value", "answer_relevancy=0.95", "--value", "faithfulness=0.90",
                            "--value", "hallucination=0.05", "--value", "contextual_relevancy=0.85",
                            "--value", "bias=0.10"])
    assert r.exit_code == 0 and "deepeval: 0.9200 (Excellent)" in r.output
    r = runner.invoke(app, ["composite", "--value", "faithfulness=x"])
    assert r.exit_code != 0
    res = evaluate(str(EXAMPLE / "traces.jsonl"), config=str(EXAMPLE / "expectations.yaml"), db=db_url)
    r = runner.invoke(app, ["composite", res.run_id, "--db", db_url, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert set(data["composites"]) == {"openevals", "unified"}
    assert data["composites"]["openevals"]["mean"] == pytest.approx(K.composite_scores(open_store(db_url), res.run_id,
                                                                                       "openevals")["mean"])
    r = runner.invoke(app, ["composite", res.run_id, "--db", db_url, "--preset", "deepeval"])
    assert r.exit_code == 0 and "none of its components" in r.output
    r = runner.invoke(app, ["show", res.run_id, "--db", db_url])
    assert r.exit_code == 0
    assert "composite scores" in r.output and "openevals: " in r.output
    assert "hints" in r.output and "review workflow graph" in r.output.lower()
    assert "score bands" in r.output and "tool_completeness: 0.7500 Good — minor improvements possible" in r.output


def test_run_config_can_define_named_composites(db_url):
    _register_test_metrics()
    res = evaluate([{"id": x} for x in "abc"], ["tcomp_good"], db=db_url,
                   options={"composite": {"only_good": {"components": {"tcomp_good": 1}}}})
    out = K.composite_scores(open_store(db_url), res.run_id, "only_good")
    assert out["mean"] == pytest.approx((0.9 + 0.5 + 0.7) / 3) and out["band"] == "Good"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_runs_composites_equal_the_per_sample_formula_exactly(db_url, seed):
    """composite_scores computes every sample at once on the score columns: each sample's value is
    composite_from_values of its scores, to the last bit, with missing values, a lower-is-better
    component, renormalisation, the 'none' policy and min_coverage; the summary is the aggregate of
    those values with their reasons."""
    import random

    from ragmeter.metrics.registry import _REGISTRY
    from ragmeter.stats import aggregate_many

    rnd = random.Random(seed)
    ids = [f"s{i}" for i in range(300)]
    names = [f"tcol{seed}_{k}" for k in range(4)]
    values = {m: {i: (None if rnd.random() < 0.15 else rnd.choice([0.0, 1.0, rnd.random()])) for i in ids}
              for m in names}

    def const(vals):
        def fn(samples, ctx, **_):
            return [Score(vals[s.id]) if vals[s.id] is not None else Score.missing("judge failure")
                    for s in samples]
        return fn

    for k, m in enumerate(names):
        if m not in _REGISTRY:
            register_metric(MetricSpec(name=m, family="test", fn=const(values[m]), higher_is_better=k != 2))
    res = evaluate([{"id": i, "question": "q"} for i in ids], names, db=db_url)
    store = open_store(db_url)
    weights = {m: rnd.choice([0.1, 0.25, 0.3, 1.0, 2.0]) for m in names}
    for missing, cover in (("renormalise", 0.0), ("none", 0.0), ("renormalise", 0.6)):
        preset = {"name": "mix", "components": weights, "missing": missing, "min_coverage": cover}
        out = K.composite_scores(store, res.run_id, preset, per_sample=True)
        expect, reasons = [], []
        for i in ids:
            one = K.composite_from_values({m: values[m][i] for m in names}, preset)
            assert out["per_sample"][i]["value"] == one["value"]  # exactly, not approximately
            assert out["per_sample"][i]["missing"] == one["missing"]
            expect.append(np.nan if one["value"] is None else one["value"])
            reasons.append(one.get("reason"))
        agg = aggregate_many({"c": (np.array(expect), reasons)}, bounds={"c": (0.0, 1.0)})["c"]
        assert {k: out[k] for k in agg} == agg
