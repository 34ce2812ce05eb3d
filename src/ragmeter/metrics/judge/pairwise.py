"""Pairwise verdicts: which of two systems' answers to one question is better, asked in both orders.

A pair sample carries system A's answer as ``answer`` and system B's in ``metadata["arena"]``
(``{"item", "a", "b", "answer_b"}``; ``ragmeter arena`` builds them from stored runs). Each metric
asks the judge twice, A shown first and then B shown first, and scores the pair

    1.0  both verdicts prefer A        0.0  both prefer B        0.5  anything else (a tie)

so a verdict that follows the position shown, not the answer, becomes a tie (Zheng et al., 2023,
"Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", §3.4: a win only when the answer wins in
both orders). ``details["position"]`` is ``first`` / ``second`` when both verdicts picked the same
position (the position bias ``ragmeter arena`` counts). A failed verdict in either order is no value
with the precise reason: the pair is not judged, never a tie.

- ``pairwise``: ragmeter's prompt (criteria, "1" / "2" / "tie").
- ``deepeval:arena_g_eval``: DeepEval 4.3.1's ``ArenaGEval`` prompts (criteria -> evaluation steps
  once per run, then the winner by contestant name) on two contestants, in both orders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import field_validator

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import Verdict, fence_blocks, judge_check, load_template, tool_equals
from ragmeter.metrics.registry import MetricSpec, register_metric

#: the key of a pair sample's metadata holding the second system's answer
META = "arena"
#: run options read when the metric's own parameters are not set (``--option arena_criteria=...``)
ARENA_OPTIONS = ("arena_criteria", "arena_evaluation_steps")
#: what the pair is judged on when no criteria are given
DEFAULT_CRITERIA = ("The better answer responds to the question correctly and completely, states nothing the "
                    "question's facts do not support, and stays on point.")
ORDERS = (("a", "b"), ("b", "a"))


class PairwiseVerdict(Verdict):
    reason: str
    winner: Literal["1", "2", "tie"]

    @field_validator("winner", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        # a judge may answer the number 1 for "1"; anything else fails validation (and is re-asked)
        return str(v).strip().lower() if isinstance(v, int | str) and not isinstance(v, bool) else v


class ArenaSteps(Verdict):
    steps: list[str]


class Winner(Verdict):
    """DeepEval's ``Winner`` schema: a contestant name and the reason."""

    winner: str
    reason: str


def other_answer(s: Sample) -> str | None:
    meta = s.metadata.get(META)
    if isinstance(meta, dict) and isinstance(meta.get("answer_b"), str):
        return meta["answer_b"]
    return None


def _labels(s: Sample) -> tuple[str, str]:
    meta = s.metadata.get(META) or {}
    return str(meta.get("a", "A")), str(meta.get("b", "B"))


def combine(picked: Sequence[str], s: Sample, verdicts: list[dict[str, Any]], how: str) -> Score:
    """The pair's score from the system each order picked (``a``, ``b`` or ``tie``)."""
    first = [v["position"] for v in verdicts]
    position = first[0] if first[0] in ("first", "second") and first[0] == first[1] else None
    outcome = picked[0] if picked[0] == picked[1] and picked[0] != "tie" else "tie"
    la, lb = _labels(s)
    value = {"a": 1.0, "b": 0.0, "tie": 0.5}[outcome]
    said = ", ".join(f"{la if o == ('a', 'b') else lb} shown first: "
                     f"{ {'a': la, 'b': lb, 'tie': 'tie'}[p]}" for o, p in zip(ORDERS, picked, strict=True))
    won = {"a": f"{la} wins", "b": f"{lb} wins", "tie": "tie (the two orders disagree)"
           if picked[0] != picked[1] else "tie"}[outcome]
    details = {"outcome": outcome, "position": position, "verdicts": verdicts, "a": la, "b": lb, "method": how,
               "summary": f"{won} ({said})" + ("; both verdicts followed the position shown" if position else "")}
    return Score(value, details=details)


def _criteria(params: dict[str, Any], options: dict[str, Any]) -> str:
    c = params.get("criteria")
    if c is None:
        c = options.get("arena_criteria", DEFAULT_CRITERIA)
    if not isinstance(c, str) or not c.strip():
        raise MetricError(f"the pairwise criteria must be a non-empty text, got {c!r}")
    return c.strip()


