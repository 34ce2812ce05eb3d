"""Agent metrics: intent, plan, tool choice precision / recall, trajectory match and final-answer
quality, registered under their config keys.

The pieces they use live in small modules and are re-exported here: trace reading in
:mod:`ragmeter.io.traces`, expectations and presets in :mod:`ragmeter.metrics.agent.config`, the formulas in
:mod:`ragmeter.metrics.agent.formulas`, trajectory matching in :mod:`ragmeter.metrics.agent.matching`, execution
statistics of traces in :mod:`ragmeter.metrics.agent.execution` (of a stored run:
:mod:`ragmeter.analysis.agent_execution`); the LLM trajectory judge is
:mod:`ragmeter.metrics.judge.trajectory`. Every expectation (expected tools per task type, expected
trajectory, plan keywords, required output fields and their validators) is data: the run options
(``options.agent`` and/or ``options.agent_preset``, e.g. the bundled ``credit_risk`` preset) or a
sample's metadata (``expected_tools``, ``expected_trajectory``, ``expected_tool_calls`` ...). See
``docs/agent.md``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import AgentTrace, Sample, Score
from ragmeter.io.traces import TRACE_ALIASES, parse_trace
from ragmeter.metrics.agent.config import AgentConfig, agent_config, load_preset, preset_names
from ragmeter.metrics.agent.execution import STAT_FIGURES, describe, execution_stats
from ragmeter.metrics.agent.formulas import (
    _clean,
    _order_value,
    final_answer_score,
    intent_score,
    jaccard,
    order_pairs,
    order_score,
    plan_score,
    tool_precision,
    tool_recall,
    trajectory_score,
)
from ragmeter.metrics.agent.lookup import lookup
from ragmeter.metrics.agent.matching import (
    ARG_MODES,
    MATCH_MODES,
    Step,
    _args_match,
    _steps_of,
    match_trajectory,
    reference_calls,
)
from ragmeter.metrics.registry import metric


def _check_config(ctx: Any, **_: Any) -> str | None:
    agent_config(ctx.options)  # raises ConfigError before any work when the expectations are invalid
    return None


# =============================================================================================
# The formulas, as plain functions


# =============================================================================================
# Metrics
# =============================================================================================

def _task_type(sample: Sample, cfg: AgentConfig) -> str | None:
    for src in cfg.task_type:
        v = lookup(sample, src)
        if v is not None and v != "":
            return str(v)
    return None


def _expected_tools(sample: Sample, cfg: AgentConfig) -> tuple[frozenset[str] | None, dict[str, Any], str | None]:
    meta = sample.metadata.get("expected_tools")
    if meta is not None:
        if not isinstance(meta, list) or not all(isinstance(x, str) for x in meta):
            return None, {}, "metadata.expected_tools must be a list of tool names"
        return frozenset(cfg.canon(n) for n in meta), {"source": "metadata.expected_tools"}, None
    if cfg.expected_tools is None:
        return None, {}, ("no expected tools: set options.agent.expected_tools (per task type), "
                          "an agent_preset, or metadata.expected_tools")
    if isinstance(cfg.expected_tools, frozenset):
        return cfg.expected_tools, {"source": "agent.expected_tools"}, None
    t = _task_type(sample, cfg)
    if t is None:
        return None, {}, f"no task type for this sample (looked at {', '.join(cfg.task_type)})"
    if t not in cfg.expected_tools:
        return None, {"task_type": t}, (f"no expected tools for task type {t!r} "
                                        f"(known: {', '.join(sorted(cfg.expected_tools))})")
    return cfg.expected_tools[t], {"source": "agent.expected_tools", "task_type": t}, None


def _tool_scores(samples: Sequence[Sample], ctx: Any, which: str) -> list[Score]:
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        expected, info, why = _expected_tools(s, cfg)
        if expected is None:
            out.append(Score.missing(why or "no expected tools", details=info or None))
            continue
        selected = {cfg.canon(c.name) for c in s.trace.tool_calls}
        details = {**info, "expected": sorted(expected), "selected": sorted(selected),
                   "correct": sorted(selected & expected)}
        if which == "precision":
            details["unexpected"] = sorted(selected - expected)
            out.append(Score(tool_precision(selected, expected), details=details))
        else:
            details["missing"] = sorted(expected - selected)
            out.append(Score(tool_recall(selected, expected), details=details))
    return out


@metric("tool_choice_correctness", family="agent", requires=("trace",), check=_check_config,
        aliases=("tool_precision",), span_kinds=("tool", "trace", "agent"))
def tool_choice_correctness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Tool choice correctness (precision): the share of the distinct tools the agent called that
    the task needed, ``|expected ∩ selected| / |selected|`` (the agent-evaluation guide; see :func:`tool_precision`).

    Expected tools come from ``metadata.expected_tools``, else ``options.agent.expected_tools``
    for the sample's task type (``agent.task_type`` sources: ground truth first, then the type the
    agent parsed). No expectation for a sample -> no value, with the reason. Tool names are mapped
    through ``agent.tool_aliases``. Scored per span (``--per-span``), a tool span's value is 1 when
    the tool it called was expected, else 0.
    """
    return _tool_scores(samples, ctx, "precision")


