"""DeepEval's DAG metric (``deepeval:dag``, DeepEval 4.3.1 ``DAGMetric``): a decision graph of task,
judgement and verdict nodes, walked per sample with one judge request per node reached, its score
the verdict node the walk ends on (``score / 10``) or that verdict's child metric.

The graph is a :class:`~ragmeter.core.deepeval_dag.Dag` (DeepEval's JSON document, parsed and checked
by :func:`~ragmeter.core.deepeval_dag.parse_dag`). :func:`walk_dag` is the evaluator, independent of
what a sample is: it takes how to show a node the fields it names (``blocks``) and how to score a
verdict's child metric (``child_scores``), so a conversational DAG runs on it with its own. It
follows DeepEval's runner (``_DeepAcyclicGraphRunner.run``): roots in document order, depth first,
a node runs when every edge into it has arrived (its in-degree), a verdict node continues only when
it is the verdict its first parent judgement gave, and the last verdict reached sets the score.
Every sample's walk advances in rounds: the requests of all samples at the same step go to the
judge together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragmeter.core.deepeval_dag import BINARY, JUDGEMENTS, TASK, VERDICT, Dag, DagError, DagNode, parse_dag
from ragmeter.core.deepeval_fields import LLM_TEST_CASE, as_text, field_value
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import FIELD_PRESENT, Sample, Score
from ragmeter.metrics.judge._common import Verdict, fence_blocks, judge_check, load_template, tool_equals
from ragmeter.metrics.registry import MetricSpec, register_metric

NAME = "deepeval:dag"
REFUSED = "empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)"


class DagTaskOutput(Verdict):
    output: str | list[str] | dict[str, str]


class DagBinaryVerdict(Verdict):
    reason: str
    verdict: bool


class DagChoiceVerdict(Verdict):
    reason: str
    verdict: str


# ---- the evaluator ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AskJudge:
    """A step of a walk that needs the judge: a task, binary or non-binary judgement node."""

    node: DagNode
    request: Any


@dataclass(frozen=True)
class AskChild:
    """A step that needs a verdict node's child metric (``geval`` or ``metric``) scored on the sample."""

    node: DagNode


@dataclass
class Walk:
    """One sample's walk through the graph (a generator of asks; DeepEval's runner state)."""

    dag: Dag
    sample: Sample
    request: Callable[[DagNode, list[tuple[str, str]]], Any]
    blocks: Callable[[Sample, DagNode], list[tuple[str, str]] | str]
    remaining: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, Any] = field(default_factory=dict)
    path: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None
    child_details: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.remaining = dict(self.dag.indegree)

    def run(self) -> Generator[AskJudge | AskChild, Any, None]:
        for root in self.dag.roots:
            yield from self._visit(root)

    def _visit(self, nid: str) -> Generator[AskJudge | AskChild, Any, None]:
        node = self.dag.nodes[nid]
        if node.type == VERDICT:
            yield from self._verdict(node)
            return
        self.remaining[nid] -= 1
        if self.remaining[nid] > 0:
            return
        shown = self.blocks(self.sample, node)
        if isinstance(shown, str):
            raise _Stop(Score.missing(shown))
        parents = [self.dag.nodes[p] for p in self.dag.parents.get(nid, ())]
        upstream = [(_label(p.output_label or ""), as_text(self.outputs[p.id])) for p in parents
                    if p.type == TASK and p.id in self.outputs]
        value = yield AskJudge(node, self.request(node, [*upstream, *shown]))
        step: dict[str, Any] = {"node": nid, "type": node.type, "label": node.label}
        if node.type == TASK:
            self.outputs[nid] = value.output
            step["output"] = value.output
        else:
            self.verdicts[nid] = value.verdict
            step.update(verdict=value.verdict, reason=value.reason)
        self.path.append(step)
        for child in node.children:
            yield from self._visit(child)

    def _verdict(self, node: DagNode) -> Generator[AskJudge | AskChild, Any, None]:
        self.remaining[node.id] -= 1
        if self.remaining[node.id] > 0:
            return
        parents = self.dag.parents.get(node.id) or ()
        first = self.dag.nodes[parents[0]] if parents else None
        if first is not None and first.type in JUDGEMENTS and self.verdicts.get(first.id, _UNSET) != node.verdict:
            return
        if node.score is not None:
            self.score = node.score / 10
            self.path.append({"node": node.id, "type": VERDICT, "verdict": node.verdict, "score": node.score})
        elif node.child_ref is not None:
            yield from self._visit(node.child_ref)
        else:
            sc: Score = yield AskChild(node)
            if sc.value is None:
                raise _Stop(Score.missing(f"the DAG's child metric at verdict node {node.id}: {sc.reason}",
                                          sc.details))
            self.score = sc.value
            self.child_details = sc.details
            self.path.append({"node": node.id, "type": VERDICT, "verdict": node.verdict,
                              "child": node.child.get("metric_class") or node.child.get("name") or "GEval"
                              if node.child else None, "child_score": sc.value})


