"""``quality_offline``: a small learned model of answer quality from offline features (lexical,
sentence-embedding, BERTScore and claim features), fitted to human labels, as COMET and BLEURT
are fitted for translation.

The model is ridge regression on standardised features: ``q = clip(b + sum_k w_k (x_k - mu_k) / s_k,
0, 1)`` on the 0-1 label scale. The one shipped (``ragmeter/data/quality_offline.json``) is fitted
on the bundled ``example-human`` labels (SQuALITY correctness, 300 answers, 3 raters);
``ragmeter fit-quality`` fits one on a user's labels and ``--option quality_model=FILE`` uses it
(the file is read and checked by :mod:`ragmeter.io.quality_model`, never here).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ragmeter.core import language
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Sample, Score
from ragmeter.embed.models import EmbeddingError, ModelUnavailableError
from ragmeter.metrics.bertscore import prepare_texts, score_pairs
from ragmeter.metrics.claims import claim_rows, prepare_claims
from ragmeter.metrics.registry import MetricSpec, register_metric

#: the features, in the order of a model's coefficients
FEATURES = ("token_f1", "semantic_similarity", "bertscore_precision", "bertscore_recall", "bertscore_f1",
            "claim_recall", "claim_precision", "claim_f1", "claim_soft_recall", "claim_soft_precision",
            "log_length_ratio")
#: the format of a model file
MODEL_FORMAT = 1
#: the run option naming a model (a file on the command line; the parsed model inside a run)
OPTION = "quality_model"


def check_model(doc: Any, where: str = "quality model") -> dict[str, Any]:
    """``doc`` checked as a quality model (what ``ragmeter fit-quality`` writes).

    Raises:
        ConfigError: naming ``where`` and the field that is missing or wrong.
    """
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: a quality model is a JSON object, got {type(doc).__name__}")
    if doc.get("format") != MODEL_FORMAT:
        raise ConfigError(f"{where}: field 'format' must be {MODEL_FORMAT}, got {doc.get('format')!r}")
    feats = doc.get("features")
    if not isinstance(feats, list) or not feats or not all(isinstance(f, str) for f in feats):
        raise ConfigError(f"{where}: field 'features' must be a list of feature names")
    unknown = [f for f in feats if f not in FEATURES]
    if unknown:
        raise ConfigError(f"{where}: field 'features' has unknown feature(s) {unknown}; known: {', '.join(FEATURES)}")
    for name in ("mean", "scale", "coef"):
        v = doc.get(name)
        if (not isinstance(v, list) or len(v) != len(feats)
                or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
            raise ConfigError(f"{where}: field {name!r} must be {len(feats)} finite numbers (one per feature)")
    if any(x <= 0 for x in doc["scale"]):
        raise ConfigError(f"{where}: field 'scale' must be positive numbers")
    b = doc.get("intercept")
    if not isinstance(b, int | float) or isinstance(b, bool) or not math.isfinite(b):
        raise ConfigError(f"{where}: field 'intercept' must be a finite number")
    return dict(doc)


@lru_cache(maxsize=1)
def bundled_model() -> dict[str, Any]:
    """The model shipped with ragmeter (fitted on ``example-human``)."""
    text = resources.files("ragmeter").joinpath("data", "quality_offline.json").read_text(encoding="utf-8")
    return check_model(json.loads(text), "ragmeter/data/quality_offline.json")


def predict(model: Mapping[str, Any], x: np.ndarray) -> np.ndarray:
    """The model's quality of each row of ``x`` (columns in :data:`FEATURES` order), in [0, 1]."""
    cols = [FEATURES.index(f) for f in model["features"]]
    z = (x[:, cols] - np.asarray(model["mean"])) / np.asarray(model["scale"])
    coef = np.asarray(model["coef"], dtype=np.float64)
    # a correctly rounded sum per row: a matrix product's rounding depends on how many rows it has,
    # and a sample's value must not depend on the batch it is scored in
    q = np.array([float(model["intercept"]) + math.fsum(row * coef) for row in z], dtype=np.float64)
    return np.clip(q, 0.0, 1.0)


def prepare_features(samples: Sequence[Sample], ctx: Any, **_: Any) -> None:
    """Ask the services for every text the features need."""
    texts = [t for s in samples for t in (s.answer or "", *s.references)]
    ctx.service("embeddings").request(texts)
    prepare_texts(ctx, texts)
    prepare_claims(samples, ctx)