# ---- ragmeter's pairwise prompt ----------------------------------------------------------------------
@dataclass
class PairwiseMetric:
    """``pairwise``: two requests per pair (A first, B first), one score from both verdicts."""

    name: str = "pairwise"

    def requests(self, samples: Sequence[Sample], params: dict[str, Any], options: dict[str, Any]) -> list[Any]:
        from ragmeter.llm.request import JudgeRequest

        tpl = load_template("pairwise")
        system = tpl.system(criteria=_criteria(params, options))
        out: list[Any] = []
        for s in samples:
            b = other_answer(s)
            if b is None:
                out.append(Score.missing("missing field: the second system's answer (metadata.arena.answer_b; "
                                         "`ragmeter arena` makes the pairs from two runs)"))
                continue
            texts = {"a": s.answer or "", "b": b}
            pair = []
            for first, second in ORDERS:
                blocks = ([("QUESTION", s.question)] if s.question is not None else [])
                blocks += [("ANSWER 1", texts[first]), ("ANSWER 2", texts[second])]
                pair.append(JudgeRequest(metric=self.name, sample_id=s.id, system=system, user=fence_blocks(blocks),
                                         schema=PairwiseVerdict, template_version=tpl.version,
                                         expected_output_tokens=80))
            out.append(pair)
        return out

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        reqs = self.requests(samples, params, ctx.options)
        ctx.service("judge").prefetch([r for p in reqs if not isinstance(p, Score) for r in p])

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        reqs = self.requests(samples, params, ctx.options)
        flat = [r for p in reqs if not isinstance(p, Score) for r in p]
        results = iter(ctx.service("judge").submit(flat) if flat else [])
        out: list[Score] = []
        for s, p in zip(samples, reqs, strict=True):
            if isinstance(p, Score):
                out.append(p)
                continue
            got = [next(results), next(results)]
            out.append(_pair_score(s, got, "ragmeter pairwise prompt"))
        return out


def _pair_score(s: Sample, got: list[Any], how: str) -> Score:
    la, lb = _labels(s)
    for order, res in zip(ORDERS, got, strict=True):
        if not res.ok:
            miss = res.missing({"order": f"{la if order[0] == 'a' else lb} shown first"})
            return Score.missing(f"not judged: {miss.reason}", miss.details)
    picked, verdicts = [], []
    for order, res in zip(ORDERS, got, strict=True):
        w = res.value.winner
        pick = "tie" if w == "tie" else order[int(w) - 1]
        picked.append(pick)
        verdicts.append({"shown_first": order[0], "winner": w, "picked": pick,
                         "position": {"1": "first", "2": "second"}.get(w, "tie"), "reason": res.value.reason})
    return combine(picked, s, verdicts, how)


# ---- DeepEval's ArenaGEval ----------------------------------------------------------------------------
ARENA = "deepeval:arena_g_eval"
#: the contestants' masked names by the position shown (DeepEval draws them at random from its
#: FAKE_NAMES per test case; fixed names keep every request cacheable and both orders comparable)
NAMES = ("Alice", "Bob")
#: DeepEval's evaluation params an arena compares -> (block label, the name in DeepEval's prompt)
ARENA_PARAMS = {"input": ("INPUT", "Input"), "actual_output": ("ACTUAL OUTPUT", "Actual Output"),
                "expected_output": ("EXPECTED OUTPUT", "Expected Output")}


@dataclass(frozen=True)
class ArenaConfig:
    criteria: str | None
    steps: tuple[str, ...] | None
    params: tuple[str, ...]

    @property
    def parameters(self) -> str:
        """DeepEval's ``construct_g_eval_params_string``."""
        names = [ARENA_PARAMS[p][1] for p in self.params]
        if len(names) <= 2:
            return " and ".join(names)
        return ", ".join(names[:-1]) + ", and " + names[-1]


def arena_config(params: dict[str, Any], options: dict[str, Any]) -> ArenaConfig:
    steps = params.get("evaluation_steps") or options.get("arena_evaluation_steps")
    criteria = None if steps and params.get("criteria") is None and "arena_criteria" not in options \
        else _criteria(params, options)
    if steps is not None:
        if isinstance(steps, str):
            steps = [steps]
        if not isinstance(steps, list | tuple) or not all(isinstance(x, str) and x.strip() for x in steps):
            raise MetricError(f"{ARENA}: evaluation_steps must be a non-empty list of texts, got {steps!r}")
    ps = params.get("evaluation_params") or ["input", "actual_output"]
    if isinstance(ps, str):
        ps = [x.strip() for x in ps.split(",") if x.strip()]
    if not isinstance(ps, list | tuple) or "actual_output" not in ps or any(p not in ARENA_PARAMS for p in ps):
        raise MetricError(f"{ARENA}: evaluation_params must list actual_output and may add input and "
                          f"expected_output (what two contestants of an arena share or differ in); got {ps!r}")
    return ArenaConfig(criteria, tuple(steps) if steps else None, tuple(dict.fromkeys(ps)))


