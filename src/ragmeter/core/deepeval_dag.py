"""A DeepEval decision graph (DAG) as data: the JSON document ``DeepAcyclicGraph.to_json()`` writes
(DeepEval 4.3.1, ``deepeval/metrics/dag/serialization``), parsed and checked the way DeepEval
builds and checks it, so a DAG written for DeepEval runs in ragmeter as it is.

The document is ``{"nodes": {ID: NODE, ...}}``; a node's ``type`` is ``TaskNode`` (``instructions``,
``output_label``, ``children``), ``BinaryJudgementNode`` / ``NonBinaryJudgementNode`` (``criteria``,
``children``: verdict nodes) or ``VerdictNode`` (``verdict`` and either ``score`` 0-10 or ``child``:
``{"type": "node", "ref": ID}``, ``{"type": "geval", ...}``, ``{"type": "metric", "metric_class",
"kwargs"}``); task and judgement nodes may name ``evaluation_params`` and a ``label``. The roots are
the nodes no other node references. :func:`parse_dag` also computes what DeepEval's runner uses:
each node's parents (in DeepEval's order) and in-degree. Files are read by
:mod:`ragmeter.io.deepeval_dag`; the graph is run by :mod:`ragmeter.metrics.judge.dag`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmeter.core.errors import ConfigError

TASK, BINARY, NON_BINARY, VERDICT = "TaskNode", "BinaryJudgementNode", "NonBinaryJudgementNode", "VerdictNode"
NODE_TYPES = (TASK, BINARY, NON_BINARY, VERDICT)
JUDGEMENTS = (BINARY, NON_BINARY)
CHILD_TYPES = ("node", "geval", "metric")

#: DeepEval's ``SingleTurnParams`` values -> the name its prompts show (``G_EVAL_PARAMS``); DeepEval
#: accepts the MCP ones in a DAG file but has no prompt name for them
SINGLE_TURN_PARAMS: dict[str, str] = {
    "input": "Input", "actual_output": "Actual Output", "expected_output": "Expected Output", "context": "Context",
    "retrieval_context": "Retrieval Context", "metadata": "Metadata", "tags": "Tags",
    "tools_called": "Tools Called", "expected_tools": "Expected Tools", "mcp_servers": "MCP Servers",
    "mcp_tools_called": "MCP Tools Called", "mcp_resources_called": "MCP Resources Called",
    "mcp_prompts_called": "MCP Prompts Called"}


#: DeepEval's ``MultiTurnParams`` a conversational DAG node shows for each turn -> its prompt name
#: (``CONVERSATIONAL_G_EVAL_PARAMS``; the conversation-level ones are not read per turn by DeepEval)
MULTI_TURN_PARAMS: dict[str, str] = {"content": "Content", "role": "Role", "retrieval_context": "Retrieval Context",
                                     "tools_called": "Tools Called", "metadata": "Metadata"}


class DagError(ConfigError):
    """A DAG document DeepEval would refuse; the message names the node."""


@dataclass(frozen=True)
class DagNode:
    """One node of the document (the fields its ``type`` uses; the rest stay ``None``)."""

    id: str
    type: str
    children: tuple[str, ...] = ()
    instructions: str | None = None
    output_label: str | None = None
    criteria: str | None = None
    label: str | None = None
    evaluation_params: tuple[str, ...] | None = None
    turn_window: tuple[int, int] | None = None
    verdict: bool | str | None = None
    score: float | None = None
    child: dict[str, Any] | None = None

    @property
    def child_ref(self) -> str | None:
        """The node a verdict leads to (``child`` of type ``node``)."""
        return self.child.get("ref") if self.child and self.child.get("type") == "node" else None

    def edges(self) -> list[str]:
        """The nodes this one leads to: its children, then a verdict's child node."""
        return [*self.children, *([self.child_ref] if self.child_ref else [])]

    @property
    def name(self) -> str:
        """How messages name the node: its label, else its type and id."""
        return f"{self.type} {self.label!r} ({self.id})" if self.label else f"{self.type} {self.id}"


