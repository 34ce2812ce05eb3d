"""DeepEval 4.3.1's deterministic agent metrics with DeepEval's numbers: ``deepeval:tool_correctness``
(ToolCorrectnessMetric), ``deepeval:tool_permission`` (ToolPermissionMetric) and
``deepeval:agent_loop_detection`` (AgentLoopDetectionMetric). No judge: each equals DeepEval on
every input (tests/test_parity_deepeval_agentic.py checks 200 generated inputs per metric).

DeepEval's ``LLMTestCase`` fields as ragmeter reads them: ``input`` is the sample's question,
``actual_output`` its answer, ``tools_called`` the trace's tool calls (``name``,
``input_parameters`` = arguments, ``output`` = result), ``expected_tools`` the sample's
``metadata.expected_tools`` (tool names, or DeepEval ``ToolCall`` objects with ``name``,
``input_parameters``/``inputParameters``, ``output``). DeepEval's ``@observe`` trace
(``test_case._trace_dict``, a tree of spans with ``type``/``name``/``input``/``output``/``children``)
is made from the trace's spans (:func:`deepeval_trace_tree`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import AgentTrace, Sample, Score
from ragmeter.metrics.registry import metric

_EQUALS = {"tool": "deepeval", "version": "4.3.1"}
_SPAN_TYPES = ("agent", "llm", "retriever", "tool")


def _equals(cls: str) -> dict[str, str]:
    return {**_EQUALS, "metric": cls}


def _aliases(cls: str) -> tuple[str, ...]:
    return (cls, f"deepeval.metrics.{cls}")


def _threshold(name: str, threshold: Any, strict_mode: Any) -> float:
    if not isinstance(strict_mode, bool):
        raise MetricError(f"{name}: strict_mode must be true or false, got {strict_mode!r}")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
        raise MetricError(f"{name}: threshold must be a number in [0, 1], got {threshold!r}")
    return 1.0 if strict_mode else float(threshold)


def _params_check(name: str, fn: Any) -> Any:
    """A ``check`` hook: the metric's parameters validated before the run starts (by scoring no
    sample), so a bad parameter is a usage error, not a failure half way."""

    def check(ctx: Any, **params: Any) -> str | None:
        try:
            fn([], ctx, **params)
        except MetricError as exc:  # the run names the metric
            return str(exc).removeprefix(f"{name}: ").removeprefix(f"{name} ")
        return None

    return check


def _finish(value: float, threshold: float, strict: bool, details: dict[str, Any]) -> Score:
    """DeepEval's ending: in strict mode a score under the threshold (1) is 0; ``success`` is
    ``score >= threshold``."""
    if strict and value < threshold:
        value = 0.0
    details.update(threshold=threshold, strict_mode=strict, success=value >= threshold)
    return Score(value, details=details)


# ---- tool calls as DeepEval's ToolCall -------------------------------------------------------------
class _Call:
    """A tool call compared the way DeepEval's ``ToolCall`` is: ``name`` and ``type`` decide a
    match, value equality (``==``) is over ``name``, ``input_parameters`` and ``output``."""

    __slots__ = ("name", "type", "params", "output")

    def __init__(self, name: str, type_: str, params: Any, output: Any) -> None:
        self.name, self.type, self.params, self.output = name, type_, params, output

    def same_value(self, other: _Call) -> bool:
        return self.name == other.name and self.params == other.params and self.output == other.output


def _called(trace: AgentTrace) -> list[_Call]:
    out = []
    for c in trace.tool_calls:
        extra = c.model_extra or {}
        out.append(_Call(c.name, str(extra.get("type") or "FUNCTION").upper(), dict(c.arguments), c.result))
    return out


def _expected(raw: Any) -> list[_Call] | str:
    """``metadata.expected_tools`` as calls, or why it cannot be read."""
    if not isinstance(raw, list):
        return "metadata.expected_tools must be a list of tool names or DeepEval ToolCall objects"
    out = []
    for i, x in enumerate(raw):
        if isinstance(x, str):
            out.append(_Call(x, "FUNCTION", {}, None))
        elif isinstance(x, Mapping) and isinstance(x.get("name"), str):
            params = x.get("input_parameters", x.get("inputParameters", x.get("arguments")))
            out.append(_Call(x["name"], str(x.get("type") or "FUNCTION").upper(),
                             dict(params) if isinstance(params, Mapping) else {}, x.get("output", x.get("result"))))
        else:
            return f"metadata.expected_tools[{i}] is neither a tool name nor an object with a 'name'"
    return out


def compare_arguments(a: Mapping[str, Any], b: Mapping[str, Any], exact: bool) -> float:
    """DeepEval's argument similarity: 1 when equal; else (not ``exact``) the share of the union of
    keys whose values are equal, nested objects counting their own share."""
    if a == b:
        return 1.0
    if exact:
        return 0.0
    keys = set(a) | set(b)
    total = 0.0
    for k in set(a) & set(b):
        if a[k] == b[k]:
            total += 1 / len(keys)
        elif isinstance(a[k], Mapping) and isinstance(b[k], Mapping):
            total += compare_arguments(a[k], b[k], exact) / len(keys)
    return total


def _pair(e: _Call, c: _Call, use_params: bool, use_output: bool, exact: bool) -> float:
    if e.name != c.name or e.type != c.type:
        return 0.0
    s = compare_arguments(e.params, c.params, exact) if use_params else 1.0
    return 0.0 if use_output and e.output != c.output else s


def tool_correctness_score(expected: list[_Call], called: list[_Call], *, ordering: bool, exact: bool,
                           use_params: bool, use_output: bool) -> float:
    """DeepEval's ToolCorrectnessMetric tool-calling score (before strict mode)."""
    if exact:  # same length, same tools in the same order
        if len(called) != len(expected):
            return 0.0
        for e, c in zip(expected, called, strict=True):
            if e.name != c.name or e.type != c.type or (use_params and e.params != c.params) \
                    or (use_output and e.output != c.output):
                return 0.0
        return 1.0
    if ordering:  # weighted longest common subsequence, backtracked as DeepEval does
        m, n = len(expected), len(called)
        dp = [[0.0] * (n + 1) for _ in range(m + 1)]
        for i in range(1, m + 1):
            for j in range(1, n + 1):
                e, c = expected[i - 1], called[j - 1]
                if e.name != c.name or e.type != c.type:
                    dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
                    continue
                s = _pair(e, c, use_params, use_output, exact)
                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1], dp[i - 1][j - 1] + s if s > 0 else 0)
        i, j, total = m, n, 0.0
        while i > 0 and j > 0:
            if dp[i][j] == dp[i - 1][j]:
                i -= 1
            elif dp[i][j] == dp[i][j - 1]:
                j -= 1
            else:
                total += dp[i][j] - dp[i - 1][j - 1]
                i, j = i - 1, j - 1
        if not expected:
            return 1.0 if not called else 0.0
        return total / m
    # each expected call takes its best unmatched call; DeepEval keeps the matched calls in a set
    # of value-equal ToolCall objects, so a call equal in value to a matched one is skipped too
    matched: list[_Call] = []
    total = 0.0
    for e in expected:
        best, best_call = 0.0, None
        for c in called:
            if any(c.same_value(x) for x in matched):
                continue
            s = _pair(e, c, use_params, use_output, exact)
            if s > best:
                best, best_call = s, c
        if best > 0 and best_call is not None:
            total += best
            matched.append(best_call)
    if not expected:
        return 1.0 if not called else 0.0
    return total / len(expected)


