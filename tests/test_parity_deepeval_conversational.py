"""DeepEval 4.3.1's conversational metrics against DeepEval itself, given the same verdicts:
``deepeval:knowledge_retention``, ``deepeval:turn_relevancy`` (its sliding windows),
``deepeval:role_adherence``, ``deepeval:conversation_completeness``, ``deepeval:goal_accuracy``, ``deepeval:topic_adherence``,
``deepeval:tool_use``.

One scripted OpenAI-compatible server (tests/parity_deepeval_conv_support.py) answers ragmeter's
one request per conversation (or per window) and every step of DeepEval's own pipeline (fact
extraction per user turn, a verdict per assistant turn, per window, per intention) from one script
per conversation; the numbers must be equal (1e-6 relative), and DeepEval's ``success`` too. The
empty and degenerate conversations are included (no assistant turn, no user fact, no intention,
no chatbot role: DeepEval's empty score 1 or its refusal, which is no value here).
"""

from __future__ import annotations

import inspect
import os

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ["PARITY_KEY"] = "parity"

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from parity_deepeval_conv_support import ConversationServer, conversation, deepeval_model, ours, theirs  # noqa: E402

PARAMS = [{}, {"strict_mode": True}, {"threshold": 0.8}]


@pytest.fixture(scope="module")
def srv():
    s = ConversationServer().start()
    yield s
    s.stop()


def test_version():
    assert deepeval.__version__ == "4.3.1"


def check(srv, metric_name, cls, convs, params, **metric_kw):
    got = ours(srv, {"name": metric_name, "params": params}, convs)
    seen = set()
    for conv, sc in zip(convs, got, strict=True):
        kw = {"include_reason": False} if "include_reason" in inspect.signature(cls).parameters else {}
        metric = cls(model=deepeval_model(srv), async_mode=False, **kw, **{**params, **metric_kw})
        want, success = theirs(metric, conv)
        if want is None:
            assert sc.value is None and "DeepEval refuses" in sc.reason, (conv.id, sc)
            continue
        assert sc.value == pytest.approx(want, rel=1e-6, abs=1e-12), (metric_name, params, conv.id, sc, want)
        if success is not None:  # DeepEval's ToolUseMetric.measure leaves success unset
            assert sc.details["success"] is success, (conv.id, sc.details)
        seen.add(round(want, 6))
    return seen


RETENTION = [  # (roles, user turns stating facts, assistant verdicts)
    ("uauaua", {1: True, 3: False, 5: True}, {2: "no", 4: "yes", 6: "no"}),
    ("uauaua", {1: False, 3: True, 5: False}, {2: "yes", 4: "yes", 6: "no"}),  # turn 2 not judged
    ("uaua", {1: False, 3: False}, {2: "yes", 4: "yes"}),  # no fact: nothing judged, 1
    ("auua", {2: True, 3: True}, {4: "yes"}),  # a leading assistant turn is never judged
    ("u", {1: True}, {}),  # no assistant turn
    ("uaua", {1: True, 3: True}, {2: "yes", 4: "yes"}),
]


@pytest.mark.parametrize("params", PARAMS)
def test_knowledge_retention(srv, params):
    from deepeval.metrics import KnowledgeRetentionMetric

    convs = [conversation(srv.case("retention", {"facts": f, "checks": c}), roles, cid=f"kr{i}")
             for i, (roles, f, c) in enumerate(RETENTION)]
    seen = check(srv, "deepeval:knowledge_retention", KnowledgeRetentionMetric, convs, params)
    assert len(seen) >= 2


RELEVANCY = [
    ("uauaua", {2: "yes", 4: "no", 6: "yes"}),
    ("uaauuaua", {3: "no", 6: "no", 8: "yes"}),
    ("uuu", {}),  # no assistant turn: no window, 1
    ("au", {}),
    ("ua", {2: "no"}),
]


@pytest.mark.parametrize("params", [*PARAMS, {"window_size": 2}, {"window_size": 1, "strict_mode": True}])
def test_turn_relevancy(srv, params):
    from deepeval.metrics import TurnRelevancyMetric

    convs = [conversation(srv.case("relevancy", v), roles, cid=f"tr{i}") for i, (roles, v) in enumerate(RELEVANCY)]
    check(srv, "deepeval:turn_relevancy", TurnRelevancyMetric, convs, params)


ROLE = [("uauaua", [4]), ("uaua", []), ("uaua", [2, 4, 4]), ("uuu", []), ("ua", [2, 2])]


@pytest.mark.parametrize("params", PARAMS)
def test_role_adherence(srv, params):
    from deepeval.metrics import RoleAdherenceMetric

    convs = [conversation(srv.case("role", v), roles, cid=f"ra{i}") for i, (roles, v) in enumerate(ROLE)]
    convs.append(conversation(srv.case("role", [2]), "ua", role=None, cid="no-role"))  # refused
    check(srv, "deepeval:role_adherence", RoleAdherenceMetric, convs, params)


COMPLETENESS = [("uaua", ["yes", "no", "yes"]), ("ua", ["no"]), ("uaua", []), ("u", ["no", "no"]), ("uaua", ["yes"])]


