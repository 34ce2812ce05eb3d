"""ragas' metrics without a judge, under ragas' names: ``ragas:bleu_score``, ``ragas:chrf_score``,
``ragas:rouge_score``, ``ragas:exact_match``, ``ragas:string_presence``,
``ragas:non_llm_string_similarity``, ``ragas:quoted_spans_alignment``, ``ragas:datacompy_score``,
``ragas:semantic_similarity``.

Each equals ragas 0.4.3 (``ragas.metrics.collections``) on every input: ragas' own text handling
(no Unicode normalisation, BLEU over the sentences of ``". "``-split texts, chrF's 0 for a blank
side, ROUGE with the Porter stemmer), the same libraries underneath (sacrebleu, rouge-score's
tokenisation as :mod:`.rouge_metrics` reproduces it, rapidfuzz, datacompy), its parameters and
defaults. ragas takes one ``reference`` string: a sample's first reference is it.
tests/test_parity_ragas_text.py runs ragas on generated inputs to check it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.registry import MetricSpec, register_metric

VERSION = "0.4.3"

#: a pair's value (or ``None``) and, without a value, why
Pair = tuple[float | None, str | None]


def _equals(cls: str) -> dict[str, str]:
    return {"tool": "ragas", "version": VERSION, "metric": cls}


# ---- kernels: (response, reference, params) -> (value, reason) --------------------------------------


def bleu_score(response: str, reference: str, **kwargs: Any) -> float:
    """ragas' ``BleuScore``: sacrebleu's corpus BLEU / 100, the response's and the reference's
    ``". "``-separated sentences as the corpus (each reference sentence its own one-line stream)."""
    from sacrebleu import corpus_bleu

    refs = [[r] for r in reference.split(". ")]
    return float(corpus_bleu(response.split(". "), refs, **kwargs).score / 100)


def chrf_score(response: str, reference: str, **kwargs: Any) -> float:
    """ragas' ``CHRFScore``: sacrebleu's chrF / 100 of the pair; 0 when either side is blank."""
    from sacrebleu import corpus_chrf

    if not reference.strip() or not response.strip():
        return 0.0
    return float(corpus_chrf([response], [[reference]], **kwargs).score / 100)


_ROUGE_COLUMN = {("rouge1", "precision"): 0, ("rouge1", "recall"): 1, ("rouge1", "fmeasure"): 2,
                 ("rougeL", "precision"): 6, ("rougeL", "recall"): 7, ("rougeL", "fmeasure"): 8}


def _bleu(pairs: list[tuple[str, str]], p: dict[str, Any]) -> list[Pair]:
    out: list[Pair] = []
    for resp, ref in pairs:
        try:
            out.append((bleu_score(resp, ref, **(p.get("kwargs") or {})), None))
        except Exception as exc:  # noqa: BLE001 - sacrebleu's refusal is ragas' error: no value, saying why
            out.append((None, f"sacrebleu refuses the pair (ragas raises): {exc}"))
    return out


def _chrf(pairs: list[tuple[str, str]], p: dict[str, Any]) -> list[Pair]:
    return [(chrf_score(resp, ref, **(p.get("kwargs") or {})), None) for resp, ref in pairs]


def _rouge(pairs: list[tuple[str, str]], p: dict[str, Any]) -> list[Pair]:
    from ragmeter.metrics.lexical.rouge_metrics import rouge_pairs

    col = _ROUGE_COLUMN[(p["rouge_type"], p["mode"])]
    if not pairs:
        return []
    table = rouge_pairs([r for r, _ in pairs], [t for _, t in pairs], use_stemmer=True,
                        bigrams=False)
    return [(float(v), None) for v in table[:, col]]


def _exact(pairs: list[tuple[str, str]], _p: dict[str, Any]) -> list[Pair]:
    return [(float(ref == resp), None) for resp, ref in pairs]


def _presence(pairs: list[tuple[str, str]], _p: dict[str, Any]) -> list[Pair]:
    return [(float(ref in resp), None) for resp, ref in pairs]


_DISTANCES = ("levenshtein", "hamming", "jaro", "jaro_winkler")


def _similarity(pairs: list[tuple[str, str]], p: dict[str, Any]) -> list[Pair]:
    from rapidfuzz import distance

    scorer = {"levenshtein": distance.Levenshtein, "hamming": distance.Hamming, "jaro": distance.Jaro,
              "jaro_winkler": distance.JaroWinkler}[p["distance_measure"]]
    return [(float(1 - scorer.normalized_distance(ref, resp)), None) for resp, ref in pairs]


def _datacompy(pairs: list[tuple[str, str]], p: dict[str, Any]) -> list[Pair]:
    return [datacompy_score(resp, ref, p["mode"], p["metric"]) for resp, ref in pairs]


def datacompy_score(response: str, reference: str, mode: str = "rows", metric: str = "f1") -> Pair:
    """ragas' ``DataCompyScore``: the two CSV texts read by pandas and compared by datacompy on their
    index; ``rows`` mode counts the rows equal in every shared column, ``columns`` mode the columns
    with no unequal value. Precision divides by the response's rows (columns), recall by the
    reference's (0 for an empty side), F1 is their harmonic mean (0 when both are 0). A text pandas
    cannot read has no value (ragas: NaN)."""
    import warnings
    from io import StringIO

    import pandas as pd

    try:
        with warnings.catch_warnings():  # datacompy warns at import about its Spark comparison
            warnings.simplefilter("ignore")
            from datacompy.core import Compare
    except ImportError as exc:
        raise MetricError("ragas:datacompy_score needs datacompy, which is not installed: "
                          "pip install 'ragmeter-eval[datacompy]'") from exc
    try:
        ref_df = pd.read_csv(StringIO(reference))
        resp_df = pd.read_csv(StringIO(response))
    except Exception as exc:  # noqa: BLE001 - any pandas parse failure is ragas' NaN
        return None, f"a CSV text pandas cannot read (ragas: NaN): {exc}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = Compare(ref_df, resp_df, on_index=True)
        if mode == "rows":
            matched = cmp.count_matching_rows()
            ref_n, resp_n = ref_df.shape[0], resp_df.shape[0]
        else:
            matched = sum(1 for col in cmp.column_stats if col["unequal_cnt"] == 0)
            ref_n, resp_n = ref_df.shape[1], resp_df.shape[1]
    recall = matched / ref_n if ref_n > 0 else 0.0
    precision = matched / resp_n if resp_n > 0 else 0.0
    if metric == "precision":
        return float(precision), None
    if metric == "recall":
        return float(recall), None
    return (0.0 if precision + recall == 0 else float(2 * precision * recall / (precision + recall))), None


# ragas' quote characters: straight and curly double and single quotes, backtick, acute accent
_QUOTE = "\"\u201c\u201d\u201e\u201f'\u2018\u2019`\u00b4"
_QUOTED = re.compile(f"[{_QUOTE}](.*?)[{_QUOTE}]")
_SPACES = re.compile(r"\s+")


def quoted_spans_alignment(response: str, contexts: Sequence[str], casefold: bool = True,
                           min_span_words: int = 3) -> float:
    """ragas' ``QuotedSpansAlignment``: the share of the response's quoted spans (text between two
    quote characters, at least ``min_span_words`` words) found verbatim in the contexts joined by a
    space (whitespace collapsed and lower-cased with ``casefold``); 1 when nothing is quoted."""
    spans = [m.group(1).strip() for m in _QUOTED.finditer(response)]
    spans = [s for s in spans if len(s.split()) >= min_span_words]
    if not spans:
        return 1.0

    def norm(t: str) -> str:
        return _SPACES.sub(" ", t).strip().lower() if casefold else t

    source = norm(" ".join(contexts))
    return sum(1 for s in spans if norm(s) and norm(s) in source) / len(spans)


# ---- the metrics -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kernel:
    key: str
    cls: str
    run: Callable[[list[tuple[str, str]], dict[str, Any]], list[Pair]]
    defaults: dict[str, Any]
    aliases: tuple[str, ...]
    description: str


def _check(name: str, p: dict[str, Any]) -> None:
    choices = {"rouge_type": ("rouge1", "rougeL"), "mode": ("fmeasure", "precision", "recall"),
               "distance_measure": _DISTANCES}
    if name == "ragas:datacompy_score":
        choices = {"mode": ("rows", "columns"), "metric": ("precision", "recall", "f1")}
    for k, allowed in choices.items():
        if k in p and p[k] not in allowed:
            raise MetricError(f"{name}: {k} must be one of {', '.join(allowed)}, got {p[k]!r}")
    if "kwargs" in p and not isinstance(p["kwargs"], dict | type(None)):
        raise MetricError(f"{name}: kwargs must be a mapping of sacrebleu options, got {p['kwargs']!r}")


def _pair_metric(k: _Kernel) -> Callable[..., list[Score]]:
    def fn(samples: Sequence[Sample], ctx: Any = None, **params: Any) -> list[Score]:
        _check(k.key, params)
        pairs = [(s.answer or "", s.references[0]) for s in samples]
        return [Score(v) if v is not None else Score.missing(why or "no value") for v, why in k.run(pairs, params)]

    fn.__name__ = fn.__qualname__ = k.key.replace(":", "_")
    return fn


_PAIR_NOTE = "A sample's first reference is ragas' ``reference``, its answer the ``response``."

KERNELS = (
    _Kernel("ragas:bleu_score", "BleuScore", _bleu, {"kwargs": None}, ("BleuScore", "bleu_score"), """
