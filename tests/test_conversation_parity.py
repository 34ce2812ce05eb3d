"""The conversation metrics against their sources, given the same verdicts: DeepEval 4.3.1's
KnowledgeRetention, RoleAdherence, TurnRelevancy (its sliding windows too), ConversationCompleteness
and ToolCorrectness formulas, and ragas 0.4.3's TopicAdherenceScore."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_server import judge_options, server_fixtures
from ragmeter.conversations import parse_conversation
from ragmeter.conversations.model import Turn
from ragmeter.conversations.writers import to_ragas
from ragmeter.io.readers import bundled_path
from ragmeter.metrics.conversation.judged import sliding_windows
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from references import require_reference

deepeval = require_reference("deepeval")
ragas = require_reference("ragas")
pytestmark = pytest.mark.contract
judge_server_module, server = server_fixtures()


def test_versions():
    assert deepeval.__version__ == "4.3.1" and ragas.__version__ == "0.4.3"


def _de_metric(cls):
    from deepeval.models import GPTModel

    return cls(model=GPTModel(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="parity"),
               async_mode=False)


@pytest.fixture(scope="module")
def scored(tmp_path_factory, judge_server_module):
    srv = judge_server_module  # the module's scripted server
    if srv is not None:
        convs = [json.loads(x) for x in bundled_path("example-chat").read_text().splitlines()]
        extra = [  # edge cases: a leading assistant turn, a trailing user turn, one exchange, topics refused
            {"id": "lead", "chatbot_role": "r", "reference_topics": ["ferries"], "turns": [
                {"role": "assistant", "content": "Hello, ask me about ferries?"},
                {"role": "user", "content": "ferries to Ostby"}, {"role": "assistant", "content": "ferries go daily"},
                {"role": "user", "content": "what about shares"}]},
            {"id": "one", "chatbot_role": "r", "reference_topics": ["x"], "turns": [
                {"role": "user", "content": "capital of France"}, {"role": "assistant", "content": "I cannot say."}]},
        ]
        p = tmp_path_factory.mktemp("parity") / "c.jsonl"
        p.write_text("".join(json.dumps(c) + "\n" for c in [*convs, *extra]))
        db = f"sqlite:///{p.parent / 'r.db'}"
        metrics = ["knowledge_retention", "role_adherence", "conversation_relevancy", "conversation_relevancy@2",
                   "conversation_completeness", "topic_adherence",
                   {"name": "topic_adherence", "params": {"mode": "precision"}, "key": "ta_p"},
                   {"name": "topic_adherence", "params": {"mode": "recall"}, "key": "ta_r"}]
        res = evaluate(str(p), metrics, db=db, options=judge_options(srv))
        table = open_store(db).score_table(res.run_id)
    return {c["id"]: parse_conversation(c) for c in [*convs, *extra]}, table


def test_knowledge_retention_equals_deepeval(scored):
    from deepeval.metrics import KnowledgeRetentionMetric
    from deepeval.metrics.knowledge_retention.schema import KnowledgeRetentionVerdict

    convs, table = scored
    for cid, sc in table["knowledge_retention"].items():
        m = _de_metric(KnowledgeRetentionMetric)
        m.verdicts = [KnowledgeRetentionVerdict(verdict=v["verdict"]) for v in sc.details["verdicts"]]
        assert sc.value == pytest.approx(m._calculate_score()), cid


def test_role_adherence_equals_deepeval(scored):
    from deepeval.metrics import RoleAdherenceMetric
    from deepeval.metrics.role_adherence.schema import OutOfCharacterResponseVerdicts
    from deepeval.test_case import Turn as DeTurn

    convs, table = scored
    seen_break = False
    for cid, sc in table["role_adherence"].items():
        m = _de_metric(RoleAdherenceMetric)
        ooc = sc.details["out_of_character"]
        seen_break |= bool(ooc)
        m.out_of_character_verdicts = OutOfCharacterResponseVerdicts(
            verdicts=[{"index": v["turn"], "reason": v["reason"]} for v in ooc])
        turns = [DeTurn(role=t.role, content=t.content) for t in convs[cid].turns if t.role in ("user", "assistant")]
        assert sc.value == pytest.approx(m._calculate_score(turns)), cid
    assert seen_break


@pytest.mark.parametrize("key, window", [("conversation_relevancy", 10), ("conversation_relevancy@2", 2)])
def test_conversation_relevancy_equals_deepeval_turn_relevancy(scored, key, window):
    from deepeval.metrics import TurnRelevancyMetric
    from deepeval.metrics.turn_relevancy.schema import TurnRelevancyVerdict

    convs, table = scored
    for cid, sc in table[key].items():
        m = _de_metric(TurnRelevancyMetric)
        m.verdicts = [TurnRelevancyVerdict(verdict=v["verdict"]) for v in sc.details["verdicts"]]
        assert sc.value == pytest.approx(m._calculate_score()), cid
        assert sc.details["window_size"] == window


def test_conversation_completeness_equals_deepeval(scored):
    from deepeval.metrics import ConversationCompletenessMetric
    from deepeval.metrics.conversation_completeness.schema import ConversationCompletenessVerdict

    convs, table = scored
    for cid, sc in table["conversation_completeness"].items():
        m = _de_metric(ConversationCompletenessMetric)
        m.verdicts = [ConversationCompletenessVerdict(verdict=i["verdict"]) for i in sc.details["intentions"]]
        assert sc.value == pytest.approx(m._calculate_score()), cid


@pytest.mark.parametrize("key, mode", [("topic_adherence", "f1"), ("ta_p", "precision"), ("ta_r", "recall")])
def test_topic_adherence_equals_ragas(scored, key, mode):
    from ragas.dataset_schema import MultiTurnSample
    from ragas.metrics import TopicAdherenceScore

    convs, table = scored
    for cid, sc in table[key].items():
        topics = sc.details["topics"]
        refused = iter([not t["answered"] for t in topics])

        class Prompt:
            def __init__(self, reply):
                self.reply = reply

            async def generate(self, data, llm, callbacks=None):
                return self.reply()

        metric = TopicAdherenceScore(llm=object(), mode=mode)
        extracted = SimpleNamespace(topics=[t["topic"] for t in topics])
        classified = SimpleNamespace(classifications=[t["on_reference_topic"] for t in topics])
        metric.topic_extraction_prompt = Prompt(lambda x=extracted: x)
        metric.topic_refused_prompt = Prompt(lambda it=refused: SimpleNamespace(refused_to_answer=next(it)))
        metric.topic_classification_prompt = Prompt(lambda x=classified: x)
        d = to_ragas(convs[cid])
        sample = MultiTurnSample(user_input=d["user_input"], reference_topics=d["reference_topics"])
        want = asyncio.run(metric._multi_turn_ascore(sample, callbacks=None))
        assert sc.value == pytest.approx(float(want), abs=1e-12), cid


_roles = st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(roles=_roles, window=st.integers(1, 6))
def test_sliding_windows_equal_deepevals(roles, window):
    from deepeval.metrics.utils.turns import get_turns_in_sliding_window, get_unit_interactions
    from deepeval.test_case import Turn as DeTurn

    turns = [(i, Turn(role=r, content=f"m{i}")) for i, r in enumerate(roles)]
    ours = [[pos for pos, _ in win] for win in sliding_windows(turns, window)]
    de = [DeTurn(role=r, content=f"m{i}") for i, r in enumerate(roles)]
    theirs = [[int(t.content[1:]) for unit in w for t in unit]
              for w in get_turns_in_sliding_window(get_unit_interactions(de), window)]
    assert ours == theirs


_TOOL_METRICS: dict[bool, object] = {}


def _de_tool_score(expected, called, ordered):
    from deepeval.metrics import ToolCorrectnessMetric
    from deepeval.models import GPTModel
    from deepeval.test_case import ToolCall

    m = _TOOL_METRICS.get(ordered)
    if m is None:
        m = _TOOL_METRICS[ordered] = ToolCorrectnessMetric(
            should_consider_ordering=ordered, async_mode=False, include_reason=False,
            model=GPTModel(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="p"))
    m.tools_called, m.expected_tools = [ToolCall(name=n) for n in called], [ToolCall(name=n) for n in expected]
    return m._calculate_score()


def test_turn_tool_correctness_where_deepeval_merges_equal_calls():
    """Declared difference: DeepEval 4.3.1 keeps matched calls in a set of value-equal ToolCall
    objects, so a second call of the same tool cannot match a second expected one."""
    from ragmeter.metrics.conversation.tools import _turn_score

    assert _de_tool_score(["a", "a"], ["a", "a"], False) == 0.5
    assert _turn_score(["a", "a"], ["a", "a"], False) == 1.0
    assert _de_tool_score(["a", "a"], ["a", "a"], True) == _turn_score(["a", "a"], ["a", "a"], True) == 1.0


@settings(max_examples=200, deadline=None)
@given(expected=st.lists(st.sampled_from("abcd"), max_size=4),
       called=st.lists(st.sampled_from("abcde"), max_size=5, unique=True))
def test_turn_tool_correctness_equals_deepeval_tool_correctness(expected, called):
    from ragmeter.metrics.conversation.tools import _turn_score

    for ordered in (False, True):
        want = _de_tool_score(expected, called, ordered)
        assert _turn_score(list(expected), list(called), ordered) == pytest.approx(want), (expected, called, ordered)