@pytest.mark.parametrize("params", PARAMS)
def test_conversation_completeness(srv, params):
    from deepeval.metrics import ConversationCompletenessMetric

    convs = [conversation(srv.case("completeness", v), roles, cid=f"cc{i}") for i, (roles, v) in enumerate(COMPLETENESS)]
    check(srv, "deepeval:conversation_completeness", ConversationCompletenessMetric, convs, params)


GOAL = [("uaua", {2: (1.0, 0.75), 4: (0.25, 0.5)}), ("uauua", {2: (0.5, 0.5), 5: (1.0, 1.0)}),
        ("uuu", {}), ("auaa", {4: (0.75, 0.0)}), ("ua", {2: (1.0, 1.0)})]


@pytest.mark.parametrize("params", PARAMS)
def test_goal_accuracy(srv, params):
    from deepeval.metrics import GoalAccuracyMetric

    convs = [conversation(srv.case("goal", v), roles, cid=f"ga{i}") for i, (roles, v) in enumerate(GOAL)]
    seen = check(srv, "deepeval:goal_accuracy", GoalAccuracyMetric, convs, params)
    assert 0.0 in seen  # no exchange: DeepEval's 0


TOPIC = [("uaua", {2: ["TP", "FN"], 4: ["TN"]}), ("uaua", {2: ["FP"], 4: []}), ("uaua", {}),
         ("uuu", {}), ("uauaua", {2: ["TP"], 4: ["TP", "TN", "FP"], 6: ["FN"]})]


@pytest.mark.parametrize("params", PARAMS)
def test_topic_adherence(srv, params):
    from deepeval.metrics import TopicAdherenceMetric

    topics = ["ferries", "timetables"]
    convs = [conversation(srv.case("topic", v), roles, cid=f"ta{i}") for i, (roles, v) in enumerate(TOPIC)]
    seen = check(srv, "deepeval:topic_adherence", TopicAdherenceMetric, convs, {**params, "relevant_topics": topics})
    assert 0.0 in seen and (len(seen) >= 3 or params.get("strict_mode"))


TOOL_USE = [("uaua", {2: (1.0, 0.75), 4: (0.5, 0.25)}, {2: 2, 4: 1}),
            ("uaua", {2: (0.75, 0.0), 4: (1.0, 1.0)}, {4: 1}),  # exchange 2 called nothing: no argument score
            ("uaua", {2: (1.0, 1.0), 4: (1.0, 1.0)}, {}),  # no tool called anywhere: DeepEval's 0
            ("uuu", {}, {}),  # no exchange: 0
            ("ua", {2: (0.25, 1.0)}, {2: 1})]


@pytest.mark.parametrize("params", PARAMS)
def test_tool_use(srv, params):
    from deepeval.metrics import ToolUseMetric
    from deepeval.test_case import ToolCall as DeCall

    tools = ["tool0", "tool1", {"name": "tool2", "description": "books a ferry"}]
    convs = [conversation(srv.case("tooluse", v), roles, cid=f"tu{i}", calls=c) for i, (roles, v, c) in enumerate(TOOL_USE)]
    seen = check(srv, "deepeval:tool_use", ToolUseMetric, convs, {**params, "available_tools": tools},
                 available_tools=[DeCall(name=t) if isinstance(t, str) else DeCall(**t) for t in tools])
    assert 0.0 in seen


def test_tool_use_needs_its_tools(srv):
    from ragmeter.core.errors import MetricError

    with pytest.raises(MetricError, match="available_tools"):
        ours(srv, "deepeval:tool_use", [conversation(srv.case("tooluse", {}), "ua")])


GEVAL = [  # (score, alternatives at the score token: probability-weighted when given)
    (7, [("7", 0.6), ("8", 0.3), ("x", 0.05), ("2", 0.005)]), (10, None), (0, [("0", 0.5), ("1", 0.5)]),
    (4, [("4", 1.0)])]


@pytest.mark.parametrize("params", [{"criteria": "Is the assistant helpful?"},
                                    {"criteria": "Is the assistant helpful?", "strict_mode": True},
                                    {"evaluation_steps": ["Check each answer.", "Check the outcome."], "threshold": 0.7,
                                     "evaluation_params": ["content", "expected_outcome"]}])
def test_conversational_g_eval(srv, params):
    from deepeval.metrics import ConversationalGEval
    from deepeval.test_case import MultiTurnParams

    params = dict(params)
    if "criteria" in params:  # the steps request carries the criteria only: it holds a case marker
        params["criteria"] += f" {srv.case('g_eval')}"
    names = params.pop("evaluation_params", ["content", "role"])
    convs = []
    for i, (score, alts) in enumerate(GEVAL):
        c = conversation(srv.case("g_eval", score=score, alternatives=alts), "uaua", cid=f"ge{i}")
        convs.append(c.model_copy(update={"expected_outcome": "the ferry is booked"}))
    convs.append(conversation(srv.case("g_eval", score=3), "ua", cid="no-outcome"))  # refused when read
    check(srv, "deepeval:conversational_g_eval", ConversationalGEval, convs, {**params, "evaluation_params": names},
          name="parity", evaluation_params=[MultiTurnParams(n) for n in names])
