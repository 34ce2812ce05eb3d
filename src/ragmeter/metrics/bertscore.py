"""BERTScore (Zhang et al. 2020, "BERTScore: Evaluating Text Generation with BERT"): each token of
the answer matched to its most similar token of the reference by the cosine of their contextual
embeddings, and the other way round. Equal to the ``bert-score`` package (0.3.13) given the same
model folder and layer (tests/test_bertscore.py).

The encoder and the idf documents come from the run's ``token_embeddings`` service
(:mod:`ragmeter.embed.contextual`); the texts are encoded here, once per run, model and layer, in
padded batches sorted by length (:func:`encode`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ragmeter.core.context import declare_service
from ragmeter.core.errors import ConfigError, MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.embed.models import EmbeddingError, ModelUnavailableError
from ragmeter.metrics.registry import MetricSpec, register_metric

declare_service("token_embeddings", "ragmeter.embed.contextual")

PARTS = ("precision", "recall", "f1")
SOURCE = ("Zhang, Kishore, Wu, Weinberger and Artzi, BERTScore: Evaluating Text Generation with BERT, "
          "ICLR 2020; equal to the bert-score package 0.3.13")


def parse_baseline(value: Any) -> tuple[float, float, float] | None:
    """The baseline of rescaling as ``(b_P, b_R, b_F)``: one number for all three, three numbers
    (``"0.83,0.83,0.83"`` or a list), or ``None`` (no rescaling).

    Raises:
        ConfigError: not numbers, not one or three of them, or a value that is not below 1.
    """
    if value is None or value == "":
        return None
    raw = value.split(",") if isinstance(value, str) else (list(value) if isinstance(value, list | tuple) else [value])
    try:
        nums = [float(x) for x in raw]
    except (TypeError, ValueError):
        raise ConfigError(f"baseline must be a number or three numbers P,R,F (bert-score's baseline file row "
                          f"of the layer), got {value!r}") from None
    if len(nums) == 1:
        nums *= 3
    if len(nums) != 3 or not all(math.isfinite(b) and b < 1 for b in nums):
        raise ConfigError(f"baseline must be one or three finite numbers below 1 (P,R,F), got {value!r}")
    return nums[0], nums[1], nums[2]


def pair_score(cand: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray],
               weight: Any) -> tuple[float, float, float]:
    """BERTScore of one pair of tokenised texts (``(ids, unit rows)`` each).

    ``P = sum_i w(x_i) max(0, max_j x_i . y_j) / sum_i w(x_i)``, ``R`` the same from the reference
    side, ``F = 2PR / (P + R)``; ``w`` is the idf weight (1 without idf) and 0 for [CLS] and [SEP],
    which still take part in the matching, as in bert-score. A token's best cosine counts at least 0:
    bert-score takes the maximum over a padded batch, where padding positions have cosine 0 (a
    one-word answer such as "x" otherwise differs from it by 1e-3). A side with only special tokens
    scores 0.
    """
    c_ids, c = cand
    r_ids, r = ref
    sim = c.astype(np.float64) @ r.astype(np.float64).T
    wc = np.array([weight(int(t)) for t in c_ids], dtype=np.float64)
    wr = np.array([weight(int(t)) for t in r_ids], dtype=np.float64)
    if wc.sum() <= 0 or wr.sum() <= 0:
        return 0.0, 0.0, 0.0
    p = float((np.maximum(sim.max(axis=1), 0.0) * wc).sum() / wc.sum())
    r_ = float((np.maximum(sim.max(axis=0), 0.0) * wr).sum() / wr.sum())
    f = 2 * p * r_ / (p + r_) if p + r_ != 0 else 0.0
    return p, r_, (0.0 if math.isnan(f) else f)


#: tokens per padded batch (bert-score's default is 64 texts; this bounds the memory of long ones)
BATCH_TOKENS = 4096
#: the vectors encoded so far, per service (a run's context owns one service)
_ENCODED: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, str], tuple[np.ndarray, np.ndarray]]] = (
    weakref.WeakKeyDictionary())


def padded_length(n: int) -> int:
    """The length a text of ``n`` word pieces is padded to: the next multiple of 8, at least 16.

    A text's vectors depend only on this length, never on the other texts of its batch: on one
    thread, a padded row's output is the same bit for bit whatever rows share the batch once the
    batch has 16 rows of tokens or more (fewer take another matrix kernel: measured 2e-6 apart). So
    a sample scores the same in any batch, run split or worker, as the common metric test checks.
    """
    return max(16, -(-n // 8) * 8)


def encode(svc: Any, texts: Iterable[str], model: str | None = None, num_layers: int | None = None,
           progress: Callable[[str, int], Callable[[int], None]] | None = None) -> None:
    """Encode the ``texts`` not encoded yet for ``model`` and layer: token ids as bert-score makes
    them, texts sorted by padded length, each length's texts in batches of at most
    :data:`BATCH_TOKENS` tokens, the model run once per batch with an attention mask over the padding,
    every vector of the layer scaled to unit length.

    Raises:
        ModelUnavailableError: the model cannot be loaded. ConfigError: ``num_layers`` is not a layer.
    """
    enc = svc.encoder(model)
    layer = enc.layer(num_layers)
    cache = _ENCODED.setdefault(svc, {})
    mid = enc.ref.model_id
    todo = list(dict.fromkeys(t for t in texts if (mid, layer, t) not in cache))
    if not todo:
        return
    ids = {t: enc.ids(t) for t in todo}
    todo.sort(key=lambda t: padded_length(len(ids[t])))
    advance = (progress or (lambda d, n: (lambda k: None)))(
        f"token embeddings ({mid.rsplit('/', 1)[-1]}, layer {layer})", len(todo))
    import torch

    pad = enc.tokenizer.pad_token_id or 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # more threads split the sums differently from one batch shape to another
    try:
        start = 0
        while start < len(todo):
            width = padded_length(len(ids[todo[start]]))
            end = start + 1
            while (end < len(todo) and end - start < max(1, BATCH_TOKENS // width)
                   and padded_length(len(ids[todo[end]])) == width):
                end += 1
            batch = todo[start:end]
            x = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros_like(x)
            for k, t in enumerate(batch):
                x[k, :len(ids[t])] = torch.tensor(ids[t], dtype=torch.long)
                mask[k, :len(ids[t])] = 1
            with torch.inference_mode():
                out = enc.model(input_ids=x.to(enc.device) if enc.device else x,
                                attention_mask=mask.to(enc.device) if enc.device else mask,
                                output_hidden_states=True)
                h = out.hidden_states[layer].float().cpu().numpy()
            for k, t in enumerate(batch):
                rows = np.array(h[k, :len(ids[t])], dtype=np.float32)
                norms = np.linalg.norm(rows, axis=1, keepdims=True)
                np.divide(rows, norms, out=rows, where=norms > 0)
                cache[(mid, layer, t)] = (np.asarray(ids[t], dtype=np.int64), rows)
            advance(len(batch))
            start = end
    finally:
        torch.set_num_threads(threads)


def tokens(svc: Any, text: str, model: str | None = None, num_layers: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, unit rows)`` of ``text`` (encoded by :func:`encode` if it was not yet)."""
    enc = svc.encoder(model)
    key = (enc.ref.model_id, enc.layer(num_layers), text)
    cache = _ENCODED.get(svc)
    if cache is None or key not in cache:
        encode(svc, [text], model, num_layers)
        cache = _ENCODED[svc]
    return cache[key]