ragas' BLEU (``BleuScore``): sacrebleu's corpus BLEU / 100 where the corpus is the response's
sentences (split at ". ") against the reference's sentences, each reference sentence its own
one-line reference stream (ragas' layout). ``kwargs``: sacrebleu's options. Range [0, 1]."""),
    _Kernel("ragas:chrf_score", "CHRFScore", _chrf, {"kwargs": None}, ("CHRFScore", "chrf_score"), """
ragas' chrF (``CHRFScore``): sacrebleu's chrF of the response against the reference / 100;
0 when either text is blank (ragas' rule). ``kwargs``: sacrebleu's options. Range [0, 1]."""),
    _Kernel("ragas:rouge_score", "RougeScore", _rouge, {"rouge_type": "rougeL", "mode": "fmeasure"},
            ("RougeScore", "rouge_score"), """
ragas' ROUGE (``RougeScore``): rouge-score's ``rouge_type`` (rougeL default, or rouge1) ``mode``
(fmeasure default, precision, recall) of the response against the reference, Porter stemmer on.
Range [0, 1]."""),
    _Kernel("ragas:exact_match", "ExactMatch", _exact, {}, ("ExactMatch",), """
ragas' exact match (``ExactMatch``): 1 when the response equals the reference character for
character (no normalisation), else 0."""),
    _Kernel("ragas:string_presence", "StringPresence", _presence, {},
            ("StringPresence", "string_present", "ragas:string_present"), """
ragas' string presence (``StringPresence``): 1 when the reference occurs in the response as a
substring (case-sensitive), else 0."""),
    _Kernel("ragas:non_llm_string_similarity", "NonLLMStringSimilarity", _similarity,
            {"distance_measure": "levenshtein"}, ("NonLLMStringSimilarity", "non_llm_string_similarity"), """
ragas' string similarity (``NonLLMStringSimilarity``): 1 - rapidfuzz's normalised distance of
reference and response, ``distance_measure`` levenshtein (default), hamming, jaro or
jaro_winkler. Range [0, 1]."""),
    _Kernel("ragas:datacompy_score", "DataCompyScore", _datacompy, {"mode": "rows", "metric": "f1"},
            ("DataCompyScore", "datacompy_score", "data_compare_score", "ragas:data_compy_score",
             "ragas:data_compare_score"), """
ragas' table comparison (``DataCompyScore``): response and reference are CSV texts, compared by
datacompy on their index. ``mode`` rows (default: rows equal in every shared column) or columns
(columns without an unequal value); precision = matched / the response's count, recall = matched /
the reference's (0 for an empty table), ``metric`` f1 (default), precision or recall. A text pandas
cannot parse has no value (ragas: NaN). Needs datacompy."""),
)

for _k in KERNELS:
    register_metric(MetricSpec(
        name=_k.key, family="lexical", fn=_pair_metric(_k), requires=("answer", "reference"),
        defaults=dict(_k.defaults), aliases=_k.aliases, equals=_equals(_k.cls),
        description=_k.description + "\n\n" + _PAIR_NOTE,
        parity=f"Equals ragas {VERSION} ``{_k.cls}`` on every input (tests/test_parity_ragas_text.py)."))


def _quoted_metric(samples: Sequence[Sample], ctx: Any = None, casefold: bool = True,
                   min_span_words: int = 3) -> list[Score]:
    if not isinstance(min_span_words, int) or isinstance(min_span_words, bool) or min_span_words < 0:
        raise MetricError(f"ragas:quoted_spans_alignment: min_span_words must be a whole number >= 0, got {min_span_words!r}")
    return [Score(quoted_spans_alignment(s.answer or "", [c.text or "" for c in s.contexts or []],
                                         bool(casefold), min_span_words)) for s in samples]


register_metric(MetricSpec(
    name="ragas:quoted_spans_alignment", family="lexical", fn=_quoted_metric, requires=("answer", "context_texts"),
    defaults={"casefold": True, "min_span_words": 3},
    aliases=("QuotedSpansAlignment", "quoted_spans_alignment"), equals=_equals("QuotedSpansAlignment"),
    description="""
ragas' quoted spans alignment (``QuotedSpansAlignment``): of the spans the response quotes (text
between two quote characters, straight or curly, with at least ``min_span_words`` = 3 words),
the share found verbatim in the retrieved contexts joined by a space (whitespace collapsed and
lower-cased unless ``casefold`` is false):

    ragas:quoted_spans_alignment = |quoted spans found in the contexts| / |quoted spans|

1 when the response quotes nothing (ragas' rule). Range [0, 1].""",
    parity=f"Equals ragas {VERSION} ``QuotedSpansAlignment`` on every input (tests/test_parity_ragas_text.py)."))


