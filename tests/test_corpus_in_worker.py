"""BLEU's corpus score computed by the second process (engines/forked.py): a metric with a corpus
score is scored whole there, its corpus score is computed there from the statistics it counted and
handed back; the run's values and summary are those of one process, and the parent does not
compute the corpus score again (it does when its samples differ from the worker's)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import ragmeter
from ragmeter.metrics.lexical import corpus
from ragmeter.run.engines import forked
from ragmeter.store import open_store

METRICS = ["rouge1_fmeasure", "bleu", "token_f1"]
WORDS = "refund policy days customer order shipping return warranty the a of and to in is 14 30".split()

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2 or not hasattr(os, "fork"),
                                reason="a forked second process needs fork and a second CPU")


def _pairs(path: Path, n: int, without_reference: int | None = None) -> None:
    rnd = random.Random(7)

    def text() -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 16))) + rnd.choice([".", "!", ""])

    with path.open("w") as fh:
        for i in range(n):
            row = {"id": f"s{i}", "question": "q", "answer": text()}
            if i != without_reference:
                row["reference"] = text()
            fh.write(json.dumps(row) + "\n")


def _run(tmp_path, monkeypatch, data: Path, method: str, name: str):
    monkeypatch.setenv("RAGMETER_START_METHOD", method)
    res = ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / name}")
    return open_store(f"sqlite:///{tmp_path / name}").score_table(res.run_id), res.summary


@pytest.mark.parametrize("without_reference", [None, 5])
def test_corpus_score_from_the_worker_equals_one_process(tmp_path, monkeypatch, without_reference):
    data = tmp_path / "pairs.jsonl"
    _pairs(data, 400, without_reference)
    monkeypatch.setattr(forked, "MIN_SAMPLES", 50)
    monkeypatch.delenv("RAGMETER_WORKERS", raising=False)
    log = tmp_path / "pids"
    real = corpus.corpus_score

    def logged(*args, **kwargs):  # type: ignore[no-untyped-def]
        with log.open("a") as fh:  # the forked worker inherits this wrapper
            fh.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(corpus, "corpus_score", logged)
    monkeypatch.setattr(corpus, "_CORPUS_MEMO", {})
    two = _run(tmp_path, monkeypatch, data, "fork", "fork.db")
    pids = log.read_text().split()
    assert pids and str(os.getpid()) != pids[0]  # computed first by the worker
    # the parent reuses it when it summarises the same texts; with a pair the worker did not score
    # (no reference) its samples differ, and it computes the corpus score itself
    assert (str(os.getpid()) in pids) == (without_reference is not None)
    corpus._CORPUS_MEMO.clear()
    one = _run(tmp_path, monkeypatch, data, "single", "single.db")
    assert two == one
    assert one[1]["bleu"].get("corpus_score") is not None and one[1]["bleu"].get("corpus_ci_low") is not None


def test_the_memo_key_depends_on_the_texts_only():
    from ragmeter.core.schema import Sample

    text = "the refund policy"
    shared = [Sample(id="a", answer=text, references=[text]), Sample(id="b", answer=text, references=[text])]
    copies = [Sample(id="x", answer="".join(text), references=[text[:3] + text[3:]]),
              Sample(id="y", answer=text[:4] + text[4:], references=["".join([text])])]
    other = [Sample(id="a", answer=text, references=[text]), Sample(id="b", answer=text, references=[text + "."])]
    key = corpus._memo_key(shared, {}, {}, "bleu")
    assert corpus._memo_key(copies, {}, {}, "bleu") == key
    assert corpus._memo_key(other, {}, {}, "bleu") != key
    assert corpus._memo_key(shared, {"unicode_normalize": False}, {}, "bleu") != key
    assert corpus._memo_key(shared, {}, {"max_ngram_order": 2}, "bleu") != key
