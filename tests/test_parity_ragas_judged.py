"""ragmeter's judged ``ragas:*`` metrics against ragas 0.4.3 itself, given the same verdicts.

One scripted OpenAI-compatible server (tests/parity_server.py, extended here with the steps of
these metrics) answers ragmeter's one call per sample and every step of ragas' own pipeline from one
script per sample. For each metric, at least three verdict patterns and an empty or degenerate
sample (one ragas refuses, scores 0 without asking, or gives NaN): the values must agree within
1e-6 (relative); where ragas raises or gives NaN, ragmeter has no value.
"""

from __future__ import annotations

import json
import os
import re
import warnings

import pytest

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from references import require_reference  # noqa: E402

ragas = require_reference("ragas")
pytestmark = pytest.mark.contract

from parity_server import _CTX, Case, ParityServer  # noqa: E402
from ragas_parity_support import close, ours, ragas_value  # noqa: E402
from ragmeter.core.schema import Chunk, Sample  # noqa: E402

_INPUT = "Now perform the same with the following input"


def _input(user: str) -> str:
    """The input part of a ragas prompt (after its examples)."""
    return user.rsplit(_INPUT, 1)[-1]


def _input_json(user: str) -> dict:
    """The input of a ragas prompt as the JSON it wrote (``input: {...}`` before ``Output:``)."""
    return json.loads(_input(user).split("input:", 1)[1].rsplit("Output:", 1)[0])


class RagasServer(ParityServer):
    """The parity server with the steps of ragas' other judged metrics."""

    def _ragmeter(self, case: Case, schema: str, system: str, user: str, mark: str):
        v = case.verdicts
        if case.kind == "two_judges":
            return {"rating_1": v[0], "rating_2": v[1]}
        if case.kind == "entities":
            return {"reference_entities": v[0], "context_entities": v[1]}
        if case.kind == "factual":
            return {"answer_claims": [{"claim": f"a{i} {mark}", "reason": "", "verdict": x} for i, x in enumerate(v[0])],
                    "reference_claims": [{"claim": f"r{i} {mark}", "reason": "", "verdict": x} for i, x in enumerate(v[1])]}
        if case.kind == "noise":
            gt, ans, ref = v
            return {"reference_statements": [{"statement": f"gt{i} {mark}", "in_contexts": row} for i, row in enumerate(gt)],
                    "answer_statements": [{"statement": f"ans{i} {mark}", "in_contexts": row, "in_reference": r}
                                          for i, (row, r) in enumerate(zip(ans, ref, strict=True))]}
        if case.kind == "summary":
            keyphrases, answers = v
            return {"keyphrases": [f"k{i}" for i in range(keyphrases)],
                    "questions": [{"question": f"q{i} {mark}", "answer": a} for i, a in enumerate(answers)]}
        if case.kind == "sql":
            return {"response_explanation": "scripted", "reference_explanation": "scripted", "equivalent": v}
        if case.kind == "rubric":
            return {"feedback": "scripted", "score": v}
        if case.kind == "goal":
            return {"user_goal": "g", "end_state": "e", "reason": "scripted", "verdict": v}
        if case.kind == "topics":
            return {"topics": [{"topic": f"t{i} {mark}", "answered": a, "on_reference_topic": o, "reason": ""}
                               for i, (a, o) in enumerate(v)]}
        return super()._ragmeter(case, schema, system, user, mark)

    def _ragas(self, case: Case, title: str, user: str, mark: str):
        v, part = case.verdicts, _input(user)
        if case.kind == "two_judges":
            return {"rating": v[0] if user.lstrip().startswith("You are a world class") else v[1]}
        if case.kind == "entities":
            return {"entities": v[1] if "[ctx" in part else v[0]}
        if case.kind == "factual":
            if title == "ClaimDecompositionOutput":
                mine = v[0] if "ANSWER-TEXT" in part else v[1]
                side = "a" if "ANSWER-TEXT" in part else "r"
                return {"claims": [f"{side}{i} {mark}" for i in range(len(mine))]}
            if title == "NLIStatementOutput":
                side = 0 if re.search(r'"a\d+ ', part) else 1
                return {"statements": [{"statement": f"s{i}", "reason": "", "verdict": x} for i, x in enumerate(v[side])]}
        if case.kind == "noise":
            gt, ans, ref = v
            if title == "StatementGeneratorOutput":
                is_ref = "REF-TEXT" in _input_json(user)["answer"]  # ragas names the text "answer" here
                return {"statements": [f"{'gt' if is_ref else 'ans'}{i} {mark}" for i in range(len(gt if is_ref else ans))]}
            if title == "StatementFaithfulnessOutput":
                data = _input_json(user)
                if not data["statements"]:
                    return {"statements": []}
                rows = gt if any(s.startswith("gt") for s in data["statements"]) else ans
                m = _CTX.search(data["context"])
                got = [r[int(m.group(1)) - 1] for r in rows] if m else list(ref)
                return {"statements": [{"statement": s, "reason": "", "verdict": x}
                                       for s, x in zip(data["statements"], got, strict=True)]}
        if case.kind == "summary":
            keyphrases, answers = v
            if title == "ExtractedKeyphrases":
                return {"keyphrases": [f"k{i}" for i in range(keyphrases)]}
            if title == "QuestionsGenerated":
                return {"questions": [f"q{i} {mark}" for i in range(len(answers))]}
            if title == "AnswersGenerated":
                return {"answers": list(answers)}
        if case.kind == "sql":
            return {"response_explanation": "scripted", "reference_explanation": "scripted", "equivalent": v}
        if case.kind == "rubric":
            return {"feedback": "scripted", "score": v}
        if case.kind == "goal":
            if title == "WorkflowOutput":  # the comparison step sees only these: they carry the marker
                return {"user_goal": f"goal {mark}", "end_state": f"end state {mark}"}
            return {"reason": "scripted", "verdict": str(v)}
        if case.kind == "topics":
            if title == "TopicExtractionOutput":
                return {"topics": [f"t{i} {mark}" for i in range(len(v))]}
            if title == "TopicRefusedOutput":
                i = int(re.search(r'"topic": "t(\d+) ', part).group(1))
                return {"refused_to_answer": not v[i][0]}
            if title == "TopicClassificationOutput":
                return {"classifications": [o for _, o in v]}
        return super()._ragas(case, title, user, mark)


