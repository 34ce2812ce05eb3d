"""Lexical metrics: string similarity, ROUGE, BLEU, chrF, SQuAD exact match / token F1, keywords.

Every metric key of Microsoft's rag-experiment-accelerator is registered under its name (``lcsstr``,
``levenshtein``, ``rouge1_fmeasure`` ...) with the semantics of its code (``plain_metrics.py``) on a
0-1 scale, and every metric is also a plain function::

    >>> from ragmeter.metrics import lexical
    >>> lexical.levenshtein("kitten", "sitting")
    0.5714285714285714
    >>> lexical.rouge("The cat sat.", "A cat sat down.")["rouge1"].fmeasure
    0.5714285714285715

The package, by concept:

* :mod:`.texts` -- the texts compared (input checks at the public edge, a run's samples as the
  metrics see them);
* :mod:`.strings` and :mod:`.string_kernels` -- the string metrics: one table of batch kernels
  (:data:`STRING_METRICS`), one driver that expands several references per answer and keeps the best;
* :mod:`.rouge_metrics` -- ROUGE-1/2/L as rouge-score; the nine keys of a sample come from one tokenisation
  and the run memoises them, so asking for all nine costs one ROUGE computation;
* :mod:`.translation` -- sentence BLEU and chrF as sacrebleu; :mod:`.corpus` -- their corpus-level
  score (declared on the metric as its ``corpus`` hook);
* :mod:`.byte_tokens` and :mod:`.ngrams` -- column-at-once tokenisation and n-gram counting.

See ``docs/metrics/lexical.md``.
"""

from __future__ import annotations

from ragmeter.metrics.lexical import deepeval_checks  # noqa: F401 - registers deepeval:exact_match ...
from ragmeter.metrics.lexical.corpus import BLEU_CACHE, corpus_hook
from ragmeter.metrics.lexical.rouge_metrics import (
    ROUGE_KEYS,
    RougeScore,
    _rouge_batch_fn,
    _rouge_check,
    rouge,
    rouge_scores,
)
from ragmeter.metrics.lexical.strings import (
    FUZZ_SCORERS,
    STRING_METRICS,
    StringMetric,
    _string_batch_fn,
    _string_check,
    cosine,
    exact_match,
    fuzzy_score,
    hamming,
    jaccard,
    jaro_winkler,
    keyword_match,
    lcsseq,
    lcsstr,
    levenshtein,
    normalize_answer,
    string_similarity,
    token_f1,
)
from ragmeter.metrics.lexical.texts import References, sample_texts
from ragmeter.metrics.lexical.translation import (
    _BLEU2_DEFAULTS,
    _BLEU_DEFAULTS,
    _CHRF_DEFAULTS,
    _mt_batch_fn,
    _mt_check,
    bleu,
    bleu2,
    bleu_batch,
    bleu_scores,
    check_bleu_params,
    check_chrf_params,
    chrf,
    chrf_batch,
    chrf_scores,
)
from ragmeter.metrics.registry import MetricSpec, register_metric

__all__ = [
    "FUZZ_SCORERS", "ROUGE_KEYS", "STRING_METRICS", "References", "RougeScore", "StringMetric", "bleu",
    "bleu2", "bleu_scores", "chrf", "chrf_scores", "cosine", "exact_match", "fuzzy_score", "hamming",
    "jaccard", "jaro_winkler", "keyword_match", "lcsseq", "lcsstr", "levenshtein", "normalize_answer",
    "rouge", "rouge_scores", "sample_texts", "string_similarity", "token_f1",
]

# ---- registry ---------------------------------------------------------------------------------

_REQUIRES = ("answer", "reference")
#: samples per batch: the n-gram kernels sort each batch's n-grams, and a smaller sort stays in the
#: CPU's caches (30,000 RAG-like prose pairs, CPU seconds: BLEU 0.85 at 2,000 and 0.72 at 1,000;
#: ROUGE and token F1 4-6% less at 2,000 than at 5,000); the values do not depend on it
_TOKEN_BATCH = {"token_f1": 2000, "exact_match": 2000}
_ROUGE_BATCH = 2000
_BLEU_BATCH = 1000

for _m in STRING_METRICS.values():
    register_metric(MetricSpec(
        name=_m.key, family="lexical", fn=_string_batch_fn(_m.key), requires=_REQUIRES,
        defaults=dict(_m.defaults), check=_string_check(_m.key), batch_size=_TOKEN_BATCH.get(_m.key, 5000),
        param="scorer" if _m.key == "fuzzy_score" else None,
        description=f"{_m.summary}\n\nReference: {_m.reference_impl}."))

for _key in ROUGE_KEYS:
    _type, _measure = _key.split("_")
    register_metric(MetricSpec(
        name=_key, family="lexical", fn=_rouge_batch_fn(_key), requires=_REQUIRES,
        defaults={"use_stemmer": True}, check=_rouge_check, batch_size=_ROUGE_BATCH,
        description=(
            f"{_type.upper().replace('ROUGE', 'ROUGE-')} {_measure}: "
            + {"rouge1": "unigram", "rouge2": "bigram", "rougeL": "longest-common-subsequence"}[_type]
            + {"precision": " overlap / tokens of the answer",
               "recall": " overlap / tokens of the reference",
               "fmeasure": " F1 of precision and recall"}[_measure]
            + " (rouge-score, Porter stemming on; the best reference by F-measure)."
            "\n\nReference: rouge_score.rouge_scorer.RougeScorer(use_stemmer=True).score_multi.")))

register_metric(MetricSpec(
    name="bleu", family="lexical", fn=_mt_batch_fn("bleu", bleu_batch), requires=_REQUIRES,
    defaults=dict(_BLEU_DEFAULTS),
    check=_mt_check(check_bleu_params, ("max_ngram_order", "smooth_method", "tokenize")),
    corpus=corpus_hook("bleu"), worker_cache=BLEU_CACHE, batch_size=_BLEU_BATCH,
    description="Sentence BLEU / 100 (sacrebleu: 4-grams, exp smoothing, 13a tokens, effective "
                "order, several references natively).\n\nReference: sacrebleu.sentence_bleu."))
register_metric(MetricSpec(
    name="bleu2", family="lexical", fn=_mt_batch_fn("bleu2", bleu_batch), requires=_REQUIRES,
    defaults=dict(_BLEU2_DEFAULTS),
    check=_mt_check(check_bleu_params, ("max_ngram_order", "smooth_method", "tokenize")),
    corpus=corpus_hook("bleu2"), worker_cache=BLEU_CACHE, batch_size=_BLEU_BATCH,
    description="BLEU up to bigrams, no smoothing / 100: rag-experiment-accelerator's BLEU (HF evaluate, "
                "max_order=2).\n\nReference: sacrebleu.BLEU(max_ngram_order=2, "
                "smooth_method='none').sentence_score."))
register_metric(MetricSpec(
    name="chrf", family="lexical", fn=_mt_batch_fn("chrf", chrf_batch), requires=_REQUIRES,
    defaults=dict(_CHRF_DEFAULTS),
    check=_mt_check(check_chrf_params, ("char_order", "word_order", "beta")),
    corpus=corpus_hook("chrf"),
    description="Sentence chrF / 100: F-beta (beta 2) of character 1..6-gram precision and recall "
                "(word_order=2: chrF++).\n\nReference: sacrebleu.sentence_chrf."))

# ragas 0.4.3 metrics without a judge, under their ragas names (ragas:bleu_score ...)
from ragmeter.metrics.lexical import ragas_text  # noqa: E402,F401 - registers
