"""DeepEval 4.3.1's ConversationalDAGMetric against ``deepeval:conversational_dag``, given the same
task outputs and verdicts: a DAG built with DeepEval's conversational nodes (a task over the turns'
content, a binary judgement on a turn window, a non-binary judgement whose verdicts end with scores or
a ConversationalGEval child), serialised with ``DeepAcyclicGraph.to_json()`` and given to ragmeter as
it is; one scripted server answers both (tests/parity_deepeval_support.py, case kind ``dag``)."""

from __future__ import annotations

import json
import os
import warnings

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from parity_deepeval_conv_support import conversation, theirs  # noqa: E402
from parity_deepeval_support import DeepEvalServer, deepeval_model, ours  # noqa: E402
from ragmeter.conversations.model import to_samples  # noqa: E402

SUMMARISE, GREETS, COMPLETE = "Summarise what the user asked", "Does the assistant greet the user", "How completely"


@pytest.fixture(scope="module")
def srv():
    s = DeepEvalServer().start()
    yield s
    s.stop()


def _dag(srv):
    from deepeval.metrics import ConversationalGEval
    from deepeval.metrics.conversational_dag import (
        ConversationalBinaryJudgementNode,
        ConversationalNonBinaryJudgementNode,
        ConversationalTaskNode,
        ConversationalVerdictNode,
    )
    from deepeval.metrics.dag import DeepAcyclicGraph
    from deepeval.test_case import MultiTurnParams as P

    steps_case = srv.case("dag", {"task": {}, "judgement": {}})  # the GEval child's steps request
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        geval = ConversationalGEval(name="child", criteria=f"Is the answer helpful? {steps_case}",
                                    evaluation_params=[P.CONTENT, P.ROLE], model=deepeval_model(srv))
        nonbinary = ConversationalNonBinaryJudgementNode(
            criteria=f"{COMPLETE} did the assistant answer? Reply complete, partial or none.",
            evaluation_params=[P.CONTENT], children=[ConversationalVerdictNode(verdict="complete", score=10),
                      ConversationalVerdictNode(verdict="partial", score=6),
                      ConversationalVerdictNode(verdict="none", child=geval)])
        binary = ConversationalBinaryJudgementNode(
            criteria=f"{GREETS}?", evaluation_params=[P.CONTENT, P.ROLE], turn_window=(0, 1),
            children=[ConversationalVerdictNode(verdict=False, score=2), ConversationalVerdictNode(verdict=True, child=nonbinary)])
        task = ConversationalTaskNode(instructions=f"{SUMMARISE}.", output_label="Summary",
                                      evaluation_params=[P.CONTENT], children=[binary])
        return DeepAcyclicGraph(root_nodes=[task])


CASES = [(False, "complete", 0), (True, "complete", 0), (True, "partial", 0), (True, "none", 7), (True, "none", 3)]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}, {"threshold": 0.65}])
def test_conversational_dag_equals_deepeval(srv, params):
    from deepeval.metrics import ConversationalDAGMetric

    dag = _dag(srv)
    document = json.loads(dag.to_json()) if isinstance(dag.to_json(), str) else dag.to_json()
    convs = [conversation(srv.case("dag", {"task": {SUMMARISE: "asked about ferries"},
                                           "judgement": {GREETS: greets, COMPLETE: complete}, "geval": g}),
                          "uaua", cid=f"d{i}") for i, (greets, complete, g) in enumerate(CASES)]
    convs.append(conversation(srv.case("dag", {"task": {SUMMARISE: "x"}, "judgement": {GREETS: True}}), "u",
                              cid="too-short"))  # the judgement's turn window does not fit: DeepEval raises
    got = ours(srv, {"name": "deepeval:conversational_dag", "params": {**params, "dag": document}},
               [to_samples(c)[0] for c in convs])
    seen = set()
    for conv, sc in zip(convs, got, strict=True):
        metric = ConversationalDAGMetric(name="parity", dag=_dag(srv), model=deepeval_model(srv), async_mode=False,
                                         include_reason=False, **params)
        try:
            want, success = theirs(metric, conv)
        except ValueError:
            assert sc.value is None and "turn_window" in sc.reason, (conv.id, sc)
            continue
        assert sc.value == pytest.approx(want, rel=1e-6, abs=1e-12), (conv.id, params, sc, want)
        assert sc.details["success"] is success
        seen.add(round(want, 6))
    assert len(seen) >= 4, seen