@metric("tool_completeness", family="agent", requires=("trace",), check=_check_config,
        aliases=("tool_recall",))
def tool_completeness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Tool completeness (recall): the share of the expected tools the agent called,
    ``|expected ∩ selected| / |expected|`` (the agent-evaluation guide; see :func:`tool_recall`).

    Expected tools are resolved as for ``tool_choice_correctness``.
    """
    return _tool_scores(samples, ctx, "recall")


@metric("tool_correctness", family="agent", requires=("trace",), check=_check_config,
        span_kinds=("tool", "trace", "agent"))
def tool_correctness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Tool correctness: correctly used tools / expected tools, ``|expected ∩ selected| / |expected|``
    over the distinct tool names -- DeepEval's ToolCorrectnessMetric with its default options
    (``deepeval:tool_correctness`` is DeepEval's exactly, repeated calls and every option included).
    On a whole trace it equals ``tool_completeness``. Scored per span (``--per-span``), a tool
    span's value is 1 when the tool it called was expected, else 0; the trace's and each agent's
    rows are scored as a trace.

    Expected tools are resolved as for ``tool_choice_correctness``.
    """
    tool_rows = [i for i, s in enumerate(samples) if s.metadata.get("span_kind") == "tool"]
    if not tool_rows:
        return _tool_scores(samples, ctx, "recall")
    out: list[Score | None] = [None] * len(samples)
    rest = [i for i in range(len(samples)) if i not in set(tool_rows)]
    for idx, which in ((tool_rows, "precision"), (rest, "recall")):
        for i, sc in zip(idx, _tool_scores([samples[i] for i in idx], ctx, which), strict=True):
            out[i] = sc
    return [sc for sc in out if sc is not None]


def _reference(sample: Sample, cfg: AgentConfig) -> tuple[list[Step] | None, str, str | None]:
    """The expected trajectory: ``(steps, kind, why_missing)``; kind is ``calls`` or ``steps``."""
    meta = sample.metadata
    t = None
    try:
        if meta.get("expected_tool_calls") is not None:
            return [Step(cfg.canon(s.name), s.arguments, s.turn, s.invalid_arguments)
                    for s in reference_calls(meta["expected_tool_calls"], "metadata.expected_tool_calls")], \
                "calls", None
    except ConfigError as exc:
        return None, "calls", str(exc)
    if meta.get("expected_trajectory") is not None:
        tr = meta["expected_trajectory"]
        if not isinstance(tr, list) or not all(isinstance(x, str) for x in tr):
            return None, "steps", "metadata.expected_trajectory must be a list of step names"
        return [Step(cfg.canon(n)) for n in tr], "steps", None
    for attr, kind in (("expected_tool_calls", "calls"), ("expected_trajectory", "steps")):
        val = getattr(cfg, attr)
        if val is None:
            continue
        if isinstance(val, dict):
            t = _task_type(sample, cfg)
            if t is None or t not in val:
                continue
            val = val[t]
        return _config_steps(val), kind, None
    why = "no expected trajectory: set options.agent.expected_trajectory (or expected_tool_calls), " \
          "an agent_preset, or metadata.expected_trajectory"
    if t is not None:
        why += f" (none for task type {t!r})"
    return None, "steps", why