@pytest.fixture(scope="module")
def srv():
    s = RagasServer().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def llm(srv):
    from openai import AsyncOpenAI
    from ragas.llms import llm_factory

    os.environ["PARITY_KEY"] = "parity"
    return llm_factory("gpt-4o-mini", client=AsyncOpenAI(base_url=srv.url, api_key="parity", max_retries=0))


def sample(mark, i, *, question="What is asked?", answer="The answer.", contexts=None, reference=None,
           relevant=None, metadata=None):
    """A sample whose every text carries the case's marker; the answer says ANSWER-TEXT, the
    reference REF-TEXT, context k [ctxk] (what the server reads to tell ragas' steps apart)."""
    def tag(t, label):
        return t if not t else f"{t} {label} {mark}"
    return Sample(id=f"s{i}", question=tag(question, ""), answer=tag(answer, "ANSWER-TEXT"),
                  references=[] if reference is None else [tag(reference, "REF-TEXT")],
                  contexts=None if contexts is None else [Chunk(text=tag(c, f"[ctx{k}]")) for k, c in enumerate(contexts, 1)],
                  relevant=None if relevant is None else [Chunk(text=tag(c, "")) for c in relevant],
                  metadata=metadata or {})


def compare(srv, entry, samples, ragas_fields, metric_of):
    """ragmeter's values of ``entry`` equal ragas' (``metric_of(sample)`` built per sample, called
    with ``ragas_fields(sample)``) within 1e-6 relative; returns ragmeter's values."""
    got = ours(srv.url, entry, samples)
    for s, (value, score) in zip(samples, got, strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = ragas_value(metric_of(s), **ragas_fields(s))
        assert close(value, want), (s.id, value, want, score.reason)
    return [v for v, _ in got]


def _qa(s):
    return {"user_input": s.question, "response": s.answer, "reference": s.reference}


# ---- two judges -------------------------------------------------------------------------------------------


def test_answer_accuracy(srv, llm):
    from ragas.metrics.collections import AnswerAccuracy

    pats = [(4, 4), (2, 0), (0, 0), (4, 2), (0, 4)]
    samples = [sample(srv.case("two_judges", p), i, reference="The reference.") for i, p in enumerate(pats)]
    samples += [sample(srv.case("two_judges", (4, 4)), 90, answer="", reference="R."),
                sample(srv.case("two_judges", (4, 4)), 91, reference="")]
    got = compare(srv, "ragas:answer_accuracy", samples, _qa, lambda s: AnswerAccuracy(llm=llm))
    assert got[:5] == [1.0, 0.25, 0.0, 0.75, 0.5] and got[5] is None and got[6] is None


@pytest.mark.parametrize("name", ["ragas:context_relevance", "ragas:response_groundedness"])
def test_context_relevance_and_response_groundedness(srv, llm, name):
    from ragas.metrics.collections import ContextRelevance, ResponseGroundedness

    cls = ContextRelevance if name.endswith("relevance") else ResponseGroundedness
    pats = [(2, 2), (1, 0), (0, 0), (2, 1)]
    samples = [sample(srv.case("two_judges", p), i, contexts=["One fact.", "Another fact."]) for i, p in enumerate(pats)]
    m = srv.case("two_judges", (2, 2))
    samples += [sample(m, 90, contexts=[]),  # refused
                Sample(id="s91", question="   ", answer="   ", contexts=[Chunk(text=f"c {m}")]),  # blank: 0
                Sample(id="s92", question=f"Same {m}", answer=f"Same {m}", contexts=[Chunk(text=f"Same {m}")])]

    def fields(s):
        f = {"retrieved_contexts": s.context_texts or []}
        return {"user_input": s.question, **f} if cls is ContextRelevance else {"response": s.answer, **f}

    got = compare(srv, name, samples, fields, lambda s: cls(llm=llm))
    assert got[:4] == [1.0, 0.25, 0.0, 0.75] and got[4] is None and got[5] == 0.0


# ---- context precision without a reference ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["ragas:context_precision_without_reference", "context_utilization"])
def test_context_precision_without_reference(srv, llm, name):
    from ragas.metrics.collections import ContextPrecisionWithoutReference, ContextUtilization

    useful = [["yes", "no", "yes"], ["no", "no"], ["yes", "yes", "yes"], ["no", "yes"]]
    samples = [sample(srv.case("contexts", v), i, contexts=[f"context {k}" for k in range(len(v))])
               for i, v in enumerate(useful)]
    samples += [sample(srv.case("contexts", []), 90, contexts=[]), sample(srv.case("contexts", ["yes"]), 91,
                                                                           answer="", contexts=["c"])]
    cls = ContextUtilization if name == "context_utilization" else ContextPrecisionWithoutReference
    got = compare(srv, name, samples, lambda s: {"user_input": s.question, "response": s.answer,
                                                 "retrieved_contexts": s.context_texts or []}, lambda s: cls(llm=llm))
    assert got[1] == 0.0 and got[4] is None


# ---- context entity recall ------------------------------------------------------------------------------


def test_context_entity_recall(srv, llm):
    from ragas.metrics.collections import ContextEntityRecall

    pats = [(["Paris", "France"], ["Paris"]), (["A", "B", "C"], ["A", "B", "C", "D"]), (["X"], ["Y"]),
            ([], ["Z"]), (["A", "A", "B"], ["B"])]
    samples = [sample(srv.case("entities", p), i, contexts=["c one", "c two"], reference="The reference.")
               for i, p in enumerate(pats)]
    got = compare(srv, "ragas:context_entity_recall", samples,
                  lambda s: {"reference": s.reference, "retrieved_contexts": s.context_texts},
                  lambda s: ContextEntityRecall(llm=llm))
    assert got[3] == 0.0 and got[2] == 0.0


# ---- factual correctness --------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [{}, {"mode": "precision"}, {"mode": "recall"}, {"beta": 2.0},
                                    {"atomicity": "high", "coverage": "high"}])