@dataclass(frozen=True)
class Dag:
    """A checked graph: its nodes, roots (in document order), each node's parents (in the order
    DeepEval's depth-first build finds them) and in-degree (exclusive verdict edges collapsed)."""

    nodes: dict[str, DagNode]
    roots: tuple[str, ...]
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    indegree: dict[str, int] = field(default_factory=dict)
    multiturn: bool = False

    def required_params(self) -> list[str]:
        """DeepEval's ``extract_required_params``: the evaluation params of the task and judgement
        nodes reached from the roots through ``children`` (not through a verdict's child)."""
        out: dict[str, None] = {}

        def walk(ids: Iterable[str]) -> None:
            for nid in ids:
                n = self.nodes[nid]
                if n.type != VERDICT:
                    out.update(dict.fromkeys(n.evaluation_params or ()))
                    walk(n.children)

        walk(self.roots)
        return list(out)


def parse_dag(data: Any, *, params: Mapping[str, str] = SINGLE_TURN_PARAMS, multiturn: bool = False) -> Dag:
    """Check a DAG document as DeepEval's ``DeepAcyclicGraph.from_dict`` does and return it.

    Args:
        data: the parsed document.
        params: the evaluation params a node may name (DeepEval's single-turn ones by default; a
            conversational DAG passes DeepEval's ``MultiTurnParams``).
        multiturn: a conversational DAG (nodes may carry ``turn_window``).

    Raises:
        DagError: what DeepEval would refuse, naming the node: an unknown type, a missing field, a
            reference to no node, a cycle, a task node with a verdict child or neither evaluation
            params nor a parent, a binary judgement without exactly one true and one false verdict,
            duplicate verdicts, a score outside 0-10, several roots with a judgement among them.
    """
    data = flat_document(data)
    specs = data["nodes"]
    if not isinstance(specs, Mapping) or not specs:
        raise DagError("'nodes' must be a non-empty object of node id -> node")
    nodes = {str(k): _node(str(k), v, params, multiturn) for k, v in specs.items()}
    for n in nodes.values():
        for ref in n.edges():
            if ref not in nodes:
                raise DagError(f"node {n.id}: references unknown node id {ref!r}")
    referenced = {ref for n in nodes.values() for ref in n.edges()}
    roots = tuple(k for k in nodes if k not in referenced)
    if not roots:
        raise DagError("no root node: every node is referenced by another (the graph has a cycle)")
    for n in nodes.values():
        _check_children(n, nodes)
    if len(roots) > 1 and any(nodes[r].type in JUDGEMENTS for r in roots):
        raise DagError(f"roots {', '.join(roots)}: a judgement node can be a root only when it is the only one")
    parents, indegree = _topology(nodes, roots)
    for n in nodes.values():
        if n.id in indegree and n.type == TASK and n.evaluation_params is None and not parents.get(n.id):
            raise DagError(f"node {n.id}: a TaskNode needs evaluation_params or a parent node")
    return Dag(nodes, roots, parents, indegree, multiturn)


def flat_document(data: Any) -> dict[str, Any]:
    """The document in DeepEval's serialized shape (``{"nodes": {ID: NODE}}``, children by id).

    Also accepted, as a person writes the graph DeepEval's Python builds: a nested document, one root
    node object (or ``{"root_nodes": [...]}``) whose ``children`` are node objects and whose verdict
    ``child`` is a node object; equal task or judgement node objects are one node (the Python graph's
    shared node, such as a judgement reached both from a task and from a verdict). Evaluation params may be written as
    the enum's name (``ACTUAL_OUTPUT``, ``SingleTurnParams.ACTUAL_OUTPUT``).

    Raises:
        DagError: neither shape.
    """
    if isinstance(data, Mapping) and "nodes" in data:
        nodes = data["nodes"]
        if isinstance(nodes, Mapping):
            return {"nodes": {k: _params_by_value(v) for k, v in nodes.items()}}
        return {"nodes": nodes}
    roots = data.get("root_nodes") if isinstance(data, Mapping) and "root_nodes" in data else (
        [data] if isinstance(data, Mapping) and "type" in data else None)
    if not isinstance(roots, list) or not roots:
        raise DagError("expected DeepEval's DAG document: {\"nodes\": {id: node, ...}} (DeepAcyclicGraph.to_json()), "
                       "or a nested root node {\"type\": \"TaskNode\", ..., \"children\": [...]}")
    nodes: dict[str, Any] = {}
    ids: dict[str, str] = {}

    def add(node: Any, where: str) -> str:
        if not isinstance(node, Mapping) or node.get("type") not in NODE_TYPES:
            raise DagError(f"{where}: expected a node object with a 'type' of {', '.join(NODE_TYPES)}, "
                           f"got {node!r:.80}")
        key = json.dumps(node, sort_keys=True, default=str)
        if key in ids and node["type"] != VERDICT:  # a verdict belongs to its one judgement
            return ids[key]
        nid = str(node.get("id") or f"{node['type']}-{len(nodes) + 1}")
        if nid in nodes:
            raise DagError(f"node {nid}: two nodes have this id")
        ids[key] = nid
        spec = {k: v for k, v in node.items() if k not in ("id", "children", "child")}
        nodes[nid] = spec
        if "children" in node:
            kids = node["children"] or []
            if not isinstance(kids, list):
                raise DagError(f"node {nid}: 'children' must be a list")
            spec["children"] = [add(c, f"node {nid} child {i}") for i, c in enumerate(kids, 1)]
        child = node.get("child")
        if isinstance(child, Mapping) and child.get("type") in NODE_TYPES:
            spec["child"] = {"type": "node", "ref": add(child, f"node {nid} child")}
        elif child is not None:
            spec["child"] = child
        nodes[nid] = _params_by_value(spec)
        return nid

    for i, r in enumerate(roots, 1):
        add(r, f"root {i}")
    return {"nodes": nodes}


