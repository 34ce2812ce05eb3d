"""``deepeval:dag`` against DeepEval 4.3.1's ``DAGMetric``: a DAG written with DeepEval's nodes (the
documented summary-headings example: a task node extracting the headings, a binary judgement on
whether all three are there, a non-binary one on their order, shared by two paths), saved with
``DeepAcyclicGraph.to_json()`` to ``dag.json``, read by ragmeter as it is and walked by both tools
against one scripted judge (tests/parity_deepeval_support.py). Every path's score must match, the
refused test case included; then the same file through ``ragmeter eval DATA --metrics deepeval:dag
--option dag=dag.json``, and files DeepEval would refuse exit 2 naming the file and the node.
"""

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

from cli_runner import run_main  # noqa: E402
from parity_deepeval_support import DeepEvalServer, close, deepeval_model, deepeval_score, ours  # noqa: E402
from ragmeter.core.deepeval_dag import parse_dag  # noqa: E402
from ragmeter.core.errors import ConfigError  # noqa: E402
from ragmeter.core.schema import Sample  # noqa: E402
from ragmeter.io.deepeval_files import read_dag  # noqa: E402

EXTRACT = "Extract all headings in `actual_output`"
HAS_ALL = "Does the summary headings contain all three: 'intro', 'body', and 'conclusion'?"
ORDER = "Are the summary headings in the correct order: 'intro' => 'body' => 'conclusion'?"


def headings_dag():
    """DeepEval's documented DAG example (docs/metrics-dag), built with DeepEval's classes."""
    from deepeval.metrics.dag import (
        BinaryJudgementNode,
        DeepAcyclicGraph,
        NonBinaryJudgementNode,
        TaskNode,
        VerdictNode,
    )
    from deepeval.test_case import SingleTurnParams

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        order = NonBinaryJudgementNode(criteria=ORDER, children=[
            VerdictNode(verdict="Yes", score=10),
            VerdictNode(verdict="Two are out of order", score=4),
            VerdictNode(verdict="All out of order", score=2)])
        has_all = BinaryJudgementNode(criteria=HAS_ALL, children=[
            VerdictNode(verdict=False, score=0),
            VerdictNode(verdict=True, child=order)])
        extract = TaskNode(instructions=EXTRACT, evaluation_params=[SingleTurnParams.ACTUAL_OUTPUT],
                           output_label="Summary headings", children=[has_all, order])
        return DeepAcyclicGraph(root_nodes=[extract])


def two_roots_dag():
    """Two root tasks feeding one judgement (it waits for both), a verdict handing the sample to a
    child metric (DeepEval's ExactMatchMetric) and one scoring it."""
    from deepeval.metrics import ExactMatchMetric
    from deepeval.metrics.dag import BinaryJudgementNode, DeepAcyclicGraph, TaskNode, VerdictNode
    from deepeval.test_case import SingleTurnParams

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        judge = BinaryJudgementNode(criteria="Do the two lists name the same facts?", children=[
            VerdictNode(verdict=True, child=ExactMatchMetric()),
            VerdictNode(verdict=False, score=3)])
        a = TaskNode(instructions="List the facts of the input.", output_label="Input facts",
                     evaluation_params=[SingleTurnParams.INPUT], children=[judge])
        b = TaskNode(instructions="List the facts of the output.", output_label="Output facts",
                     evaluation_params=[SingleTurnParams.ACTUAL_OUTPUT, SingleTurnParams.EXPECTED_OUTPUT],
                     children=[judge])
        return DeepAcyclicGraph(root_nodes=[a, b])


@pytest.fixture(scope="module")
def srv():
    s = DeepEvalServer().start()
    yield s
    s.stop()


def saved(tmp_path, dag) -> dict:
    path = tmp_path / "dag.json"
    path.write_text(dag.to_json(), encoding="utf-8")
    return read_dag(path)


def deepeval_dag_score(srv, dag, sample, **kw):
    from deepeval.metrics import DAGMetric

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metric = DAGMetric(name="Format", dag=dag, model=deepeval_model(srv), include_reason=False, **kw)
    fields = {"input": sample.question, "actual_output": sample.answer}
    if sample.references:
        fields["expected_output"] = sample.reference
    return deepeval_score(metric, **fields)


HEADINGS = [(True, "Yes", 1.0), (True, "Two are out of order", 0.4), (True, "All out of order", 0.2),
            (False, "Yes", 0.0)]


