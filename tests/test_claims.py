"""Claim-level offline metrics (ragmeter.metrics.claims): the splitter and the alignment."""

from __future__ import annotations

import numpy as np
import pytest

from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Sample
from ragmeter.metrics.claims import align, split_claims
from ragmeter.metrics.registry import resolve


def test_english_sentences_abbreviations_initials_and_semicolons():
    text = ("Dr. Smith met Mr. J. R. Tolkien at 9 a.m. in the U.S. on Jan. 5. He left; nobody saw him.\n"
            "- It cost $3.50! Was it worth it? Yes.")
    assert split_claims(text) == ["Dr. Smith met Mr. J. R. Tolkien at 9 a.m. in the U.S. on Jan. 5.", "He left",
                                  "nobody saw him.", "It cost $3.50!", "Was it worth it?", "Yes."]


def test_portuguese_abbreviations():
    text = "A Sra. Costa mora na Av. Paulista, nº 5. O Dr. Lima chegou. Ela disse “sim.” Depois saiu."
    assert split_claims(text, "pt") == ["A Sra. Costa mora na Av. Paulista, nº 5.", "O Dr. Lima chegou.",
                                        "Ela disse “sim.”", "Depois saiu."]
    assert split_claims(text, "pt-BR") == split_claims(text, "pt")


def test_empty_and_punctuation_only_text_has_no_claims():
    assert split_claims("") == [] and split_claims("  ...  \n - ") == []


def test_align_counts_matched_claims_and_keeps_each_best_match():
    sim = np.array([[0.9, 0.1, 0.2], [0.3, 0.2, 0.55]])  # 2 answer claims x 3 reference claims
    row = align(["a1", "a2"], ["r1", "r2", "r3"], sim, 0.5)
    assert row["recall"] == pytest.approx(2 / 3) and row["precision"] == 1.0
    assert row["f1"] == pytest.approx(2 * (2 / 3) / (1 + 2 / 3))
    assert row["reference_claims"][1] == {"claim": "r2", "best_match": "a2", "similarity": 0.2, "matched": False}
    assert row["answer_claims"][1]["best_match"] == "r3"
    assert align([], ["r"], np.zeros((0, 1)), 0.5)["f1"] == 0.0


def test_claim_metrics_in_a_run():
    samples = [Sample(id="1", answer="Paris is the capital of France. It has the Louvre.",
                      references=["The capital of France is Paris. The Eiffel Tower is there. Bread is cheap."]),
               Sample(id="2", answer="Bananas are yellow.", references=["The capital of France is Paris."])]
    ctx = ScoringContext({})
    out = {}
    for name in ("claim_recall", "claim_precision", "claim_f1"):
        req = resolve(name)
        req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        out[name] = req.spec.fn(samples, ctx, **req.params)
    first = out["claim_recall"][0]
    assert first.value == pytest.approx(1 / 3)  # of three reference claims, the capital is covered
    assert first.details["reference_claims"][0]["best_match"] == "Paris is the capital of France."
    assert out["claim_precision"][0].value == pytest.approx(0.5)
    assert out["claim_f1"][1].value == 0.0
    bad = resolve({"name": "claim_f1", "params": {"threshold": 2}})
    assert "threshold" in bad.spec.check(ctx, **bad.params)