# ---- semantic similarity -----------------------------------------------------------------------------


def _texts(s: Sample) -> list[str]:
    return [s.references[0], s.answer or ""]


def _prepare_semantic(samples: Sequence[Sample], ctx: Any, **_p: Any) -> None:
    ctx.service("embeddings").request([t for s in samples for t in _texts(s)])


def _semantic_metric(samples: Sequence[Sample], ctx: Any, threshold: float | None = None) -> list[Score]:
    if threshold is not None and (not isinstance(threshold, int | float) or isinstance(threshold, bool)):
        raise MetricError(f"ragas:semantic_similarity: threshold must be a number or null, got {threshold!r}")
    if not samples:
        return []
    emb = np.asarray(ctx.service("embeddings").matrix([t for s in samples for t in _texts(s)]), dtype=np.float64)
    ref, resp = emb[0::2], emb[1::2]
    out = []
    for a, b in zip(ref, resp, strict=True):
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        if na == 0 or nb == 0:  # ragmeter's encoders never embed a blank text (its row is zero)
            out.append(Score.missing("a blank reference or response: ragas embeds it as \" \", ragmeter's "
                                     "encoders do not embed blank texts"))
            continue
        value = float((a / na) @ (b / nb))
        out.append(Score(float(value >= threshold) if threshold else value))  # ragas: a threshold of 0 is none
    return out


register_metric(MetricSpec(
    name="ragas:semantic_similarity", family="semantic", fn=_semantic_metric, requires=("answer", "reference"),
    needs_embeddings=True, prepare=_prepare_semantic, defaults={"threshold": None}, range=(-1.0, 1.0),
    aliases=("SemanticSimilarity", "ragas_semantic_similarity", "ragas.metrics.collections.SemanticSimilarity"),
    equals=_equals("SemanticSimilarity"),
    description="""
ragas' semantic similarity (``SemanticSimilarity``): the cosine of the embeddings of the reference
and the response; with ``threshold`` the score
is 1 when the cosine reaches it, else 0. A blank text has no value (ragas embeds " "; ragmeter's
encoders embed no blank text). The embedding model is the run's (``embedding_model``):
ragas' number needs the same model. Range [-1, 1] (the cosine is not clipped, as in ragas).""",
    parity=(f"Equals ragas {VERSION} ``SemanticSimilarity`` given the same embeddings (to float32 precision, "
            "about 1e-7; tests/test_parity_ragas_text.py), except for a blank reference or response: ragas "
            "embeds a single space, ragmeter's encoders embed no blank text, so it has no value. ragmeter's ``semantic_similarity`` takes the best "
            "of several references and clips to [0, 1].")))
