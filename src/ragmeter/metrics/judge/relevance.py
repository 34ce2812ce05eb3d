"""LLM relevance labels for retrieved chunks, and ranking metrics computed from them.

``context_relevance_labels`` grades each retrieved chunk 0-3 for the question (stored as reusable
qrels, see :mod:`ragmeter.metrics.judge.relevance_labels`); ``llm_ndcg@k``, ``llm_map`` and ``llm_mrr`` fill
``Sample.relevant`` from those labels and hand the samples to the retrieval family's own
``ndcg``, ``map`` and ``mrr``, so the ranking formulas are the ones checked against trec_eval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import judge_check
from ragmeter.metrics.registry import MetricSpec, register_metric


def _prepare(samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
    from ragmeter.metrics.judge.relevance_labels import LABELS, prefetch_labels

    prefetch_labels([s for s in samples if s.contexts], ctx.service("judge"), ctx.service(LABELS),
                    use_reference=bool(params.get("use_reference", True)))


def context_relevance_labels(samples: Sequence[Sample], ctx: Any, *, use_reference: bool = True) -> list[Score]:
    """Mean graded relevance of the retrieved chunks, as judged by an LLM, on a 0-1 scale.

    The judge grades every retrieved chunk 0 (not relevant), 1 (on topic, does not help), 2
    (holds part of the answer) or 3 (answers the question), with a reason; the reference answer
    is shown when present. Labels are stored as qrels keyed by (question, chunk text, judge
    model) and reused by every later run. The score of a sample is

        mean_i grade_i / 3

    Range [0, 1], higher is better. No value without retrieved chunks, or when a label could not
    be obtained. ``details["labels"]`` lists each chunk's grade and reason.
    """
    from ragmeter.metrics.judge.relevance_labels import LABELS, resolve_labels

    judge = ctx.service("judge")
    with_ctx = [s for s in samples if s.contexts]
    labels, reasons = resolve_labels(with_ctx, judge, ctx.service(LABELS), use_reference=use_reference)
    by_id = {s.id: (row, why) for s, row, why in zip(with_ctx, labels, reasons, strict=True)}
    out: list[Score] = []
    for s in samples:
        if not s.contexts:
            out.append(Score.missing("no contexts retrieved"))
            continue
        row, why = by_id[s.id]
        details = {"labels": [None if lab is None else {"rank": r, "grade": lab.grade, "reason": lab.reason,
                                                        "reused": lab.cached}
                              for r, lab in enumerate(row, 1)]}
        if why is not None:
            out.append(Score.missing(why, details))
        else:
            grades = [lab.grade for lab in row if lab]
            details["summary"] = (f"mean grade {sum(grades) / len(grades):.2f} on the 0-3 scale over "
                                  f"{len(grades)} chunk(s): {', '.join(map(str, grades))}")
            out.append(Score(sum(grades) / (3 * len(row)), details=details))
    return out


register_metric(MetricSpec(
    name="context_relevance_labels", family="judge", fn=context_relevance_labels,
    requires=("question", "context_texts"), needs_llm=True, defaults={"use_reference": True},
    prepare=_prepare, check=judge_check, batch_size=64,
    description=context_relevance_labels.__doc__ or "",
    parity="ragmeter's own graded labels (no ragas or DeepEval metric computes this number); "
           "ragas' and DeepEval's per-context relevance verdicts are binary."))


@dataclass
class LabelledRanking:
    """A retrieval metric of the retrieval family, run on LLM-labelled ground truth."""

    name: str
    target: str  # retrieval metric name

    def __call__(self, samples: Sequence[Sample], ctx: Any, *, k: int | None = None, min_grade: int = 1,
                 use_reference: bool = True, pool: bool = False, gain: str | None = None) -> list[Score]:
        from ragmeter.metrics.judge.relevance_labels import fill_relevant_from_llm
        from ragmeter.metrics.registry import resolve

        if not isinstance(min_grade, int) or isinstance(min_grade, bool) or not 0 <= min_grade <= 3:
            raise MetricError(f"{self.name}: min_grade must be 0, 1, 2 or 3, got {min_grade!r}")
        params: dict[str, Any] = {}
        if k is not None:
            params["k"] = k
        if gain is not None:
            params["gain"] = gain
        req = resolve({"name": self.target, "params": params})
        problem = req.spec.check(ctx, **req.params) if req.spec.check else None
        if problem:
            raise MetricError(f"{self.name}: {problem}")
        filled, _labels, reasons = fill_relevant_from_llm(samples, ctx, min_grade=min_grade,
                                                          use_reference=use_reference, pool=pool)
        out: list[Score] = [Score.missing(reasons[i] or "judge failure on chunk labels")
                            for i in range(len(samples))]
        ready: list[tuple[int, Sample]] = []
        for i, f in enumerate(filled):
            if f is None:
                continue
            if not f.relevant:
                # the judge found no relevant chunk in the list: the ranking scores 0 (with human
                # qrels the relevant documents would exist outside the list)
                out[i] = Score(0.0, details={"llm_relevant": [], "note": "no retrieved chunk was judged "
                                                                         f"relevant (grade >= {min_grade})"})
            else:
                ready.append((i, f))
        if ready:
            scores = req.spec.fn([f for _, f in ready], ctx, **req.params)
            for (i, f), sc in zip(ready, scores, strict=True):
                details = dict(sc.details or {})
                details["llm_relevant"] = [{"text": c.text, "id": c.id, "grade": c.grade} for c in f.relevant or []]
                out[i] = Score(sc.value, sc.reason, details)
        return out


_RANKING_DOC = """
{title} computed with the retrieval family's ``{target}`` on ground truth labelled by the LLM
judge instead of by people: each retrieved chunk is graded 0-3 (see ``context_relevance_labels``;
labels are stored and reused across runs and configurations), chunks graded >= ``min_grade``
become ``Sample.relevant`` with their grade, and ``{target}`` scores the ranking.

