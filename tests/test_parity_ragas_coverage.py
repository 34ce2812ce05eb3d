"""The catalogue of the tools' metrics (src/ragmeter/metrics/catalogue.py) against the installed ragas
0.4.3 and DeepEval 4.3.1, ``ragmeter metrics --from ragas|deepeval``, and that every ``ragas:*``
metric is compared with ragas by a parity test."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from references import require_reference

ragas = require_reference("ragas")
deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from ragmeter.apps.cli import main  # noqa: E402
from ragmeter.metrics.catalogue import DEEPEVAL, RAGAS, coverage, snake_case  # noqa: E402
from ragmeter.metrics.registry import all_metrics, resolve  # noqa: E402

TESTS = Path(__file__).parent


def run(capsys, *args):
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_catalogue_names_the_installed_tools_metrics():
    import deepeval.metrics
    import ragas.metrics.collections as rc

    assert ragas.__version__ == "0.4.3" and deepeval.__version__ == "4.3.1"
    exported = set(rc.__all__)
    assert set(RAGAS) <= exported, sorted(set(RAGAS) - exported)
    # the text metrics of ragas.metrics.collections: every metric class but the base, the enum, the
    # multi-modal ones and the aliases of a listed class (ContextPrecision, AgentGoalAccuracy, RubricsScore*)
    left = {n for n in exported - set(RAGAS) if n not in ("BaseMetric", "DistanceMeasure")}
    assert left == {"ContextPrecision", "AgentGoalAccuracy", "MultiModalFaithfulness", "MultiModalRelevance",
                    "RubricsScoreWithReference", "RubricsScoreWithoutReference"}
    for name in DEEPEVAL:
        assert hasattr(deepeval.metrics, name) or hasattr(deepeval.metrics, name + "Metric"), name


def test_every_ragas_metric_is_ragmeter_s_under_its_snake_case_name():
    by_class = {e.metric: e for e in coverage("ragas")}
    for cls in RAGAS:
        e = by_class[cls]
        assert e.exact and e.ragmeter, cls
        spec = resolve(f"ragas:{snake_case(cls)}").spec
        assert spec.name == e.ragmeter, cls
        assert resolve(cls).spec.name == e.ragmeter, cls  # ragas' class name is an alias
        assert spec.equals["tool"] == "ragas" and spec.equals["version"] == "0.4.3" and spec.parity_text()


@pytest.mark.parametrize(("name", "target"), [
    ("response_relevancy", "ragas:answer_relevancy"), ("ResponseRelevancy", "ragas:answer_relevancy"),
    ("llm_context_precision_with_reference", "ragas:context_precision"),
    ("context_utilization", "ragas:context_precision_without_reference"),
    ("ContextUtilization", "ragas:context_precision_without_reference"),
    ("non_llm_string_similarity", "ragas:non_llm_string_similarity"), ("string_present", "ragas:string_presence"),
    ("ragas:response_relevancy", "ragas:answer_relevancy"), ("AgentGoalAccuracy", "ragas:agent_goal_accuracy_with_reference"),
])
def test_older_ragas_names(name, target):
    assert resolve(name).spec.name == target


def test_metrics_from_ragas_prints_no_missing_metric(capsys):
    code, out, _ = run(capsys, "metrics", "--from", "ragas")
    assert code == 0 and "missing" not in out
    assert f"{len(RAGAS)} metrics, {len(RAGAS)} exact" in out
    for e in coverage("ragas"):  # ragmeter's names never wrap: each is there whole
        assert e.ragmeter in out
    code, out, _ = run(capsys, "metrics", "--from", "ragas", "--json")
    rows = json.loads(out)
    assert [r["metric"] for r in rows] == list(RAGAS)
    assert all(r["exact"] and r["status"] == "exact" and r["ragmeter"].startswith("ragas:") for r in rows)


def test_metrics_from_deepeval_lists_each_class_once(capsys):
    code, out, _ = run(capsys, "metrics", "--from", "deepeval", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["metric"] for r in rows] == list(DEEPEVAL)
    for r in rows:  # a missing one says so; an exact one names a deepeval: metric of that class
        assert (r["ragmeter"] is None) == (r["status"] == "missing")
        if r["ragmeter"]:
            assert r["ragmeter"].startswith("deepeval:") and r["version"] == "4.3.1"


def test_metrics_json_lists_every_ragas_class_with_equals(capsys):
    code, out, _ = run(capsys, "metrics", "--json")
    info = json.loads(out)
    eq = {(m["equals"]["tool"], m["equals"]["metric"]) for m in info if m["equals"]}
    for cls in RAGAS:
        aliases = {a for m in info if m["equals"] and m["equals"]["tool"] == "ragas" for a in [m["equals"]["metric"], *m["aliases"]]}
        assert ("ragas", cls) in eq or cls in aliases, cls
    for m in info:
        if m["equals"]:
            assert set(m["equals"]) == {"tool", "version", "metric"}


@pytest.mark.parametrize("args", [["--from", "ragsa"], ["--from", "ragas", "--long"], ["--from", "ragas", "--family", "judge"]])
def test_bad_use_of_from_is_a_usage_error(capsys, args):
    code, out, err = run(capsys, "metrics", *args)
    assert code == 2 and "--from" in err and "Traceback" not in err


def test_every_ragas_metric_is_compared_by_a_parity_test():
    files = [TESTS / "test_judge_parity.py", *sorted(TESTS.glob("test_parity_ragas_*.py"))]
    named: set[str] = set()
    for f in files:
        named |= {c.value for c in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                  if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    ours = {s.name for s in all_metrics() if s.equals and s.equals["tool"] == "ragas"}
    assert ours <= named, sorted(ours - named)
