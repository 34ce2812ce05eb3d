"""DeepEval 4.3.1's conversational DAG (``deepeval:conversational_dag``, ConversationalDAGMetric): the
decision graph of ``deepeval:dag`` walked once per conversation, on the DAG evaluator of
:mod:`ragmeter.metrics.judge.dag` (``walk_dag``).

The graph is DeepEval's JSON document of a conversational DAG (``DeepAcyclicGraph.to_json()`` of
``Conversational*Node`` s: the same node types, ``evaluation_params`` of DeepEval's ``MultiTurnParams``
and an optional ``turn_window`` ``[start, end]`` per node), given as ``--option dag=dag.json``. A
task or judgement node sees its parent tasks' outputs and, when it names ``evaluation_params``, the
turns of its window (the whole conversation by default) with those fields, as DeepEval shows them.
A verdict's child is ``deepeval:conversational_g_eval`` (a ``geval`` child) or ragmeter's metric of a
DeepEval conversational metric class.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ragmeter.conversations.model import from_sample
from ragmeter.core.deepeval_dag import (
    JUDGEMENTS,
    MULTI_TURN_PARAMS,
    VERDICT,
    Dag,
    DagError,
    DagNode,
    parse_dag,
)
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.conversation._base import FAMILY, dialogue
from ragmeter.metrics.judge._common import judge_check, tool_equals
from ragmeter.metrics.judge.dag import Walk, walk_dag
from ragmeter.metrics.registry import MetricSpec, get_spec, register_metric

NAME = "deepeval:conversational_dag"
TURN_PARAMS = MULTI_TURN_PARAMS
_IGNORED_KWARGS = {"model", "include_reason", "async_mode", "verbose_mode", "flaky", "evaluation_template",
                   "eval_mode", "system_one_model", "evaluation_model", "name", "_include_dag_suffix"}


def _dag_of(p: dict[str, Any], options: dict[str, Any]) -> Dag:
    doc = p.get("dag") if p.get("dag") is not None else options.get("dag")
    if doc is None:
        raise MetricError(f"{NAME} needs a DAG: --option dag=dag.json (DeepEval's DeepAcyclicGraph.to_json() "
                          "document of a conversational DAG, or the same in YAML), or the parameter dag")
    if isinstance(doc, str):
        raise MetricError(f"{NAME}: the DAG {doc!r} is a path; the run reads it when given as --option dag=FILE")
    try:
        dag = parse_dag(doc, params=TURN_PARAMS, multiturn=True)
    except DagError as exc:
        raise MetricError(f"{NAME}: {exc}") from None
    for n in dag.nodes.values():
        if n.type == VERDICT and n.child and n.child.get("type") == "metric":
            _child_spec(n)
        if n.type == VERDICT and n.child and n.child.get("type") == "geval":
            bad = [x for x in n.child.get("evaluation_params") or () if x not in ("content", "role", "retrieval_context",
                                                                                   "tools_called", "expected_outcome",
                                                                                   "scenario")]
            if bad:
                raise MetricError(f"{NAME}: verdict node {n.id}: its ConversationalGEval names {bad}, which ragmeter's "
                                  "deepeval:conversational_g_eval does not read")
    strict, thr = p.get("strict_mode", False), p.get("threshold", 0.5)
    if not isinstance(strict, bool):
        raise MetricError(f"{NAME}: strict_mode must be true or false, got {strict!r}")
    if not isinstance(thr, int | float) or isinstance(thr, bool) or not 0 <= thr <= 1:
        raise MetricError(f"{NAME}: threshold must be a number in [0, 1], got {thr!r}")
    return dag


def _child_spec(node: DagNode) -> tuple[MetricSpec, dict[str, Any]]:
    cls = (node.child or {}).get("metric_class")
    try:
        spec = get_spec(str(cls))
    except Exception:  # noqa: BLE001 - an unknown name: the message below names it
        spec = None
    if spec is None or not spec.equals or spec.equals.get("tool") != "deepeval" or spec.scope != "conversation":
        raise MetricError(f"{NAME}: verdict node {node.id}: metric_class {cls!r} is not a DeepEval conversational "
                          "metric ragmeter computes (see `ragmeter metrics --from deepeval`)")
    kwargs = {k: v for k, v in ((node.child or {}).get("kwargs") or {}).items() if k not in _IGNORED_KWARGS}
    unknown = sorted(set(kwargs) - set(spec.defaults))
    if unknown:
        raise MetricError(f"{NAME}: verdict node {node.id}: {cls} argument(s) {unknown} are not supported; "
                          f"valid: {sorted(spec.defaults)}")
    return spec, {**spec.defaults, **kwargs}


def _blocks(s: Sample, node: DagNode) -> list[tuple[str, str]] | str:
    """The turns a node reads (its window, every turn by default) with its evaluation params."""
    if not node.evaluation_params:
        return []
    turns = [t for _, t in dialogue(from_sample(s))]
    start, end = node.turn_window if node.turn_window is not None else (0, len(turns) - 1)
    if node.turn_window is not None and (start >= end or end - start >= len(turns) or start < 0 or end >= len(turns)):
        return (f"node {node.id}: turn_window {[start, end]} does not fit a conversation of {len(turns)} turns "
                "(DeepEval raises an error)")
    lines = []
    for i in range(start, end + 1):
        t = turns[i]
        values = {"content": t.content, "role": t.role,
                  "retrieval_context": None if t.contexts is None else [c.text or "" for c in t.contexts],
                  "tools_called": [{"name": c.name, "input_parameters": c.arguments, "output": c.result}
                                   for c in t.tool_calls] or None,
                  "metadata": t.metadata or None}
        for p in node.evaluation_params:
            v = values[p]
            lines.append(f"Turn {i} {TURN_PARAMS[p]}:\n{v if isinstance(v, str) or v is None else json.dumps(v, default=str)}")
    return [("CONVERSATION", "\n\n".join(lines))]


def _child_scores(node: DagNode, samples: Sequence[Sample], ctx: Any) -> list[Score]:
    child = node.child or {}
    if child.get("type") == "geval":
        spec = get_spec("deepeval:conversational_g_eval")
        params = {**spec.defaults, "evaluation_params": child.get("evaluation_params") or ["content", "role"]}
        if child.get("criteria"):
            params["criteria"] = child["criteria"]
        else:
            params["evaluation_steps"] = child.get("evaluation_steps")
    else:
        spec, params = _child_spec(node)
    return spec.fn(list(samples), ctx, **params)


def _finish(p: dict[str, Any]) -> Any:
    strict = bool(p.get("strict_mode", False))
    threshold = 1.0 if strict else float(p.get("threshold", 0.5))

    def finish(w: Walk) -> Score:
        if w.score is None:
            return Score.missing("the DAG reached no verdict node with a score (DeepEval's score stays None)",
                                 {"path": w.path})
        steps = " -> ".join(f"{x.get('label') or x['type']}={x.get('verdict', '...')!r}" for x in w.path
                            if x["type"] in JUDGEMENTS)
        last = w.path[-1] if w.path else {}
        end = (f"verdict node {last.get('node')}: score {last['score']:g}/10" if "score" in last
               else f"verdict node {last.get('node')}: child metric {last.get('child')}")
        details: dict[str, Any] = {"path": w.path, "summary": f"{steps + ' -> ' if steps else ''}{end}",
                                   "threshold": threshold, "strict_mode": strict, "success": w.score >= threshold}
        if w.child_details:
            details["child_details"] = w.child_details
        return Score(float(w.score), details=details)

    return finish


class ConversationalDagMetric:
    """The batch function of ``deepeval:conversational_dag``."""

    def _run(self, samples: Sequence[Sample], ctx: Any, params: dict[str, Any], prefetch: bool) -> list[Score]:
        dag = _dag_of(params, ctx.options or {})
        return walk_dag(dag, list(samples), ctx, name=NAME, blocks=_blocks, child_scores=_child_scores,
                        finish=_finish(params), prefetch=prefetch) if samples else []

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        self._run(samples, ctx, params, prefetch=True)

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        return self._run(samples, ctx, params, prefetch=False)


def _check(ctx: Any, **params: Any) -> str | None:
    try:
        _dag_of(params, ctx.options or {})
    except MetricError as exc:
        return str(exc).removeprefix(f"{NAME}: ").removeprefix(f"{NAME} ")
    return judge_check(ctx)


_metric = ConversationalDagMetric()
register_metric(MetricSpec(
    name=NAME, family=FAMILY, fn=_metric, requires=("conversation",), needs_llm=True,
    defaults={"dag": None, "threshold": 0.5, "strict_mode": False}, prepare=_metric.prepare, check=_check,
    batch_size=64, scope="conversation", equals=tool_equals("deepeval", "ConversationalDAGMetric"),
    aliases=("ConversationalDAGMetric", "deepeval.metrics.ConversationalDAGMetric"),
    description="""DeepEval's conversational DAG (ConversationalDAGMetric): a decision graph of task, judgement and
    verdict nodes (DeepEval's JSON document, --option dag=dag.json) walked once per conversation by the
    judge; a node sees its parent tasks' outputs and the turns of its turn_window (every turn by
    default) with its evaluation_params (content, role, retrieval_context, tools_called, metadata).
    Score = score / 10 of the last verdict node reached, or its child metric's score
    (deepeval:conversational_g_eval, or a DeepEval conversational metric ragmeter computes); no scored
    verdict reached is no value. strict_mode sets the threshold to 1. One value per conversation.
    Needs a judge.""",
    parity="DeepEval 4.3.1 ConversationalDAGMetric given the same task outputs and verdicts: DeepEval's runner "
           "(ragmeter's deepeval:dag evaluator), its turn windows, its verdict children; DeepEval's extra call "
           "writing a reason is not made."))