def test_factual_correctness(srv, llm, params):
    from ragas.metrics.collections import FactualCorrectness

    pats = [([1, 1, 0], [1, 0]), ([0, 0], [0]), ([1, 1], [1, 1, 1]), ([], [1]), ([1], []), ([], [])]
    samples = [sample(srv.case("factual", p), i, reference="The reference.") for i, p in enumerate(pats)]
    samples.append(sample(srv.case("factual", ([1], [1])), 90, reference=""))
    got = compare(srv, {"name": "ragas:factual_correctness", "params": params}, samples,
                  lambda s: {"response": s.answer, "reference": s.reference},
                  lambda s: FactualCorrectness(llm=llm, **params))
    assert got[-1] is None


# ---- noise sensitivity ----------------------------------------------------------------------------------

NOISE = [
    ([[1, 0], [0, 0]], [[1, 0], [0, 1], [1, 1]], [0, 0, 1]),   # context 1 relevant, 2 not
    ([[0, 0]], [[1, 1], [0, 0]], [0, 0]),                       # no relevant context
    ([[1, 1]], [[1, 0]], [1]),                                  # the answer is correct
    ([[1, 0]], [[0, 1], [1, 0]], [0, 0]),
    ([[0, 1], [1, 0]], [], []),                                 # no answer statement: NaN
    ([], [[1, 0]], [0]),                                        # no reference statement: ragas raises
]