_EVAL_PARAMS = ("input_parameters", "output")


@metric("deepeval:tool_correctness", family="agent", requires=("question", "trace"),
        check=_params_check("deepeval:tool_correctness", lambda samples, ctx, **p: deepeval_tool_correctness(samples, ctx, **p)),
        defaults={"threshold": 0.5, "strict_mode": False, "should_exact_match": False,
                  "should_consider_ordering": False, "evaluation_params": []},
        equals=_equals("ToolCorrectnessMetric"), aliases=_aliases("ToolCorrectnessMetric"),
        parity="Equals DeepEval 4.3.1 ToolCorrectnessMetric on every input, without a judge: names and types "
               "match, evaluation_params (input_parameters: DeepEval's key-share similarity; output: equality), "
               "should_exact_match, should_consider_ordering (DeepEval's weighted LCS), strict_mode, threshold, "
               "and DeepEval's matching of value-equal calls (a second call equal to a matched one is skipped). "
               "available_tools (a judged tool-selection score) is not offered.")
def deepeval_tool_correctness(samples: Sequence[Sample], ctx: Any, threshold: float = 0.5, strict_mode: bool = False,
                              should_exact_match: bool = False, should_consider_ordering: bool = False,
                              evaluation_params: Sequence[str] = ()) -> list[Score]:
    """DeepEval's tool correctness (ToolCorrectnessMetric): the tools the agent called against
    ``metadata.expected_tools``. Default: each expected tool takes the best not-yet-matched call of
    the same name (and type), score = matched / expected; ``should_consider_ordering``: the weighted
    longest common subsequence of expected and called tools / expected; ``should_exact_match``: 1
    when the calls are the expected ones in order, else 0. ``evaluation_params`` adds
    ``input_parameters`` (a match counts the share of argument keys with equal values) and ``output``
    (a match needs an equal output). No expected and no called tool scores 1; expected none but
    called some scores 0. ``strict_mode``: 0 below 1. Range [0, 1]."""
    thr = _threshold("deepeval:tool_correctness", threshold, strict_mode)
    bad = [p for p in evaluation_params or () if p not in _EVAL_PARAMS]
    if bad or not isinstance(evaluation_params, list | tuple):
        raise MetricError(f"deepeval:tool_correctness: evaluation_params must be a list of "
                          f"{' / '.join(_EVAL_PARAMS)}, got {evaluation_params!r}")
    out = []
    for s in samples:
        if s.question is None:
            out.append(Score.missing("no input (question): DeepEval refuses the test case"))
            continue
        raw = s.metadata.get("expected_tools")
        if raw is None:
            out.append(Score.missing("no expected_tools: DeepEval refuses the test case"))
            continue
        expected = _expected(raw)
        if isinstance(expected, str):
            out.append(Score.missing(expected))
            continue
        called = _called(s.trace) if s.trace is not None else []
        value = tool_correctness_score(expected, called, ordering=bool(should_consider_ordering),
                                       exact=bool(should_exact_match), use_params="input_parameters" in evaluation_params,
                                       use_output="output" in evaluation_params)
        out.append(_finish(value, thr, strict_mode, {"expected": [e.name for e in expected],
                                                     "called": [c.name for c in called]}))
    return out