_UNSET = object()


class _Stop(Exception):  # noqa: N818 - a walk's early end, carrying its score
    def __init__(self, score: Score) -> None:
        super().__init__(score.reason)
        self.score = score


def _label(text: str) -> str:
    """A block label from a node's output label (labels hold capitals, digits and spaces only)."""
    return re.sub(r"[^A-Z0-9 ]+", " ", text.upper()).strip() or "TASK OUTPUT"


def node_request(dag: Dag, name: str, sample_id: str | None) -> Callable[[DagNode, list[tuple[str, str]]], Any]:
    """The judge request of a task or judgement node of ``dag`` shown ``blocks``."""
    import json

    from ragmeter.llm.request import JudgeRequest

    def make(node: DagNode, blocks: list[tuple[str, str]]) -> Any:
        schema: type[BaseModel]
        validate = None
        if node.type == TASK:
            tpl = load_template("dag_task")
            system, schema = tpl.system(instructions=node.instructions), DagTaskOutput
        elif node.type == BINARY:
            tpl = load_template("dag_binary")
            system, schema = tpl.system(criteria=node.criteria), DagBinaryVerdict
        else:
            options = [str(dag.nodes[c].verdict) for c in node.children]
            tpl = load_template("dag_choice")
            listed = "\n".join(f"- {json.dumps(o, ensure_ascii=False)}" for o in options)
            system, schema = tpl.system(criteria=node.criteria, options=listed), DagChoiceVerdict
            validate = _one_of(options)
        return JudgeRequest(metric=name, sample_id=sample_id, system=system,
                            user=fence_blocks(blocks or [("DATA", "")]), schema=schema,
                            template_version=tpl.version, expected_output_tokens=80, validate=validate)

    return make


def _one_of(options: list[str]) -> Callable[[Any], None]:
    def check(v: DagChoiceVerdict) -> None:
        if v.verdict not in options:
            raise ValueError(f"verdict must be one of {options}, got {v.verdict!r}")

    return check


def walk_dag(dag: Dag, samples: Sequence[Sample], ctx: Any, *, name: str,
             blocks: Callable[[Sample, DagNode], list[tuple[str, str]] | str],
             child_scores: Callable[[DagNode, Sequence[Sample], Any], list[Score]],
             finish: Callable[[Walk], Score], prefetch: bool = False) -> list[Score]:
    """Walk ``dag`` for every sample; the entry point of every DAG metric.

    Args:
        dag: the checked graph.
        samples: the samples (a conversational DAG passes its conversation samples).
        ctx: the scoring context (its ``judge`` service answers the nodes).
        name: the metric asking (for the judge's accounting).
        blocks: ``(sample, node) -> [(label, text), ...]``: the fields the node's
            ``evaluation_params`` name, fenced for the judge (a text instead: no value, why).
        child_scores: ``(verdict node, samples, ctx) -> scores``: a verdict's child metric on the
            samples that reached it.
        finish: ``walk -> Score``: the sample's score from its finished walk.
        prefetch: only queue the first step's requests (``prepare``) and return nothing.

    Returns:
        one score per sample: ``finish``'s, or no value with the reason a walk stopped (a judge
        failure, a field missing, a child metric without value).
    """
    judge = ctx.service("judge")
    walks = [Walk(dag, s, node_request(dag, name, s.id), blocks) for s in samples]
    gens = [w.run() for w in walks]
    out: list[Score | None] = [None] * len(samples)
    asks: dict[int, AskJudge | AskChild] = {}

    def advance(i: int, value: Any) -> None:
        try:
            asks[i] = gens[i].send(value)
        except StopIteration:
            asks.pop(i, None)
            out[i] = finish(walks[i])
        except _Stop as stop:
            asks.pop(i, None)
            out[i] = stop.score

    for i in range(len(samples)):
        advance(i, None)
    if prefetch:
        judge.prefetch([a.request for a in asks.values() if isinstance(a, AskJudge)])
        return []
    while asks:
        pending = sorted(asks.items())
        jobs = [(i, a) for i, a in pending if isinstance(a, AskJudge)]
        results = judge.submit([a.request for _, a in jobs]) if jobs else []
        replies: dict[int, Any] = {}
        for (i, a), res in zip(jobs, results, strict=True):
            if res.ok:
                replies[i] = res.value
            else:
                asks.pop(i)
                out[i] = res.missing({"path": walks[i].path, "failed_node": a.node.id})
        children = [(i, a) for i, a in pending if isinstance(a, AskChild)]
        for node_id in dict.fromkeys(a.node.id for _, a in children):
            group = [i for i, a in children if a.node.id == node_id]
            for i, sc in zip(group, child_scores(dag.nodes[node_id], [samples[i] for i in group], ctx), strict=True):
                replies[i] = sc
        for i in sorted(replies):
            advance(i, replies[i])
    return [s if s is not None else Score.missing("the DAG walk did not finish") for s in out]


