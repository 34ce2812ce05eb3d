"""The bundled RAG pipeline: chunking offsets, BM25 against its formula, retrieval, extractive answers."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragmeter
from ragmeter.core.errors import ConfigError
from ragmeter.pipeline import accepts, chunk_corpus, chunk_text, load_pipeline, rag, read_corpus
from ragmeter.pipeline.answer import idf_table, overlap_scores, sentences
from ragmeter.pipeline.retriever import BM25Retriever, analyse, top_k


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab cé.\n\n?!x")), max_size=300),
       st.integers(1, 60), st.integers(0, 59))
def test_chunks_are_exact_slices_that_cover_the_text(text, size, overlap):
    if overlap >= size:
        with pytest.raises(ConfigError):
            chunk_text(text, "d", chunk_size=size, overlap=overlap)
        return
    chunks = chunk_text(text, "d", chunk_size=size, overlap=overlap)
    covered = set()
    for c in chunks:
        assert text[c.start:c.end] == c.text and c.text == c.text.strip() and c.text
        assert len(c.text) <= size
        assert c.id == f"d#{c.start}-{c.end}" and c.source == "d"
        covered.update(range(c.start, c.end))
    assert [c.start for c in chunks] == sorted({c.start for c in chunks})  # strictly increasing
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_chunking_prefers_word_and_sentence_boundaries_and_overlaps():
    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    chunks = chunk_text(text, "g", chunk_size=25, overlap=0)
    assert [c.text for c in chunks] == ["Alpha beta gamma.", "Delta epsilon zeta.", "Eta theta iota."]
    ov = chunk_text(text, "g", chunk_size=25, overlap=8)
    assert all(b.start < a.end for a, b in zip(ov, ov[1:], strict=False))  # neighbours share text
    assert all(text[c.start - 1].isspace() for c in ov if c.start > 0)  # chunks start at a word
    assert chunk_text("", "e") == [] and chunk_text("   \n ", "e") == []
    assert [c.text for c in chunk_text("x" * 10, "l", chunk_size=4, overlap=0)] == ["xxxx", "xxxx", "xx"]
    for bad in ({"chunk_size": 0}, {"chunk_size": 10, "overlap": 10}, {"chunk_size": True}, {"overlap": -1}):
        with pytest.raises(ConfigError):
            chunk_text("abc", "x", **bad)


def test_bundled_corpus_and_the_example_spans_agree():
    docs = dict(read_corpus())
    assert "geography.md" in docs and len(docs) >= 5
    ds = ragmeter.load("example")
    spans = [c for s in ds.samples for c in (s.relevant or []) if c.has_span]
    assert spans
    for c in spans:
        assert docs[c.source][c.start:c.end] == c.text


def _bm25_reference(docs, query, k1=1.5, b=0.75):
    """Lucene's BM25 written out from its formula (Lucene >= 8 drops the constant (k1 + 1) factor)."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if t not in df:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return np.array(out)


def test_bm25_retriever_matches_the_formula_on_random_corpora():
    from ragmeter.pipeline.chunking import TextChunk

    rng = np.random.default_rng(0)
    vocab = ["ferry", "ticket", "harbour", "crossing", "island", "captain", "refund", "cabin", "dog", "bicycle"]
    for _ in range(20):
        texts = [" ".join(rng.choice(vocab, size=int(rng.integers(1, 12)))) for _ in range(int(rng.integers(2, 9)))]
        chunks = [TextChunk(f"c{i}", t, "s", 0, len(t)) for i, t in enumerate(texts)]
        q = " ".join(rng.choice(vocab, size=3))
        got = BM25Retriever(chunks).scores([q])[0]
        want = _bm25_reference([analyse(t) for t in texts], analyse(q))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert BM25Retriever(chunks).scores(["the of and"])[0].tolist() == [0.0] * len(chunks)  # stopwords only


def test_top_k_is_stable_and_clipped():
    s = np.array([[0.5, 0.9, 0.5, 0.1]])
    idx, val = top_k(s, 3)
    assert idx.tolist() == [[1, 0, 2]] and val.tolist() == [[0.9, 0.5, 0.5]]
    assert top_k(s, 10)[0].shape == (1, 4)