@metric("deepeval:tool_permission", family="agent", requires=("trace",),
        check=_params_check("deepeval:tool_permission", lambda samples, ctx, **p: deepeval_tool_permission(samples, ctx, **p)),
        defaults={"allowed_tools": None, "denied_tools": None, "threshold": 1.0, "strict_mode": False},
        equals=_equals("ToolPermissionMetric"), aliases=_aliases("ToolPermissionMetric"),
        parity="Equals DeepEval 4.3.1 ToolPermissionMetric on every input (deterministic in DeepEval too).")
def deepeval_tool_permission(samples: Sequence[Sample], ctx: Any, allowed_tools: Sequence[str] | None = None,
                             denied_tools: Sequence[str] | None = None, threshold: float = 1.0,
                             strict_mode: bool = False) -> list[Score]:
    """DeepEval's tool permission (ToolPermissionMetric): the share of the agent's tool calls that
    were authorized. A call is unauthorized when its tool is in ``denied_tools`` or, given an
    ``allowed_tools`` list, not in it (a denial wins). Score = authorized calls / calls, 1 when no
    tool was called; DeepEval's default threshold is 1 (every call authorized); ``strict_mode``: 0
    below 1. One of ``allowed_tools`` / ``denied_tools`` is required. Range [0, 1]."""
    name = "deepeval:tool_permission"
    thr = _threshold(name, threshold, strict_mode)
    for key, v in (("allowed_tools", allowed_tools), ("denied_tools", denied_tools)):
        if v is not None and not (isinstance(v, list | tuple) and all(isinstance(x, str) for x in v)):
            raise MetricError(f"{name}: {key} must be a list of tool names, got {v!r}")
    if allowed_tools is None and denied_tools is None:
        raise MetricError(f"{name} needs allowed_tools (an allowlist) or denied_tools (a denylist), "
                          "as DeepEval's ToolPermissionMetric does")
    allowed = None if allowed_tools is None else set(allowed_tools)
    denied = set(denied_tools or ())
    out = []
    for s in samples:
        calls = [c.name for c in s.trace.tool_calls] if s.trace is not None else []
        bad = [n for n in calls if n in denied or (allowed is not None and n not in allowed)]
        value = 1.0 if not calls else (len(calls) - len(bad)) / len(calls)
        out.append(_finish(value, thr, strict_mode, {"called": calls, "unauthorized": bad,
                                                     "summary": f"{len(calls) - len(bad)} of {len(calls)} tool calls authorized"}))
    return out