# ---- deepeval:dag on single-turn samples ---------------------------------------------------------------


def _dag_of(p: dict[str, Any], options: dict[str, Any]) -> Dag:
    doc = p.get("dag")
    if doc is None:
        doc = options.get("dag")
    if doc is None:
        raise MetricError(f"{NAME} needs a DAG: --option dag=dag.json (DeepEval's DeepAcyclicGraph.to_json() "
                          "document, or the same in YAML), or the parameter dag")
    if isinstance(doc, str):
        raise MetricError(f"{NAME}: the DAG {doc!r} is a path; the run reads it when given as --option dag=FILE "
                          "(in Python: ragmeter.io.deepeval_files.read_dag(path))")
    try:
        dag = parse_dag(doc)
    except DagError as exc:
        raise MetricError(f"{NAME}: {exc}") from None
    for n in dag.nodes.values():
        for p_ in n.evaluation_params or ():
            if p_ not in LLM_TEST_CASE:
                raise MetricError(f"{NAME}: node {n.id} names {p_!r}, which a single-turn sample does not hold")
        if n.type == VERDICT and n.child and n.child.get("type") == "metric":
            _child_spec(n)
    strict, thr = p.get("strict_mode", False), p.get("threshold", 0.5)
    if not isinstance(strict, bool):
        raise MetricError(f"{NAME}: strict_mode must be true or false, got {strict!r}")
    if not isinstance(thr, int | float) or isinstance(thr, bool) or not 0 <= thr <= 1:
        raise MetricError(f"{NAME}: threshold must be a number in [0, 1], got {thr!r}")
    return dag


#: a child metric's DeepEval arguments that change nothing ragmeter computes
_IGNORED_KWARGS = {"model", "include_reason", "async_mode", "verbose_mode", "flaky", "evaluation_template",
                   "eval_mode", "system_one_model", "evaluation_model", "name", "_include_dag_suffix"}


def _child_spec(node: DagNode) -> tuple[MetricSpec, dict[str, Any]]:
    from ragmeter.metrics.registry import get_spec

    assert node.child is not None
    cls = node.child["metric_class"]
    try:
        spec = get_spec(cls)
    except Exception:  # noqa: BLE001 - an unknown name: the message below names it
        spec = None
    if spec is None or not spec.equals or spec.equals.get("tool") != "deepeval":
        raise MetricError(f"{NAME}: verdict node {node.id}: metric_class {cls!r} is not a DeepEval metric "
                          "ragmeter computes (see `ragmeter metrics --from deepeval`)")
    kwargs = {k: v for k, v in (node.child.get("kwargs") or {}).items() if k not in _IGNORED_KWARGS}
    unknown = sorted(set(kwargs) - set(spec.defaults))
    if unknown:
        raise MetricError(f"{NAME}: verdict node {node.id}: {cls} argument(s) {unknown} are not supported; "
                          f"valid: {sorted(spec.defaults)}")
    return spec, {**spec.defaults, **kwargs}


def _blocks(s: Sample, node: DagNode) -> list[tuple[str, str]]:
    return [(p.replace("_", " ").upper(), as_text(field_value(s, p))) for p in node.evaluation_params or ()]