def test_rag_bm25_answers_from_the_right_chunk_with_spans():
    docs = dict(read_corpus())
    out = rag("What is the capital of France?", retriever="bm25", top_k=3, chunk_size=300, overlap=30)
    assert set(out) == {"answer", "contexts"} and len(out["contexts"]) == 3
    first = out["contexts"][0]
    assert first["source"] == "geography.md" and "Paris" in first["text"]
    for c in out["contexts"]:
        assert docs[c["source"]][c["start"]:c["end"]] == c["text"]
    scores = [c["score"] for c in out["contexts"]]
    assert scores == sorted(scores, reverse=True)
    assert "Paris is the capital of France" in out["answer"]
    assert any(out["answer"] in c["text"] for c in out["contexts"])  # extractive
    many = rag("What is the capital of France?", top_k=10_000)
    assert len(many["contexts"]) == len(chunk_corpus(read_corpus(), chunk_size=400, overlap=50))


def test_rag_batch_equals_single_calls_and_validates_params():
    qs = ["How many people does Tidewell employ?", "Who is the chief executive of Tidewell Ferries?"]
    batch = rag.batch(qs, top_k=2)
    assert batch == [rag(q, top_k=2) for q in qs]
    assert "412" in batch[0]["answer"] and "Okafor" in batch[1]["answer"]
    with pytest.raises(ConfigError, match="no parameter"):
        rag("q", top_n=3)
    with pytest.raises(ConfigError, match="top_k"):
        rag("q", top_k=0)
    with pytest.raises(ConfigError, match="retriever"):
        rag("q", retriever="tfidf")
    with pytest.raises(ConfigError, match="overlap"):
        rag("q", chunk_size=100, overlap=100)


def test_rag_on_a_users_corpus(tmp_path):
    (tmp_path / "a.md").write_text("# Pets\n\nCats sleep sixteen hours a day. Dogs need walks.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("The train leaves at noon from platform 4.", encoding="utf-8")
    out = rag("When does the train leave?", corpus=str(tmp_path), top_k=1)
    assert out["contexts"][0]["source"] == "b.txt" and out["answer"] == "The train leaves at noon from platform 4."
    with pytest.raises(ConfigError, match="not found"):
        rag("q", corpus=str(tmp_path / "missing"))


def test_extractive_answerer_picks_the_best_covering_sentence():
    cands = sentences(["## Fares\n\nAn adult single costs €14.50. Children under 5 travel free.",
                       "- Bicycles cost €4.00 per crossing."])
    assert [c.text for c in cands] == ["An adult single costs €14.50.", "Children under 5 travel free.",
                                       "Bicycles cost €4.00 per crossing."]
    idf = idf_table([analyse(c.text) for c in cands])
    s = overlap_scores("How much does an adult single ticket cost?", cands, idf)
    assert int(np.argmax(s)) == 0


@pytest.mark.slow
def test_embedding_and_hybrid_retrievers_find_the_capital():
    for retriever in ("embedding", "hybrid"):
        out = rag("What is the capital of Australia?", retriever=retriever, top_k=2, answerer="embedding")
        assert out["contexts"][0]["source"] == "geography.md"
        assert "Canberra" in out["answer"]


def test_load_pipeline_targets(tmp_path, monkeypatch):
    assert load_pipeline("ragmeter.pipeline:rag") is rag
    f = tmp_path / "my_rag.py"
    f.write_text("def answer(question, top_k=1):\n    return {'answer': question.upper(), 'contexts': []}\n")
    fn = load_pipeline(f"{f}:answer")
    assert fn("hi")["answer"] == "HI"
    monkeypatch.chdir(tmp_path)
    assert load_pipeline("my_rag:answer")("x")["answer"] == "X"
    for bad, msg in [("ragmeter.pipeline", "module:function"), ("no_such_mod_xyz:f", "cannot import"),
                     ("ragmeter.pipeline:nope", "no attribute"), ("ragmeter.pipeline:DEFAULTS", "not callable"),
                     (f"{tmp_path / 'missing.py'}:f", "not found")]:
        with pytest.raises(ConfigError, match=msg):
            load_pipeline(bad)
    accepts(fn, {"top_k": 3})
    with pytest.raises(ConfigError, match="chunk_size"):
        accepts(fn, {"chunk_size": 3})
