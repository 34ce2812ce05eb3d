"""Metrics built at run time from a definition, one of every kind, with the range each must carry.

A metric of the registry declares its range on its spec; a metric built from a definition (an
OpenAI Evals grader: ``score_model``'s ``range``, a text_similarity grader's ``evaluation_metric``,
a python grader's declared ``range``, a multi grader's formula; G-Eval's rubric; a custom judged
metric registered by a user) carries the range of that definition on the spec its request resolves
to (``MetricSpec.range_for``). tests/test_common_metrics.py puts every entry of :data:`RUNTIME`
through the checks every registered metric passes; tests/test_interval_ranges.py through the run
aggregation with adversarial values; tests/test_runtime_ranges.py through the command line.

``expected`` is written here by hand (not computed by the code under test): the range the entry's
definition sets, or ``None`` for a definition that declares none (a python grader without
``range``, a formula over one), whose intervals follow the rule for no declared range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the fields of the common test's question-answering samples a grader's templates read
QA_USES = ("answer", "reference")


@dataclass(frozen=True)
class Runtime:
    """One metric built from a definition.

    Attributes:
        name: the registered metric it runs as (``openai_score_model``, ``deepeval:g_eval`` ...).
        params: its parameters (the definition: a grader object, G-Eval's rubric ...).
        expected: the range its definition sets, ``None`` when it declares none.
        services: what it needs from the test's context: ``judge``, ``embeddings``, ``python``
            (the permission to run python graders), ``wordnet`` (a stand-in WordNet for METEOR).
        uses: the sample fields it reads through its templates.
    """

    name: str
    params: dict[str, Any]
    expected: tuple[float, float] | None
    services: frozenset[str] = frozenset()
    uses: tuple[str, ...] = QA_USES


J, E, P, W = frozenset({"judge"}), frozenset({"embeddings"}), frozenset({"python"}), frozenset({"wordnet"})


def check(op: str) -> dict[str, Any]:
    return {"type": "string_check", "name": f"rt-{op}", "input": "{{sample.output_text}}",
            "reference": "{{item.reference}}", "operation": op}


def similarity(metric: str) -> dict[str, Any]:
    return {"type": "text_similarity", "name": f"rt-{metric}", "input": "{{sample.output_text}}",
            "reference": "{{item.reference}}", "evaluation_metric": metric, "pass_threshold": 0.5}


def score_model(rng: list[float] | None, name: str = "rt-score") -> dict[str, Any]:
    g: dict[str, Any] = {
        "type": "score_model", "name": name, "model": "gpt-4o-mini",
        "input": [{"role": "system", "content": "Grade the model's answer against the reference."},
                  {"role": "user", "content": "Question: {{item.question}}\nReference answer: {{item.reference}}\n"
                                              "Model answer: {{sample.output_text}}"}]}
    return g | ({"range": rng} if rng is not None else {})


LABEL_MODEL = {
    "type": "label_model", "name": "rt-label", "model": "gpt-4o-mini",
    "input": [{"role": "developer", "content": "Is the model's answer correct? Label it."},
              {"role": "user", "content": "Question: {{item.question}}\nReference answer: {{item.reference}}\n"
                                          "Model answer: {{sample.output_text}}"}],
    "labels": ["correct", "partly", "incorrect"], "passing_labels": ["correct"]}

#: a 0/1 grader: whether the answer contains the reference's first word
PY01_SOURCE = ("def grade(sample, item):\n"
               "    first = item['reference'].split()[0].lower()\n"
               "    return 1.0 if first in sample['output_text'].lower() else 0.0\n")
#: the share of the reference's words in the answer, times 10
PY10_SOURCE = ("def grade(sample, item):\n"
               "    out = set(sample['output_text'].lower().split())\n"
               "    ref = set(item['reference'].lower().split())\n"
               "    return 10 * len(out & ref) / len(ref)\n")


def python(name: str, source: str, rng: list[float] | None) -> dict[str, Any]:
    return {"type": "python", "name": name, "source": source} | ({"range": rng} if rng is not None else {})


def multi(name: str, formula: str, graders: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "multi", "name": name, "calculate_output": formula, "graders": graders}


def _grader(g: dict[str, Any], expected: tuple[float, float] | None, services: frozenset[str] = frozenset(),
            uses: tuple[str, ...] = QA_USES) -> Runtime:
    return Runtime(f"openai_{g['type']}", {"grader": g}, expected, services, uses)


#: a custom judged metric (docs/judge.md, "Writing an LLM metric") on a 1-5 scale: the test module
#: registers it (:func:`register_custom_judged`) and removes it afterwards
CUSTOM_JUDGED = "t_custom_likert"

RUNTIME: dict[str, Runtime] = {
    # BERTScore rescaled with a baseline b: (x - b) / (1 - b), down to -b / (1 - b) (one b, or P,R,F)
    "bertscore_f1[baseline 0.8]": Runtime("bertscore_f1", {"baseline": 0.8}, (-4.0, 1.0), E),
    "bertscore_recall[baseline P,R,F]": Runtime("bertscore_recall", {"baseline": "0.5,0.6,0.75"}, (-3.0, 1.0), E),
    "bertscore_precision[baseline 0.5]": Runtime("bertscore_precision", {"baseline": 0.5}, (-1.0, 1.0), E),
    **{f"string_check[{op}]": _grader(check(op), (0.0, 1.0)) for op in ("eq", "ne", "like", "ilike")},
    **{f"text_similarity[{m}]": _grader(similarity(m), (0.0, 1.0), W if m == "meteor" else frozenset())
       for m in ("fuzzy_match", "bleu", "gleu", "meteor", "rouge_1", "rouge_2", "rouge_3", "rouge_4",
                 "rouge_5", "rouge_l")},
    "text_similarity[cosine]": _grader(similarity("cosine"), (-1.0, 1.0), E),
    "score_model[range 1-7]": _grader(score_model([1, 7]), (1.0, 7.0), J, ("question", *QA_USES)),
    "score_model[default range]": _grader(score_model(None), (0.0, 1.0), J, ("question", *QA_USES)),
    "label_model": _grader(LABEL_MODEL, (0.0, 1.0), J, ("question", *QA_USES)),
    "python[0/1, range 0-1]": _grader(python("rt-py01", PY01_SOURCE, [0, 1]), (0.0, 1.0), P),
    "python[0/1, no range]": _grader(python("rt-py01-open", PY01_SOURCE, None), None, P),
    "python[range 0-10]": _grader(python("rt-py10", PY10_SOURCE, [0, 10]), (0.0, 10.0), P),
    "multi[weighted mean]": _grader(multi("rt-mean", "0.5 * found + 0.5 * overlap",
                                          {"found": check("ilike"), "overlap": similarity("rouge_l")}), (0.0, 1.0)),
    "multi[log]": _grader(multi("rt-log", "log(1 + overlap) / log(2)", {"overlap": similarity("fuzzy_match")}),
                          (0.0, 1.0)),
    "multi[affine cosine]": _grader(multi("rt-cos", "2 * sim - 1", {"sim": similarity("cosine")}), (-3.0, 1.0), E),
    "multi[score over its top]": _grader(multi("rt-likert", "likert / 7", {"likert": score_model([1, 7], "likert")}),
                                         (1 / 7, 1.0), J, ("question", *QA_USES)),
    "multi[python, squared]": _grader(multi("rt-sq", "max(found, py) ^ 2",
                                            {"found": check("like"), "py": python("py", PY01_SOURCE, [0, 1])}),
                                      (0.0, 1.0), P),
    "multi[python, no range]": _grader(multi("rt-open", "py + 1", {"py": python("py", PY01_SOURCE, None)}), None, P),
    "g_eval[rubric 1-5]": Runtime(
        "deepeval:g_eval", {"criteria": "Does the actual output answer the input correctly?", "rubric": [
            {"score_range": [1, 2], "expected_outcome": "wrong or off topic"},
            {"score_range": [3, 4], "expected_outcome": "partly right"},
            {"score_range": [5, 5], "expected_outcome": "right and complete"}]},
        (0.0, 1.0), J, ("question", "answer")),
    "custom judged[1-5]": Runtime(CUSTOM_JUDGED, {}, (1.0, 5.0), J, ()),
}


def register_custom_judged() -> Any:
    """Register :data:`CUSTOM_JUDGED` the documented way (``register_judged`` with a
    ``value_range``): the judge's six-step correctness grade ``g`` in [0, 1] becomes ``1 + 4 g``."""
    from ragmeter.core.schema import Score
    from ragmeter.metrics.judge import JudgedMetric, PromptTemplate, register_judged
    from ragmeter.metrics.judge.correctness import GradedCorrectness

    jm = JudgedMetric(
        CUSTOM_JUDGED,
        PromptTemplate(CUSTOM_JUDGED, "Grade the GENERATED answer against the EXPECTED one. Reply with a JSON "
                                      'object {"reasoning": "...", "score": 0.0 | 0.2 | ... | 1.0}.'),
        GradedCorrectness,
        blocks=lambda s, p: [("QUESTION", s.question or ""), ("EXPECTED", s.reference or ""),
                             ("GENERATED", s.answer or "")],
        score=lambda s, v, p, ctx: Score(1.0 + 4.0 * v.score, details=v.model_dump()))
    return register_judged(jm, requires=("question", "answer", "reference"), value_range=(1.0, 5.0),
                           description="A custom judged metric on a 1-5 scale (tests).")


class StandInWordNet:
    """A few synonym sets in place of nltk's WordNet data (not installed here), which METEOR's
    synonym stage reads: the range of METEOR does not depend on which synonyms there are."""

    SYN = {"fast": ["fast", "quick"], "quick": ["fast", "quick"], "car": ["car", "auto"], "auto": ["car", "auto"]}

    class _Syn:
        def __init__(self, names: list[str]) -> None:
            self._names = names

        def lemmas(self) -> list[Any]:
            return [type("L", (), {"name": (lambda self, n=n: n)})() for n in self._names]

    def synsets(self, word: str, pos: Any = None) -> list[Any]:
        return [self._Syn(self.SYN[word])] if word in self.SYN else []


def use_stand_in_wordnet(monkeypatch: Any) -> None:
    """METEOR graders run with :class:`StandInWordNet` (their check passes, their values come from
    nltk's METEOR with those synonyms)."""
    import functools

    from ragmeter.metrics.openai_evals import similarity as sim

    monkeypatch.setattr(sim, "wordnet_problem", lambda: None)
    monkeypatch.setattr(sim, "meteor", functools.partial(sim.meteor, wordnet=StandInWordNet()))
