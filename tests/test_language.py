"""Language settings: Portuguese correctness cues, Unicode ROUGE tokenisation, the Portuguese example."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ragmeter
from ragmeter.core import language as lang
from ragmeter.core.text import has_strong_negation, is_abstention, key_facts
from references import require_reference

Q = "Qual é a capital de Portugal?"


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'lang.db'}"


def test_words_any_script_and_cjk_by_character():
    assert lang.words("Το ίδιο κείμενο") == ["το", "ίδιο", "κείμενο"]
    assert lang.words("北京是首都") == ["北", "京", "是", "首", "都"]
    assert lang.words("cafe\u0301") == lang.words("caf\u00e9") == ["café"]
    assert lang.normalize_code("pt-BR") == "pt" and lang.normalize_code(None) == "en"


def test_portuguese_cues():
    assert has_strong_negation("A capital de Portugal não é Lisboa.", "pt")
    assert not has_strong_negation("A capital de Portugal não é Lisboa.")  # English cues: no "not"
    for t in ["Não sei.", "Não tenho certeza.", "O texto não menciona isso.", "Essa informação não é mencionada."]:
        assert is_abstention(t, "pt"), t
    assert not is_abstention("A capital de Portugal é Lisboa.", "pt")
    keys = [f.key for f in key_facts("O presidente executivo é Daniel Okafor.", language="pt")]
    assert "de" not in keys and any("okafor" in k for k in keys)


def test_language_pt_keyword_and_guarded(db):
    rows = [{"question": Q, "answer": a, "reference": "Lisboa"}
            for a in ("A capital de Portugal não é Lisboa.", "A capital de Portugal é Lisboa.")]
    keys = ["correct_keyword", "correct_semantic_guarded"]
    res = ragmeter.evaluate(rows, keys, db=db, options={"language": "pt"})
    for k in keys:
        assert [s.value for s in res.scores[k]] == [0.0, 1.0], k
    # without the language setting the Portuguese negation is not seen
    en = ragmeter.evaluate(rows, keys, db=db)
    assert [s.value for s in en.scores["correct_keyword"]] == [1.0, 1.0]
    # a per-sample language field does the same as the option
    res2 = ragmeter.evaluate([{**r, "language": "pt"} for r in rows], keys, db=db)
    assert [s.value for s in res2.scores["correct_keyword"]] == [0.0, 1.0]


def test_cli_language_option(db):
    from ragmeter.apps.cli import app

    path_rows = [{"question": Q, "answer": "A capital de Portugal não é Lisboa.", "reference": "Lisboa"}]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "pt.jsonl"
        p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in path_rows), encoding="utf-8")
        r = CliRunner().invoke(app, ["eval", str(p), "-m", "correct_keyword", "--language", "pt", "--json",
                                     "--db", db])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["metrics"]["correct_keyword"]["mean"] == 0.0


@pytest.mark.contract
def test_rouge_greek_with_language_and_default_equals_rouge_score(db):
    rouge_scorer = require_reference("rouge_score.rouge_scorer")

    text = "Η πρωτεύουσα της Ελλάδας είναι η Αθήνα."
    rows = [{"question": "q", "answer": text, "reference": text}]
    el = ragmeter.evaluate(rows, ["rouge1_fmeasure"], db=db, options={"language": "el"})
    assert el["rouge1_fmeasure"] == 1.0
    en = ragmeter.evaluate(rows, ["rouge1_fmeasure"], db=db)
    ref = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True).score(text, text)["rouge1"].fmeasure
    assert en["rouge1_fmeasure"] == ref == 0.0
    zh = ragmeter.evaluate([{"question": "q", "answer": "北京是中国的首都", "reference": "北京是中国的首都"}],
                           ["rouge1_fmeasure", "rouge2_fmeasure"], db=db, options={"language": "zh"})
    assert zh["rouge1_fmeasure"] == zh["rouge2_fmeasure"] == 1.0


def test_example_pt_dataset():
    ds = ragmeter.load("example-pt")
    assert len(ds.samples) >= 40
    kinds = [s.metadata["answer_kind"] for s in ds.samples]
    assert kinds.count("idk") >= 3 and any("não" in s.answer.lower() and s.label == 0 for s in ds.samples)
    for s in ds.samples:
        assert s.metadata["language"] == "pt" and s.label in (0, 1)
        for c in s.relevant:
            assert c.text and c.end > c.start


def test_correctness_example_pt_prints_every_method(db):
    from ragmeter.apps.cli import app

    r = CliRunner().invoke(app, ["correctness", "example-pt", "--json", "--db", db])
    assert r.exit_code == 0, r.output
    table = {row["method"]: row for row in json.loads(r.output.strip().splitlines()[-1])["methods"]}
    assert set(table) == {"correct_keyword", "correct_semantic_fixed", "correct_semantic_dynamic",
                          "correct_semantic_guarded"}
    for row in table.values():
        assert row["all"]["accuracy"] is not None and row["all"]["n"] >= 20
    # negated and "não sei" answers: the language-aware methods reject them
    assert table["correct_keyword"]["all"]["precision"] == 1.0


def test_nfc_before_lexical_metrics_and_option_off(db):
    import unicodedata

    rows = [{"question": "q", "answer": unicodedata.normalize("NFD", "café"), "reference": "café"}]
    res = ragmeter.evaluate(rows, ["exact_match", "levenshtein", "chrf"], db=db)
    assert res["exact_match"] == 1.0 and res["levenshtein"] == 1.0
    off = ragmeter.evaluate(rows, ["exact_match"], db=db, options={"unicode_normalize": False})
    assert off["exact_match"] == 0.0


def test_bm25_pipeline_uses_portuguese_stopwords_and_stems():
    from pathlib import Path

    from ragmeter.pipeline import rag
    from ragmeter.pipeline.retriever import analyse

    assert analyse("A travessia até Halden Isle demora 55 minutos", "pt") == [
        "travess", "halden", "isle", "demor", "55", "minut"]
    corpus = Path(ragmeter.__file__).parent / "data" / "example_pt" / "corpus"
    r = rag("Quanto tempo demora a travessia até Halden Isle?", corpus=str(corpus), language="pt")
    assert "55 minutos" in r["answer"]


def test_token_estimate_counts_cjk_per_character():
    from ragmeter.llm import service

    if service._tiktoken_encoding() is not None:
        pytest.skip("tiktoken with a cached encoding counts exactly")
    zh = "北京是中国的首都也是政治中心"
    assert service.estimate_tokens(zh) == len(zh)  # was len/4: a 4x undercount
    assert service.estimate_tokens("hello world, this is a test") == 7  # English unchanged


def test_corpus_bleu_and_chrf_beside_sentence_means(db):
    import sacrebleu

    pairs = [("the cat sat on the mat", ["the cat sat on a mat"]), ("a dog barked loudly", ["the dog barked"]),
             ("hello there", ["hello world", "hello there friend"]), ("it rains today in Paris", ["today it rains in Paris"])]
    rows = [{"question": "q", "answer": a, "references": r} for a, r in pairs]
    res = ragmeter.evaluate(rows, ["bleu", "chrf"], db=db)
    hyps = [a for a, _ in pairs]
    refs = [[r[0] for _, r in pairs], [r[1] if len(r) > 1 else None for _, r in pairs]]
    assert res.summary["bleu"]["corpus_score"] == pytest.approx(sacrebleu.corpus_bleu(hyps, refs).score / 100)
    assert res.summary["chrf"]["corpus_score"] == pytest.approx(sacrebleu.corpus_chrf(hyps, refs).score / 100)
    for k in ("bleu", "chrf"):
        s = res.summary[k]
        assert s["mean_kind"] == "sentence mean" and s["corpus_score"] != pytest.approx(s["mean"])
        assert s["corpus_ci_low"] <= s["corpus_score"] <= s["corpus_ci_high"]


def test_empty_text_conventions_match_the_documented_table(db):
    ms = ["exact_match", "token_f1", "levenshtein", "fuzzy_score", "rouge1_fmeasure", "bleu", "chrf"]
    want = {"exact_match": 1.0, "token_f1": 1.0, "levenshtein": 1.0, "fuzzy_score": 0.0,
            "rouge1_fmeasure": 0.0, "bleu": 0.0, "chrf": 0.0}
    for text in ("", "  "):
        res = ragmeter.evaluate([{"question": "q", "answer": text, "reference": text}], ms, db=db)
        assert {m: res.scores[m][0].value for m in ms} == want, repr(text)


def test_token_f1_and_exact_match_unicode_tokens_for_other_languages(db):
    rows = [{"question": "q", "answer": "北京是中国的首都", "reference": "中国的首都是北京"},
            {"question": "q", "answer": "A capital é Lisboa!", "reference": "a capital é lisboa"}]
    en = ragmeter.evaluate(rows, ["token_f1"], db=db)
    assert [s.value for s in en.scores["token_f1"]] == [0.0, 1.0]  # SQuAD: one "word" each, unequal
    zh = ragmeter.evaluate(rows, ["token_f1", "exact_match"], db=db, options={"language": "zh"})
    assert [s.value for s in zh.scores["token_f1"]] == [1.0, 1.0]
    assert [s.value for s in zh.scores["exact_match"]] == [0.0, 1.0]
