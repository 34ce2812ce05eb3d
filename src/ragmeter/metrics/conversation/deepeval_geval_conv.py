"""DeepEval 4.3.1's conversational G-Eval (``deepeval:conversational_g_eval``, ConversationalGEval):
criteria -> evaluation steps (one judge call per run, unless given) -> one call per conversation
scoring it 0-10, weighted by the judge's token probabilities where the provider gives them
(:func:`ragmeter.metrics.judge.geval.weighted_score`, DeepEval's rule), divided by 10.

``evaluation_params`` (required, as in DeepEval; ``content`` and ``role`` are always added) choose
what the judge reads: per turn ``content``, ``role``, ``retrieval_context``, ``tools_called``; for the
conversation ``scenario`` and ``expected_outcome``. In ``strict_mode`` DeepEval scores the plain
reply without log-probabilities and sets anything under 10 to 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ragmeter.conversations.model import Conversation, from_sample
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.conversation._base import FAMILY, template
from ragmeter.metrics.judge._common import fence_blocks, judge_check, tool_equals
from ragmeter.metrics.judge.geval import PLAIN, WEIGHTED, ReasonScore, Steps, weighted_score
from ragmeter.metrics.registry import MetricSpec, register_metric

NAME = "deepeval:conversational_g_eval"
#: DeepEval's MultiTurnParams -> the name in its prompts
TURN_PARAMS = {"content": "Content", "role": "Role", "retrieval_context": "Retrieval Context",
               "tools_called": "Tools Called"}
CONVERSATION_PARAMS = {"expected_outcome": "Expected Outcome", "scenario": "Scenario"}
DEFAULTS: dict[str, Any] = {"name": None, "criteria": None, "evaluation_steps": None, "evaluation_params": None,
                            "rubric": None, "threshold": 0.5, "strict_mode": False, "top_logprobs": 20}


def _config(p: dict[str, Any]) -> dict[str, Any]:
    criteria, steps, params = p.get("criteria"), p.get("evaluation_steps"), p.get("evaluation_params")
    if isinstance(params, str):
        params = [x.strip() for x in params.split(",") if x.strip()]
    known = {**TURN_PARAMS, **CONVERSATION_PARAMS}
    if not isinstance(params, list | tuple) or not params or any(x not in known for x in params):
        raise MetricError(f"{NAME} needs evaluation_params (as DeepEval): a non-empty list of {', '.join(known)}; "
                          f"got {params!r}")
    params = list(dict.fromkeys(params))
    params += [x for x in ("content", "role") if x not in params]  # DeepEval appends them
    if criteria is None and steps is None:
        raise MetricError(f"{NAME} needs criteria or evaluation_steps")
    if criteria is not None and (not isinstance(criteria, str) or not criteria.strip()):
        raise MetricError(f"{NAME}: criteria must be a non-empty text, got {criteria!r}")
    if steps is not None and (not isinstance(steps, list | tuple) or not steps
                              or not all(isinstance(x, str) and x.strip() for x in steps)):
        raise MetricError(f"{NAME}: evaluation_steps must be a non-empty list of texts, got {steps!r}")
    rubric = p.get("rubric")
    lines = []
    for r in rubric or []:
        rng = r.get("score_range") if isinstance(r, dict) else None
        if not (isinstance(rng, list | tuple) and len(rng) == 2 and all(isinstance(x, int) for x in rng)
                and 0 <= rng[0] <= rng[1] <= 10 and isinstance(r.get("expected_outcome"), str)):
            raise MetricError(f"{NAME}: a rubric entry needs score_range [low, high] in 0..10 and expected_outcome, "
                              f"got {r!r}")
        lines.append((rng[0], rng[1], r["expected_outcome"]))
    strict, thr, top = p.get("strict_mode", False), p.get("threshold", 0.5), p.get("top_logprobs", 20)
    if not isinstance(strict, bool):
        raise MetricError(f"{NAME}: strict_mode must be true or false, got {strict!r}")
    if not isinstance(thr, int | float) or isinstance(thr, bool) or not 0 <= thr <= 1:
        raise MetricError(f"{NAME}: threshold must be a number in [0, 1], got {thr!r}")
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= 20:
        raise MetricError(f"{NAME}: top_logprobs must be an integer in 0..20, got {top!r}")
    names = [known[x] for x in params]
    parameters = " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + ", and " + names[-1]
    return {"criteria": criteria, "steps": list(steps) if steps else None, "params": params, "strict": strict,
            "threshold": 1.0 if strict else float(thr), "top": top, "parameters": parameters,
            "rubric": sorted(lines)}


def _turns(conv: Conversation, params: list[str]) -> str:
    rows = []
    for t in conv.turns:
        if t.role not in ("user", "assistant"):
            continue
        row: dict[str, Any] = {}
        for p in params:
            if p == "content":
                row["content"] = t.content
            elif p == "role":
                row["role"] = t.role
            elif p == "retrieval_context" and t.contexts is not None:
                row["retrieval_context"] = [c.text or "" for c in t.contexts]
            elif p == "tools_called" and t.tool_calls:
                row["tools_called"] = [{"name": c.name, "input_parameters": c.arguments, "output": c.result}
                                       for c in t.tool_calls]
        rows.append(row)
    return json.dumps(rows, indent=2, ensure_ascii=False, default=str)


class ConversationalGEval:
    """The batch function (steps once per run, then one score call per conversation)."""

    name = NAME

    def _steps(self, cfg: dict[str, Any], judge: Any) -> tuple[list[str] | None, Any]:
        from ragmeter.llm.request import JudgeRequest

        if cfg["steps"] is not None:
            return cfg["steps"], None
        tpl = template("deepeval_conversational_g_eval_steps")
        req = JudgeRequest(metric=self.name, sample_id=None, system=tpl.system(parameters=cfg["parameters"],
                                                                                criteria=cfg["criteria"]),
                           user=fence_blocks([("TASK", "Write the evaluation steps for the criteria above.")]),
                           schema=Steps, template_version=tpl.version, expected_output_tokens=150)
        res = judge.submit([req])[0]
        return (list(res.value.steps) if res.ok else None), res

    def _requests(self, samples: Sequence[Sample], cfg: dict[str, Any], steps: Sequence[str]) -> list[Any]:
        from ragmeter.llm.request import JudgeRequest

        tpl = template("deepeval_conversational_g_eval_score")
        rubric = ("\nRubric:\n" + "\n".join(f"{a}: {o}" if a == b else f"{a}-{b}: {o}" for a, b, o in cfg["rubric"])
                  + "\n") if cfg["rubric"] else ""
        system = tpl.system(what="Evaluation Steps and a Rubric" if rubric else "Evaluation Steps",
                            how=("by how well the conversation follows the rubric and the evaluation steps" if rubric
                                 else "by how well the conversation follows the evaluation steps"),
                            steps="".join(f"{i}. {s}\n" for i, s in enumerate(steps, 1)), rubric=rubric,
                            parameters=cfg["parameters"])
        out: list[Any] = []
        for s in samples:
            conv = from_sample(s)
            missing = next((p for p in cfg["params"] if p in CONVERSATION_PARAMS and getattr(conv, p) is None), None)
            if missing is not None:
                out.append(Score.missing(f"no {missing}: DeepEval refuses the test case ('{missing}' cannot be empty)"))
                continue
            blocks = [("PER-TURN FIELDS", _turns(conv, cfg["params"]))]
            level = [f"{CONVERSATION_PARAMS[p]}:\n{getattr(conv, p)}" for p in cfg["params"] if p in CONVERSATION_PARAMS]
            if level:
                blocks.append(("CONVERSATION-LEVEL FIELDS", "\n\n".join(level)))

            def check(v: ReasonScore) -> None:
                if not 0 <= v.score <= 10:
                    raise ValueError(f"score must lie between 0 and 10, got {v.score}")

            out.append(JudgeRequest(metric=self.name, sample_id=s.id, system=system, user=fence_blocks(blocks),
                                    schema=ReasonScore, template_version=tpl.version, expected_output_tokens=120,
                                    validate=check,
                                    logprobs=cfg["top"] if not cfg["strict"] and cfg["top"] else None))
        return out

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        cfg = _config(params)
        judge = ctx.service("judge")
        steps, res = self._steps(cfg, judge)
        if steps is None:
            if res is None or res.status != "dry_run":
                return
            steps = ["(the evaluation steps generated from the criteria)"] * 4  # dry run: estimate only
        judge.prefetch([r for r in self._requests(samples, cfg, steps) if not isinstance(r, Score)])

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        cfg = _config(params)
        judge = ctx.service("judge")
        steps, res = self._steps(cfg, judge)
        if steps is None:
            why = res.missing()
            return [Score.missing(f"evaluation steps: {why.reason}", why.details) for _ in samples]
        reqs = self._requests(samples, cfg, steps)
        out = [r if isinstance(r, Score) else Score.missing("not judged") for r in reqs]
        pending = [(i, r) for i, r in enumerate(reqs) if not isinstance(r, Score)]
        if pending:
            for (i, _), r in zip(pending, judge.submit([r for _, r in pending]), strict=True):
                out[i] = _score(r.value, r.logprobs, cfg, steps) if r.ok else r.missing({"steps": list(steps)})
        return out


def _score(v: ReasonScore, logprobs: Any, cfg: dict[str, Any], steps: Sequence[str]) -> Score:
    details: dict[str, Any] = {"reason": v.reason, "score": v.score, "steps": list(steps), "strict_mode": cfg["strict"]}
    if cfg["strict"]:  # DeepEval: the plain score, then anything under the threshold (1) is 0
        g, method = float(v.score), "strict (the plain score; under 10 is 0)"
    else:
        g, method = weighted_score(v.score, logprobs) if logprobs else (float(v.score), PLAIN)
    details["score_method"] = method
    if method == WEIGHTED:
        details["weighted_score"] = g
    value = g / 10
    if cfg["strict"] and value < cfg["threshold"]:
        value = 0.0
    if not 0.0 <= value <= 1.0:
        return Score.missing(f"the weighted score {g:.3f} lies outside DeepEval's 0-10 scale", details)
    details.update(threshold=cfg["threshold"], success=value >= cfg["threshold"],
                   summary=f"{v.score} of 10 ({method}): {value:.3f}. {v.reason}".strip())
    return Score(value, details=details)


def _check(ctx: Any, **params: Any) -> str | None:
    try:
        _config(params)
    except MetricError as exc:
        return str(exc)
    return judge_check(ctx)


_metric = ConversationalGEval()
register_metric(MetricSpec(
    name=NAME, family=FAMILY, fn=_metric, requires=("conversation",), needs_llm=True, defaults=dict(DEFAULTS),
    prepare=_metric.prepare, check=_check, batch_size=64, scope="conversation",
    equals=tool_equals("deepeval", "ConversationalGEval"),
    aliases=("ConversationalGEval", "deepeval.metrics.ConversationalGEval"),
    description="""DeepEval's conversational G-Eval (ConversationalGEval): criteria are turned into 3-4 evaluation
    steps (one judge call per run, unless evaluation_steps are given); each conversation gets one call
    returning a reason and a score from 0 to 10 over the evaluation_params it reads (per turn: content,
    role, retrieval_context, tools_called; per conversation: scenario, expected_outcome). With the reply's
    token log-probabilities the score is g = sum_s s x p(s) / sum_s p(s) over the score token's decimal
    alternatives with p >= 0.01, else the plain score; value = g / 10. strict_mode: the plain score, 0
    under 10. One value per conversation. Needs a judge.""",
    parity="DeepEval 4.3.1 ConversationalGEval given the same evaluation steps, reply and token "
           "log-probabilities: its /10 scale, its weighting, strict_mode (plain score, 0 under the threshold 1), "
           "threshold; a conversation missing a conversation-level field it reads is refused, as DeepEval does."))