def _config_steps(val: tuple[Any, ...]) -> list[Step]:
    # config expectations are canonical already (tool aliases applied in _build_config)
    return [v if isinstance(v, Step) else Step(v) for v in val]


def _actual(trace: AgentTrace, kind: str, cfg: AgentConfig) -> list[Step]:
    if kind == "steps" and trace.trajectory is not None:
        return [Step(cfg.canon(n)) for n in trace.trajectory]
    return _steps_of(trace.tool_calls, cfg.canon)


def _check_trajectory(ctx: Any, mode: str = "jaccard_order", tool_args: str = "exact",
                      tool_args_overrides: Any = None, **_: Any) -> str | None:
    agent_config(ctx.options)
    if mode not in MATCH_MODES:
        raise ConfigError(f"trajectory_match mode must be one of {', '.join(MATCH_MODES)}, got {mode!r}")
    if tool_args not in ARG_MODES:
        raise ConfigError(f"trajectory_match tool_args must be one of {', '.join(ARG_MODES)}, got {tool_args!r}")
    if tool_args_overrides is not None:
        if not isinstance(tool_args_overrides, Mapping) or not all(
                v in ARG_MODES or (isinstance(v, list) and all(isinstance(k, str) for k in v))
                for v in tool_args_overrides.values()):
            raise ConfigError("trajectory_match tool_args_overrides must map tool names to an argument "
                              f"mode ({', '.join(ARG_MODES)}) or a list of argument keys")
    return None


@metric("trajectory_match", family="agent", requires=("trace",), check=_check_trajectory, param="mode",
        defaults={"mode": "jaccard_order", "tool_args": "exact", "tool_args_overrides": None})
