"""DeepEval's G-Eval (``deepeval:g_eval``): criteria -> generated evaluation steps -> a score on
the rubric's range, weighted by the judge's token probabilities where the provider gives them.

The algorithm is DeepEval 4.3.1's ``GEval`` (after Liu et al., "G-Eval: NLG Evaluation using GPT-4
with Better Human Alignment", 2023): one call turns the criteria into 3-4 evaluation steps (once
per run and criteria, cached like every verdict; skipped when ``evaluation_steps`` are given), then
one call per sample returns ``{"reason", "score"}``. With the reply's token log-probabilities
(OpenAI-compatible judges; ``top_logprobs`` 20) the score is DeepEval's probability-weighted sum
over the score token's decimal alternatives of probability >= 1%; otherwise the plain score.
``details["score_method"]`` says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import (
    Verdict,
    context_blocks,
    fence_blocks,
    judge_check,
    load_template,
    tool_equals,
)
from ragmeter.metrics.registry import MetricSpec, register_metric

NAME = "deepeval:g_eval"
#: DeepEval's evaluation params -> (block label, the name in DeepEval's prompt, the sample's value)
PARAMS: dict[str, tuple[str, str, Any]] = {
    "input": ("INPUT", "Input", lambda s: s.question),
    "actual_output": ("ACTUAL OUTPUT", "Actual Output", lambda s: s.answer),
    "expected_output": ("EXPECTED OUTPUT", "Expected Output", lambda s: s.reference),
    "context": ("CONTEXT", "Context", lambda s: None if s.relevant is None else [c.text or "" for c in s.relevant]),
    "retrieval_context": ("RETRIEVAL CONTEXT", "Retrieval Context",
                          lambda s: None if s.contexts is None else s.context_texts),
}
#: run options read when the metric's own parameter is not set (``--option g_eval_criteria=...``)
OPTION = {"criteria": "g_eval_criteria", "evaluation_steps": "g_eval_evaluation_steps",
          "evaluation_params": "g_eval_params", "rubric": "g_eval_rubric", "score_range": "g_eval_score_range",
          "strict_mode": "g_eval_strict_mode", "threshold": "g_eval_threshold"}
DEFAULTS: dict[str, Any] = {"criteria": None, "evaluation_steps": None, "evaluation_params": None,
                            "rubric": None, "score_range": None, "strict_mode": False, "threshold": 0.5,
                            "top_logprobs": 20}
PLAIN = "plain score (the judge returned no token log-probabilities)"
WEIGHTED = "probability-weighted (token log-probabilities)"


class Steps(Verdict):
    steps: list[str] = Field(min_length=1)


class ReasonScore(Verdict):
    reason: str
    score: int | float


@dataclass(frozen=True)
class Config:
    """A G-Eval definition, validated."""

    criteria: str | None
    steps: tuple[str, ...] | None
    params: tuple[str, ...]
    rubric: tuple[tuple[int, int, str], ...] | None
    low: int
    high: int
    strict: bool
    threshold: float
    top_logprobs: int

    @property
    def parameters(self) -> str:
        """DeepEval's ``construct_g_eval_params_string``: "Input and Actual Output"."""
        names = [PARAMS[p][1] for p in self.params]
        if len(names) <= 2:
            return " and ".join(names)
        return ", ".join(names[:-1]) + ", and " + names[-1]


def _option(p: dict[str, Any], options: dict[str, Any], key: str) -> Any:
    """The metric's parameter when set (not its default), else the run option, else the default."""
    v = p.get(key, DEFAULTS.get(key))
    if v == DEFAULTS.get(key) and OPTION[key] in options:
        return options[OPTION[key]]
    return v


