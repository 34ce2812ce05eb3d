"""The basic templates of the open-source openai/evals registry as metrics.

Registry samples are JSONL rows ``{"input": [chat messages], "ideal": "text" | ["text", ...]}``;
ragmeter reads ``input`` as the question (the last user message) and ``ideal`` as the references,
and the model's completion from the answer column (``--map answer=COLUMN``). The templates, with
openai/evals' semantics (``evals/elsuite/basic/*.py``, ``evals/elsuite/utils.py``,
``evals/api.py:record_and_check_match``):

- ``evals_match`` (``Match``): 1 when the completion starts with one of the ideal answers;
- ``evals_includes`` (``Includes``): 1 when one of the ideal answers occurs in the completion
  (``ignore_case``: compared lower-cased, as ``utils.get_answer``);
- ``evals_fuzzy_match`` (``FuzzyMatch``'s accuracy): 1 when, after ``utils.normalize`` (lower case,
  no punctuation, no articles a/an/the, single spaces), one of completion and an ideal answer
  contains the other (two empty texts match; an empty one matches nothing else);
- ``evals_f1`` (``FuzzyMatch``'s ``f1_score``): the best token F1 over the ideal answers, on the
  normalised tokens;
- ``evals_json_match`` (``JsonMatch``): 1 when the completion, read as JSON, equals one of the ideal
  answers read as JSON, component by component (objects: the same keys, each value matching; lists:
  the same length, matching element by element; other values: Python ``==``, so ``1`` equals
  ``1.0``; a ``null`` never matches, nor a completion that is not JSON). An ideal answer that is not
  JSON is no value with the reason (openai/evals stops the whole run on it).
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.registry import MetricSpec, register_metric

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(s: str) -> str:
    """openai/evals ``utils.normalize``: lower text, remove punctuation, articles and extra whitespace."""
    s = s.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def match(sampled: str, ideals: Sequence[str]) -> float:
    """1.0 when ``sampled`` starts with one of ``ideals`` (openai/evals ``Match``), else 0.0."""
    return float(any(sampled.startswith(i) for i in ideals))


def includes(sampled: str, ideals: Sequence[str], ignore_case: bool = False) -> float:
    """1.0 when one of ``ideals`` occurs in ``sampled`` (openai/evals ``Includes``), else 0.0."""
    if ignore_case:
        low = sampled.lower()
        return float(any(i.lower() in low for i in ideals))
    return float(any(i in sampled for i in ideals))


def fuzzy_match(sampled: str, ideals: Sequence[str]) -> float:
    """1.0 when ``sampled`` fuzzy-matches one of ``ideals`` (openai/evals ``utils.fuzzy_match``)."""
    a = normalize(sampled)
    for ideal in ideals:
        b = normalize(ideal)
        if (a == b) if (a == "" or b == "") else (a in b or b in a):
            return 1.0
    return 0.0


def f1(sampled: str, ideals: Sequence[str]) -> float:
    """The best token F1 of ``sampled`` against ``ideals`` (openai/evals ``utils.f1_score``)."""
    def one(pred: str, truth: str) -> float:
        p, t = normalize(pred).split(), normalize(truth).split()
        same = sum((Counter(p) & Counter(t)).values())
        if same == 0:
            return 0.0
        precision, recall = same / len(p), same / len(t)
        return 2 * precision * recall / (precision + recall)

    return max(one(sampled, i) for i in ideals)


def _json_equal(got: Any, want: Any) -> bool:
    if got is None or want is None:  # openai/evals: a missing value is never correct
        return False
    if isinstance(got, dict):
        return isinstance(want, dict) and all(_json_equal(got.get(k), want.get(k)) for k in got.keys() | want.keys())
    if isinstance(got, list):
        return isinstance(want, list) and len(got) == len(want) and all(
            _json_equal(a, b) for a, b in zip(got, want, strict=True))
    return bool(got == want)


def json_match(sampled: str, ideals: Sequence[str]) -> float:
    """1.0 when ``sampled`` read as JSON equals one of ``ideals`` read as JSON, component by
    component (openai/evals ``JsonMatch``), else 0.0.

    Raises:
        ValueError: an ideal answer that is not JSON (its position in the message).
    """
    wanted = []
    for i, ideal in enumerate(ideals):
        try:
            wanted.append(json.loads(ideal))
        except ValueError as exc:
            raise ValueError(f"ideal answer {i} is not JSON ({exc})") from None
    try:
        got = json.loads(sampled)
    except (ValueError, RecursionError):
        return 0.0  # a completion that is not JSON matches nothing
    return float(any(_json_equal(got, w) for w in wanted))


def _json_batch(samples: Sequence[Sample], ctx: Any = None, **params: Any) -> list[Score]:
    out = []
    for s in samples:
        try:
            out.append(Score(json_match(s.answer or "", s.references)))
        except (ValueError, RecursionError) as exc:
            out.append(Score.missing(f"JsonMatch: {exc}"))
    return out


def _batch(kernel: Any) -> Any:
    def fn(samples: Sequence[Sample], ctx: Any = None, **params: Any) -> list[Score]:
        return [Score(kernel(s.answer or "", s.references, **params)) for s in samples]
    return fn


_REQ = ("answer", "reference")
register_metric(MetricSpec(name="evals_match", family="openai_evals", fn=_batch(match), requires=_REQ,
                           description=match.__doc__ or ""))
register_metric(MetricSpec(name="evals_includes", family="openai_evals", fn=_batch(includes), requires=_REQ,
                           defaults={"ignore_case": False}, description=includes.__doc__ or ""))
register_metric(MetricSpec(name="evals_fuzzy_match", family="openai_evals", fn=_batch(fuzzy_match), requires=_REQ,
                           description=fuzzy_match.__doc__ or ""))
register_metric(MetricSpec(name="evals_f1", family="openai_evals", fn=_batch(f1), requires=_REQ,
                           description=f1.__doc__ or ""))
register_metric(MetricSpec(name="evals_json_match", family="openai_evals", fn=_json_batch, requires=_REQ,
                           description=json_match.__doc__ or ""))
