"""Every ``text_similarity`` metric against its reference library, the openai/evals basic templates
against openai/evals' own definitions, string_check operations, templates and the formula."""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.metrics.openai_evals import similarity as S
from ragmeter.metrics.openai_evals.basic import f1, fuzzy_match, includes, match, normalize
from ragmeter.metrics.openai_evals.formula import FormulaError, evaluate_formula, parse_formula
from ragmeter.metrics.openai_evals.graders import string_check
from ragmeter.metrics.openai_evals.templates import TemplateError, render
from references import require_reference

WORDS = ["the", "cat", "sat", "on", "a", "mat", "Cat", "dogs", "ran", "far", "é", "naïve", "café", "東京", "12",
         "x-ray", "don't", "!", ",", "...", "RAG", "running", "runs", "ÅNGSTRÖM", "\t", "\n"]
EDGE = [("", ""), ("a", ""), ("", "a"), ("The Cat!", "the cat"), ("東京 タワー", "東京"), ("ß", "SS"),
        ("   ", "x"), ("🙂🙂", "🙂"), ("a a a a a", "a a"), ("Naïve café", "naive cafe"),
        ("one two three four five six", "one two three four five six"), ("\u0301", "e\u0301")]


def _pairs(n: int = 250, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = [(" ".join(rng.choices(WORDS, k=rng.randint(0, 14))), " ".join(rng.choices(WORDS, k=rng.randint(0, 14))))
           for _ in range(n)]
    return out + EDGE


PAIRS = _pairs()
A = [p[0] for p in PAIRS]
B = [p[1] for p in PAIRS]


@pytest.mark.contract
@pytest.mark.parametrize("n", ["1", "2", "3", "4", "5", "L"])
def test_rouge_equals_rouge_score(n):
    rouge_scorer = require_reference("rouge_score.rouge_scorer")

    key = f"rouge{n}"
    scorer = rouge_scorer.RougeScorer([key], use_stemmer=False)
    ours = S.similarity(f"rouge_{n.lower()}", A, B)
    ref = [scorer.score(b, a)[key].fmeasure for a, b in zip(A, B, strict=True)]
    assert ours == pytest.approx(ref, abs=1e-12)


def test_bleu_equals_sacrebleu():
    import sacrebleu

    ours = S.similarity("bleu", A, B)
    ref = [min(1.0, sacrebleu.sentence_bleu(a, [b]).score / 100) for a, b in zip(A, B, strict=True)]
    assert ours == pytest.approx(ref, abs=1e-12)


def test_fuzzy_match_equals_rapidfuzz_wratio():
    from rapidfuzz import fuzz, utils

    ours = S.similarity("fuzzy_match", A, B)
    ref = [fuzz.WRatio(a, b, processor=utils.default_process) / 100 for a, b in zip(A, B, strict=True)]
    assert ours == ref


def test_gleu_equals_nltk_on_13a_tokens():
    import sacrebleu
    from nltk.translate.gleu_score import sentence_gleu

    tok = sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()
    ours = S.similarity("gleu", A, B)
    ref = [sentence_gleu([tok(b).split()], tok(a).split()) for a, b in zip(A, B, strict=True)]
    assert ours == pytest.approx(ref, abs=1e-12)
    assert S.similarity("gleu", ["the cat sat"], ["the cat sat"]) == [1.0]


class _Synsets:
    """A stand-in for nltk's WordNet reader (its data is not installed here): a few synonym sets."""

    # METEOR looks synonyms up after its Porter-stem stage: words that are their own stems
    SYN = {"fast": ["fast", "quick"], "quick": ["fast", "quick"], "car": ["car", "auto"], "auto": ["car", "auto"]}

    class _Syn:
        def __init__(self, names):
            self._names = names

        def lemmas(self):
            return [type("L", (), {"name": (lambda self, n=n: n)})() for n in self._names]

    def synsets(self, word, pos=None):
        return [self._Syn(self.SYN[word])] if word in self.SYN else []


def test_meteor_equals_nltk_on_13a_tokens():
    import sacrebleu
    from nltk.translate.meteor_score import meteor_score

    tok = sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()
    wn = _Synsets()
    pairs = [p for p in PAIRS[:120] if p[0].strip() and p[1].strip()] + [("the quick auto", "the fast car")]
    ours = S.meteor([p[0] for p in pairs], [p[1] for p in pairs], wordnet=wn)
    ref = [meteor_score([tok(b).split()], tok(a).split(), wordnet=wn) for a, b in pairs]
    assert ours == pytest.approx(ref, abs=1e-12)
    assert ours[-1] > 0.9  # synonyms matched through the WordNet stage


def test_meteor_without_wordnet_data_is_refused_with_the_fix():
    problem = S.wordnet_problem()
    if problem is not None:
        assert "nltk.downloader wordnet" in problem


def test_cosine_uses_the_embedding_model():
    from ragmeter.core.context import ScoringContext
    from ragmeter.embed import get_encoder

    ctx = ScoringContext({})
    try:
        texts_a = ["the cat sat on the mat", "a fast car", "", "東京"]
        texts_b = ["a cat was sitting on a mat", "quantum chromodynamics", "x", "東京"]
        ours = S.similarity("cosine", texts_a, texts_b, ctx)
    finally:
        ctx.close()
    enc = get_encoder()
    ea, eb = enc.encode(texts_a), enc.encode(texts_b)
    for i, v in enumerate(ours):
        if not texts_a[i].strip():
            assert v == 0.0  # a blank text has a zero vector
            continue
        assert v == pytest.approx(float((ea[i] * eb[i]).sum()), abs=1e-5)
    assert ours[0] > ours[1] and ours[3] == pytest.approx(1.0, abs=1e-5)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_similarity_values_in_range_for_any_text(a, b):
    for metric in ("fuzzy_match", "bleu", "gleu", "rouge_1", "rouge_3", "rouge_l"):
        (v,) = S.similarity(metric, [a], [b])
        assert 0.0 <= v <= 1.0 and not math.isnan(v)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_string_check_operations(a, b):
    assert string_check("eq", a, b) == float(a == b)
    assert string_check("ne", a, b) == 1.0 - string_check("eq", a, b)
    assert string_check("like", a, b) == float(b in a)
    assert string_check("ilike", a, b) == float(b.casefold() in a.casefold())
    assert string_check("like", a + b, b) == 1.0 and string_check("ilike", a + b.upper(), b) == 1.0


# ---- openai/evals basic templates: their code, copied as the reference --------------------------
def _evals_normalize(s: str) -> str:  # evals/elsuite/utils.py
    s = s.lower()
    exclude = set(string.punctuation)
    s = "".join(char for char in s if char not in exclude)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _evals_fuzzy(s1: str, s2: str) -> bool:
    s1, s2 = _evals_normalize(s1), _evals_normalize(s2)
    if s1 == "" or s2 == "":
        return s1 == s2
    return s1 in s2 or s2 in s1


def _evals_f1(prediction: str, answers: list[str]) -> float:
    def one(prediction, ground_truth):
        p, g = _evals_normalize(prediction).split(), _evals_normalize(ground_truth).split()
        common = Counter(p) & Counter(g)
        num_same = sum(common.values())
        if num_same == 0:
            return 0
        precision, recall = num_same / len(p), num_same / len(g)
        return (2 * precision * recall) / (precision + recall)
    return max(one(prediction, a) for a in answers)


def _evals_match(sampled: str, expected: list[str]) -> bool:  # evals/api.py record_and_check_match
    picked = None
    for option in expected:
        if not sampled.startswith(option):
            continue
        picked = option
        break
    return picked in expected


def _evals_includes(sampled: str, ideal: list[str], ignore_case: bool) -> bool:
    def get_answer(text, answer_prompt):
        idx = text.lower().rfind(answer_prompt.lower()) if ignore_case else text.rfind(answer_prompt)
        return None if idx == -1 else text[idx: idx + len(answer_prompt)]
    return any(get_answer(sampled, ref) is not None for ref in ideal)


_TEXT = st.lists(st.sampled_from(list("abAB,.!é ") + [" the ", "an", "The", " a ", "An "]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.lists(_TEXT, min_size=1, max_size=3), st.booleans())
def test_registry_templates_equal_openai_evals(sampled, ideals, ignore_case):
    assert normalize(sampled) == _evals_normalize(sampled)
    assert match(sampled, ideals) == float(_evals_match(sampled, ideals))
    assert includes(sampled, ideals, ignore_case) == float(_evals_includes(sampled, ideals, ignore_case))
    assert fuzzy_match(sampled, ideals) == float(any(_evals_fuzzy(sampled, i) for i in ideals))
    assert f1(sampled, ideals) == pytest.approx(_evals_f1(sampled, ideals))


# ---- templates and formula -------------------------------------------------------------------------
def test_templates_resolve_nested_paths_and_say_what_is_missing():
    ns = {"item": {"a": {"b": [10, {"c": "deep"}]}, "n": 3, "t": True},
          "sample": {"output_text": "x", "output_tools": [{"function": {"name": "f"}}]}}
    assert render("{{item.a.b[1].c}}/{{ item.n }}/{{item.t}}", ns) == "deep/3/true"
    assert render("{{sample.output_tools[0].function.name}}", ns) == "f"
    assert render('{{item["a"].b.0}}', ns) == "10"
    assert render("{{item.a}}", ns) == '{"b": [10, {"c": "deep"}]}'
    with pytest.raises(TemplateError, match="has no field 'zz'"):
        render("{{item.zz}}", ns)
    with pytest.raises(TemplateError, match="element"):
        render("{{item.a.b[5]}}", ns)
    with pytest.raises(TemplateError, match="--map sample=COLUMN"):
        render("{{sample.output_text}}", {"item": {}, "sample": None})


@pytest.mark.parametrize(("formula", "values", "expected"), [
    ("0.5 * a + 0.5 * b", {"a": 1, "b": 0.5}, 0.75),
    ("a ^ 2 * 3", {"a": 2}, 12.0),  # ^ is a power with a power's precedence
    ("-a ^ 2", {"a": 3}, -9.0),
    ("2 ** a", {"a": 3}, 8.0),
    ("min(a, b, 0.2) + max(a, b)", {"a": 0.1, "b": 0.9}, 1.0),
    ("abs(a - b) + floor(2.7) + ceil(0.2)", {"a": 0.25, "b": 1}, 3.75),
    ("exp(0) + sqrt(a) + log(exp(2))", {"a": 4}, 5.0),
    ("(100 - abs(e - a)) / 100", {"e": 80, "a": 60}, 0.8),
])
def test_formula_values(formula, values, expected):
    assert evaluate_formula(parse_formula(formula, set(values)), values) == pytest.approx(expected)


@pytest.mark.parametrize("formula", [
    "__import__('os').system('true')", "a.__class__", "a[0]", "open('x')", "lambda: 1", "a if a else b",
    "a < b", "'text'", "unknown + 1", "[a]", "a; b", "exec('1')", "min()", "sqrt(a, b)", "a @ b", "a // b",
    "", "   ", "1j", "f'{a}'", "(a := 2)", "not a", "a and b", "True",
])
def test_formula_refuses_everything_else(formula):
    with pytest.raises(ValueError):
        parse_formula(formula, {"a", "b"})


@pytest.mark.parametrize(("formula", "values"), [
    ("a / b", {"a": 1, "b": 0}), ("log(a)", {"a": 0}), ("sqrt(a)", {"a": -1}), ("a ^ 0.5", {"a": -4}),
    ("exp(a)", {"a": 1e6}), ("a ^ b", {"a": 10, "b": 1e6}),
])
def test_formula_without_a_value(formula, values):
    with pytest.raises(FormulaError):
        evaluate_formula(parse_formula(formula, set(values)), values)