def _weights(svc: Any, model: str | None, idf: bool, docs: Sequence[str]) -> Any:
    from ragmeter.embed.contextual import idf_weights

    enc = svc.encoder(model)
    special = enc.special_ids
    if not idf:
        return lambda t: 0.0 if t in special else 1.0
    tokenised = [enc.ids(d) for d in docs]
    m = len(tokenised)
    table = idf_weights(tokenised, {t for d in tokenised for t in d})
    unseen = math.log(m + 1)
    return lambda t: 0.0 if t in special else table.get(t, unseen)


def score_pairs(svc: Any, answers: Sequence[str], references: Sequence[Sequence[str]], *,
                model: str | None = None, num_layers: int | None = None, idf: bool = False,
                baseline: Any = None, idf_documents: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per answer ``{"precision", "recall", "f1", "best_reference"}`` against its references (the
    reference with the highest F1 counts, as bert-score does with several), rescaled when a
    baseline is given: ``(x - b) / (1 - b)``.

    Raises:
        ModelUnavailableError: the model cannot be loaded. ConfigError: a wrong layer or baseline.
    """
    base = parse_baseline(baseline)
    docs = list(idf_documents) if idf_documents is not None else [r for refs in references for r in refs]
    weight = _weights(svc, model, idf, docs)
    encode(svc, [*answers, *(r for refs in references for r in refs)], model, num_layers)
    out = []
    for a, refs in zip(answers, references, strict=True):
        ca = tokens(svc, a, model, num_layers)
        best: tuple[float, float, float] | None = None
        best_k = 0
        for k, ref in enumerate(refs):
            s = pair_score(ca, tokens(svc, ref, model, num_layers), weight)
            if best is None or s[2] > best[2]:
                best, best_k = s, k
        assert best is not None
        vals = best if base is None else tuple((v - b) / (1 - b) for v, b in zip(best, base, strict=True))
        out.append({**dict(zip(PARTS, vals, strict=True)), "best_reference": best_k})
    return out


def bertscore(answers: Sequence[str], references: Sequence[str | Sequence[str]], *, model: str | None = None,
              num_layers: int | None = None, idf: bool = False, baseline: Any = None,
              options: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """BERTScore precision, recall and F1 of each answer against its reference(s).

    ``P = sum_{x in a} w(x) max_{y in r} cos(x, y) / sum w(x)``, ``R`` symmetrically over the
    reference's tokens, ``F = 2PR / (P + R)``, with ``x``, ``y`` the contextual embeddings of word
    pieces at layer ``num_layers``; ``w`` = 1, or with ``idf=True`` ``log((M + 1) / (df + 1))``
    over the ``M`` references given; [CLS] and [SEP] weigh 0. Several references: the one with the
    highest F1. ``baseline`` rescales ``(x - b) / (1 - b)`` (one number or P,R,F).

    Args:
        answers: candidate texts. references: per answer, a reference or a list of them.
        model: encoder folder or name (default: the bundled all-MiniLM-L6-v2).
        num_layers: the layer (default: the model's last). idf: idf weighting.
        baseline: rescaling baseline. options: ``embedding_model_paths``, ``embedding_device``.

    Returns:
        ``{"precision": array, "recall": array, "f1": array}``.

    Example:
        >>> bertscore(["the cat sat on the mat"], ["a cat was on the mat"])["f1"]  # doctest: +SKIP
        array([0.87...])
    """
    from ragmeter.embed.contextual import TokenEmbeddingService

    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    if len(refs) != len(answers):
        raise MetricError(f"got {len(answers)} answers but {len(refs)} references")
    if any(not r for r in refs):
        raise MetricError("every answer needs at least one reference")
    rows = score_pairs(TokenEmbeddingService(options), list(answers), refs, model=model,
                       num_layers=num_layers, idf=idf, baseline=baseline)
    return {p: np.array([r[p] for r in rows], dtype=np.float64) for p in PARTS}


# ---- the runner's interface -----------------------------------------------------------------------


def _texts(samples: Sequence[Sample]) -> tuple[list[str], list[list[str]]]:
    return [s.answer or "" for s in samples], [list(s.references) for s in samples]


def prepare_texts(ctx: Any, texts: Sequence[str], model: str | None = None, num_layers: int | None = None) -> None:
    """Encode a run's texts before its batches are scored (a model that cannot load, or a wrong
    layer, is left for the scoring, which gives each sample the reason)."""
    try:
        encode(ctx.service("token_embeddings"), texts, model, num_layers, ctx.progress)
    except (ModelUnavailableError, EmbeddingError, ConfigError):
        pass


def _prepare(samples: Sequence[Sample], ctx: Any, model: str | None = None, num_layers: int | None = None,
             idf: bool = False, baseline: Any = None) -> None:
    svc = ctx.service("token_embeddings")
    answers, refs = _texts(samples)
    prepare_texts(ctx, [*answers, *(r for g in refs for r in g)], model, num_layers)
    if idf:  # idf over every reference of the run, whatever batch a sample is scored in
        svc.set_idf_documents([r for g in refs for r in g], model)


def _score(samples: Sequence[Sample], ctx: Any, part: str, model: str | None = None,
           num_layers: int | None = None, idf: bool = False, baseline: Any = None) -> list[Score]:
    svc = ctx.service("token_embeddings")
    answers, refs = _texts(samples)
    try:
        rows = score_pairs(svc, answers, refs, model=model, num_layers=num_layers, idf=idf, baseline=baseline,
                           idf_documents=svc.idf_documents(model) if idf else None)
        layer = svc.encoder(model).layer(num_layers)
    except (ModelUnavailableError, EmbeddingError) as exc:
        return [Score.missing(f"unavailable: {exc}")] * len(samples)
    out = []
    for row, g in zip(rows, refs, strict=True):
        details: dict[str, Any] = {k: round(row[k], 6) for k in PARTS if k != part}
        details["layer"] = layer
        if len(g) > 1:
            details["best_reference"] = row["best_reference"]
        value = row[part] if baseline not in (None, "") else min(max(row[part], 0.0), 1.0)
        out.append(Score(value, None, details))
    return out


def _range(params: Mapping[str, Any]) -> tuple[float, float]:
    base = parse_baseline(params.get("baseline"))
    if base is None:
        return 0.0, 1.0
    return min(-b / (1 - b) for b in base), 1.0


def _check(ctx: Any, model: str | None = None, num_layers: int | None = None, idf: Any = False,
           baseline: Any = None) -> str | None:
    try:
        parse_baseline(baseline)
    except ConfigError as exc:
        return str(exc)
    if num_layers is not None and (isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1):
        return f"num_layers must be a positive integer (a layer of the model), got {num_layers!r}"
    if not isinstance(idf, bool):
        return f"idf must be true or false, got {idf!r}"
    return None


_DOC = {
    "precision": "BERTScore precision: the idf-weighted mean, over the answer's word pieces, of the best cosine "
                 "with a reference word piece (contextual embeddings, bundled all-MiniLM-L6-v2 by default).",
    "recall": "BERTScore recall: the idf-weighted mean, over the reference's word pieces, of the best cosine "
              "with an answer word piece (contextual embeddings, bundled all-MiniLM-L6-v2 by default).",
    "f1": "BERTScore F1 = 2PR / (P + R) of BERTScore precision and recall (contextual embeddings, bundled "
          "all-MiniLM-L6-v2 by default).",
}

for _part in PARTS:
    register_metric(MetricSpec(
        name=f"bertscore_{_part}", family="semantic", fn=partial(_score, part=_part),
        requires=("answer", "reference"), range=(0.0, 1.0), needs_embeddings=True,
        defaults={"model": None, "num_layers": None, "idf": False, "baseline": None}, param="num_layers",
        prepare=_prepare, check=_check, range_for=_range,
        description=(f"{_DOC[_part]} Options: model (a sentence-transformers or Hugging Face folder), num_layers "
                     "(the layer; default the last), idf (weights log((M+1)/(df+1)) over the run's M references; "
                     "[CLS]/[SEP] weigh 0), baseline (rescale (x - b)/(1 - b); one number or P,R,F). Several "
                     f"references: the one with the best F1. Source: {SOURCE}.\n\n" + (bertscore.__doc__ or ""))))
