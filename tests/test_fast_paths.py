"""The column-at-once kernels and the runner's fast paths give exactly the values of the reference
implementations (sacrebleu, rouge-score, the SQuAD script, nltk) and of the one-process run."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest

from ragmeter.metrics.lexical import string_kernels as K
from ragmeter.metrics.lexical.ngrams import NgramColumns, clipped_matches, pair_layout
from ragmeter.metrics.lexical.rouge_metrics import rouge_pairs
from ragmeter.metrics.lexical.translation import bleu_batch, bleu_stats, tokenize_13a_many
from references import require_reference

PUNCT = list("ab.,-.,-0123456789 ") + ["٣", "&quot;", "&amp;", "\n", "é", "!", "(", ")", "<skipped>", "-\n"]
WORDS = ["The", "the", "a", "An", "cat", "Cat.", "sat", "on", "mat,", "3.5", "1,000", "-", "\n", "é", "naïve",
         "ΣΑΣ", "", "  ", "an\nthe", "x!y", "theatre", "running", "runs", "U.S.A.", "日本", "\t", "it's"]


def _texts(rnd: random.Random, n: int, alphabet: list[str], sep: list[str], most: int) -> list[str]:
    return ["".join(rnd.choice(alphabet) + rnd.choice(sep) for _ in range(rnd.randint(0, most))) for _ in range(n)]


def test_13a_column_equals_sacrebleu_tokenizer() -> None:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    rnd = random.Random(5)
    lines = _texts(rnd, 5000, PUNCT, ["", ""], 30) + _texts(rnd, 2000, WORDS, [" ", ""], 15) + ["", ".", ",,.", "5.,5"]
    tok = Tokenizer13a()
    got = tokenize_13a_many(lines)
    assert [" ".join(t) for t in got] == [tok(x) for x in lines]


@pytest.mark.parametrize("kw", [{}, {"max_ngram_order": 2, "smooth_method": "none", "effective_order": False},
                                {"smooth_method": "floor"}, {"smooth_method": "add-k"}, {"lowercase": True}])
def test_bleu_column_equals_sacrebleu(kw: dict) -> None:
    import sacrebleu

    rnd = random.Random(11)
    hyps = _texts(rnd, 1500, WORDS, [" ", " ", ""], 20) + ["", "x"]
    refs = [[t] + _texts(rnd, rnd.choice([0, 0, 1, 2]), WORDS, [" "], 20) for t in _texts(rnd, len(hyps), WORDS, [" "], 20)]
    ours = bleu_batch(hyps, refs, **kw)
    scorer = sacrebleu.BLEU(**{"effective_order": True, **kw})
    assert ours.tolist() == [scorer.sentence_score(h, r).score for h, r in zip(hyps, refs, strict=True)]


def test_corpus_bleu_from_sentence_statistics() -> None:
    import sacrebleu

    from ragmeter.metrics.lexical.corpus import corpus_score

    rnd = random.Random(3)
    hyps = _texts(rnd, 800, WORDS, [" "], 20)
    refs = [[t] + (_texts(rnd, 1, WORDS, [" "], 20) if rnd.random() < 0.4 else []) for t in _texts(rnd, 800, WORDS, [" "], 20)]
    bleu_stats(hyps[:100], refs[:100])  # half remembered, half counted afresh
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(2)]
    got = corpus_score("bleu", hyps, refs)
    assert got["corpus_score"] == sacrebleu.corpus_bleu(hyps, streams).score / 100
    assert got["corpus_ci_low"] <= got["corpus_score"] <= got["corpus_ci_high"]


def _clipped_reference(hyp: list[str], refs: list[list[str]], n: int) -> int:
    def grams(t: list[str]) -> Counter:
        return Counter(tuple(t[i:i + n]) for i in range(len(t) - n + 1))

    h = grams(hyp)
    best: Counter = Counter()
    for r in refs:
        for g, c in grams(r).items():
            best[g] = max(best[g], c)
    return sum(min(c, best[g]) for g, c in h.items())


def test_clipped_matches_equal_counters() -> None:
    rnd = random.Random(7)
    vocab = [f"w{i}" for i in range(6)]
    hyps = [[rnd.choice(vocab) for _ in range(rnd.randint(0, 12))] for _ in range(400)]
    refs = [[[rnd.choice(vocab) for _ in range(rnd.randint(0, 12))] for _ in range(rnd.randint(0, 3))] for _ in hyps]
    segments, hyp_seg, ref_pair = pair_layout(hyps, refs)
    grams = NgramColumns(segments, 4)
    for n in range(1, 5):
        got = clipped_matches(grams, hyp_seg, ref_pair, n)
        assert got.tolist() == [_clipped_reference(h, r, n) for h, r in zip(hyps, refs, strict=True)]


def test_squad_column_kernels_equal_the_per_pair_script() -> None:
    rnd = random.Random(2)
    a = _texts(rnd, 3000, WORDS, [" ", ""], 12)
    b = _texts(rnd, 3000, WORDS, [" ", ""], 12)

    def f1(p: str, g: str) -> float:
        pt, gt = K.normalize_answer(p).split(), K.normalize_answer(g).split()
        if not pt or not gt:
            return float(pt == gt)
        same = sum((Counter(pt) & Counter(gt)).values())
        if same == 0:
            return 0.0
        pr, rc = same / len(pt), same / len(gt)
        return 2 * pr * rc / (pr + rc)

    assert K.token_f1_kernel(a, b).tolist() == [f1(x, y) for x, y in zip(a, b, strict=True)]
    assert K.exact_match_kernel(a, b).tolist() == [float(K.normalize_answer(x) == K.normalize_answer(y))
                                                   for x, y in zip(a, b, strict=True)]
    assert K.normalize_answers(a) == [K.normalize_answer(x) for x in a]


def test_exact_match_after_token_f1_of_many_batches() -> None:
    """Token F1 leaves each batch's exact match behind (keyed by the texts' digest): a run's
    exact_match batches, more than the token-id memo keeps, get the values computed afresh, and a
    batch that differs in one text (or only in where its texts split) does not take another's."""
    rnd = random.Random(4)
    batches = [(_texts(rnd, 300, WORDS, [" ", ""], 8), _texts(rnd, 300, WORDS, [" ", ""], 8)) for _ in range(9)]
    batches.append((batches[0][0], batches[0][0][:-1] + ["x"]))
    batches.append((batches[1][0][:-1] + [batches[1][0][-1] + batches[1][1][0]], batches[1][1][1:] + [""]))
    want = [[float(K.normalize_answer(x) == K.normalize_answer(y)) for x, y in zip(a, b, strict=True)]
            for a, b in batches]
    for a, b in batches[:9]:
        K.token_f1_kernel(a, b)
    order = [9, 10, *range(9)]  # the near-copies first, while the originals' entries are there
    assert [K.exact_match_kernel(*batches[i]).tolist() for i in order] == [want[i] for i in order]
    assert [K.exact_match_kernel(a, b).tolist() for a, b in batches] == want  # nothing left behind now