def trajectory_match(samples: Sequence[Sample], ctx: Any, mode: str = "jaccard_order", tool_args: str = "exact",
                     tool_args_overrides: Mapping[str, Any] | None = None) -> list[Score]:
    """Trajectory match: did the agent follow the expected path?

    ``mode="jaccard_order"`` (default, the agent-evaluation guide): ``0.6 * J + 0.4 * O`` (weights from
    ``agent.trajectory``), where ``J`` is the Jaccard similarity of the sets of step names and
    ``O`` = correct_order_pairs / total_pairs: over consecutive steps ``(a, b)`` of the agent's
    trajectory that both occur in the expected trajectory, the share where ``b`` comes strictly
    later than ``a`` in the expected trajectory (see :func:`order_pairs`, :func:`order_score`).

    ``mode`` = ``strict`` | ``unordered`` | ``subset`` | ``superset`` (``trajectory_match@strict``):
    1.0 when the agent's tool calls match the expected ones in that sense, else 0.0, with
    tool-argument matching ``tool_args`` = ``exact`` | ``ignore`` | ``subset`` | ``superset`` and
    per-tool ``tool_args_overrides`` (see :func:`match_trajectory`).

    The expected trajectory: ``metadata.expected_tool_calls`` (calls with arguments) or
    ``metadata.expected_trajectory`` (step names), else ``agent.expected_tool_calls`` /
    ``agent.expected_trajectory`` (one list, or per task type). The agent's side: the trace's
    ``trajectory`` when the expectation is step names and the trace has one, else its tool calls.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        ref, kind, why = _reference(s, cfg)
        if ref is None:
            out.append(Score.missing(why or "no expected trajectory"))
            continue
        act = _actual(s.trace, kind, cfg)
        if mode == "jaccard_order":
            a, e = [x.name for x in act], [x.name for x in ref]
            if not e:
                out.append(Score.missing("the expected trajectory is empty"))
                continue
            correct, total = order_pairs(a, e)
            j, o = jaccard(a, e), _order_value(correct, total, a, e)
            value = _clean((cfg.jaccard_weight * j + cfg.order_weight * o) / (cfg.jaccard_weight + cfg.order_weight))
            out.append(Score(value, details={
                "jaccard": j, "order_score": o, "correct_pairs": correct, "total_pairs": total,
                "expected": e, "actual": a, "missing": sorted(set(e) - set(a)),
                "unexpected": sorted(set(a) - set(e))}))
        else:
            ok, reason = match_trajectory(act, ref, mode, tool_args, tool_args_overrides)
            details: dict[str, Any] = {"mode": mode, "tool_args": tool_args,
                                       "expected": [x.name for x in ref], "actual": [x.name for x in act]}
            if reason:
                details["reason"] = reason
            out.append(Score(1.0 if ok else 0.0, details=details))
    return out


def _check_arguments(ctx: Any, tool_args: str = "exact", **_: Any) -> str | None:
    agent_config(ctx.options)
    if tool_args not in ARG_MODES or tool_args == "ignore":
        raise ConfigError(f"argument_correctness tool_args must be one of exact, subset, superset, got {tool_args!r}")
    return None


@metric("argument_correctness", family="agent", requires=("trace",), check=_check_arguments, param="tool_args",
        defaults={"tool_args": "exact"}, span_kinds=("tool", "trace", "agent"))
def argument_correctness(samples: Sequence[Sample], ctx: Any, tool_args: str = "exact") -> list[Score]:
    """Argument correctness: the share of the agent's calls of an expected tool whose arguments
    match an expected call of that tool, ``|calls with matching arguments| / |calls of expected
    tools|``. Arguments match as ``tool_args`` says (``exact``: equal; ``subset``: the call's
    arguments are among the expected ones; ``superset``: the call has every expected argument);
    an expected call without ``arguments`` accepts any. Expected calls come from
    ``metadata.expected_tool_calls``, else ``agent.expected_tool_calls`` (per task type). A call of
    a tool that no expected call names is not counted (that is tool choice:
    ``tool_choice_correctness``); no call of an expected tool -> no value, with the reason. Scored
    per span (``--per-span``), a tool span's value is 1 when its arguments match, else 0.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        ref, kind, why = _reference(s, cfg)
        if ref is None or kind != "calls":
            # the expected calls this metric reads, not _reference's 'no expected trajectory'
            task = why[why.index(" (none for task type"):] if why and " (none for task type" in why else ""
            out.append(Score.missing("no expected tool calls with arguments: set metadata.expected_tool_calls, "
                                     "options.agent.expected_tool_calls or an agent_preset" + task))
            continue
        by_tool: dict[str, list[Step]] = {}
        for r in ref:
            by_tool.setdefault(r.name, []).append(r)
        judged = []
        for call in _steps_of(s.trace.tool_calls, cfg.canon):
            if call.name in by_tool:
                ok = any(_args_match(call, r, tool_args) for r in by_tool[call.name])
                judged.append({"tool": call.name, "arguments": call.arguments, "correct": ok})
        if not judged:
            out.append(Score.missing("no call of an expected tool", details={"expected": sorted(by_tool)}))
            continue
        k = sum(1 for j in judged if j["correct"])
        out.append(Score(k / len(judged), details={"calls": judged, "tool_args": tool_args,
                                                   "summary": f"{k} of {len(judged)} calls with the expected arguments"}))
    return out


