"""The correctness methods registered as metrics: ``correct_keyword``, ``correct_semantic_fixed``,
``correct_semantic_dynamic``, ``correct_semantic_guarded``, ``correct_llm_judge``, ``correct_hybrid``.

Each records what it did in the run: ``Run.extra["method"]`` (the method, its parameters and
figures such as judge calls saved) and, for ``semantic_dynamic``, ``Run.extra["calibration"]``
(the whole threshold curve and the chosen threshold). They reach ``Run.extra`` as the ``stats()``
of two small run services, ``method`` and ``calibration``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmeter.core.context import ScoringContext, register_service
from ragmeter.core.errors import ConfigError, MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.correctness.calibration import binary_scores, calibrate_threshold, validation_split
from ragmeter.metrics.correctness.methods import (
    DEFAULT_THRESHOLD,
    GuardParams,
    guarded_best,
    keyword_correct,
    reference_similarities,
)
from ragmeter.metrics.registry import MetricSpec, get_spec, missing_fields, register_metric

FAMILY = "correctness"
JUDGE_METRIC = "graded_correctness"
#: the whole column at once: calibration needs every sample, hybrid counts calls over the run
WHOLE_RUN = 1_000_000_000


# ---- run records -------------------------------------------------------------------------------

class MethodRecord:
    """Run service ``method``: which correctness method(s) scored the run, with parameters and
    figures. Its ``stats()`` becomes ``Run.extra["method"]``::

        {"name": "hybrid", "methods": {"hybrid": {"params": {...}, "n_scored": 48,
                                                  "judge_calls": 9, "judge_calls_saved": 39, ...}}}

    ``name`` is a list when several methods scored the same run.
    """

    #: figures that add up over the batches of one metric; the others are overwritten
    COUNTS = frozenset({"n_scored", "judge_calls", "judge_calls_saved", "audit_judge_calls", "audit_pairs"})

    def __init__(self, _ctx: Any = None) -> None:
        self.methods: dict[str, dict[str, Any]] = {}

    def add(self, method: str, params: dict[str, Any], **figures: Any) -> None:
        """Record (or extend, for a later batch) one method's figures. The same method with other
        parameters in the same run is recorded as ``method(param=value,...)``."""
        params = _jsonable(params)
        key = method
        first = self.methods.get(method)
        if first is not None and first["params"] != params:
            diff = {k: v for k, v in params.items() if first["params"].get(k) != v}
            key = method + "(" + ",".join(f"{k}={v}" for k, v in sorted(diff.items())) + ")"
        rec = self.methods.setdefault(key, {"params": params})
        for k, v in figures.items():
            rec[k] = rec.get(k, 0) + v if k in self.COUNTS else v

    def stats(self) -> dict[str, Any]:
        names = list(self.methods)
        return {"name": names[0] if len(names) == 1 else names, "methods": self.methods}


class CalibrationRecord:
    """Run service ``calibration``: ``stats()`` is the :class:`Calibration` dict of the run's
    semantic_dynamic (``thresholds``, ``accuracy``, ``f1``, ``chosen``, ``objective`` ...)."""

    def __init__(self, _ctx: Any = None) -> None:
        self.value: dict[str, Any] = {}

    def stats(self) -> dict[str, Any]:
        return self.value


register_service("method", MethodRecord)
register_service("calibration", CalibrationRecord)


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(d, default=str))


# ---- helpers -----------------------------------------------------------------------------------

def _embedding_errors() -> tuple[type[Exception], ...]:
    try:
        from ragmeter.embed import EmbeddingError, ModelUnavailableError
    except ImportError:
        return ()
    return (ModelUnavailableError, EmbeddingError)


def _similarities(samples: Sequence[Sample], ctx: ScoringContext,
                  model: str | None) -> list[np.ndarray]:
    svc = ctx.service("embeddings")
    return reference_similarities([s.answer or "" for s in samples], [s.references for s in samples],
                                  lambda texts: svc.matrix(list(texts), model=model))


def _prepare_embeddings(samples: Sequence[Sample], ctx: ScoringContext, **params: Any) -> None:
    svc = ctx.service("embeddings")
    svc.request([s.answer or "" for s in samples], model=params.get("model"))
    svc.request([r for s in samples for r in s.references], model=params.get("model"))


def _guard_semantic(fn):  # type: ignore[no-untyped-def]
    """An unavailable embedding model gives every sample no value, with the reason (not a crash)."""

    def wrapped(samples: list[Sample], ctx: ScoringContext, **params: Any) -> list[Score]:
        errors = _embedding_errors()
        try:
            return fn(samples, ctx, **params)
        except errors as exc:  # type: ignore[misc]
            return [Score.missing(f"embeddings unavailable: {exc}")] * len(samples)

    wrapped.__doc__ = fn.__doc__
    wrapped.__name__ = fn.__name__
    return wrapped


def _check_threshold(t: Any, name: str = "threshold") -> float:
    try:
        v = float(t)
    except (TypeError, ValueError) as exc:
        raise MetricError(f"{name} must be a number, got {t!r}") from exc
    if not -1.0 <= v <= 1.0:
        raise MetricError(f"{name} must be a cosine similarity in [-1, 1], got {v}")
    return v


# ---- keyword -----------------------------------------------------------------------------------

def _keywords_of(sample: Sample, field: str) -> list[str]:
    kw = sample.metadata.get(field)
    if isinstance(kw, str):
        return [kw]
    if isinstance(kw, list | tuple):
        return [str(k) for k in kw]
    return list(sample.references)


def correct_keyword(samples: list[Sample], ctx: ScoringContext, *, mode: str = "any",
                    keywords_field: str = "keywords", check_negation: bool = True) -> list[Score]:
    """Keyword correctness (the common `1.0 if expected in answer else 0.5` check, without its 0.5 floor).

    1 when an expected keyword occurs in the answer, else 0. The keywords are the sample's
    ``metadata[keywords_field]`` (a string or a list) when present, else its references. Matching
    is case-insensitive on whole tokens with punctuation, whitespace and accents normalised;
    ``mode="all"`` needs every keyword. With ``check_negation`` an answer that negates a statement
    while no keyword does is 0 ("The capital is not Lisbon"; the negation cues follow the sample's
    or the run's ``language``: "não é Lisboa"). Range {0, 1}. A sample with no usable keyword has no
    value.
    """
    import ragmeter.core.language as lang

    if mode not in ("any", "all"):
        raise MetricError(f"mode must be 'any' or 'all', got {mode!r}")
    out = []
    for s in samples:
        kws = _keywords_of(s, keywords_field)
        try:
            v = keyword_correct(s.answer or "", kws, mode=mode, check_negation=check_negation,
                                language=lang.of(s, ctx.options))
        except MetricError:
            out.append(Score.missing("no expected keyword (metadata.keywords or a reference)"))
            continue
        out.append(Score(v, details={"keywords": kws[:10]}))
    ctx.service("method").add("keyword", {"mode": mode, "keywords_field": keywords_field,
                                          "check_negation": check_negation},
                              n_scored=sum(s.value is not None for s in out))
    return out


# ---- semantic fixed ----------------------------------------------------------------------------

@_guard_semantic
def correct_semantic_fixed(samples: list[Sample], ctx: ScoringContext, *,
                           threshold: float = DEFAULT_THRESHOLD, model: str | None = None) -> list[Score]:
    """Semantic correctness with a fixed threshold (phase 1 of the keyword -> semantic -> judge path).

    ``1 if max_r cos(e(answer), e(reference_r)) >= threshold else 0`` with all-MiniLM-L6-v2 by
    default (run option ``embedding_model`` or the ``model`` parameter to change it). Range {0, 1}.
    Known failure: a same-shaped wrong answer ("... is London" vs "... is Paris", cosine 0.84)
    passes; see ``correct_semantic_guarded``.
    """
    t = _check_threshold(threshold)
    sims = _similarities(samples, ctx, model)
    out = [Score(float(x.max() >= t), details={"similarity": round(float(x.max()), 4), "threshold": t})
           for x in sims]
    ctx.service("method").add("semantic_fixed", {"threshold": t, "model": model}, n_scored=len(out))
    return out


# ---- semantic dynamic --------------------------------------------------------------------------

@_guard_semantic
def correct_semantic_dynamic(samples: list[Sample], ctx: ScoringContext, *, threshold: float | None = None,
                             objective: str = "accuracy", val_fraction: float = 0.5, seed: int = 0,
                             grid: str = "fine", use_proxy: bool = True,
                             model: str | None = None) -> list[Score]:
    """Semantic correctness with a threshold calibrated on labelled data (phase 2: calibrated threshold).

    A validation split of the labelled samples (``metadata.split`` = validation/val/dev when
    given, else a label-stratified random ``val_fraction``) chooses the threshold that maximises
    ``objective`` (accuracy or F1, from the human labels) over a fine grid; the rest (held-out)
    is scored ``1 if similarity >= chosen else 0``. Validation samples get no value (they were
    used to choose the threshold). The curve, the chosen threshold and the held-out accuracy/F1
    are recorded in ``Run.extra["calibration"]``. Without labels, the similarity proxy
    (similarity > 0.9) is used with a warning that this is circular (``use_proxy=false`` refuses
    instead). Passing ``threshold`` skips calibration (e.g. a threshold calibrated earlier).
    """
    if objective not in ("accuracy", "f1"):
        raise MetricError(f"objective must be 'accuracy' or 'f1', got {objective!r}")
    sims = np.array([float(x.max()) for x in _similarities(samples, ctx, model)])
    method = ctx.service("method")
    params = {"objective": objective, "val_fraction": val_fraction, "seed": seed, "grid": grid,
              "model": model, "threshold": threshold, "use_proxy": use_proxy}
    if threshold is not None:
        t = _check_threshold(threshold)
        method.add("semantic_dynamic", params, n_scored=len(samples), threshold=t, calibrated=False)
        return [Score(float(s >= t), details={"similarity": round(float(s), 4), "threshold": t})
                for s in sims]

    ids = [s.id for s in samples]
    labels = [s.label for s in samples]
    n_labelled = sum(lab is not None for lab in labels)
    if n_labelled >= 4:
        val = validation_split(ids, labels, fraction=val_fraction, seed=seed,
                               split_of=[str(s.metadata.get("split") or "") or None for s in samples])
        idx = [i for i, x in enumerate(ids) if x in val]
        cal = calibrate_threshold(sims[idx], [labels[i] for i in idx], objective=objective, grid=grid)  # type: ignore[misc]
    elif use_proxy:
        rng = np.random.default_rng(seed)
        k = max(1, int(round(val_fraction * len(samples))))
        idx = sorted(rng.permutation(len(samples))[:k].tolist()) if len(samples) > 1 else [0]
        val = {ids[i] for i in idx}
        cal = calibrate_threshold(sims[idx], None, objective=objective, grid=grid)
    else:
        reason = f"semantic_dynamic needs >= 4 labelled samples to calibrate (got {n_labelled}); " \
                 "use_proxy=true calibrates on the (circular) similarity proxy"
        return [Score.missing(reason)] * len(samples)

    t = cal.chosen
    held = [i for i, x in enumerate(ids) if x not in val]
    held_lab = [i for i in held if labels[i] is not None]
    if held_lab and not cal.circular:
        y = [labels[i] for i in held_lab]
        cal.held_out_scores = {
            "chosen": binary_scores(y, (sims[held_lab] >= t).astype(float)).to_dict(),
            f"fixed_{DEFAULT_THRESHOLD}": binary_scores(
                y, (sims[held_lab] >= DEFAULT_THRESHOLD).astype(float)).to_dict(),
        }
    ctx.service("calibration").value = cal.to_dict()
    method.add("semantic_dynamic", params, n_scored=len(held), threshold=t, calibrated=True,
               n_validation=len(val), circular=cal.circular, label_source=cal.label_source)
    out = []
    for i, s in enumerate(sims):
        if ids[i] in val:
            out.append(Score.missing("calibration split: used to choose the threshold",
                                     details={"similarity": round(float(s), 4)}))
        else:
            out.append(Score(float(s >= t), details={"similarity": round(float(s), 4), "threshold": t}))
    return out


# ---- semantic guarded --------------------------------------------------------------------------

@_guard_semantic
def correct_semantic_guarded(samples: list[Sample], ctx: ScoringContext, *, min_similarity: float = 0.5,
                             fallback_threshold: float = DEFAULT_THRESHOLD, min_coverage: float = 0.5,
                             check_negation: bool = True, use_question: bool = True, fuzzy: float = 88.0,
                             model: str | None = None) -> list[Score]:
    """Guarded semantic correctness (ragmeter's offline fix of the fixed threshold).

    Similarity alone passes same-shaped wrong answers ("The capital of France is London" vs
    "... Paris": cosine 0.84) and fails short references ("Paris" vs "Paris is the capital of
    France.": 0.73). This method also checks the reference's key facts (numbers, names, content
    words, Porter-stemmed; those the question already states are left out) in the answer, an
    abstention ("I don't know") and a negation flip. A missing number or name, low fact coverage,
    an abstention or a negation flip -> 0; facts present and on topic -> 1; a reference without
    key facts falls back to ``similarity >= fallback_threshold``. Range {0, 1}; the deciding rule
    is stored in the score's details.
    """
    import ragmeter.core.language as lang

    for name, v in (("min_similarity", min_similarity), ("fallback_threshold", fallback_threshold)):
        _check_threshold(v, name)
    if not 0 <= min_coverage <= 1:
        raise MetricError(f"min_coverage must be in [0, 1], got {min_coverage}")
    sims = _similarities(samples, ctx, model)
    p = GuardParams(min_similarity, fallback_threshold, min_coverage, check_negation, fuzzy)
    out = []
    for s, x in zip(samples, sims, strict=True):
        v, det = guarded_best(s.answer or "", s.references, x,
                              question=s.question if use_question else None, params=p,
                              language=lang.of(s, ctx.options))
        out.append(Score(v, details=det))
    ctx.service("method").add("semantic_guarded", p.__dict__ | {"use_question": use_question, "model": model},
                              n_scored=len(out))
    return out


# ---- LLM judge ---------------------------------------------------------------------------------

def _judge_spec() -> MetricSpec:
    try:
        return get_spec(JUDGE_METRIC)
    except ConfigError as exc:
        raise ConfigError(f"the LLM judge metric {JUDGE_METRIC!r} is not available in this "
                          "installation (ragmeter.metrics.judge)") from exc


def _judge_params(judge_params: dict[str, Any] | None) -> dict[str, Any]:
    spec = _judge_spec()
    return {**spec.defaults, **(judge_params or {})}


def _judge_check(ctx: ScoringContext, **params: Any) -> str | None:
    try:
        spec = _judge_spec()
    except ConfigError as exc:
        return str(exc)
    if spec.check is None:
        return None
    return spec.check(ctx, **_judge_params(params.get("judge_params")))


def _judge_scores(samples: list[Sample], ctx: ScoringContext, judge_params: dict[str, Any] | None,
                  *, prepare: bool = True) -> list[Score]:
    """graded_correctness on ``samples``; samples lacking a field it needs get no value.
    ``prepare=False`` when the runner already called the judge's ``prepare`` for them."""
    spec = _judge_spec()
    params = _judge_params(judge_params)
    ok = [s for s in samples if not missing_fields(s, spec.requires)]
    by_id: dict[str, Score] = {}
    if ok:
        if prepare and spec.prepare is not None:
            spec.prepare(ok, ctx, **params)
            ctx.flush()
        got = spec.fn(ok, ctx, **params)
        if len(got) != len(ok):
            raise MetricError(f"{JUDGE_METRIC} returned {len(got)} scores for {len(ok)} samples")
        by_id = {s.id: g for s, g in zip(ok, got, strict=True)}
    return [by_id.get(s.id) or Score.missing("missing field: " + ", ".join(missing_fields(s, spec.requires)))
            for s in samples]


def correct_llm_judge(samples: list[Sample], ctx: ScoringContext, *,
                      judge_params: dict[str, Any] | None = None) -> list[Score]:
    """LLM-judged correctness (phase 3: LLM judge): the judge's ``graded_correctness``.

    The scale: 1.0 completely correct, 0.8 mostly, 0.6 partially, 0.4 somewhat, 0.2 mostly
    incorrect, 0.0 wrong or irrelevant. A reply that cannot be parsed is a judge failure (no
    value), never 0. Needs a judge (``--option judge=provider:model``); ``judge_params`` are passed
    to ``graded_correctness``.
    """
    out = _judge_scores(samples, ctx, judge_params, prepare=False)
    ctx.service("method").add("llm_judge", {"judge_params": judge_params or {},
                                            "judge": ctx.options.get("judge")},
                              n_scored=sum(s.value is not None for s in out), judge_calls=len(samples))
    return out


def _prepare_judge(samples: list[Sample], ctx: ScoringContext, **params: Any) -> None:
    spec = _judge_spec()
    if spec.prepare is not None:
        ok = [s for s in samples if not missing_fields(s, spec.requires)]
        spec.prepare(ok, ctx, **_judge_params(params.get("judge_params")))


# ---- hybrid ------------------------------------------------------------------------------------

@_guard_semantic
def correct_hybrid(samples: list[Sample], ctx: ScoringContext, *, threshold: float = DEFAULT_THRESHOLD,
                   band: float = 0.1, audit: bool = False, model: str | None = None,
                   judge_params: dict[str, Any] | None = None) -> list[Score]:
    """Hybrid correctness: the semantic threshold decides the clear cases, the LLM judge the
    uncertain ones.

    With ``s`` the best cosine to a reference: ``s >= threshold + band`` -> 1 and
    ``s < threshold - band`` -> 0 without a judge call; answers with ``|s - threshold| < band``
    get the judge's graded correctness. ``Run.extra["method"]["methods"]["hybrid"]`` records the
    judge calls made and saved. ``audit=true`` also judges every answer (spending the calls the
    band saves) to report the agreement between the hybrid and judging everything (both binarised
    at 0.5), and the mean absolute difference.
    """
    t = _check_threshold(threshold)
    if not 0 <= band <= 2:
        raise MetricError(f"band must be in [0, 2], got {band}")
    sims = np.array([float(x.max()) for x in _similarities(samples, ctx, model)])
    uncertain = [i for i, s in enumerate(sims) if abs(s - t) < band]
    out: list[Score] = [Score(float(s >= t), details={"similarity": round(float(s), 4), "route": "semantic"})
                        for s in sims]
    judged_all: list[Score] | None = None
    if audit:
        judged_all = _judge_scores(samples, ctx, judge_params)
        judged = [judged_all[i] for i in uncertain]
    else:
        judged = _judge_scores([samples[i] for i in uncertain], ctx, judge_params) if uncertain else []
    for i, j in zip(uncertain, judged, strict=True):
        det = {"similarity": round(float(sims[i]), 4), "route": "judge", **(j.details or {})}
        out[i] = Score(j.value, j.reason, det) if j.value is not None else Score.missing(
            j.reason or "judge failure", det)
    figures: dict[str, Any] = {"n_scored": sum(s.value is not None for s in out),
                               "judge_calls": len(uncertain),
                               "judge_calls_saved": len(samples) - len(uncertain)}
    if judged_all is not None:
        pairs = [(h.value, a.value) for h, a in zip(out, judged_all, strict=True)
                 if h.value is not None and a.value is not None]
        figures["audit_judge_calls"] = len(samples)
        figures["audit_pairs"] = len(pairs)
        figures["agreement_with_judge_all"] = (
            float(np.mean([(h >= 0.5) == (a >= 0.5) for h, a in pairs])) if pairs else None)
        figures["mean_abs_diff_with_judge_all"] = (
            float(np.mean([abs(h - a) for h, a in pairs])) if pairs else None)
    ctx.service("method").add("hybrid", {"threshold": t, "band": band, "audit": audit, "model": model,
                                         "judge": ctx.options.get("judge")}, **figures)
    return out


def _prepare_hybrid(samples: list[Sample], ctx: ScoringContext, **params: Any) -> None:
    _prepare_embeddings(samples, ctx, **params)


# ---- registration ------------------------------------------------------------------------------

_SEMANTIC = {"needs_embeddings": True, "prepare": _prepare_embeddings}

register_metric(MetricSpec(
    name="correct_keyword", family=FAMILY, fn=correct_keyword, requires=("answer",),
    defaults={"mode": "any", "keywords_field": "keywords", "check_negation": True},
    description=correct_keyword.__doc__ or ""))
register_metric(MetricSpec(
    name="correct_semantic_fixed", family=FAMILY, fn=correct_semantic_fixed,
    requires=("answer", "reference"), defaults={"threshold": DEFAULT_THRESHOLD, "model": None},
    param="threshold", description=correct_semantic_fixed.__doc__ or "", **_SEMANTIC))
register_metric(MetricSpec(
    name="correct_semantic_dynamic", family=FAMILY, fn=correct_semantic_dynamic,
    requires=("answer", "reference"),
    defaults={"threshold": None, "objective": "accuracy", "val_fraction": 0.5, "seed": 0, "grid": "fine",
              "use_proxy": True, "model": None},
    param="objective", batch_size=WHOLE_RUN, per_sample=False,  # the threshold is fitted on the batch
    description=correct_semantic_dynamic.__doc__ or "", **_SEMANTIC))
register_metric(MetricSpec(
    name="correct_semantic_guarded", family=FAMILY, fn=correct_semantic_guarded,
    requires=("answer", "reference"),
    defaults={"min_similarity": 0.5, "fallback_threshold": DEFAULT_THRESHOLD, "min_coverage": 0.5,
              "check_negation": True, "use_question": True, "fuzzy": 88.0, "model": None},
    description=correct_semantic_guarded.__doc__ or "", **_SEMANTIC))
register_metric(MetricSpec(
    name="correct_llm_judge", family=FAMILY, fn=correct_llm_judge,
    requires=("question", "answer", "reference"), needs_llm=True, defaults={"judge_params": None},
    prepare=_prepare_judge, check=_judge_check, batch_size=WHOLE_RUN,
    description=correct_llm_judge.__doc__ or ""))
register_metric(MetricSpec(
    name="correct_hybrid", family=FAMILY, fn=correct_hybrid, requires=("question", "answer", "reference"),
    needs_embeddings=True, needs_llm=True,
    defaults={"threshold": DEFAULT_THRESHOLD, "band": 0.1, "audit": False, "model": None, "judge_params": None},
    prepare=_prepare_hybrid, check=_judge_check, batch_size=WHOLE_RUN,
    description=correct_hybrid.__doc__ or ""))