@pytest.mark.parametrize("mode", ["relevant", "irrelevant"])
def test_noise_sensitivity(srv, llm, mode):
    from ragas.metrics.collections import NoiseSensitivity

    samples = [sample(srv.case("noise", p), i, contexts=["first context", "second context"], reference="The reference.")
               for i, p in enumerate(NOISE)]
    samples.append(sample(srv.case("noise", NOISE[0]), 90, contexts=[], reference="R."))
    got = compare(srv, {"name": "ragas:noise_sensitivity", "params": {"mode": mode}}, samples,
                  lambda s: {"user_input": s.question, "response": s.answer, "reference": s.reference,
                             "retrieved_contexts": s.context_texts or []},
                  lambda s: NoiseSensitivity(llm=llm, mode=mode))
    assert got[4] is None and got[5] is None and got[6] is None
    assert len({v for v in got if v is not None}) > 1


# ---- summary score ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [{}, {"length_penalty": False}, {"coeff": 0.2}])
def test_summary_score(srv, llm, params):
    from ragas.metrics.collections import SummaryScore

    pats = [(3, ["1", "0", "1"]), (2, ["0", "0"]), (1, ["1"]), (2, [])]
    text = "A long text about Paris, France, written in 1900 by many people. " * 3
    samples = [sample(srv.case("summary", p), i, answer="A summary.", relevant=[text, "More text."])
               for i, p in enumerate(pats)]
    samples.append(sample(srv.case("summary", (1, ["1"])), 90, answer="", relevant=[text]))
    got = compare(srv, {"name": "ragas:summary_score", "params": params}, samples,
                  lambda s: {"reference_contexts": [c.text for c in s.relevant], "response": s.answer},
                  lambda s: SummaryScore(llm=llm, **params))
    assert got[3] is None and got[4] is None


# ---- SQL, rubrics ------------------------------------------------------------------------------------------


def test_sql_semantic_equivalence(srv, llm):
    from ragas.metrics.collections import SQLSemanticEquivalence

    samples = [sample(srv.case("sql", v), i, answer="SELECT 1", reference="SELECT true",
                      relevant=["CREATE TABLE t (a int)"] if i else None) for i, v in enumerate([True, False, True])]
    samples.append(Sample(id="s90", answer="   ", references=[f"SELECT 1 {srv.case('sql', True)}"]))
    got = compare(srv, "ragas:sql_semantic_equivalence", samples,
                  lambda s: {"response": s.answer, "reference": s.reference,
                             "reference_contexts": [c.text for c in s.relevant or []] or None},
                  lambda s: SQLSemanticEquivalence(llm=llm))
    assert got == [1.0, 0.0, 1.0, None]


RUBRIC = {f"score{i}_description": f"level {i}" for i in range(1, 6)}


@pytest.mark.parametrize("params", [{}, {"with_reference": True}, {"rubrics": RUBRIC}])
def test_domain_specific_rubrics(srv, llm, params):
    from ragas.metrics.collections import DomainSpecificRubrics

    samples = [sample(srv.case("rubric", v), i, contexts=["c"], reference="R." if i % 2 else None)
               for i, v in enumerate([5, 1, 3, 4])]
    samples.append(sample(srv.case("rubric", 2), 90, answer="", contexts=[]))  # an empty answer is still rated
    compare(srv, {"name": "ragas:domain_specific_rubrics", "params": params}, samples,
            lambda s: {"user_input": s.question, "response": s.answer, "retrieved_contexts": s.context_texts,
                       "reference": s.reference},
            lambda s: DomainSpecificRubrics(llm=llm, **params))