@dataclass
class ArenaGEvalMetric:
    """``deepeval:arena_g_eval``: steps once per run, then two winner requests per pair."""

    name: str = ARENA

    def _steps(self, cfg: ArenaConfig, judge: Any) -> tuple[tuple[str, ...] | None, Any]:
        from ragmeter.llm.request import JudgeRequest

        if cfg.steps is not None:
            return cfg.steps, None
        tpl = load_template("arena_g_eval_steps")
        req = JudgeRequest(metric=self.name, sample_id=None, system=tpl.system(parameters=cfg.parameters,
                                                                                criteria=cfg.criteria),
                           user=fence_blocks([("TASK", "Write the evaluation steps for the criteria above.")]),
                           schema=ArenaSteps, template_version=tpl.version, expected_output_tokens=150)
        res = judge.submit([req])[0]
        return (tuple(res.value.steps) if res.ok and res.value.steps else None), res

    def requests(self, samples: Sequence[Sample], cfg: ArenaConfig, steps: Sequence[str]) -> list[Any]:
        from ragmeter.llm.request import JudgeRequest

        tpl = load_template("arena_g_eval_winner")
        numbered = "".join(f"{i}. {x}\n" for i, x in enumerate(steps, 1))
        system = tpl.system(names=f"{NAMES[0]} and {NAMES[1]}", parameters=cfg.parameters, steps=numbered,
                            first=NAMES[0])
        out: list[Any] = []
        for s in samples:
            b = other_answer(s)
            if b is None:
                out.append(Score.missing("missing field: the second system's answer (metadata.arena.answer_b; "
                                         "`ragmeter arena` makes the pairs from two runs)"))
                continue
            if not s.answer or not b:
                out.append(Score.missing("empty answer: DeepEval refuses the test case ('actual_output' cannot "
                                         "be empty)"))
                continue
            if "input" in cfg.params and s.question is None:
                out.append(Score.missing("missing field for ArenaGEval's input (evaluation_params): the question"))
                continue
            if "expected_output" in cfg.params and s.reference is None:
                out.append(Score.missing("missing field for ArenaGEval's expected_output (evaluation_params)"))
                continue
            texts = {"a": s.answer, "b": b}
            pair = []
            for order in ORDERS:
                blocks: list[tuple[str, str]] = []
                if "input" in cfg.params:
                    blocks.append(("INPUT", s.question or ""))
                if "expected_output" in cfg.params:
                    blocks.append(("EXPECTED OUTPUT", s.reference or ""))
                for name, who in zip(NAMES, order, strict=True):
                    blocks.append((f"CONTESTANT {name.upper()} ACTUAL OUTPUT", texts[who]))
                pair.append(JudgeRequest(metric=self.name, sample_id=s.id, system=system, user=fence_blocks(blocks),
                                         schema=Winner, template_version=tpl.version, expected_output_tokens=120,
                                         validate=_winner_check))
            out.append(pair)
        return out

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        cfg = arena_config(params, ctx.options)
        judge = ctx.service("judge")
        steps, res = self._steps(cfg, judge)
        if steps is None:
            if res is None or res.status != "dry_run":
                return
            steps = ["(the evaluation steps generated from the criteria)"] * 4  # dry run: estimate only
        reqs = self.requests(samples, cfg, steps)
        judge.prefetch([r for p in reqs if not isinstance(p, Score) for r in p])

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        cfg = arena_config(params, ctx.options)
        judge = ctx.service("judge")
        steps, res = self._steps(cfg, judge)
        if steps is None:
            why = res.missing()
            return [Score.missing(f"evaluation steps: {why.reason}", why.details) for _ in samples]
        reqs = self.requests(samples, cfg, steps)
        flat = [r for p in reqs if not isinstance(p, Score) for r in p]
        results = iter(judge.submit(flat) if flat else [])
        out: list[Score] = []
        for s, p in zip(samples, reqs, strict=True):
            if isinstance(p, Score):
                out.append(p)
                continue
            got = [next(results), next(results)]
            out.append(_arena_score(s, got, steps))
        return out


def _winner_check(v: Winner) -> None:
    # DeepEval looks the name up in its dummy-to-real mapping: any other text is its KeyError
    if v.winner not in NAMES:
        raise ValueError(f"winner must be exactly one of {', '.join(NAMES)}, got {v.winner!r}")


_MARKED = re.compile(r"\$(\w+)\$")


def _real_names(reason: str, names: dict[str, str]) -> str:
    """``$Alice$`` -> the system shown as Alice (other ``$...$`` marks are left as they are)."""
    return _MARKED.sub(lambda m: names.get(m.group(1), m.group(0)), reason)