def config(p: dict[str, Any], options: dict[str, Any] | None = None) -> Config:
    """The G-Eval definition from the metric's parameters, else the ``g_eval_*`` run options.

    Raises:
        MetricError: no criteria and no steps, or a malformed parameter (named).
    """
    opts = options or {}
    criteria, steps = _option(p, opts, "criteria"), _option(p, opts, "evaluation_steps")
    if criteria is None and steps is None:
        raise MetricError(f"{NAME} needs criteria or evaluation steps: --option g_eval_criteria=\"...\" "
                          "(or the parameters criteria / evaluation_steps, or --option "
                          "g_eval_evaluation_steps='[\"...\"]')")
    if criteria is not None:
        criteria = str(criteria)
        if not criteria.strip():
            raise MetricError(f"{NAME}: criteria cannot be an empty text")
    if steps is not None:
        if isinstance(steps, str):
            steps = [steps]
        if not isinstance(steps, list | tuple) or not steps or not all(isinstance(x, str) and x.strip() for x in steps):
            raise MetricError(f"{NAME}: evaluation_steps must be a non-empty list of texts, got {steps!r}")
    params = _option(p, opts, "evaluation_params") or ["input", "actual_output"]
    if isinstance(params, str):
        params = [x.strip() for x in params.split(",") if x.strip()]
    if not isinstance(params, list | tuple) or not params or any(x not in PARAMS for x in params):
        raise MetricError(f"{NAME}: evaluation_params must be a non-empty list of {', '.join(PARAMS)}; got {params!r}")
    rubric = _rubric(_option(p, opts, "rubric"))
    low, high = _range(_option(p, opts, "score_range"), rubric)
    strict = _option(p, opts, "strict_mode")
    if not isinstance(strict, bool):
        raise MetricError(f"{NAME}: strict_mode must be true or false, got {strict!r}")
    thr = _option(p, opts, "threshold")
    if not isinstance(thr, int | float) or isinstance(thr, bool) or not 0 <= thr <= 1:
        raise MetricError(f"{NAME}: threshold must be a number in [0, 1], got {thr!r}")
    top = p.get("top_logprobs", 20)
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= 20:
        raise MetricError(f"{NAME}: top_logprobs must be an integer in 0..20, got {top!r}")
    return Config(criteria, tuple(steps) if steps else None, tuple(dict.fromkeys(params)), rubric, low, high,
                  strict, float(thr), top)


def _rubric(rubric: Any) -> tuple[tuple[int, int, str], ...] | None:
    """DeepEval's ``Rubric`` list, validated and sorted as ``validate_and_sort_rubrics`` does."""
    if not rubric:
        return None
    if not isinstance(rubric, list | tuple):
        raise MetricError(f"{NAME}: rubric must be a list of {{score_range: [low, high], expected_outcome}}")
    out = []
    for r in rubric:
        rng = r.get("score_range") if isinstance(r, dict) else None
        outcome = r.get("expected_outcome") if isinstance(r, dict) else None
        if (not isinstance(rng, list | tuple) or len(rng) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                          for x in rng) or not isinstance(outcome, str)):
            raise MetricError(f"{NAME}: a rubric entry needs score_range [low, high] (integers) and "
                              f"expected_outcome (text), got {r!r}")
        a, b = rng
        if not (0 <= a <= 10 and 0 <= b <= 10) or a > b:
            raise MetricError(f"{NAME}: rubric score_range {list(rng)} must lie in 0..10 with low <= high (DeepEval)")
        out.append((a, b, outcome))
    out.sort(key=lambda r: r[0])
    for i in range(len(out)):
        for j in range(i + 1, len(out)):
            if out[i][1] >= out[j][0]:
                raise MetricError(f"{NAME}: overlapping rubric score ranges {list(out[i][:2])} and {list(out[j][:2])}")
    return tuple(out)


def _range(score_range: Any, rubric: tuple[tuple[int, int, str], ...] | None) -> tuple[int, int]:
    if rubric is not None:  # DeepEval: from the first rubric's low to the last one's high
        if score_range is not None and list(score_range) != [rubric[0][0], rubric[-1][1]]:
            raise MetricError(f"{NAME}: score_range {score_range!r} disagrees with the rubric's "
                              f"{[rubric[0][0], rubric[-1][1]]}; give one of them")
        return rubric[0][0], rubric[-1][1]
    if score_range is None:
        return 0, 10
    if (not isinstance(score_range, list | tuple) or len(score_range) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in score_range)
            or score_range[0] >= score_range[1]):
        raise MetricError(f"{NAME}: score_range must be two integers [low, high] with low < high, got {score_range!r}")
    return int(score_range[0]), int(score_range[1])