def test_instance_specific_rubrics(srv, llm):
    from ragas.metrics.collections import InstanceSpecificRubrics

    samples = [sample(srv.case("rubric", v), i, reference="R.", metadata={"rubrics": RUBRIC}) for i, v in enumerate([5, 2, 1])]
    samples.append(sample(srv.case("rubric", 3), 90, metadata={"rubrics": {}}))  # refused
    got = compare(srv, "ragas:instance_specific_rubrics", samples,
                  lambda s: {"rubrics": s.metadata["rubrics"], "user_input": s.question, "response": s.answer,
                             "reference": s.reference},
                  lambda s: InstanceSpecificRubrics(llm=llm))
    assert got == [5.0, 2.0, 1.0, None]


# ---- multi-turn: agent goal accuracy, topic adherence --------------------------------------------------


def conversation(mark, i, *, reference=None, topics=None, only_the_user=False):
    """A ragas MultiTurnSample row and ragmeter's conversation sample read from it (``only_the_user``:
    one human message and nothing else, the degenerate workflow)."""
    from ragmeter.conversations.model import to_samples
    from ragmeter.conversations.readers import parse_conversation

    row = {"id": f"c{i}", "user_input": [
        {"type": "human", "content": f"Book a table {mark}"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "book", "args": {"n": 2}}]},
        {"type": "tool", "content": f"booked {mark}"},
        {"type": "ai", "content": f"Done {mark}"}]}
    if only_the_user:
        row["user_input"] = row["user_input"][:1]
    if reference is not None:
        row["reference"] = reference
    if topics is not None:
        row["reference_topics"] = topics
    return row, to_samples(parse_conversation(row))[0]


def ragas_messages(row):
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage

    out = []
    for m in row["user_input"]:
        if m["type"] == "human":
            out.append(HumanMessage(content=m["content"]))
        elif m["type"] == "tool":
            out.append(ToolMessage(content=m["content"]))
        else:
            out.append(AIMessage(content=m["content"], tool_calls=[ToolCall(name=c["name"], args=c["args"])
                                                                   for c in m.get("tool_calls", [])] or None))
    return out


@pytest.mark.parametrize("with_reference", [True, False])
def test_agent_goal_accuracy(srv, llm, with_reference):
    from ragas.metrics.collections import AgentGoalAccuracyWithoutReference, AgentGoalAccuracyWithReference

    rows = []
    for i, v in enumerate([1, 0, 1]):
        mark = srv.case("goal", v)
        rows.append(conversation(mark, i, reference=f"A table is booked. {mark}"))
    mark = srv.case("goal", 0)
    rows.append(conversation(mark, 91, reference=f"A table is booked. {mark}", only_the_user=True))  # nothing done
    if with_reference:
        rows.append(conversation(srv.case("goal", 1), 90, reference=""))  # refused: no reference
    name = "ragas:agent_goal_accuracy_with_reference" if with_reference else "ragas:agent_goal_accuracy_without_reference"
    cls = AgentGoalAccuracyWithReference if with_reference else AgentGoalAccuracyWithoutReference
    got = ours(srv.url, name, [s for _, s in rows])
    for (row, s), (value, sc) in zip(rows, got, strict=True):
        fields = {"user_input": ragas_messages(row)}
        if with_reference:
            fields["reference"] = row.get("reference")
        want = ragas_value(cls(llm=llm), **fields)
        assert close(value, want), (s.id, value, want, sc.reason)
    assert [v for v, _ in got[:4]] == [1.0, 0.0, 1.0, 0.0]
    if with_reference:
        assert got[4][0] is None


TOPICS = [[(True, True), (True, False)], [(False, True)], [(True, True), (False, True), (True, False)],
          [(False, False)], []]


@pytest.mark.parametrize("mode", ["f1", "precision", "recall"])
def test_topic_adherence(srv, llm, mode):
    from ragas.metrics.collections import TopicAdherence

    rows = [conversation(srv.case("topics", v), i, topics=["food"]) for i, v in enumerate(TOPICS)]
    rows.append(conversation(srv.case("topics", TOPICS[0]), 90))  # no reference topics: refused
    got = ours(srv.url, {"name": "ragas:topic_adherence", "params": {"mode": mode}}, [s for _, s in rows])
    for (row, s), (value, sc) in zip(rows, got, strict=True):
        want = ragas_value(TopicAdherence(llm=llm, mode=mode), user_input=ragas_messages(row),
                           reference_topics=row.get("reference_topics") or [])
        assert close(value, want), (s.id, mode, value, want, sc.reason)
    assert got[4][0] is None and got[5][0] is None