def _params_by_value(spec: Any) -> Any:
    """``evaluation_params`` written as the enum's name (``ACTUAL_OUTPUT``) as its value."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("evaluation_params"), list):
        return spec
    fixed = [p.rsplit(".", 1)[-1].lower() if isinstance(p, str) and (p.isupper() or "Params." in p) else p
             for p in spec["evaluation_params"]]
    return {**spec, "evaluation_params": fixed}


def _text(spec: Mapping[str, Any], key: str, nid: str, kind: str) -> str:
    v = spec.get(key)
    if not isinstance(v, str):
        raise DagError(f"node {nid}: a {kind} needs '{key}' (a text), got {v!r:.60}")
    return v


def _node(nid: str, spec: Any, params: Mapping[str, str], multiturn: bool) -> DagNode:
    if not isinstance(spec, Mapping) or "type" not in spec:
        raise DagError(f"node {nid}: missing required 'type' field")
    t = spec["type"]
    if t not in NODE_TYPES:
        raise DagError(f"node {nid}: unknown type {t!r}; expected one of: {', '.join(NODE_TYPES)}")
    if t == VERDICT:
        return _verdict(nid, spec)
    children = spec.get("children") or []
    if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
        raise DagError(f"node {nid}: 'children' must be a list of node ids, got {children!r:.60}")
    ep = spec.get("evaluation_params")
    if ep is not None:
        if not isinstance(ep, list):
            raise DagError(f"node {nid}: 'evaluation_params' must be a list, got {ep!r:.60}")
        for p in ep:
            if p not in params:
                raise DagError(f"node {nid}: unknown evaluation_param {p!r}; expected one of: {', '.join(params)}")
    label = spec.get("label")
    if label is not None and not isinstance(label, str):
        raise DagError(f"node {nid}: 'label' must be a text, got {label!r:.60}")
    window = spec.get("turn_window") if multiturn else None
    if window is not None and (not isinstance(window, list | tuple) or len(window) != 2
                               or not all(isinstance(x, int) and not isinstance(x, bool) for x in window)):
        raise DagError(f"node {nid}: 'turn_window' must be two turn indices [start, end], got {window!r:.60}")
    common: dict[str, Any] = {"children": tuple(children), "label": label,
                              "evaluation_params": None if ep is None else tuple(ep),
                              "turn_window": None if window is None else (window[0], window[1])}
    if t == TASK:
        return DagNode(nid, t, instructions=_text(spec, "instructions", nid, t),
                       output_label=_text(spec, "output_label", nid, t), **common)
    return DagNode(nid, t, criteria=_text(spec, "criteria", nid, t), **common)


def _verdict(nid: str, spec: Mapping[str, Any]) -> DagNode:
    if "verdict" not in spec:
        raise DagError(f"node {nid}: a VerdictNode needs 'verdict'")
    verdict = spec["verdict"]
    if not isinstance(verdict, bool | str):
        raise DagError(f"node {nid}: 'verdict' must be true, false or a text, got {verdict!r:.60}")
    score = spec.get("score")
    if score is not None:
        if not isinstance(score, int | float) or isinstance(score, bool) or not 0 <= score <= 10:
            raise DagError(f"node {nid}: the score must be a number between 0 and 10, inclusive, got {score!r}")
        if spec.get("child") is not None:
            raise DagError(f"node {nid}: a VerdictNode has either a 'score' or a 'child', not both")
        return DagNode(nid, VERDICT, verdict=verdict, score=float(score))
    child = spec.get("child")
    if not isinstance(child, Mapping) or child.get("type") not in CHILD_TYPES:
        raise DagError(f"node {nid}: a VerdictNode needs a 'score' (0-10) or a 'child' "
                       f"{{\"type\": node | geval | metric, ...}}, got {child!r:.80}")
    if child["type"] == "node" and not isinstance(child.get("ref"), str):
        raise DagError(f"node {nid}: a child of type 'node' needs 'ref' (a node id)")
    if child["type"] == "metric" and not (isinstance(child.get("metric_class"), str) and child["metric_class"]):
        raise DagError(f"node {nid}: a child of type 'metric' needs a non-empty 'metric_class'")
    if child["type"] == "metric" and not isinstance(child.get("kwargs") or {}, Mapping):
        raise DagError(f"node {nid}: the metric child's 'kwargs' must be an object")
    return DagNode(nid, VERDICT, verdict=verdict, child=dict(child))


def _check_children(n: DagNode, nodes: Mapping[str, DagNode]) -> None:
    kids = [nodes[c] for c in n.children]
    if n.type == TASK:
        bad = [k.id for k in kids if k.type == VERDICT]
        if bad:
            raise DagError(f"node {n.id}: a TaskNode must not have a VerdictNode child ({', '.join(bad)})")
        return
    if n.type not in JUDGEMENTS:
        return
    bad = [k.id for k in kids if k.type != VERDICT]
    if bad:
        raise DagError(f"node {n.id}: every child of a {n.type} must be a VerdictNode ({', '.join(bad)} is not)")
    verdicts = [k.verdict for k in kids]
    if n.type == BINARY:
        if len(kids) != 2 or not all(isinstance(v, bool) for v in verdicts) or set(verdicts) != {True, False}:
            raise DagError(f"node {n.id}: a BinaryJudgementNode needs exactly 2 VerdictNode children, one with "
                           f"verdict true and one with verdict false; got {json.dumps(verdicts)}")
        return
    if not kids:
        raise DagError(f"node {n.id}: a NonBinaryJudgementNode needs at least one VerdictNode child")
    if not all(isinstance(v, str) for v in verdicts):
        raise DagError(f"node {n.id}: the verdicts of a NonBinaryJudgementNode's children must be texts; "
                       f"got {json.dumps(verdicts)}")
    dup = sorted({v for v in verdicts if verdicts.count(v) > 1})
    if dup:
        raise DagError(f"node {n.id}: duplicate verdict {dup[0]!r} among its children")


def _topology(nodes: Mapping[str, DagNode], roots: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """Parents and in-degrees as DeepEval's ``DeepAcyclicGraph._build_graph`` computes them, with
    its cycle check and its collapse of mutually exclusive verdict edges (several verdicts of one
    judgement leading to one node count as one arrival)."""
    indegree: dict[str, int] = {}
    parents: dict[str, list[str]] = {}
    visited: set[str] = set()
    stack: list[str] = []

    def visit(nid: str) -> None:
        if nid in stack:
            raise DagError(f"node {nid}: cycle detected in the DAG ({' -> '.join([*stack, nid])})")
        if nid in visited:
            return
        visited.add(nid)
        stack.append(nid)
        indegree.setdefault(nid, 0)
        for child in nodes[nid].edges():
            indegree[child] = indegree.get(child, 0) + 1
            parents.setdefault(child, []).append(nid)
            visit(child)
        stack.pop()

    for r in roots:
        visit(r)
    for nid, ps in parents.items():
        exclusive: dict[str, int] = {}
        for p in ps:
            if nodes[p].type != VERDICT or p in roots:
                continue
            owners = parents.get(p) or []
            if len(owners) != 1 or nodes[owners[0]].type not in JUDGEMENTS:
                continue
            exclusive[owners[0]] = exclusive.get(owners[0], 0) + 1
        for count in exclusive.values():
            if count > 1:
                indegree[nid] -= count - 1
    return {k: tuple(v) for k, v in parents.items()}, indegree