@pytest.mark.parametrize("mode", [{"async_mode": False}, {"async_mode": True}, {"async_mode": False, "strict_mode": True}])
def test_the_documented_example_equals_deepevals_dag_metric(srv, tmp_path, mode):
    dag = headings_dag()
    doc = saved(tmp_path, dag)
    assert parse_dag(doc).roots and len(doc["nodes"]) == 8
    samples = []
    for i, (has_all, order, _) in enumerate(HEADINGS):
        mark = srv.case("dag", {"task": {EXTRACT: "intro, body, conclusion"},
                                "judgement": {HAS_ALL: has_all, ORDER: order}})
        samples.append(Sample(id=f"d{i}", question=f"Summarise {mark}", answer=f"# intro ... {mark}"))
    mark = srv.case("dag", {"task": {EXTRACT: "x"}, "judgement": {HAS_ALL: True, ORDER: "Yes"}})
    samples.append(Sample(id="empty", question=f"Summarise {mark}", answer=""))  # refused by DeepEval
    params = {k: v for k, v in mode.items() if k == "strict_mode"}
    got = ours(srv, {"name": "deepeval:dag", "params": params}, samples, options={"dag": doc})
    for s, sc, (_, _, expected) in zip(samples, got, [*HEADINGS, (None, None, None)], strict=True):
        want, success = deepeval_dag_score(srv, dag, s, **mode)
        assert close(sc.value, want), (s.id, sc.value, want, sc.reason)
        assert sc.value == expected
        if want is not None:
            assert sc.details["success"] is success
            assert sc.details["path"][0]["output"].startswith("intro, body, conclusion")
    assert got[-1].value is None and "refuses" in got[-1].reason


def test_shared_inputs_and_a_child_metric(srv, tmp_path):
    dag = two_roots_dag()
    doc = saved(tmp_path, dag)
    cases = [(True, "Paris", "Paris"), (True, "Paris", "Rome"), (False, "Paris", "Paris")]
    samples = []
    for i, (same, answer, ref) in enumerate(cases):
        mark = srv.case("dag", {"task": {"List the facts of the input.": "f1",
                                         "List the facts of the output.": "f1"},
                                "judgement": {"Do the two lists name the same facts?": same}})
        samples.append(Sample(id=f"t{i}", question=f"Capital? {mark}", answer=f"{answer} {mark}",
                              references=[f"{ref} {mark}"]))
    got = ours(srv, "deepeval:dag", samples, options={"dag": doc})
    for s, sc in zip(samples, got, strict=True):
        want, success = deepeval_dag_score(srv, dag, s, async_mode=False)
        assert close(sc.value, want), (s.id, sc.value, want, sc.reason)
        assert sc.details["success"] is success
    assert [g.value for g in got] == [1.0, 0.0, 0.3]


def test_the_command_runs_dag_json(srv, tmp_path):
    doc_path = tmp_path / "dag.json"
    doc_path.write_text(headings_dag().to_json(), encoding="utf-8")
    rows = []
    for i, (has_all, order, _) in enumerate(HEADINGS):
        mark = srv.case("dag", {"task": {EXTRACT: "intro, body, conclusion"},
                                "judgement": {HAS_ALL: has_all, ORDER: order}})
        rows.append({"id": f"r{i}", "input": f"Summarise {mark}", "actual_output": f"# intro {mark}"})
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.environ["PARITY_KEY"] = "parity"
    code, out, err = run_main("eval", str(data), "--metrics", "deepeval:dag", "--option", f"dag={doc_path}",
                              "--judge", "openai:gpt-4o-mini", "--judge-base-url", srv.url,
                              "--judge-api-key-env", "PARITY_KEY", "--db", str(tmp_path / "r.db"), "--json",
                              "--no-progress")
    assert code == 0, err
    summary = json.loads(out)["metrics"]["deepeval:dag"]
    assert summary["mean"] == pytest.approx((1.0 + 0.4 + 0.2 + 0.0) / 4)


@pytest.mark.parametrize("broken, node, words", [
    (lambda d: d["nodes"][_of(d, "BinaryJudgementNode")]["children"].pop(), "BinaryJudgementNode",
     "exactly 2 VerdictNode children"),
    (lambda d: d["nodes"][_of(d, "VerdictNode")].update(score=11), "VerdictNode", "between 0 and 10"),
    (lambda d: d["nodes"][_of(d, "TaskNode")].update(children=["nowhere"]), "TaskNode", "unknown node id 'nowhere'"),
    (lambda d: d["nodes"][_of(d, "TaskNode")].update(type="Task"), "TaskNode", "unknown type 'Task'"),
    (lambda d: d["nodes"][_of(d, "TaskNode")].update(evaluation_params=["answer"]), "TaskNode",
     "unknown evaluation_param 'answer'"),
])
def test_a_dag_deepeval_would_refuse_exits_2_naming_file_and_node(tmp_path, broken, node, words):
    doc = json.loads(headings_dag().to_json())
    target = _of(doc, node)
    broken(doc)
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        read_dag(path)
    assert str(path) in str(err.value) and words in str(err.value)
    if "unknown node id" not in words:
        assert target in str(err.value)
    code, out, err = run_main("eval", "example", "--metrics", "deepeval:dag", "--option", f"dag={path}",
                              "--db", str(tmp_path / "r.db"))
    assert code == 2, (out, err)
    assert "dag.json" in err and target in err.replace("\n", "") and "Traceback" not in err