@pytest.mark.contract
def test_rouge_column_equals_rouge_score() -> None:
    rouge_scorer = require_reference("rouge_score.rouge_scorer")

    rnd = random.Random(9)
    a = _texts(rnd, 1500, WORDS + ["fishes", "connected", "İstanbul", "ß"], [" ", ""], 15)
    b = _texts(rnd, 1500, WORDS + ["fishing", "connection"], [" ", ""], 15)
    ours = rouge_pairs(a, b)
    sc = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        r = sc.score(y, x)
        want = [getattr(r[t], m) for t in ("rouge1", "rouge2", "rougeL") for m in ("precision", "recall", "fmeasure")]
        assert ours[i].tolist() == want


def test_porter_stemmer_without_nltk_package_import() -> None:
    import sys

    from nltk.stem.porter import PorterStemmer

    import ragmeter.core.language as lang

    ours = lang.porter_stemmer()
    ref = PorterStemmer()
    rnd = random.Random(1)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 12))) for _ in range(3000)]
    assert [ours.stem(w) for w in words] == [ref.stem(w) for w in words]
    assert "nltk" in sys.modules  # the real package, imported above, is untouched


def test_aggregate_many_equals_aggregate() -> None:
    from ragmeter.core.schema import Score
    from ragmeter.stats import aggregate, aggregate_many

    rng = np.random.default_rng(4)
    cols = {"a": [Score(float(v)) for v in rng.random(500)],
            "b": [Score(float(v)) for v in rng.beta(0.3, 2, 500)] + [Score.missing("x")],
            "c": [Score(float(v)) for v in rng.integers(0, 2, 300)],
            "d": [Score(float(v)) for v in rng.random(40)], "e": [Score.missing("none")]}
    bounds = {k: (0.0, 1.0) for k in "abc"}
    many = aggregate_many(cols, bounds=bounds)
    for k, v in cols.items():
        assert many[k] == aggregate(v, bounds=bounds.get(k))
    assert many["a"]["ci_method"] == "quasi_score" and many["c"]["ci_method"] == "clopper_pearson"


