"""Lexical family: public functions, registry entries, runner end to end, properties (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz
from rapidfuzz.distance import Hamming, JaroWinkler, LCSseq, Levenshtein

import ragmeter
from ragmeter.core.config import load_config
from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import ConfigError, MetricError
from ragmeter.core.schema import Sample
from ragmeter.metrics import get_spec, resolve_all
from ragmeter.metrics import lexical as L
from references import require_reference

SEED_002_LEXICAL = ["lcsstr", "lcsseq", "cosine", "jaro_winkler", "hamming", "jaccard", "levenshtein",
                    "fuzzy_score", "rouge1_precision", "rouge1_recall", "rouge1_fmeasure",
                    "rouge2_precision", "rouge2_recall", "rouge2_fmeasure", "rougeL_precision",
                    "rougeL_recall", "rougeL_fmeasure"]
ALL_KEYS = SEED_002_LEXICAL + ["bleu", "bleu2", "chrf", "exact_match", "token_f1", "keyword_match"]
SYMMETRIC = ["lcsstr", "lcsseq", "cosine", "jaro_winkler", "hamming", "jaccard", "levenshtein",
             "fuzzy_score", "exact_match", "token_f1"]


# ---- registry ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ALL_KEYS)
def test_registered_with_requirements_and_range(key):
    spec = get_spec(key)
    assert spec.family == "lexical"
    assert spec.requires == ("answer", "reference")
    assert spec.range == (0.0, 1.0) and spec.higher_is_better
    assert not spec.needs_llm and not spec.needs_embeddings
    assert spec.info()["description"]


def test_seed_002_config_resolves(tmp_path):
    path = tmp_path / "search_config.json"
    path.write_text(json.dumps({"metric_types": SEED_002_LEXICAL, "chunking": {"size": 512}}))
    keys = [r.key for r in resolve_all(load_config(path)["metrics"])]
    assert keys == SEED_002_LEXICAL


def test_parameters_resolve_and_are_validated():
    (req,) = resolve_all([{"name": "fuzzy_score", "params": {"scorer": "ratio"}}])
    assert req.key == "fuzzy_score(scorer=ratio)" and req.params == {"scorer": "ratio"}
    (req,) = resolve_all(["fuzzy_score@WRatio"])
    assert req.key == "fuzzy_score@WRatio" and req.params == {"scorer": "WRatio"}
    assert get_spec("rouge1_fmeasure").defaults == {"use_stemmer": True}
    assert get_spec("bleu2").defaults["max_ngram_order"] == 2
    with pytest.raises(ConfigError, match="has no parameter"):
        resolve_all([{"name": "levenshtein", "params": {"scorer": "ratio"}}])
    assert "unknown fuzzy_score scorer" in get_spec("fuzzy_score").check(None, scorer="nope")
    assert "smooth_method" in get_spec("bleu").check(None, **{**get_spec("bleu").defaults,
                                                              "smooth_method": "magic"})
    assert get_spec("rougeL_recall").check(None, use_stemmer="yes")
    assert get_spec("chrf").check(None, **get_spec("chrf").defaults) is None


# ---- public functions -------------------------------------------------------------------------

@pytest.mark.contract
def test_functions_equal_references_on_examples():
    textdistance = require_reference("textdistance")
    rouge_scorer = require_reference("rouge_score.rouge_scorer")
    a, b = "The capital of France is Paris.", "Paris is the capital of France"
    assert L.levenshtein(a, b) == Levenshtein.normalized_similarity(a, b)
    assert L.jaro_winkler(a, b) == JaroWinkler.normalized_similarity(a, b)
    assert L.lcsseq(a, b) == LCSseq.normalized_similarity(a, b)
    assert L.hamming(a, b) == Hamming.normalized_similarity(a, b, pad=True)
    assert L.fuzzy_score(a, b) == fuzz.token_set_ratio(a, b) / 100
    assert L.fuzzy_score(a, b, scorer="WRatio") == fuzz.WRatio(a, b) / 100
    for name in ("jaccard", "cosine", "lcsstr"):
        assert getattr(L, name)(a, b) == pytest.approx(getattr(textdistance, name).normalized_similarity(a, b),
                                                       abs=1e-12)
    ref = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(b, a)
    ours = L.rouge(a, b)
    for t in ("rouge1", "rouge2", "rougeL"):
        assert tuple(ours[t]) == tuple(ref[t])


def test_docstring_examples_hold():
    import doctest

    from ragmeter.metrics.lexical import rouge_metrics, strings, translation

    results = [doctest.testmod(m) for m in (L, strings, rouge_metrics, translation)]
    assert sum(r.attempted for r in results) >= 15 and sum(r.failed for r in results) == 0


def test_several_references_take_the_best():
    refs = ["completely different", "the cat sat on the mat"]
    assert L.levenshtein("the cat sat on a mat", refs) == L.levenshtein("the cat sat on a mat", refs[1])
    assert L.exact_match("The cat!", ["dog", "cat"]) == 1.0
    assert L.keyword_match("It is Paris.", ["London", "paris"]) == 1.0
    assert L.string_similarity("jaccard", ["abc"], [["xyz", "abd", "abc"]]).tolist() == [1.0]


def test_edge_cases():
    assert L.levenshtein("", "") == 1.0 and L.levenshtein("", "a") == 0.0
    assert L.jaccard("", "") == 1.0 and L.cosine("", "x") == 0.0 and L.lcsstr("", "") == 1.0
    assert L.exact_match("", "") == 1.0 and L.token_f1("", "") == 1.0 and L.token_f1("a", "x") == 0.0
    assert L.token_f1("The", "a") == 1.0  # both normalise to nothing (SQuAD v2.0)
    assert L.bleu("", "a b c") == 0.0 and L.chrf("", "") == 0.0
    assert L.bleu("the cat sat on the mat", "the cat sat on the mat") == 1.0  # clipped, not 1+4e-16
    assert all(v == 0.0 for s in L.rouge("", "some words").values() for v in s)
    assert L.rouge("!!!", "???")["rougeL"] == L.RougeScore(0.0, 0.0, 0.0)


def test_keyword_match_is_binary_and_normalised():
    assert L.keyword_match("The capital of France is Paris", "paris") == 1.0
    assert L.keyword_match("The capital of France is Lyon", "Paris") == 0.0
    assert L.keyword_match("I don't know", "Paris") == 0.0
    assert L.keyword_match("New   York-City, USA", "new york city") == 1.0
    assert L.keyword_match("STRASSE 5", "straße") == 1.0  # case folding, not just lower()
    assert L.keyword_match("a comparison", "paris") == 1.0  # substring containment, as seed 003
    assert L.keyword_match("compare-paris", "paris", whole_words=True) == 1.0
    assert L.keyword_match("comparison", "paris", whole_words=True) == 0.0
    assert L.keyword_match("anything", "?!") is None  # nothing to look for: no value


def test_bad_input_raises_clear_errors():
    with pytest.raises(MetricError, match="answer must be a string"):
        L.levenshtein(None, "a")  # type: ignore[arg-type]
    with pytest.raises(MetricError, match="at least one reference"):
        L.rouge("a", [])
    with pytest.raises(MetricError, match=r"reference\[1\] must be a string"):
        L.bleu("a", ["b", 3])  # type: ignore[list-item]
    with pytest.raises(MetricError, match="differ in length"):
        L.string_similarity("levenshtein", ["a", "b"], ["a"])
    with pytest.raises(MetricError, match="unknown string metric"):
        L.string_similarity("levenstein", ["a"], ["a"])
    with pytest.raises(MetricError, match="unknown fuzzy_score scorer"):
        L.fuzzy_score("a", "b", scorer="nope")
    with pytest.raises(MetricError, match="max_ngram_order"):
        L.bleu("a", "b", max_ngram_order=0)
    with pytest.raises(MetricError, match="no parameter"):
        L.chrf("a", "b", order=3)


def test_rouge_scores_columns_and_stemming():
    cols = L.rouge_scores(["running cats"], ["the cat runs"])
    assert list(cols) == list(L.ROUGE_KEYS)
    assert cols["rouge1_recall"][0] == pytest.approx(2 / 3)  # run/cat shared after stemming
    assert L.rouge_scores(["running cats"], ["the cat runs"], use_stemmer=False)["rouge1_recall"][0] == 0.0


# ---- batch functions, memo, runner ------------------------------------------------------------

def _samples(n=40):
    out = []
    for i in range(n):
        refs = [f"The policy gives {i} vacation days to employees."]
        if i % 5 == 0:
            refs.append("Employees get vacation days.")
        out.append(Sample(id=f"s{i}", answer=f"Employees receive {i % 7} days of vacation per year.",
                          references=refs))
    return out


def test_rouge_nine_keys_share_one_computation():
    ctx = ScoringContext()
    samples = _samples()
    for key in L.ROUGE_KEYS:
        scores = get_spec(key).fn(samples, ctx, use_stemmer=True)
        direct = L.rouge_scores([s.answer for s in samples], [s.references for s in samples])[key]
        assert [s.value for s in scores] == direct.tolist()
    # the nine specs computed ROUGE once per distinct (answer, references)
    assert ctx.stats()["lexical_memo"] == {"rouge_pairs": len({(s.answer, tuple(s.references))
                                                               for s in samples})}
    # the last key is rougeL_fmeasure: details name the reference with the best ROUGE-L F
    s0 = samples[0]
    f = [L.rouge(s0.answer, r)["rougeL"].fmeasure for r in s0.references]
    assert f[0] != f[1] and scores[0].details == {"best_reference": f.index(max(f))}
    assert scores[1].details is None  # one reference: nothing to report


def test_batch_functions_equal_public_functions():
    samples = _samples(12)
    for key in ("lcsstr", "cosine", "token_f1", "bleu", "bleu2", "chrf"):
        spec = get_spec(key)
        got = [s.value for s in spec.fn(samples, ScoringContext(), **spec.defaults)]
        fn = getattr(L, key)
        assert got == [fn(s.answer, s.references) for s in samples]


def test_evaluate_end_to_end(db_url):
    rows = [
        {"id": "q1", "question": "Capital of France?", "answer": "The capital is Paris.",
         "reference": "Paris"},
        {"id": "q2", "question": "Capital of France?", "answer": "The capital is Lyon.",
         "references": ["Paris", "The capital of France is Paris."]},
        {"id": "q3", "question": "Capital of France?", "answer": "I don't know."},
        {"id": "q4", "question": "?", "answer": "Paris", "reference": "..."},
    ]
    metrics = SEED_002_LEXICAL + ["bleu", "bleu2", "chrf", "exact_match", "token_f1", "keyword_match"]
    res = ragmeter.evaluate(rows, metrics=metrics, db=db_url)
    assert set(res.summary) == set(metrics)
    for key in metrics:
        q3 = res.scores[key][2]
        assert q3.value is None and q3.reason == "missing field: reference"
        assert 0.0 <= res.scores[key][0].value <= 1.0
    assert [s.value for s in res.scores["keyword_match"]] == [1.0, 0.0, None, None]
    assert res.scores["keyword_match"][3].reason == "keyword is empty after normalisation"
    assert res.summary["keyword_match"]["n"] == 2 and res.summary["keyword_match"]["n_missing"] == 2
    assert res.scores["levenshtein"][1].value == L.levenshtein(rows[1]["answer"], rows[1]["references"])
    assert res.scores["rougeL_fmeasure"][0].value == L.rouge(rows[0]["answer"], "Paris")["rougeL"].fmeasure
    assert res.extra["lexical_memo"] == {"rouge_pairs": 3}
    # stored: the run can be read back with the same values
    again = ragmeter.evaluate(None, resume=res.run_id, db=db_url)
    assert [s.value for s in again.scores["bleu"]] == [s.value for s in res.scores["bleu"]]


def test_evaluate_rejects_bad_parameters_before_work(db_url):
    rows = [{"id": "a", "answer": "x", "reference": "y"}]
    with pytest.raises(ConfigError, match="unknown fuzzy_score scorer"):
        ragmeter.evaluate(rows, metrics=[{"name": "fuzzy_score", "params": {"scorer": "nope"}}], db=db_url)


# ---- properties -------------------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
WORDY = st.lists(st.sampled_from(["the", "cat", "cats", "sat", "on", "a", "mat", "running", "Paris",
                                  "é", "東京", ",", ".", "-", "don't", "3.5"]), max_size=25).map(" ".join)
PAIR = st.tuples(st.one_of(TEXT, WORDY), st.one_of(TEXT, WORDY))
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(PAIR)
def test_every_value_in_unit_interval(pair):
    a, b = pair
    for key in L.STRING_METRICS:
        v = L.string_similarity(key, [a], [b])[0]
        assert v != v or 0.0 <= v <= 1.0, key  # NaN only for keyword_match without a keyword
    for v in L.rouge_scores([a], [b]).values():
        assert 0.0 <= v[0] <= 1.0
    assert 0.0 <= L.bleu(a, b) <= 1.0 and 0.0 <= L.bleu2(a, b) <= 1.0 and 0.0 <= L.chrf(a, b) <= 1.0


@FAST
@given(PAIR)
def test_symmetric_metrics_are_symmetric(pair):
    a, b = pair
    for key in SYMMETRIC:
        assert L.string_similarity(key, [a, b], [b, a]).tolist() == pytest.approx(
            L.string_similarity(key, [b, a], [a, b]).tolist(), abs=1e-12), key
    ab, ba = L.rouge(a, b), L.rouge(b, a)
    for t in ab:
        assert ab[t].fmeasure == pytest.approx(ba[t].fmeasure, abs=1e-12)
        assert ab[t].precision == ba[t].recall


@FAST
@given(st.one_of(TEXT, WORDY))
def test_identical_strings_score_one(a):
    for key in ("lcsstr", "lcsseq", "cosine", "jaro_winkler", "hamming", "jaccard", "levenshtein",
                "exact_match", "token_f1"):
        assert L.string_similarity(key, [a], [a])[0] == 1.0, key


@pytest.mark.contract
@FAST
@given(PAIR)
def test_string_keys_match_references_on_arbitrary_text(pair):
    textdistance = require_reference("textdistance")
    a, b = pair
    refs = {
        "levenshtein": Levenshtein.normalized_similarity(a, b),
        "jaro_winkler": JaroWinkler.normalized_similarity(a, b),
        "lcsseq": LCSseq.normalized_similarity(a, b),
        "hamming": Hamming.normalized_similarity(a, b, pad=True),
        "fuzzy_score": fuzz.token_set_ratio(a, b) / 100,
        "jaccard": textdistance.jaccard.normalized_similarity(a, b),
        "cosine": textdistance.cosine.normalized_similarity(a, b),
        "lcsstr": textdistance.lcsstr.normalized_similarity(a, b),
    }
    for key, expected in refs.items():
        assert L.string_similarity(key, [a], [b])[0] == pytest.approx(expected, abs=1e-9), key