def weighted_score(raw: Any, logprobs: Sequence[dict[str, Any]]) -> tuple[float, str]:
    """DeepEval 4.3.1 ``calculate_weighted_summed_score``: at the last reply token equal to the
    score's text, the probability-weighted mean of the decimal alternatives of probability
    >= 1%; the raw score when no token is the score or no alternative is left. Returns the score
    and how it was obtained (``details["score_method"]``)."""
    target = str(raw)
    tok = next((t for t in reversed(logprobs) if t.get("token") == target), None)
    if tok is None:
        return float(raw), PLAIN.replace("returned no token log-probabilities",
                                         "gave no log-probabilities for the score's token")
    probs: dict[int, float] = {}
    total = 0.0
    floor = math.log(0.01)
    for alt in tok.get("top_logprobs") or []:
        lp = alt["logprob"]
        if lp < floor or not alt["token"].isdecimal():
            continue
        p = math.exp(lp)
        score = int(alt["token"])
        probs[score] = probs.get(score, 0.0) + p
        total += p
    if total == 0:
        return float(raw), PLAIN.replace("returned no token log-probabilities",
                                         "gave no decimal alternative of probability >= 1% for the score's token")
    weighted = 0.0
    for score, p in probs.items():
        weighted += score * p
    return weighted / total, WEIGHTED


@dataclass
class GEvalMetric:
    """The batch function of ``deepeval:g_eval`` (steps once, then one score call per sample)."""

    name: str = NAME

    def _steps_request(self, cfg: Config) -> Any:
        from ragmeter.llm.request import JudgeRequest

        tpl = load_template("g_eval_steps")
        return JudgeRequest(metric=self.name, sample_id=None, system=tpl.system(parameters=cfg.parameters,
                                                                                 criteria=cfg.criteria),
                            user=fence_blocks([("TASK", "Write the evaluation steps for the criteria above.")]),
                            schema=Steps, template_version=tpl.version, expected_output_tokens=150)

    def _steps(self, cfg: Config, judge: Any) -> tuple[tuple[str, ...] | None, Any]:
        """The evaluation steps, generated when not given, and the steps call's result."""
        if cfg.steps is not None:
            return cfg.steps, None
        res = judge.submit([self._steps_request(cfg)])[0]
        return (tuple(res.value.steps) if res.ok else None), res

    def _requests(self, samples: Sequence[Sample], cfg: Config, steps: Sequence[str]) -> list[Any]:
        from ragmeter.llm.request import JudgeRequest

        numbered = "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 1))
        if cfg.strict:
            tpl = load_template("g_eval_strict")
            system = tpl.system(parameters=cfg.parameters, steps=numbered)
        else:
            tpl = load_template("g_eval_score")
            rubric = ("\nRubric:\n" + "\n".join(f"{a}: {o}" if a == b else f"{a}-{b}: {o}" for a, b, o in cfg.rubric)
                      + "\n") if cfg.rubric else ""
            meaning = ("based on the rubric provided" if cfg.rubric else
                       f"with {cfg.high} indicating strong alignment with the evaluation steps and "
                       f"{cfg.low} indicating no alignment")
            system = tpl.system(what="evaluation steps and rubric" if cfg.rubric else "evaluation steps",
                                low=cfg.low, high=cfg.high, scale_meaning=meaning, parameters=cfg.parameters,
                                steps=numbered, rubric=rubric)
        out: list[Any] = []
        for s in samples:
            blocks: list[tuple[str, str]] = []
            missing = None
            for p in cfg.params:
                label, title, get = PARAMS[p]
                value = get(s)
                if value is None:
                    missing = f"missing field for G-Eval's {p} (evaluation_params)"
                    break
                blocks += context_blocks(value, label) if isinstance(value, list) else [(label, value)]
            if missing is None and "actual_output" in cfg.params and s.answer == "":
                missing = "empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)"
            if missing is not None:
                out.append(Score.missing(missing))
                continue
            out.append(JudgeRequest(metric=self.name, sample_id=s.id, system=system, user=fence_blocks(blocks),
                                    schema=ReasonScore, template_version=tpl.version, expected_output_tokens=120,
                                    validate=_score_check(cfg),
                                    logprobs=cfg.top_logprobs if not cfg.strict and cfg.top_logprobs else None))
        return out

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        cfg = config(params, ctx.options)
        judge = ctx.service("judge")
        steps, res = self._steps(cfg, judge)
        if steps is None:
            if res is None or res.status != "dry_run":
                return
            steps = ["(the evaluation steps generated from the criteria)"] * 4  # dry run: estimate only
        judge.prefetch([r for r in self._requests(samples, cfg, steps) if not isinstance(r, Score)])

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        cfg = config(params, ctx.options)
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
                out[i] = score(r.value, r.logprobs, cfg, steps) if r.ok else r.missing({"steps": list(steps)})
        return out


