"""The bundled example dataset: spans point at the corpus, ids are consistent, labels are sound."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragmeter
from ragmeter.apps.cli import app
from ragmeter.io.readers import example_path

EXAMPLE_DIR = example_path().parent
CORPUS_DIR = EXAMPLE_DIR / "corpus"
REPO = Path(__file__).resolve().parents[1]
KINDS = {"exact": 1.0, "paraphrase": 1.0, "wrong": 0.0, "idk": 0.0, "partial": 0.0}
PARIS_CASES = {
    "The capital of France is Paris": 1.0,
    "France's seat of government is in Paris": 1.0,
    "The capital city is Paris": 1.0,
    "The capital of France is Lyon": 0.0,
    "I don't know": 0.0,
    "Paris is the capital of France.": 1.0,
}


@pytest.fixture(scope="module")
def data():
    return ragmeter.load("example")


@pytest.fixture(scope="module")
def corpus() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(CORPUS_DIR.glob("*.md"))}


@pytest.fixture(scope="module")
def chunk_table() -> list[dict]:
    lines = (EXAMPLE_DIR / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _all_chunks(data):
    for s in data:
        for c in s.contexts or []:
            yield s.id, "contexts", c
        for c in s.relevant or []:
            yield s.id, "relevant", c


def test_loads_as_the_word_example(data):
    assert data.source == "example"
    assert len(data) >= 40
    assert not data.skipped
    assert len({s.id for s in data}) == len(data)
    for s in data:
        assert s.question and s.answer is not None and s.references


def test_corpus_is_a_few_thousand_words(corpus):
    words = sum(len(t.split()) for t in corpus.values())
    assert 3000 <= words <= 5000
    assert len(corpus) >= 5


def test_every_span_points_at_its_text(data, corpus):
    n = 0
    for sid, where, c in _all_chunks(data):
        assert c.id and c.text and c.has_span, (sid, where, c)
        assert c.source in corpus, f"{sid} {where}: unknown source {c.source!r}"
        assert corpus[c.source][c.start:c.end] == c.text, f"{sid} {where} {c.id}: span does not match text"
        n += 1
    assert n > 2 * len(data)


def test_chunk_table_spans_match_corpus(chunk_table, corpus):
    for c in chunk_table:
        assert corpus[c["source"]][c["start"]:c["end"]] == c["text"], c["id"]
        assert c["id"] == f"{c['source']}#{c['id'].rsplit('#', 1)[1]}"
    assert len({c["id"] for c in chunk_table}) == len(chunk_table)
    assert len({c["text"] for c in chunk_table}) == len(chunk_table), "two chunks share a text"
    by_source = defaultdict(list)
    for c in chunk_table:
        by_source[c["source"]].append((c["start"], c["end"]))
    for source, spans in by_source.items():
        spans.sort()
        for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False):
            assert e1 <= s2, f"overlapping chunks in {source}"
    assert set(by_source) == set(corpus)


def test_same_id_means_same_text_and_span(data, chunk_table):
    table = {c["id"]: (c["text"], c["source"], c["start"], c["end"]) for c in chunk_table}
    seen: dict[str, tuple] = {}
    for sid, where, c in _all_chunks(data):
        key = (c.text, c.source, c.start, c.end)
        assert seen.setdefault(c.id, key) == key, f"{sid} {where}: chunk {c.id} differs from an earlier use"
        assert table.get(c.id) == key, f"{sid} {where}: chunk {c.id} is not the one in chunks.jsonl"
    # and the other way round: one text, one id
    by_text = defaultdict(set)
    for cid, (text, *_rest) in seen.items():
        by_text[text].add(cid)
    assert all(len(ids) == 1 for ids in by_text.values())


def test_id_and_span_relevance_agree(data):
    """Judging a retrieved chunk relevant by id or by span overlap gives the same verdicts."""
    for s in data:
        rel_ids = {c.id for c in s.relevant}
        for c in s.contexts:
            by_id = c.id in rel_ids
            by_span = any(r.source == c.source and min(r.end, c.end) > max(r.start, c.start)
                          for r in s.relevant)
            by_text = any(r.text == c.text for r in s.relevant)
            assert by_id == by_span == by_text, (s.id, c.id)


def test_retrieval_shape_is_realistic(data):
    first_rank = Counter()
    for s in data:
        assert 3 <= len(s.contexts) <= 5, s.id
        assert 1 <= len(s.relevant) <= 3, s.id
        assert all(r.grade in {1.0, 2.0, 3.0} for r in s.relevant), s.id
        scores = [c.score for c in s.contexts]
        assert all(x is not None for x in scores) and scores == sorted(scores, reverse=True), s.id
        assert len({c.id for c in s.contexts}) == len(s.contexts), s.id
        rel = {c.id for c in s.relevant}
        ranks = [i for i, c in enumerate(s.contexts, start=1) if c.id in rel]
        first_rank[ranks[0] if ranks else None] += 1
    # relevant chunks are usually, but not always, ranked first; some samples retrieve nothing relevant
    assert first_rank[1] > len(data) / 2
    assert first_rank[None] >= 5
    assert first_rank[2] + first_rank[3] >= 5


def test_labels_match_answer_kinds(data):
    labels = [s.label for s in data]
    assert all(v in (0.0, 1.0) for v in labels)
    zero_share = labels.count(0.0) / len(labels)
    assert 0.3 <= zero_share <= 0.5
    kinds = Counter()
    for s in data:
        kind = s.metadata["answer_kind"]
        kinds[kind] += 1
        assert s.label == KINDS[kind], f"{s.id}: {kind} answer labelled {s.label}"
        if kind in {"wrong", "partial"}:
            assert s.metadata.get("label_reason"), f"{s.id}: a wrong/partial answer says why"
    assert set(kinds) == set(KINDS)
    assert all(n >= 3 for n in kinds.values())


def test_questions_are_asked_several_times_with_different_answers(data):
    by_q = defaultdict(list)
    for s in data:
        by_q[s.metadata["question_id"]].append(s)
    repeated = [q for q, ss in by_q.items() if len(ss) > 1]
    assert len(repeated) >= 10
    for q in repeated:
        ss = by_q[q]
        assert len({s.question for s in ss}) == 1, q
        assert len({s.answer for s in ss}) == len(ss), f"{q}: the same answer twice"
        assert len({tuple(s.references) for s in ss}) == 1, q
        assert len({tuple(c.id for c in s.relevant) for s in ss}) == 1, q
    assert sum(len({s.metadata["answer_kind"] for s in by_q[q]}) > 1 for q in repeated) >= 10


def test_seed_003_paris_cases(data, corpus):
    paris = {s.answer: s for s in data if s.question == "What is the capital of France?"}
    for answer, label in PARIS_CASES.items():
        assert answer in paris, f"missing Paris case {answer!r}"
        s = paris[answer]
        assert s.label == label, answer
        assert s.references[0] == "Paris"
        assert s.relevant[0].source == "geography.md"
        assert "Paris is the capital of France" in s.relevant[0].text
    assert "Paris is the capital of France" in corpus["geography.md"]


def test_negative_references_are_not_references(data):
    for s in data:
        assert not set(s.negative_references) & set(s.references), s.id


def test_readme_counts_match_the_data(data):
    readme = (EXAMPLE_DIR / "README.md").read_text(encoding="utf-8")
    m = re.search(r"(\d+) labelled samples over (\d+) questions", readme)
    assert m, "README states the sample and question counts"
    assert int(m.group(1)) == len(data)
    assert int(m.group(2)) == len({s.metadata["question_id"] for s in data})
    m = re.search(r"(\d+) samples are\s+labelled 1 and (\d+) are labelled 0", readme)
    assert m, "README states the label counts"
    assert (int(m.group(1)), int(m.group(2))) == (sum(s.label == 1 for s in data), sum(s.label == 0 for s in data))


def test_example_write_copies_the_files(tmp_path, data):
    out = tmp_path / "my-example"
    result = CliRunner().invoke(app, ["example", "--write", str(out)])
    assert result.exit_code == 0, result.output
    expected = sorted(p.relative_to(EXAMPLE_DIR) for p in EXAMPLE_DIR.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)
    copied = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert copied == expected
    assert {Path("samples.jsonl"), Path("README.md"), Path("chunks.jsonl"), Path("corpus/geography.md")} <= set(copied)
    for rel in expected:
        assert (out / rel).read_bytes() == (EXAMPLE_DIR / rel).read_bytes()
    again = ragmeter.load(out / "samples.jsonl")
    assert [s.model_dump() for s in again] == [s.model_dump() for s in data]


def test_demo_config_lists_known_metrics():
    from ragmeter.core.config import load_config
    from ragmeter.metrics.registry import resolve_all

    cfg = load_config(REPO / "examples" / "demo.yaml")
    assert len(cfg["metrics"]) >= 10
    assert not any("judge" in m or m.startswith("ragas_") for m in cfg["metrics"]), "the demo runs offline"
    assert len(resolve_all(cfg["metrics"])) == len(cfg["metrics"])
