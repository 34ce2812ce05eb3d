"""Test data for the report, dashboard and browser tests (no test here): tiny test-only metrics
registered once, and stores holding runs made with ``ragmeter.evaluate``."""

from __future__ import annotations

import re
from typing import Any

from ragmeter.core.schema import Score
from ragmeter.metrics.registry import MetricSpec, register_metric

XSS_ANSWER = "<script>alert(1)</script>"
XSS_QUESTION = "Who wrote </script><script>alert(2)</script> this?"
XSS_REFERENCE = '<img src=x onerror="alert(3)"> Marie Curie'


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _overlap(samples, ctx, **params) -> list[Score]:
    out = []
    for s in samples:
        a, r = _tokens(s.answer), _tokens(s.reference)
        out.append(Score(len(a & r) / len(a | r)) if a | r else Score.missing("both texts empty"))
    return out


def _unsupported(samples, ctx, **params) -> list[Score]:
    out = []
    for s in samples:
        a = _tokens(s.answer)
        c = set().union(*(_tokens(t) for t in s.context_texts)) if s.context_texts else set()
        if not a:
            out.append(Score.missing("empty answer"))
            continue
        bad = sorted(a - c)
        out.append(Score(len(bad) / len(a), details={
            "reasoning": f"{len(bad)} of {len(a)} answer words are not in the contexts",
            "verdicts": [{"claim": w, "verdict": "unsupported"} for w in bad[:5]]}))
    return out


def _judge(samples, ctx, **params) -> list[Score]:
    out = []
    for s in samples:
        if s.answer == "":
            out.append(Score.missing("judge failure: reply did not parse",
                                     details={"raw": "<b>not json</b>"}))
            continue
        hit = s.reference.lower() in s.answer.lower()
        out.append(Score(1.0 if hit else 0.25,
                         details={"reasoning": ("the answer states the reference" if hit else
                                                f"the answer misses the reference: {s.reference}")}))
    return out


TEST_METRICS = (
    MetricSpec(name="rmtest_overlap", family="lexical", fn=_overlap, requires=("answer", "reference"),
               description="Token Jaccard of answer and reference (test only)."),
    MetricSpec(name="rmtest_unsupported", family="llm", fn=_unsupported,
               requires=("answer", "context_texts"), higher_is_better=False,
               description="Share of answer words absent from the contexts (test only)."),
    MetricSpec(name="rmtest_judge", family="llm", fn=_judge, requires=("answer", "reference"),
               description="Scripted judge: 1 when the answer contains the reference (test only)."),
)
METRICS = [m.name for m in TEST_METRICS]


def ensure_test_metrics() -> None:
    """Register the test-only metrics once per process."""
    for spec in TEST_METRICS:
        try:
            register_metric(spec)
        except ValueError:
            pass  # already registered by another test module in this process


CITIES = [("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Germany", "Berlin"),
          ("Japan", "Tokyo"), ("Peru", "Lima"), ("Kenya", "Nairobi"), ("Canada", "Ottawa")]


def make_samples(n: int = 24, *, quality: float = 1.0, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` capital-city samples; ``quality`` < 1 makes some answers wrong (deterministically),
    plus the XSS sample, a unicode one and an empty answer."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        country, city = CITIES[i % len(CITIES)]
        good = rng.random() < quality
        answer = f"The capital of {country} is {city}." if good else f"I think it is {CITIES[(i + 1) % len(CITIES)][1]}."
        rows.append({
            "id": f"q{i}", "question": f"What is the capital of {country}?", "answer": answer,
            "reference": city,
            "contexts": [f"{city} is the capital of {country}.", f"{country} is a country."],
        })
    rows.append({"id": "xss", "question": XSS_QUESTION, "answer": XSS_ANSWER,
                 "reference": XSS_REFERENCE,
                 "contexts": ["</script><script>alert(4)</script>", "line\u2028separator & <b>bold</b>"]})
    rows.append({"id": "unicode-é", "question": "Où est la tour Eiffel ? 🗼", "answer": "À Paris.",
                 "reference": "Paris", "contexts": ["La tour Eiffel est à Paris."]})
    rows.append({"id": "empty", "question": "Say nothing", "answer": "", "reference": "nothing",
                 "contexts": []})
    return rows


def make_store(db_url: str, *, runs: int = 1, n: int = 24) -> list[str]:
    """A store with ``runs`` runs of the test metrics over the same samples, each worse than the
    one before; returns their ids, oldest first."""
    import ragmeter

    ensure_test_metrics()
    ids = []
    for i in range(runs):
        res = ragmeter.evaluate(make_samples(n, quality=1.0 - 0.35 * i, seed=i), metrics=METRICS,
                                db=db_url, name=f"run-{chr(ord('a') + i)}")
        ids.append(res.run_id)
    return ids