def _arena_score(s: Sample, got: list[Any], steps: Sequence[str]) -> Score:
    la, lb = _labels(s)
    for order, res in zip(ORDERS, got, strict=True):
        if not res.ok:
            miss = res.missing({"order": f"{la if order[0] == 'a' else lb} shown first", "steps": list(steps)})
            return Score.missing(f"not judged: {miss.reason}", miss.details)
    picked, verdicts = [], []
    for order, res in zip(ORDERS, got, strict=True):
        real = {NAMES[0]: order[0], NAMES[1]: order[1]}
        pick = real[res.value.winner]
        # DeepEval asks the judge a third time to put the real names into the reason; the names are
        # known here, so they are replaced without a call
        reason = _real_names(res.value.reason, {n: {"a": la, "b": lb}[w] for n, w in real.items()})
        picked.append(pick)
        verdicts.append({"shown_first": order[0], "winner": res.value.winner, "picked": pick,
                         "position": "first" if res.value.winner == NAMES[0] else "second", "reason": reason})
    score = combine(picked, s, verdicts, "DeepEval ArenaGEval prompts")
    assert score.details is not None
    score.details["steps"] = list(steps)
    return score


def _check_pairwise(ctx: Any, **params: Any) -> str | None:
    try:
        _criteria(params, ctx.options)
    except MetricError as exc:
        return str(exc)
    return judge_check(ctx)


def _check_arena(ctx: Any, **params: Any) -> str | None:
    try:
        arena_config(params, ctx.options)
    except MetricError as exc:
        return str(exc)
    return judge_check(ctx)


_SCORE_TEXT = """The pair's score is 1.0 when both verdicts prefer A (the sample's own answer), 0.0 when both
prefer B (``metadata.arena.answer_b``) and 0.5 otherwise: a verdict that follows the position shown
becomes a tie (Zheng et al. 2023, MT-Bench, a win only when it wins in both orders). A failed
verdict in either order is no value (the pair is not judged). Range [0, 1], higher favours A.
``ragmeter arena RUN_A RUN_B ...`` makes the pairs from stored runs and reports win rates, the
position-bias rate and Bradley-Terry strengths."""

_pairwise = PairwiseMetric()
register_metric(MetricSpec(
    name="pairwise", family="judge", fn=_pairwise, requires=("answer",), needs_llm=True,
    defaults={"criteria": None}, param="criteria", prepare=_pairwise.prepare, check=_check_pairwise,
    batch_size=64, banded=False, aliases=("pairwise_preference",), options=ARENA_OPTIONS, description=f"""
Which of two answers to one question is better by the criteria (``criteria``, or ``--option
arena_criteria=...``; default: correct, complete, supported, on point), asked twice: A's answer as
ANSWER 1 and B's as ANSWER 2, then the other way round; the judge answers "1", "2" or "tie".

{_SCORE_TEXT}
""", parity="""
ragmeter's own prompt. DeepEval's ArenaGEval is ``deepeval:arena_g_eval``; promptfoo's
select-best and OpenAI Evals' battle template ask once, in one order.
"""))

_arena = ArenaGEvalMetric()
register_metric(MetricSpec(
    name=ARENA, family="judge", fn=_arena, requires=("answer",), needs_llm=True,
    defaults={"criteria": None, "evaluation_steps": None, "evaluation_params": None}, prepare=_arena.prepare,
    check=_check_arena, batch_size=64, banded=False, equals=tool_equals("deepeval", "ArenaGEval"),
    options=ARENA_OPTIONS,
    aliases=("arena_g_eval", "ArenaGEval", "deepeval.metrics.ArenaGEval"), description=f"""
DeepEval's ArenaGEval on two contestants: ``criteria`` (or ``evaluation_steps``) -> 3-4 evaluation
steps by one judge call per run, then the judge names the contestant that best follows them (its
``generate_arena_winner`` prompt: the contestants masked as {NAMES[0]} and {NAMES[1]}; evaluation_params
input, actual_output and expected_output), once with A shown first and once with B first.

{_SCORE_TEXT}
""", parity=f"""
Each order's winner equals DeepEval 4.3.1 ``ArenaGEval``'s given the same evaluation steps and
reply (a winner that is not exactly one of the masked names is re-asked, then no value, where
DeepEval raises). DeepEval draws the masked names and the order at random and asks once; here the
names are fixed by position ({NAMES[0]} first) and both orders are asked, so a name bias counts as
position bias. DeepEval's third call, rewriting the reason with the real names, is done without a
call (the $name$ marks are replaced).
"""))