class _OptionsView:
    """A context whose options hide the ``g_eval_*`` run options (a DAG's GEval child is defined by
    the DAG alone)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.options = {k: v for k, v in (ctx.options or {}).items() if not k.startswith("g_eval_")}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _child_scores(node: DagNode, samples: Sequence[Sample], ctx: Any) -> list[Score]:
    from ragmeter.metrics.registry import get_spec

    child = node.child or {}
    if child.get("type") == "geval":
        spec = get_spec("deepeval:g_eval")
        params = {**spec.defaults, "evaluation_params": child.get("evaluation_params")}
        if child.get("criteria"):
            params["criteria"] = child["criteria"]
        else:
            params["evaluation_steps"] = child.get("evaluation_steps")
    else:
        spec, params = _child_spec(node)
    ready = [i for i, s in enumerate(samples) if all(FIELD_PRESENT[f](s) for f in spec.requires)]
    out = [Score.missing(f"{spec.name} needs {', '.join(spec.requires)}") for _ in samples]
    if ready:
        for i, sc in zip(ready, spec.fn([samples[i] for i in ready], _OptionsView(ctx), **params), strict=True):
            out[i] = sc
    return out


def _finish(p: dict[str, Any]) -> Callable[[Walk], Score]:
    strict = bool(p.get("strict_mode", False))
    threshold = 1.0 if strict else float(p.get("threshold", 0.5))

    def finish(w: Walk) -> Score:
        if w.score is None:
            return Score.missing("the DAG reached no verdict node with a score (DeepEval's score stays None)",
                                 {"path": w.path})
        last = w.path[-1] if w.path else {}
        how = (f"verdict node {last.get('node')} ({last.get('verdict')!r}): score {last.get('score'):g}/10"
               if "score" in last else f"verdict node {last.get('node')}: child metric {last.get('child')}")
        steps = " -> ".join(f"{x.get('label') or x['node']}={x.get('verdict', '...')!r}" for x in w.path
                            if x["type"] in JUDGEMENTS)
        details: dict[str, Any] = {"path": w.path, "summary": f"{steps + ' -> ' if steps else ''}{how}",
                                   "threshold": threshold, "strict_mode": strict, "success": w.score >= threshold}
        if w.child_details:
            details["child_details"] = w.child_details
        return Score(float(w.score), details=details)

    return finish


def _refusal(dag: Dag) -> Callable[[Sample], str | None]:
    required = dag.required_params()

    def refuse(s: Sample) -> str | None:
        missing = [p for p in required if field_value(s, p) is None]
        if missing:
            return f"missing field for the DAG's evaluation_params: {', '.join(missing)} (DeepEval refuses the test case)"
        if "actual_output" in required and s.answer == "":
            return REFUSED
        return None

    return refuse


@dataclass
class DagMetric:
    """The batch function of ``deepeval:dag``."""

    def _run(self, samples: Sequence[Sample], ctx: Any, params: dict[str, Any], prefetch: bool) -> list[Score]:
        dag = _dag_of(params, ctx.options or {})
        refuse = _refusal(dag)
        why = [refuse(s) for s in samples]
        todo = [i for i, w in enumerate(why) if w is None]
        out = [Score.missing(w) if w else Score.missing("not judged") for w in why]
        scores = walk_dag(dag, [samples[i] for i in todo], ctx, name=NAME, blocks=_blocks, child_scores=_child_scores,
                          finish=_finish(params), prefetch=prefetch) if todo else []
        for i, sc in zip(todo, scores, strict=False):
            out[i] = sc
        return out

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        self._run(samples, ctx, params, prefetch=True)

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        return self._run(samples, ctx, params, prefetch=False)


def _check(ctx: Any, **params: Any) -> str | None:
    try:
        _dag_of(params, ctx.options or {})
    except MetricError as exc:  # the run names the metric
        return str(exc).removeprefix(f"{NAME}: ").removeprefix(f"{NAME} ")
    return judge_check(ctx)


_metric = DagMetric()
register_metric(MetricSpec(
    name=NAME, family="judge", fn=_metric, requires=(), needs_llm=True,
    defaults={"dag": None, "threshold": 0.5, "strict_mode": False}, prepare=_metric.prepare, check=_check,
    batch_size=64, equals=tool_equals("deepeval", "DAGMetric"),
    aliases=("DAGMetric", "deepeval.metrics.DAGMetric"), description="""
DeepEval's DAG metric: a decision graph you write (task nodes that extract or transform, binary
and non-binary judgement nodes that branch, verdict nodes that end a path with a score of 0-10 or
hand the sample to a child metric) walked per sample by the judge (DeepEval 4.3.1 ``DAGMetric``).

The graph is DeepEval's JSON document (``DeepAcyclicGraph.to_json()``; YAML of the same shape
too), given as ``--option dag=dag.json``. Each task or judgement node reached is one judge request
showing the node its ``evaluation_params`` (input, actual_output, expected_output, context,
retrieval_context, tools_called ...) and its parent tasks' outputs. The walk is DeepEval's: a node
runs once every edge into it has arrived, a verdict continues only when it is the verdict its
judgement gave, and

    deepeval:dag = score / 10 of the last verdict node reached   (or its child metric's score:
                   a GEval, or a DeepEval metric ragmeter computes, by class name)

No verdict with a score reached: no value. ``strict_mode`` sets DeepEval's threshold to 1 (the
score is kept). ``details["path"]`` holds every node's output or verdict and reason. Range [0, 1],
higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``DAGMetric`` given the same task outputs and verdicts, walking as DeepEval's
runner does (roots in document order, depth first; when several branches end on scored verdicts,
the last one reached sets the score, as in DeepEval's synchronous mode; its asynchronous mode
takes whichever finishes last). A verdict's GEval child is ragmeter's ``deepeval:g_eval`` with the
DAG's criteria (or steps) and evaluation_params; a metric child is ragmeter's metric of that
DeepEval class. DeepEval's extra call writing a reason is not made: the path's reasons are kept.
"""))
