"""Correctness methods: keyword, semantic_fixed, semantic_dynamic (calibration), semantic_guarded."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ragmeter
from ragmeter.core.errors import MetricError
from ragmeter.core.text import contains_phrase, fact_keys, is_abstention, key_facts, negation_mismatch
from ragmeter.metrics.correctness import (
    binary_scores,
    calibrate_threshold,
    candidate_thresholds,
    keyword_correct,
    metric_for_method,
    semantic_fixed,
    semantic_guarded,
    threshold_curve,
    validation_split,
)
from references import require_reference


@pytest.fixture(scope="module")
def encode():
    from ragmeter.embed import get_encoder

    enc = get_encoder()
    return lambda texts: enc.encode(list(texts))


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """Every offline method on the bundled example, once for the module."""
    db = f"sqlite:///{tmp_path_factory.mktemp('corr') / 'r.db'}"
    res = ragmeter.evaluate("example", ["correct_keyword", "correct_semantic_fixed", "correct_semantic_dynamic",
                                        "correct_semantic_guarded"], db=db)
    return res, db


# ---- keyword ---------------------------------------------------------------------------------------

SEED_TABLE = [  # seed 003's table: the current method gives 0.5 to the last two; they must be 0
    ("The capital of France is Paris", 1.0),
    ("France's seat of government is in Paris", 1.0),
    ("The capital city is Paris", 1.0),
    ("The capital of France is Lyon", 0.0),
    ("I don't know", 0.0),
]


@pytest.mark.parametrize(("answer", "expected"), SEED_TABLE)
def test_keyword_is_binary_on_seed_003_table(answer, expected):
    assert keyword_correct(answer, "paris") == expected


def test_keyword_normalisation_and_modes():
    assert keyword_correct("  PARIS!!  ", "paris") == 1.0
    assert keyword_correct("It is Zürich.", "zurich") == 1.0
    assert keyword_correct("Parisian food", "paris") == 0.0  # whole tokens only
    assert keyword_correct("The fare is €14.50.", "14.50") == 1.0
    assert keyword_correct("New  York,\ncity", "new york") == 1.0
    assert keyword_correct("Paris and Lyon", ["paris", "rome"], mode="all") == 0.0
    assert keyword_correct("Paris and Rome", ["paris", "rome"], mode="all") == 1.0
    with pytest.raises(MetricError, match="keyword"):
        keyword_correct("anything", ["", "  ", "!!"])
    with pytest.raises(MetricError, match="mode"):
        keyword_correct("a", "a", mode="most")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40), st.text(max_size=15))
def test_keyword_only_ever_gives_0_or_1(answer, kw):
    try:
        v = keyword_correct(answer, kw)
    except MetricError:
        return
    assert v in (0.0, 1.0)
    if v == 1.0:
        assert contains_phrase(answer, kw)


# ---- text helpers ---------------------------------------------------------------------------------

def test_key_facts_numbers_names_and_question_exclusion():
    facts = {f.key: f for f in key_facts("Staff get 25 days; the MV Aurora Lind carries 1,000 staff.")}
    assert facts["25"].kind == "number" and facts["1000"].kind == "number"
    assert facts["mv aurora lind"].kind == "entity" and facts["mv aurora lind"].parts == ("aurora", "lind")
    assert facts["staff"].kind == "word"  # capitalised only as the first word, lower case elsewhere
    assert key_facts("Monthly on the 25th.")[0].kind == "word"  # an -ly adverb opening a sentence
    assert [f.key for f in key_facts("twenty-five minutes")][0] == "25"
    assert [f.key for f in key_facts("It costs €14.50 at 06:00.")][1:3] == ["14.5", "6:00"]
    q = fact_keys("When did the Berlin Wall fall?")
    assert [f.surface for f in key_facts("The Berlin Wall fell on 9 November 1989.", exclude=q)] == \
        ["fell", "9", "November", "1989"]
    terminal = key_facts("It leaves from Terminal B.")[-1]
    assert terminal.ids == ("b",) and terminal.kind == "entity"


def test_abstention_and_negation():
    for t in ["I don't know", "I do not know.", "Sorry, I could not find that.", "The handbook does not say.",
              "", "   ", "Not mentioned in the context."]:
        assert is_abstention(t), t
    assert not is_abstention("Paris is the capital of France.")
    assert negation_mismatch("Paris is not the capital of France", "Paris is the capital of France")
    assert negation_mismatch("Yes, it is.", "No, it is not.")
    assert not negation_mismatch("Two bags at no charge.", "Two bags of up to 23 kg each.")
    assert not negation_mismatch("There are no sailings on 25 December.", "No, there are no sailings on 25 December.")


# ---- semantic fixed / guarded --------------------------------------------------------------------------

@pytest.mark.slow
def test_plain_threshold_failures_measured_with_minilm(encode):
    # the figures: 0.84 passes 0.75 although wrong, 0.73 fails although right
    x = encode(["The capital of France is London", "The capital of France is Paris",
                "Paris is the capital of France.", "Paris"])
    assert float(x[0] @ x[1]) == pytest.approx(0.84, abs=0.01)
    assert float(x[2] @ x[3]) == pytest.approx(0.73, abs=0.01)
    assert semantic_fixed("The capital of France is London", "The capital of France is Paris", encode=encode) == 1.0
    assert semantic_fixed("Paris is the capital of France.", "Paris", encode=encode) == 0.0


@pytest.mark.slow
def test_seed_003_unit_tests_pass_with_semantic_guarded(encode):
    assert semantic_guarded("The capital of France is Paris", "Paris is France's capital city", encode=encode) == 1.0
    assert semantic_guarded("The capital of France is London", "The capital of France is Paris", encode=encode) == 0.0
    assert semantic_guarded("Paris is the capital of France.", "Paris", encode=encode) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("reference", ["Paris", "Paris is the capital of France."])
@pytest.mark.parametrize(("answer", "expected"), SEED_TABLE)
def test_seed_003_table_with_semantic_guarded(encode, reference, answer, expected):
    assert semantic_guarded(answer, reference, question="What is the capital of France?", encode=encode) == expected


#: an out-of-domain set written before looking at the method's verdicts (not used to design it)
OUT_OF_DOMAIN = [
    ("How many moons does Mars have?", "Mars has two moons, Phobos and Deimos.", "Two: Phobos and Deimos.", 1),
    ("How many moons does Mars have?", "Mars has two moons, Phobos and Deimos.", "Mars has 2 moons.", 1),
    ("How many moons does Mars have?", "Mars has two moons, Phobos and Deimos.", "Mars has three moons.", 0),
    ("Who wrote Pride and Prejudice?", "Jane Austen", "It was written by Jane Austen in 1813.", 1),
    ("Who wrote Pride and Prejudice?", "Jane Austen", "Charlotte Brontë wrote it.", 0),
    ("Who wrote Pride and Prejudice?", "Jane Austen", "Austen.", 1),
    ("What is the boiling point of water at sea level in Celsius?", "100 degrees Celsius",
     "Water boils at 100 °C at sea level.", 1),
    ("What is the boiling point of water at sea level in Celsius?", "100 degrees Celsius", "It boils at 90 degrees.", 0),
    ("When did the Berlin Wall fall?", "The Berlin Wall fell on 9 November 1989.", "It fell in 1989, on November 9.", 1),
    ("When did the Berlin Wall fall?", "The Berlin Wall fell on 9 November 1989.", "The wall came down in 1991.", 0),
    ("Is the Great Wall of China visible from the Moon with the naked eye?",
     "No, it is not visible from the Moon with the naked eye.", "No. It cannot be seen from the Moon without aid.", 1),
    ("Is the Great Wall of China visible from the Moon with the naked eye?",
     "No, it is not visible from the Moon with the naked eye.", "Yes, you can easily see it.", 0),
    ("What is the chemical symbol for gold?", "Au", "The symbol for gold is Au.", 1),
    ("What is the chemical symbol for gold?", "Au", "Ag", 0),
    ("How long is a marathon?", "42.195 kilometres", "A marathon is 42.195 km long.", 1),
    ("How long is a marathon?", "42.195 kilometres", "It is 50 kilometres.", 0),
    ("Which planet is closest to the Sun?", "Mercury", "Mercury is the closest planet to the Sun.", 1),
    ("Which planet is closest to the Sun?", "Mercury", "Venus.", 0),
    ("What language is spoken in Brazil?", "Portuguese", "Brazilians speak Portuguese.", 1),
    ("What language is spoken in Brazil?", "Portuguese", "Spanish is the main language.", 0),
    ("What is the speed of light in vacuum?", "About 300,000 km per second.", "Roughly 300000 kilometres per second.", 1),
    ("What is the speed of light in vacuum?", "About 300,000 km per second.", "About 150,000 km per second.", 0),
    ("Does the office open on Sundays?", "No, the office is closed on Sundays.", "I'm not sure.", 0),
    ("Does the office open on Sundays?", "No, the office is closed on Sundays.", "No, it is closed on Sundays.", 1),
]


@pytest.mark.slow
def test_semantic_guarded_beats_the_plain_threshold_out_of_domain(encode):
    guarded = [semantic_guarded(a, r, question=q, encode=encode) for q, r, a, _ in OUT_OF_DOMAIN]
    fixed = [semantic_fixed(a, r, encode=encode) for _, r, a, _ in OUT_OF_DOMAIN]
    y = [lab for *_, lab in OUT_OF_DOMAIN]
    acc_g, acc_f = binary_scores(y, guarded).accuracy, binary_scores(y, fixed).accuracy
    # measured: guarded 23/24 (its one miss: "Mars has 2 moons" lacks the moons' names), fixed 14/24
    assert acc_g >= 0.9 and acc_g > acc_f + 0.2
    assert binary_scores(y, guarded).precision == 1.0  # no wrong answer accepted


def test_unknown_method_and_method_names():
    assert metric_for_method("semantic-guarded") == "correct_semantic_guarded"
    assert metric_for_method("correct_keyword") == "correct_keyword"
    with pytest.raises(MetricError, match="semantic_fixed"):
        metric_for_method("semantic")


# ---- calibration ----------------------------------------------------------------------------------------

@pytest.mark.contract
def test_binary_scores_use_real_labels_and_match_sklearn():
    skm = require_reference("sklearn.metrics")
    rng = np.random.default_rng(4)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        y, p = rng.integers(0, 2, n), rng.integers(0, 2, n)
        b = binary_scores(y, p)
        assert b.accuracy == pytest.approx(skm.accuracy_score(y, p))
        assert b.f1 == pytest.approx(skm.f1_score(y, p, zero_division=0))
        assert b.precision == pytest.approx(skm.precision_score(y, p, zero_division=0))
        assert b.recall == pytest.approx(skm.recall_score(y, p, zero_division=0))
    # the seed's bug: with y_true = [1]*n, predicting "correct" everywhere looks perfect
    preds = [1, 1, 1, 1]
    assert binary_scores([1, 1, 1, 1], preds).f1 == 1.0
    assert binary_scores([1, 0, 0, 0], preds).f1 == pytest.approx(0.4)


def test_curve_matches_brute_force_and_chosen_threshold_separates():
    rng = np.random.default_rng(1)
    s = rng.random(40)
    y = (s + rng.normal(0, 0.15, 40) > 0.55).astype(int)
    cand = candidate_thresholds(s, "fine")
    acc, f1 = threshold_curve(s, y, cand)
    for t, a, f in zip(cand[::7], acc[::7], f1[::7], strict=False):
        pred = (s >= t).astype(int)
        assert a == pytest.approx(np.mean(pred == y))
        assert f == pytest.approx(binary_scores(y, pred).f1)
    cal = calibrate_threshold(s, y)
    assert cal.validation_scores["accuracy"] == pytest.approx(max(acc))
    assert set(np.round(np.arange(0, 1.0001, 0.01), 2)) <= set(cal.thresholds)  # the fine grid
    # perfectly separable: the chosen threshold lies between the classes, in the middle of the gap
    sep = calibrate_threshold([0.2, 0.3, 0.35, 0.8, 0.9], [0, 0, 0, 1, 1])
    assert 0.35 < sep.chosen <= 0.8 and sep.validation_scores["accuracy"] == 1.0
    assert abs(sep.chosen - 0.575) < 0.03
    f = calibrate_threshold(s, y, objective="f1")
    assert f.objective == "f1" and binary_scores(y, (s >= f.chosen)).f1 == pytest.approx(max(f1))
    assert calibrate_threshold(s, y, grid="coarse").thresholds == pytest.approx(list(np.arange(0.5, 0.9001, 0.05)))
    mids = calibrate_threshold([0.1, 0.4, 0.9], [0, 1, 1], grid="midpoints")
    assert mids.thresholds == pytest.approx([0.099, 0.25, 0.65, 0.901])


def test_proxy_calibration_warns_that_it_is_circular():
    with pytest.warns(UserWarning, match="circular"):
        cal = calibrate_threshold([0.95, 0.93, 0.5, 0.2, 0.85])
    assert cal.circular and cal.label_source.startswith("proxy")
    assert 0.85 < cal.chosen <= 0.93  # it can only rediscover the proxy's 0.9
    with pytest.raises(MetricError):
        calibrate_threshold([])
    with pytest.raises(MetricError, match="objective"):
        calibrate_threshold([0.5], [1], objective="auc")


def test_validation_split_is_stratified_deterministic_and_honours_named_splits():
    ids = [f"s{i}" for i in range(20)]
    labels = [1] * 12 + [0] * 6 + [None] * 2
    a = validation_split(ids, labels, fraction=0.5, seed=3)
    assert a == validation_split(ids, labels, fraction=0.5, seed=3)
    assert sum(1 for i in a if labels[ids.index(i)] == 1) == 6 and sum(1 for i in a if labels[ids.index(i)] == 0) == 3
    assert "s18" not in a and "s19" not in a  # unlabelled never calibrate
    named = validation_split(ids, labels, split_of=["val"] * 4 + [None] * 16)
    assert named == {"s0", "s1", "s2", "s3"}
    with pytest.raises(MetricError):
        validation_split(ids, labels, fraction=1.0)


# ---- the registered metrics on the bundled example --------------------------------------------------------

def _by_id(res, key):
    return {s.id: sc for s, sc in zip(res.samples, res.scores[key], strict=True)}


@pytest.mark.slow
def test_example_keyword_binary_and_wrong_paris_answers_score_zero(example_run):
    res, _ = example_run
    kw = [sc.value for sc in res.scores["correct_keyword"]]
    assert set(kw) <= {0.0, 1.0} and None not in kw
    lyon_idk = [s.id for s in res.samples if s.question == "What is the capital of France?"
                and ("Lyon" in s.answer or "know" in s.answer)]
    assert len(lyon_idk) == 2
    for key in ("correct_keyword", "correct_semantic_fixed", "correct_semantic_dynamic", "correct_semantic_guarded"):
        by = _by_id(res, key)
        for sid in lyon_idk:
            assert by[sid].value in (0.0, None), (key, sid)  # None: in semantic_dynamic's calibration split
            if by[sid].value is None:
                assert "calibration split" in by[sid].reason
        for s in res.samples:
            assert by[s.id].value in (0.0, 1.0, None)


@pytest.mark.slow
def test_example_semantic_dynamic_reports_curve_threshold_and_held_out_accuracy(example_run):
    res, db = example_run
    cal = res.extra["calibration"]
    assert len(cal["thresholds"]) == len(cal["accuracy"]) == len(cal["f1"]) >= 101
    assert cal["objective"] == "accuracy" and not cal["circular"] and cal["label_source"] == "human"
    held = cal["held_out"]
    n_held = sum(sc.value is not None for sc in res.scores["correct_semantic_dynamic"])
    assert held["chosen"]["n"] == n_held == res.summary["correct_semantic_dynamic"]["n"]
    assert n_held + cal["n_validation"] == len(res.samples)
    # the must-show: on the same held-out samples the calibrated threshold is at least as accurate as 0.75
    assert held["chosen"]["accuracy"] >= held["fixed_0.75"]["accuracy"]
    stored = ragmeter.store.open_store(db).get_run(res.run_id)
    assert stored.extra["calibration"]["chosen"] == cal["chosen"]
    assert stored.extra["method"]["methods"]["semantic_dynamic"]["threshold"] == cal["chosen"]
    assert set(stored.extra["method"]["name"]) == {"keyword", "semantic_fixed", "semantic_dynamic", "semantic_guarded"}


@pytest.mark.slow
def test_example_guarded_is_the_most_accurate_offline_method(example_run):
    from ragmeter.analysis.correctness import label_agreement

    res, _ = example_run
    rows = {r["method"]: r for r in label_agreement(res)}
    acc = {k: r["all"]["accuracy"] for k, r in rows.items()}
    held = {k: r["held_out"]["accuracy"] for k, r in rows.items()}
    assert acc["correct_semantic_guarded"] > max(acc["correct_semantic_fixed"], acc["correct_keyword"])
    assert held["correct_semantic_guarded"] > held["correct_semantic_dynamic"]
    assert rows["correct_semantic_guarded"]["all"]["n"] == sum(s.label is not None for s in res.samples)


def test_semantic_dynamic_without_labels_uses_the_proxy_and_records_it(db_url):
    rows = [{"id": f"r{i}", "question": "q", "answer": a, "reference": "Paris is the capital of France."}
            for i, a in enumerate(["Paris is the capital of France.", "The capital is Paris.", "Lyon.",
                                   "I don't know", "France's capital is Paris", "Berlin"])]
    with pytest.warns(UserWarning, match="circular"):
        res = ragmeter.evaluate(rows, ["correct_semantic_dynamic"], db=db_url)
    cal = res.extra["calibration"]
    assert cal["circular"] and cal["held_out"] is None
    assert res.extra["method"]["methods"]["semantic_dynamic"]["circular"] is True
    strict = ragmeter.evaluate(rows, [{"name": "correct_semantic_dynamic", "params": {"use_proxy": False},
                                       "key": "strict"}], db=db_url)
    assert strict.summary["strict"]["n"] == 0
    assert "labelled" in next(iter(strict.summary["strict"]["missing_reasons"]))
    fixed = ragmeter.evaluate(rows, [{"name": "correct_semantic_dynamic", "params": {"threshold": 0.8},
                                      "key": "fixed"}], db=db_url)
    assert fixed.summary["fixed"]["n"] == len(rows) and "calibration" not in fixed.extra


def test_unavailable_embedding_model_gives_no_value_not_a_crash(db_url, tmp_path):
    rows = [{"id": "a", "question": "q", "answer": "Paris", "reference": "Paris"}]
    res = ragmeter.evaluate(rows, ["correct_semantic_guarded", "correct_keyword"], db=db_url,
                            options={"embedding_model": str(tmp_path / "no-such-model")})
    assert res.summary["correct_semantic_guarded"]["n"] == 0
    assert "embeddings unavailable" in next(iter(res.summary["correct_semantic_guarded"]["missing_reasons"]))
    assert res.summary["correct_keyword"]["mean"] == 1.0


def test_keyword_metric_uses_metadata_keywords_and_reports_missing(db_url):
    rows = [{"id": "a", "answer": "It is Paris.", "reference": "The capital is Paris", "keywords": ["paris"]},
            {"id": "b", "answer": "It is Lyon.", "reference": "Paris"},
            {"id": "c", "answer": "Something."}]
    res = ragmeter.evaluate(rows, ["correct_keyword"], db=db_url)
    vals = [sc.value for sc in res.scores["correct_keyword"]]
    assert vals == [1.0, 0.0, None]
    assert "no expected keyword" in res.scores["correct_keyword"][2].reason


@pytest.mark.slow
def test_eval_cli_method_option(db_url):
    from ragmeter.apps.cli import app

    r = CliRunner().invoke(app, ["eval", "example", "--method", "semantic_guarded", "--json", "--db", db_url])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert "correct_semantic_guarded" in out["metrics"] and out["method"]["name"] == "semantic_guarded"
    bad = CliRunner().invoke(app, ["eval", "example", "--method", "vibes", "--db", db_url])
    assert bad.exit_code != 0