@metric("intent_correctness", family="agent", requires=("trace",), check=_check_config)
def intent_correctness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Intent correctness: did the agent parse the request right? Points for the entity (0.4),
    the type (0.3) and the parse confidence (0.3 / 0.2 / 0.1 above 0.7 / 0.5 / 0.3), divided by
    their total — the agent-evaluation guide's rubric, configurable under ``agent.intent`` (see :func:`intent_score`).

    The expected entity comes from ``agent.entity`` sources (default ``metadata.expected_entity``,
    ``metadata.entity``; the credit_risk preset reads ``metadata.company``). No intent in the
    trace, or no expected entity -> no value, with the reason.
    """
    cfg = agent_config(ctx.options)
    rub = cfg.intent
    out = []
    for s in samples:
        assert s.trace is not None
        if s.trace.intent is None:
            out.append(Score.missing("the trace has no intent"))
            continue
        entity = next((v for v in (lookup(s, src) for src in cfg.entity) if v is not None), None)
        if entity is None:
            out.append(Score.missing(f"no expected entity (looked at {', '.join(cfg.entity)})"))
            continue
        etype = None
        if rub.type_check == "match":
            etype = next((v for v in (lookup(s, src) for src in rub.expected_type) if v is not None), None)
            if etype is None:
                out.append(Score.missing(f"no expected type (looked at {', '.join(rub.expected_type)})"))
                continue
        value, details = intent_score(s.trace.intent, str(entity), rub, None if etype is None else str(etype))
        out.append(Score(value, details=details))
    return out


@metric("plan_quality", family="agent", requires=("trace",), check=_check_config)
def plan_quality(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Plan quality: points for a plan of a sensible size and for steps that mention each
    keyword group, divided by their total (see :func:`plan_score`; the agent-evaluation guide: 3-10 steps 0.3, a
    data-gathering step 0.35, an analysis step 0.35). The rubric is ``agent.plan``; without one,
    or without a plan in the trace, no value.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        if cfg.plan is None:
            out.append(Score.missing("no plan rubric: set options.agent.plan or an agent_preset"))
        elif s.trace.plan is None:
            out.append(Score.missing("the trace has no plan"))
        else:
            v, d = plan_score(s.trace.plan, cfg.plan)
            out.append(Score(v, details=d))
    return out


@metric("final_answer_quality", family="agent", requires=("trace",), check=_check_config)
def final_answer_quality(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Final answer quality: required-field completeness plus validity checks of the agent's
    structured output, divided by the total points (see :func:`final_answer_score`; the agent-evaluation guide:
    0.5 completeness, 0.15 risk level, 0.15 credit score, 0.10 confidence, 0.10 reasoning). The
    rubric is ``agent.final_answer``; without one, or without ``final_output`` (a JSON object),
    no value.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        if cfg.final_answer is None:
            out.append(Score.missing("no final-answer rubric: set options.agent.final_answer or an agent_preset"))
        elif s.trace.final_output is None:
            out.append(Score.missing("the trace has no final_output (a JSON object)"))
        else:
            v, d = final_answer_score(s.trace.final_output, cfg.final_answer)
            out.append(Score(v, details=d))
    return out


# =============================================================================================
# LLM trajectory judge


__all__ = [
    "ARG_MODES", "MATCH_MODES", "STAT_FIGURES", "TRACE_ALIASES", "AgentConfig", "Step", "agent_config",
    "describe", "execution_stats", "final_answer_quality", "final_answer_score", "intent_correctness",
    "intent_score", "jaccard", "load_preset", "lookup", "match_trajectory", "order_pairs", "order_score",
    "parse_trace", "plan_quality", "plan_score", "preset_names", "reference_calls", "tool_choice_correctness",
    "tool_completeness", "tool_correctness", "tool_precision", "tool_recall", "trajectory_match", "trajectory_score",
]

from ragmeter.metrics.agent import deepeval_agent  # noqa: E402, F401 - registers DeepEval's deterministic agent metrics