def test_forked_worker_gives_the_one_process_values(tmp_path, monkeypatch) -> None:
    from ragmeter.run.engines import forked
    from ragmeter.run.runner import evaluate
    from ragmeter.store import open_store

    monkeypatch.setattr(forked, "MIN_SAMPLES", 50)
    rnd = random.Random(8)
    data = tmp_path / "pairs.jsonl"
    with data.open("w") as fh:
        for i in range(300):
            fh.write(json.dumps({"id": f"s{i}", "question": "q", "answer": " ".join(_texts(rnd, 1, WORDS, [" "], 12)),
                                 "reference": " ".join(_texts(rnd, 1, WORDS, [" "], 12)),
                                 "retrieved_ids": rnd.sample(range(30), 5), "relevant_ids": rnd.sample(range(30), 2)}) + "\n")
    metrics = ["rouge1_fmeasure", "rougeL_fmeasure", "bleu", "token_f1", "exact_match", "ndcg@10", "mrr"]
    if not forked.usable(300):
        pytest.skip("one CPU or no fork here")
    two = evaluate(str(data), metrics, db=f"sqlite:///{tmp_path / 'a.db'}")
    monkeypatch.setenv("RAGMETER_WORKERS", "1")
    one = evaluate(str(data), metrics, db=f"sqlite:///{tmp_path / 'b.db'}")
    assert "worker_wait_s" in open_store(f"sqlite:///{tmp_path / 'a.db'}").get_run(two.run_id).timings
    assert open_store(f"sqlite:///{tmp_path / 'a.db'}").score_table(two.run_id) == \
        open_store(f"sqlite:///{tmp_path / 'b.db'}").score_table(one.run_id)
    assert two.summary == one.summary


@pytest.mark.parametrize("n", [1, 7, 30001, 140000])
def test_bootstrap_sums_are_those_of_one_product_per_block(n: int) -> None:
    """The corpus bootstrap's products over several blocks of resamples give the sums of one
    product per block of draws, exactly (integer counts times integer statistics)."""
    from ragmeter.metrics.lexical.corpus import _resampled_sums

    stats = np.random.default_rng(n).integers(0, 90, (n, 10)).astype(np.float64)
    rng = np.random.default_rng(3)
    want = np.empty((40, 10))
    block = max(1, min(40, (1 << 17) // n))
    for i in range(0, 40, block):
        m = min(block, 40 - i)
        raw = rng.bit_generator.random_raw((m * n + 1) // 2).view(np.uint32)[:m * n]
        draws = (np.multiply(raw, np.uint64(n), dtype=np.uint64) >> np.uint64(32)).view(np.int64)
        draws += np.repeat(np.arange(m, dtype=np.int64) * n, n)
        want[i:i + m] = np.bincount(draws, minlength=m * n).reshape(m, n).astype(np.float64) @ stats
    assert (_resampled_sums(stats, 40, 3) == want).all()