# ---- the trace tree ----------------------------------------------------------------------------------
def deepeval_trace_tree(trace: AgentTrace) -> dict[str, Any]:
    """The trace as DeepEval's ``_trace_dict``: nested span dicts (``type``, ``name``, ``input``,
    ``output``, ``children``; keys without a value left out, as DeepEval leaves them out).

    From ``trace.spans``: ``type`` is the span kind for agent / llm / retriever / tool spans, else
    ``base``; ``input`` the span's recorded input (a tool span without one: its arguments; a
    retriever span: its query), ``output`` its output (a tool span without one: its result). One
    root span is the tree; several roots hang under a ``base`` span named ``trace``. A trace written
    without spans (tool calls only) is an ``agent`` span (input: the trace's input text, output: its
    final text) whose children are one ``tool`` span per call (input: its arguments, output: its
    result)."""

    def clean(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if v is not None}

    if not trace.spans:
        return {**clean({"type": "agent", "name": "agent", "input": trace.input_text, "output": trace.final_text}),
                "children": [{**clean({"type": "tool", "name": c.name, "input": dict(c.arguments), "output": c.result}),
                              "children": []} for c in trace.tool_calls]}
    nodes: dict[str, dict[str, Any]] = {}
    roots: list[dict[str, Any]] = []
    for sp in trace.spans:
        inp = sp.input
        if inp is None and sp.kind == "tool":
            inp = sp.tool_arguments
        if inp is None and sp.kind == "retriever":
            inp = sp.query
        outp = sp.output if sp.output is not None or sp.kind != "tool" else sp.tool_result
        node = {**clean({"type": sp.kind if sp.kind in _SPAN_TYPES else "base",
                         "name": sp.name or (sp.tool_name if sp.kind == "tool" else None),
                         "input": inp, "output": outp}), "children": []}
        nodes[sp.span_id] = node
        parent = nodes.get(sp.parent_id) if sp.parent_id is not None else None
        (parent["children"] if parent is not None else roots).append(node)
    if len(roots) == 1:
        return roots[0]
    return {"type": "base", "name": "trace", "children": roots}


# ---- agent loop detection -------------------------------------------------------------------------
#: DeepEval's stop words for reasoning stagnation (agent_loop_detection.py)
LOOP_STOP_WORDS = frozenset(
    "the a an is are was were i will now based on information provided to of in and that this with for it my "
    "next step going so do be have has not but as or from at by about above below up its let".split())
_LOOP_WEIGHTS = {"tool_repetition": 0.40, "reasoning_stagnation": 0.35, "call_graph_cycles": 0.25}


