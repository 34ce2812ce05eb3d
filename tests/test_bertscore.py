"""BERTScore (ragmeter.metrics.bertscore) against the bert-score package, and its options."""

from __future__ import annotations

import gzip
import json
from importlib import resources

import numpy as np
import pytest

from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Sample
from ragmeter.embed import bundled_model_path
from ragmeter.metrics.bertscore import bertscore, parse_baseline
from ragmeter.metrics.registry import resolve
from references import require_reference


def _pairs(n: int) -> tuple[list[str], list[str]]:
    """``n`` answer/reference pairs from the bundled human-labelled answers, cut to a few sentences
    (short, so 2n texts run through the model quickly), with an empty answer and a repeated pair."""
    path = resources.files("ragmeter").joinpath("data", "example_human", "samples.jsonl.gz")
    with gzip.open(str(path), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    cands, refs = [], []
    for i in range(n):
        row = rows[i % len(rows)]
        k = i // len(rows)
        cands.append(" ".join(row["answer"].split()[k * 7: k * 7 + 24 + i % 9]))
        refs.append(" ".join(row["references"][i % 3].split()[:20 + i % 11]))
    cands[5] = ""
    cands[6], refs[6] = cands[7], refs[7]
    return cands, refs


@pytest.mark.contract
@pytest.mark.slow
@pytest.mark.parametrize("idf", [False, True])
def test_equals_bert_score_on_200_pairs(idf):
    bert_score = require_reference("bert_score")
    path = str(bundled_model_path())
    cands, refs = _pairs(200)
    cands[5] = "x"  # bert-score 0.3.13 cannot encode an empty text under transformers 5
    for layers in (6, 3):
        mine = bertscore(cands, refs, num_layers=layers, idf=idf)
        p, r, f = bert_score.score(cands, refs, model_type=path, num_layers=layers, idf=idf)
        assert np.abs(mine["f1"] - f.numpy()).max() < 1e-6
        assert np.abs(mine["precision"] - p.numpy()).max() < 1e-6
        assert np.abs(mine["recall"] - r.numpy()).max() < 1e-6


def test_identical_texts_score_one_and_blank_scores_zero():
    out = bertscore(["The cat sat on the mat.", "", "A dog."], ["The cat sat on the mat.", "Something.", ["x", "A dog."]],
                    num_layers=2)
    assert out["f1"][0] == pytest.approx(1.0, abs=1e-6)
    assert (out["precision"][1], out["recall"][1], out["f1"][1]) == (0.0, 0.0, 0.0)
    assert out["f1"][2] == pytest.approx(1.0, abs=1e-6)  # the best of several references


def test_baseline_rescales_and_is_checked():
    raw = bertscore(["The cat sat."], ["A cat was sitting."], num_layers=2)["f1"][0]
    scaled = bertscore(["The cat sat."], ["A cat was sitting."], num_layers=2, baseline=0.8)["f1"][0]
    assert scaled == pytest.approx((raw - 0.8) / 0.2)
    assert parse_baseline("0.8,0.7,0.75") == (0.8, 0.7, 0.75)
    for bad in ("1.0", "a", "0.1,0.2", "nan"):
        with pytest.raises(Exception, match="baseline"):
            parse_baseline(bad)
    assert resolve({"name": "bertscore_f1", "params": {"baseline": 0.8}}).spec.range == (pytest.approx(-4.0), 1.0)


def test_metric_in_a_run_has_details_and_checks_its_layer():
    req = resolve("bertscore_f1@2")
    ctx = ScoringContext({})
    samples = [Sample(id="a", answer="Paris is the capital.", references=["The capital is Paris.", "Lyon."])]
    req.spec.prepare(samples, ctx, **req.params)
    ctx.flush()
    (score,) = req.spec.fn(samples, ctx, **req.params)
    assert 0 < score.value <= 1 and score.details["layer"] == 2 and score.details["best_reference"] == 0
    assert set(score.details) >= {"precision", "recall"}
    bad = resolve({"name": "bertscore_f1", "params": {"num_layers": 0}})
    assert "num_layers" in bad.spec.check(ctx, **bad.params)
    with pytest.raises(Exception, match="between 1 and 6"):
        bertscore(["a"], ["b"], num_layers=9)


def _model_calls(monkeypatch, svc):
    """Count the encoder's forward calls (the model run once per padded batch)."""
    enc = svc.encoder(None)
    calls = []
    forward = enc.model.forward

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return forward(*args, **kwargs)

    monkeypatch.setattr(enc.model, "forward", counted)
    return calls


def test_texts_are_encoded_in_padded_batches_sorted_by_length(monkeypatch):
    from ragmeter.embed.contextual import TokenEmbeddingService
    from ragmeter.metrics.bertscore import BATCH_TOKENS, encode, padded_length

    svc = TokenEmbeddingService({})
    calls = _model_calls(monkeypatch, svc)
    short = [f"answer number {i}" for i in range(40)]
    long_ = [" ".join(["word"] * 30 + [str(i)]) for i in range(5)]
    encode(svc, [*long_, *short, *short[:3], ""], num_layers=3)  # duplicates and a blank text among them
    widths = [padded_length(n) for n in (len(svc.encoder(None).ids(t)) for t in (short[0], long_[0]))]
    assert widths[0] == 16 and widths[1] > 16
    # one call per padded length here (41 short texts and 5 long ones, each under BATCH_TOKENS)
    assert [tuple(c) for c in calls] == [(41, 16), (5, widths[1])]  # shortest first
    assert 41 * 16 <= BATCH_TOKENS
    encode(svc, short, num_layers=3)
    assert len(calls) == 2  # encoded once per run, model and layer


def test_a_texts_vectors_do_not_depend_on_its_batch():
    """Alone, among others of its padded length or of other lengths: the same bits."""
    from ragmeter.embed.contextual import TokenEmbeddingService
    from ragmeter.metrics.bertscore import encode, tokens

    text = "The cat sat on the mat."
    alone = tokens(TokenEmbeddingService({}), text, num_layers=4)[1]
    svc = TokenEmbeddingService({})
    encode(svc, ["A much longer text " * 10, "Short.", text, "The cat sat on the rug."], num_layers=4)
    assert np.array_equal(tokens(svc, text, num_layers=4)[1], alone)


@pytest.mark.contract
@pytest.mark.slow
def test_equals_bert_score_on_mixed_batches():
    """Batches of mixed lengths, duplicates, texts past the model's 512 word pieces (both truncate),
    blank texts (bert-score 0.3.13 cannot encode them under transformers 5: scored 0 here, and the
    other pairs of their batch unchanged)."""
    from ragmeter.embed.contextual import TokenEmbeddingService

    bert_score = require_reference("bert_score")
    path = str(bundled_model_path())
    cands, refs = _pairs(40)
    long_text = " ".join(cands[:20])  # over 512 word pieces
    assert len(TokenEmbeddingService({}).encoder(None).ids(long_text)) == 512
    cands[1], refs[2] = long_text, long_text + " And more."
    cands[3], refs[3] = "Yes.", long_text
    cands[9], refs[9] = cands[8], refs[8]
    cands[5] = "x"
    for idf in (False, True):
        p, r, f = bert_score.score(cands, refs, model_type=path, num_layers=5, idf=idf, batch_size=7)
        with_blank = bertscore([*cands, "", "Some answer."], [*refs, "A reference.", "   "], num_layers=5,
                               idf=idf)
        mine = bertscore(cands, refs, num_layers=5, idf=idf)
        for part, theirs in (("precision", p), ("recall", r), ("f1", f)):
            assert np.abs(mine[part] - theirs.numpy()).max() < 1e-6
            assert list(with_blank[part][-2:]) == [0.0, 0.0]
        if not idf:  # (idf counts over the references given, so the two extra ones change it)
            assert np.array_equal(with_blank["f1"][:-2], mine["f1"])