def _score_check(cfg: Config) -> Any:
    def check(v: ReasonScore) -> None:
        if cfg.strict and v.score not in (0, 1):
            raise ValueError(f"score must be 0 or 1 (strict mode), got {v.score}")
        if not cfg.low <= v.score <= cfg.high:
            raise ValueError(f"score must lie between {cfg.low} and {cfg.high}, got {v.score}")

    return check


def score(v: ReasonScore, logprobs: Sequence[dict[str, Any]] | None, cfg: Config, steps: Sequence[str]) -> Score:
    """One sample's G-Eval score from the judge's reply (and its token log-probabilities)."""
    details: dict[str, Any] = {"reason": v.reason, "score": v.score, "score_range": [cfg.low, cfg.high],
                               "steps": list(steps), "strict_mode": cfg.strict}
    if cfg.strict:
        value = float(int(v.score))
        details["score_method"] = "strict (0 or 1)"
        summary = f"strict mode: {int(v.score)}"
    else:
        g, method = weighted_score(v.score, logprobs) if logprobs else (float(v.score), PLAIN)
        details["score_method"] = method
        if method == WEIGHTED:
            details["weighted_score"] = g
            how = f"probability-weighted {g:.3f}"
        else:
            how = "plain score"
        value = (g - cfg.low) / (cfg.high - cfg.low)
        summary = f"{v.score} on the {cfg.low}-{cfg.high} scale, {how}: {value:.3f}"
        if not 0.0 <= value <= 1.0:
            return Score.missing(f"the probability-weighted score {g:.3f} lies outside the {cfg.low}-{cfg.high} "
                                 f"scale (DeepEval would report {value:.4f})", details)
    threshold = 1.0 if cfg.strict else cfg.threshold
    details.update(threshold=threshold, success=value >= threshold, summary=f"{summary}. {v.reason}".strip())
    return Score(value, details=details)


def _check(ctx: Any, **params: Any) -> str | None:
    try:
        config(params, ctx.options)
    except MetricError as exc:
        return str(exc)
    return judge_check(ctx)


_metric = GEvalMetric()
register_metric(MetricSpec(
    name=NAME, family="judge", fn=_metric, requires=(), needs_llm=True, defaults=dict(DEFAULTS),
    prepare=_metric.prepare, check=_check, batch_size=64, equals=tool_equals("deepeval", "GEval"),
    options=tuple(OPTION.values()),
    aliases=("g_eval", "GEval", "deepeval.metrics.GEval"), description="""
DeepEval's G-Eval: an LLM scores the sample on a rubric's range by evaluation steps generated from
your criteria, the score weighted by the judge's token probabilities (DeepEval 4.3.1 ``GEval``,
after Liu et al. 2023, "G-Eval").

``criteria`` (or ``--option g_eval_criteria="..."``) is turned into 3-4 evaluation steps by one
judge call per run, unless ``evaluation_steps`` are given. Each sample then gets one call
returning a reason and an integer score between ``low`` and ``high`` (``rubric``: DeepEval's list of
``{score_range: [a, b], expected_outcome}``, its range from the first low to the last high;
otherwise ``score_range``, default [0, 10]). ``evaluation_params`` (default input,
actual_output; also expected_output, context, retrieval_context) choose the fields shown. With the
reply's token log-probabilities (OpenAI-compatible judges) the score is

    g = sum_s s x p(s) / sum_s p(s)   over the score token's decimal alternatives with p >= 0.01

else the plain score; ``deepeval:g_eval = (g - low) / (high - low)``, and ``details["score_method"]``
says which. ``strict_mode`` asks for 0 or 1 and reports it. Range [0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``GEval`` given the same evaluation steps, reply and token log-probabilities
(the steps are generated once per run and criteria, as one GEval object does). A reply whose score
lies outside the range (which DeepEval would turn into a number outside [0, 1]) is re-asked, then
no value. Log-probabilities come from OpenAI-compatible judges; Anthropic and Gemini judges give
the plain score, as DeepEval does with models without them.
"""))
