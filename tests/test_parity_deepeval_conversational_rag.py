"""DeepEval 4.3.1's per-window RAG metrics of a conversation against DeepEval itself, given the same
verdicts: ``deepeval:turn_contextual_precision``, ``deepeval:turn_contextual_recall``,
``deepeval:turn_contextual_relevancy``, ``deepeval:turn_faithfulness``.

One scripted OpenAI-compatible server (tests/parity_deepeval_conv_support.py) answers ragmeter's one
request per window and DeepEval's own steps from one script per conversation; the numbers (and
DeepEval's ``success``) must be equal, for several window sizes, ``strict_mode`` (DeepEval clamps
each window) and the empty and degenerate conversations (no context anywhere, no assistant turn, no
expected outcome: DeepEval's refusal, which is no value here).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ["PARITY_KEY"] = "parity"

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from parity_deepeval_conv_support import ConversationServer, deepeval_model, ours, rag_conversation, theirs  # noqa: E402

PARAMS = [{}, {"strict_mode": True}, {"window_size": 1}, {"window_size": 2, "threshold": 0.7}]
ROLES = "uauaua"


@pytest.fixture(scope="module")
def srv():
    s = ConversationServer().start()
    yield s
    s.stop()


def check(srv, name, cls, convs, params):
    got = ours(srv, {"name": name, "params": params}, convs)
    seen = set()
    for conv, sc in zip(convs, got, strict=True):
        metric = cls(model=deepeval_model(srv), async_mode=False, include_reason=False, **params)
        want, success = theirs(metric, conv)
        if want is None:
            assert sc.value is None and "DeepEval refuses" in sc.reason, (conv.id, sc)
            continue
        assert sc.value == pytest.approx(want, rel=1e-6, abs=1e-12), (name, params, conv.id, sc, want)
        assert sc.details["success"] is success, (conv.id, sc.details)
        seen.add(round(want, 6))
    assert params.get("strict_mode") or len(seen) >= 3, seen
    return seen


CONTEXTS = [{2: 3, 4: 1, 6: 2}, {2: 2, 6: 1}, {}, {4: 2}]


@pytest.mark.parametrize("params", PARAMS)
def test_turn_contextual_precision(srv, params):
    from deepeval.metrics import TurnContextualPrecisionMetric

    useful = [{"2.1": "no", "2.2": "yes", "2.3": "yes", "4.1": "no", "6.1": "yes", "6.2": "no"},
              {"2.1": "yes", "2.2": "no", "6.1": "no"}, {}, {"4.1": "no", "4.2": "no"}]
    convs = [rag_conversation(srv.case("tprec", u), ROLES, c, cid=f"p{i}") for i, (u, c) in enumerate(zip(useful, CONTEXTS, strict=True))]
    convs += [rag_conversation(srv.case("tprec", {"2.1": "yes"}), "ua", {2: 1}, expected=None, cid="refused"),
              rag_conversation(srv.case("tprec", {}), "uu", {}, cid="no-assistant")]
    check(srv, "deepeval:turn_contextual_precision", TurnContextualPrecisionMetric, convs, params)


@pytest.mark.parametrize("params", PARAMS)
def test_turn_contextual_recall(srv, params):
    from deepeval.metrics import TurnContextualRecallMetric

    attributed = [{2: ["yes", "no"], 4: ["yes", "yes", "no"], 6: ["no"]}, {2: ["yes"], 6: ["no", "no"]}, {},
                  {4: []}]
    convs = [rag_conversation(srv.case("trec", a), ROLES, c, cid=f"r{i}") for i, (a, c) in enumerate(zip(attributed, CONTEXTS, strict=True))]
    convs += [rag_conversation(srv.case("trec", {2: ["yes"]}), "ua", {2: 1}, expected=None, cid="refused")]
    check(srv, "deepeval:turn_contextual_recall", TurnContextualRecallMetric, convs, params)


@pytest.mark.parametrize("params", PARAMS)
def test_turn_contextual_relevancy(srv, params):
    from deepeval.metrics import TurnContextualRelevancyMetric

    relevant = [{"2.1": ["yes", "no"], "2.2": ["yes"], "2.3": ["no"], "4.1": ["yes", "yes"], "6.1": ["no"], "6.2": ["yes"]},
                {"2.1": ["no"], "2.2": ["no", "yes"], "6.1": ["yes"]}, {}, {"4.1": [], "4.2": []}]
    convs = [rag_conversation(srv.case("trel", r), ROLES, c, cid=f"l{i}") for i, (r, c) in enumerate(zip(relevant, CONTEXTS, strict=True))]
    check(srv, "deepeval:turn_contextual_relevancy", TurnContextualRelevancyMetric, convs, params)


S, C, N = "supported", "contradicted", "not_found"


@pytest.mark.parametrize("params", [*PARAMS, {"penalize_ambiguous_claims": True, "window_size": 2}])
def test_turn_faithfulness(srv, params):
    from deepeval.metrics import TurnFaithfulnessMetric

    claims = [{2: [S, N], 4: [C, S, S], 6: [N]}, {2: [], 4: [C], 6: [S, S]}, {2: [S], 4: [S], 6: [S]}, {2: [], 4: [], 6: []}]
    convs = [rag_conversation(srv.case("tfaith", v), ROLES, c, cid=f"f{i}") for i, (v, c) in enumerate(zip(claims, CONTEXTS, strict=True))]
    convs.append(rag_conversation(srv.case("tfaith", {}), "uu", {}, cid="no-assistant"))
    check(srv, "deepeval:turn_faithfulness", TurnFaithfulnessMetric, convs, params)