def features(samples: Sequence[Sample], ctx: Any) -> np.ndarray:
    """The :data:`FEATURES` of each sample, ``(len(samples), len(FEATURES))``: each the value the metric
    of that name gives with its defaults; ``claim_soft_*`` the mean best similarity of a claim;
    ``log_length_ratio`` = log((1 + answer words) / (1 + reference words)) for the best reference
    by token F1.

    Raises:
        ModelUnavailableError, EmbeddingError: the bundled encoder cannot be used.
    """
    from ragmeter.embed.service import is_blank
    from ragmeter.metrics.lexical.strings import token_f1
    from ragmeter.metrics.semantic import best_match_cosine

    answers = [s.answer or "" for s in samples]
    refs = [list(s.references) for s in samples]
    emb = ctx.service("embeddings")
    flat = [r for g in refs for r in g]
    sem, _ = best_match_cosine(emb.matrix(answers), emb.matrix(flat), [len(g) for g in refs],
                               np.array([is_blank(a) for a in answers]), np.array([is_blank(t) for t in flat]))
    bs = score_pairs(ctx.service("token_embeddings"), answers, refs)
    cl = claim_rows(samples, ctx)
    out = np.zeros((len(samples), len(FEATURES)), dtype=np.float64)
    for i, (a, g) in enumerate(zip(answers, refs, strict=True)):
        f1s = [token_f1(a, r) for r in g]
        best = int(np.argmax(f1s))
        ratio = math.log((1 + len(language.words(a))) / (1 + len(language.words(g[best]))))
        out[i] = [max(f1s), min(max(float(sem[i]), 0.0), 1.0), bs[i]["precision"], bs[i]["recall"], bs[i]["f1"],
                  cl[i]["recall"], cl[i]["precision"], cl[i]["f1"], cl[i]["soft_recall"], cl[i]["soft_precision"],
                  ratio]
    return out


def model_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """The run's model: the parsed ``quality_model`` option, else the bundled one.

    Raises:
        ConfigError: the option is still a path (not read by the run's loader) or not a model.
    """
    given = options.get(OPTION)
    if given is None or given == "":
        return bundled_model()
    if isinstance(given, str):
        raise ConfigError(f"option {OPTION} names a file ({given!r}) that was not read: pass it to "
                          "ragmeter.evaluate / ragmeter eval, which read it before the run")
    return check_model(given, str(given.get("file") or f"option {OPTION}") if isinstance(given, Mapping)
                       else f"option {OPTION}")


def _score(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    model = model_of(ctx.options)
    try:
        x = features(samples, ctx)
    except (ModelUnavailableError, EmbeddingError) as exc:
        return [Score.missing(f"unavailable: {exc}")] * len(samples)
    q = predict(model, x)
    name = model.get("name") or "quality model"
    return [Score(float(v), None, {"model": name, "features": {f: round(float(x[i, k]), 6)
                                                               for k, f in enumerate(FEATURES)}})
            for i, v in enumerate(q)]


def _check(ctx: Any) -> str | None:
    try:
        model_of(ctx.options)
    except ConfigError as exc:
        return str(exc)
    return None


register_metric(MetricSpec(
    name="quality_offline", family="semantic", fn=_score, requires=("answer", "reference"), range=(0.0, 1.0),
    needs_embeddings=True, prepare=prepare_features, check=_check, options=(OPTION,),
    description=(
        "Learned offline answer quality: ridge regression over standardised offline features (token_f1, "
        "semantic_similarity, bertscore_precision/recall/f1, claim_recall/precision/f1, the claims' mean best "
        "similarity, log length ratio), q = clip(b + sum_k w_k (x_k - mu_k) / s_k, 0, 1), fitted to human labels "
        "scaled to 0-1 (as COMET and BLEURT are fitted for translation). Shipped fitted on example-human "
        "(SQuALITY correctness, Wang et al. 2022); `ragmeter fit-quality LABELS --label FIELD` fits one on your "
        "labels, used with --option quality_model=FILE. `ragmeter meta-eval` reports its grouped cross-validated "
        "agreement (never an item it was fitted on).")))