Parameters: {kdoc}``min_grade`` (default {min_grade}), ``use_reference`` (show the reference answer
to the judge, default true), ``pool`` (add chunks labelled for the same question in earlier runs,
TREC-style pooling, so configurations are normalised against the same ideal; default false).
Without pooling the ideal ranking is that of the retrieved chunks themselves, and a list in
which no chunk reaches ``min_grade`` scores 0. Range [0, 1], higher is better. No value when a
chunk's label could not be obtained.
"""

for _name, _target, _param, _defaults, _title, _kdoc in (
    ("llm_ndcg", "ndcg", "k", {"k": 10, "min_grade": 1, "use_reference": True, "pool": False,
                               "gain": "exponential"},
     "nDCG@k", "``k`` (``llm_ndcg@5``, default 10), ``gain`` (``exponential`` 2^grade-1 or "
               "``linear``, as trec_eval), "),
    ("llm_map", "map", "k", {"k": None, "min_grade": 2, "use_reference": True, "pool": False},
     "Mean average precision", "``k`` (cut-off, default none), "),
    ("llm_mrr", "mrr", "k", {"k": None, "min_grade": 2, "use_reference": True, "pool": False},
     "Reciprocal rank", "``k`` (cut-off, default none), "),
):
    register_metric(MetricSpec(
        name=_name, family="judge", fn=LabelledRanking(_name, _target),
        requires=("question", "context_texts"), needs_llm=True, defaults=_defaults, param=_param,
        prepare=_prepare, check=judge_check, batch_size=64,
        description=_RANKING_DOC.format(title=_title, target=_target, kdoc=_kdoc,
                                        min_grade=_defaults["min_grade"]),
        parity=f"trec_eval's {_target} on LLM-labelled ground truth; no ragas or DeepEval metric "
               "computes this number."))
