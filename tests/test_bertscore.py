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