def _walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n:
            out.append(n)
            stack.extend(reversed(n.get("children", [])))
    return out


def _repetition(tool_spans: list[dict[str, Any]], repeat: int) -> tuple[float, str]:
    counts: dict[tuple[Any, ...], int] = {}
    for sp in tool_spans:
        arg = sp.get("input", {})
        if isinstance(arg, str):
            try:
                arg = json.loads(arg)
            except ValueError:
                pass
        key = tuple(sorted((str(k), str(v)) for k, v in arg.items())) if isinstance(arg, dict) else (str(arg),)
        counts[(sp.get("name", ""), key)] = counts.get((sp.get("name", ""), key), 0) + 1
    if not counts:
        return 1.0, "no tool span"
    (name, _), n = max(counts.items(), key=lambda kv: kv[1])
    if n >= 2 * repeat:
        return 0.0, f"tool {name!r} called {n} times with identical arguments"
    if n >= repeat:
        return 0.5, f"tool {name!r} called {n} times with identical arguments"
    return 1.0, "tool calls within the repetition limit"


def _label(span: dict[str, Any]) -> str:
    raw = span.get("input", "")
    if isinstance(raw, dict):
        try:
            raw = json.dumps(raw, sort_keys=True)
        except (TypeError, ValueError):
            raw = str(raw)
    return f"{span.get('type', 'unknown')}:{span.get('name', 'unnamed')}:{str(raw)[:64]}"


def _cycle(root: dict[str, Any]) -> tuple[float, str]:
    path: list[str] = []

    def dfs(span: dict[str, Any], above: list[str]) -> bool:
        lab = _label(span)
        if lab in above:
            path.extend([*above[above.index(lab):], lab])
            return True
        above.append(lab)
        if any(dfs(ch, above) for ch in span.get("children", [])):
            return True
        above.pop()
        return False

    if dfs(root, []):
        return 0.0, "cycle in the call graph: " + " -> ".join(":".join(p.split(":", 2)[:2]) for p in path)
    return 1.0, "no cycle in the call graph"


def _words(text: str) -> list[str]:
    return [w for w in text.lower().split() if w not in LOOP_STOP_WORDS and len(w) > 2]


def _bigram_jaccard(a: list[str], b: list[str]) -> float:
    if len(a) < 2 or len(b) < 2:
        return 0.0
    x, y = set(zip(a, a[1:], strict=False)), set(zip(b, b[1:], strict=False))
    return len(x & y) / len(x | y) if x | y else 0.0


def _stagnation(llm_spans: list[dict[str, Any]], similar: float) -> tuple[float, str]:
    if len(llm_spans) < 2:
        return 1.0, "fewer than two LLM spans"
    top, pair = 0.0, (-1, -1)
    for i in range(len(llm_spans) - 1):
        a, b = llm_spans[i].get("output", ""), llm_spans[i + 1].get("output", "")
        if not isinstance(a, str) or not isinstance(b, str):
            continue
        wa, wb = _words(a), _words(b)
        if len(wa) < 20 or len(wb) < 20:  # DeepEval skips outputs under 20 meaningful words
            continue
        sim = max(_bigram_jaccard(wa, wb), SequenceMatcher(None, " ".join(wa), " ".join(wb)).ratio())
        if sim > top:
            top, pair = sim, (i, i + 1)
    if top >= similar:
        if top > 0.95:
            return 0.0, f"identical reasoning at LLM steps {pair[0]} and {pair[1]}"
        return 0.5, f"reasoning overlap {top:.2f} at LLM steps {pair[0]} and {pair[1]}"
    return 1.0, "no reasoning stagnation"