def test_a_missing_or_malformed_file_exits_2(tmp_path):
    bad = tmp_path / "dag.yaml"
    bad.write_text("nodes: [unclosed\n", encoding="utf-8")
    for path, words in ((tmp_path / "none.json", "no such file"), (bad, "the DAG file is not valid YAML")):
        code, out, err = run_main("eval", "example", "--metrics", "deepeval:dag", "--option", f"dag={path}",
                                  "--db", str(tmp_path / "r.db"))
        assert code == 2 and words in err.replace("\n", " "), (out, err)


def test_yaml_of_the_same_shape_reads_the_same(tmp_path):
    import yaml

    doc = json.loads(headings_dag().to_json())
    path = tmp_path / "dag.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert read_dag(path) == doc


def _of(doc, node_type):
    return next(k for k, v in doc["nodes"].items() if v["type"] == node_type)


def _nested_headings():
    """The documented example written nested, as DeepEval's Python builds it (the order judgement
    appears twice: one node), evaluation params by the enum's name."""
    order = {"type": "NonBinaryJudgementNode", "criteria": ORDER, "children": [
        {"type": "VerdictNode", "verdict": "Yes", "score": 10},
        {"type": "VerdictNode", "verdict": "Two are out of order", "score": 4},
        {"type": "VerdictNode", "verdict": "All out of order", "score": 2}]}
    return {"type": "TaskNode", "instructions": EXTRACT, "output_label": "Summary headings",
            "evaluation_params": ["SingleTurnParams.ACTUAL_OUTPUT"], "children": [
                {"type": "BinaryJudgementNode", "criteria": HAS_ALL, "children": [
                    {"type": "VerdictNode", "verdict": False, "score": 0},
                    {"type": "VerdictNode", "verdict": True, "child": order}]}, order]}


def test_the_bundled_example_and_a_nested_file_equal_deepeval(srv, tmp_path):
    """examples/deepeval/dag.json (readable ids) as DeepEval's from_json reads it, and the same
    graph written nested, give DeepEval's numbers."""
    from pathlib import Path

    from deepeval.metrics.dag import DeepAcyclicGraph

    bundled = Path(__file__).resolve().parents[1] / "examples" / "deepeval" / "dag.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dag = DeepAcyclicGraph.from_json(bundled.read_text(encoding="utf-8"))
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps(_nested_headings()), encoding="utf-8")
    for path in (bundled, nested):
        doc = read_dag(path)
        samples = []
        for i, (has_all, order, _) in enumerate(HEADINGS):
            mark = srv.case("dag", {"task": {EXTRACT: "intro, body, conclusion"},
                                    "judgement": {HAS_ALL: has_all, ORDER: order}})
            samples.append(Sample(id=f"n{i}", question=f"Summarise {mark}", answer=f"# intro {mark}"))
        got = ours(srv, "deepeval:dag", samples, options={"dag": doc})
        for s, sc, (_, _, expected) in zip(samples, got, HEADINGS, strict=True):
            want, _ = deepeval_dag_score(srv, dag, s, async_mode=False)
            assert close(sc.value, want) and sc.value == expected, (path.name, s.id, sc.value, want, sc.reason)


def test_a_geval_child(srv, tmp_path):
    """A verdict handing the sample to a GEval (criteria and evaluation params from the DAG): the
    score is the GEval's, as in DeepEval."""
    from deepeval.metrics import GEval
    from deepeval.metrics.dag import BinaryJudgementNode, DeepAcyclicGraph, VerdictNode
    from deepeval.test_case import SingleTurnParams

    steps_mark = srv.case("dag", {"task": {}, "judgement": {}, "geval": 0})  # the steps request shows only the criteria
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        child = GEval(name="Polite", criteria=f"Is the output polite? {steps_mark}", model=deepeval_model(srv),
                      evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT])
        dag = DeepAcyclicGraph(root_nodes=[BinaryJudgementNode(
            criteria="Does the output answer the input?", evaluation_params=[SingleTurnParams.ACTUAL_OUTPUT],
            children=[VerdictNode(verdict=True, child=child), VerdictNode(verdict=False, score=1)])])
    doc = saved(tmp_path, dag)
    assert any(n.get("child", {}).get("type") == "geval" for n in doc["nodes"].values())
    samples = []
    for i, (answers, score) in enumerate([(True, 7), (True, 10), (False, 3), (True, 0)]):
        mark = srv.case("dag", {"task": {}, "judgement": {"Does the output answer the input?": answers},
                                "geval": score})
        samples.append(Sample(id=f"g{i}", question=f"Capital? {mark}", answer=f"Paris. {mark}"))
    got = ours(srv, "deepeval:dag", samples, options={"dag": doc})
    for s, sc in zip(samples, got, strict=True):
        want, success = deepeval_dag_score(srv, dag, s, async_mode=False)
        assert close(sc.value, want), (s.id, sc.value, want, sc.reason)
        assert sc.details["success"] is success
    assert [g.value for g in got] == [0.7, 1.0, 0.1, 0.0]