@metric("deepeval:agent_loop_detection", family="agent", requires=("question", "answer", "trace"),
        check=_params_check("deepeval:agent_loop_detection", lambda samples, ctx, **p: deepeval_agent_loop_detection(samples, ctx, **p)),
        defaults={"threshold": 0.5, "strict_mode": False, "repetition_threshold": 3, "similarity_threshold": 0.85,
                  "check_tool_repetition": True, "check_reasoning_stagnation": True, "check_call_graph_cycles": True},
        equals=_equals("AgentLoopDetectionMetric"), aliases=_aliases("AgentLoopDetectionMetric"),
        parity="Equals DeepEval 4.3.1 AgentLoopDetectionMetric on every input (deterministic in DeepEval too), "
               "on DeepEval's span tree made from the trace's spans (deepeval_trace_tree: kind -> type, "
               "name, input, output, children; a trace of tool calls only: an agent span over one tool span "
               "per call). DeepEval scores 0 when the test case carries no @observe trace; ragmeter needs a "
               "trace and gives no value without one.")
def deepeval_agent_loop_detection(samples: Sequence[Sample], ctx: Any, threshold: float = 0.5,
                                  strict_mode: bool = False, repetition_threshold: int = 3,
                                  similarity_threshold: float = 0.85, check_tool_repetition: bool = True,
                                  check_reasoning_stagnation: bool = True,
                                  check_call_graph_cycles: bool = True) -> list[Score]:
    """DeepEval's agent loop detection (AgentLoopDetectionMetric) over the trace's span tree
    (:func:`deepeval_trace_tree`), a weighted mean of three checks, each 1 (clean), 0.5 or 0:
    tool repetition (weight 0.40: the most repeated tool call with identical arguments, 0.5 at
    ``repetition_threshold`` calls, 0 at twice that), reasoning stagnation (0.35: consecutive LLM
    outputs of 20+ meaningful words whose similarity, the larger of bigram Jaccard and difflib's
    ratio after DeepEval's stop words, reaches ``similarity_threshold``: 0.5, above 0.95: 0) and
    call-graph cycles (0.25: a span whose type, name and input repeat on its own ancestry: 0).
    Score = sum(weight x check) / sum(weights of the checks run), 1 with none; ``strict_mode``: 0
    below 1. DeepEval refuses an empty answer (no value). Range [0, 1]."""
    name = "deepeval:agent_loop_detection"
    thr = _threshold(name, threshold, strict_mode)
    if not isinstance(repetition_threshold, int) or isinstance(repetition_threshold, bool):
        raise MetricError(f"{name}: repetition_threshold must be a whole number, got {repetition_threshold!r}")
    if not isinstance(similarity_threshold, int | float) or isinstance(similarity_threshold, bool):
        raise MetricError(f"{name}: similarity_threshold must be a number, got {similarity_threshold!r}")
    checks = {"tool_repetition": check_tool_repetition, "reasoning_stagnation": check_reasoning_stagnation,
              "call_graph_cycles": check_call_graph_cycles}
    for key, v in checks.items():
        if not isinstance(v, bool):
            raise MetricError(f"{name}: check_{key} must be true or false, got {v!r}")
    out = []
    for s in samples:
        if s.answer == "":
            out.append(Score.missing("empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)"))
            continue
        assert s.trace is not None
        root = deepeval_trace_tree(s.trace)
        spans = _walk(root)
        parts: dict[str, tuple[float, str]] = {}
        if check_tool_repetition:
            parts["tool_repetition"] = _repetition([x for x in spans if x.get("type") == "tool"], repetition_threshold)
        if check_reasoning_stagnation:
            parts["reasoning_stagnation"] = _stagnation([x for x in spans if x.get("type") == "llm"],
                                                        float(similarity_threshold))
        if check_call_graph_cycles:
            parts["call_graph_cycles"] = _cycle(root)
        weights = sum(_LOOP_WEIGHTS[k] for k in parts)
        value = sum(v * _LOOP_WEIGHTS[k] for k, (v, _) in parts.items()) / weights if weights else 1.0
        out.append(_finish(value, thr, strict_mode, {
            "checks": {k: {"score": v, "reason": r} for k, (v, r) in parts.items()},
            "summary": "; ".join(r for v, r in parts.values() if v < 1) or "no loop pattern"}))
    return out
