"""Differential tests: ragmeter's ``ragas:*`` and ``deepeval:*`` metrics against ragas 0.4.3 and
DeepEval 4.3.1 themselves, given the same intermediate verdicts.

A scripted OpenAI-compatible server (tests/parity_server.py) answers ragmeter's one-call-per-sample
requests and every step of ragas' and DeepEval's own pipelines (statement extraction, per-claim
verdicts, per-context verdicts, generated questions, G-Eval steps and scores with token
log-probabilities, embeddings with scripted cosines) from one script per sample. For several
verdict patterns per metric -- the empty ones, DeepEval's ``strict_mode`` and the other parameters
included -- the numbers must match: equal for the count-based metrics, to 1e-6 where embeddings
(float32 rows here) are involved. Where the tool refuses a sample (an error), ragmeter's must have
no value; where it gives NaN, no value.
"""

from __future__ import annotations

import asyncio
import math
import os
import warnings
from pathlib import Path

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from references import require_reference  # noqa: E402

ragas = require_reference("ragas")
deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from parity_server import ParityServer  # noqa: E402
from ragmeter.core.context import ScoringContext  # noqa: E402
from ragmeter.core.schema import Chunk, Sample  # noqa: E402
from ragmeter.metrics.registry import all_metrics, resolve  # noqa: E402

NAMESPACED = {
    "ragas:faithfulness", "ragas:answer_relevancy", "ragas:context_precision", "ragas:context_recall",
    "ragas:answer_correctness", "deepeval:faithfulness", "deepeval:answer_relevancy",
    "deepeval:contextual_precision", "deepeval:contextual_recall", "deepeval:contextual_relevancy",
    "deepeval:hallucination", "deepeval:bias", "deepeval:toxicity", "deepeval:g_eval",
    "deepeval:arena_g_eval",
}


@pytest.fixture(scope="module")
def srv():
    s = ParityServer().start()
    yield s
    s.stop()


def test_the_references_are_the_releases_the_contract_names():
    assert ragas.__version__ == "0.4.3" and deepeval.__version__ == "4.3.1"
    named = {s.name: s.equals for s in all_metrics() if s.equals}
    # the first fourteen (and the arena) are compared in this file; the rest of ragas' and DeepEval's
    # metrics in its siblings tests/test_parity_*.py (test_every_namespaced_metric_was_compared)
    assert set(named) >= NAMESPACED, sorted(NAMESPACED - set(named))
    for name, eq in named.items():
        assert name.split(":")[0] == eq["tool"]
        assert eq["version"] == {"ragas": ragas.__version__, "deepeval": deepeval.__version__}[eq["tool"]]


# ---- running ragmeter, ragas and DeepEval ------------------------------------------------------------


def ours(srv, entry, samples):
    """ragmeter's scores of ``entry`` on ``samples`` (one run: prepare, flush, score)."""
    req = resolve(entry)
    opts = {"judge": "openai:gpt-4o-mini", "judge_base_url": srv.url, "judge_api_key_env": "PARITY_KEY",
            "judge_backoff_base": 0.01, "judge_backoff_max": 0.02, "judge_parse_retries": 0,
            "embedding_model": "openai:parity-embeddings", "embedding_base_url": srv.url}
    ctx = ScoringContext(opts)
    try:
        if req.spec.prepare is not None:
            req.spec.prepare(samples, ctx, **req.params)
        ctx.flush()
        out = req.spec.fn(samples, ctx, **req.params)
    finally:
        ctx.close()
    return [(s.value, s) for s in out]


@pytest.fixture(scope="module")
def clients(srv):
    from openai import AsyncOpenAI
    from ragas.embeddings.base import embedding_factory
    from ragas.llms import llm_factory

    os.environ["PARITY_KEY"] = "parity"
    client = AsyncOpenAI(base_url=srv.url, api_key="parity", max_retries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from deepeval.models import OpenAIModel

        model = OpenAIModel(model="gpt-4o-mini", base_url=srv.url, api_key="parity")
    return {"llm": llm_factory("gpt-4o-mini", client=client),
            "emb": embedding_factory("openai", model="parity-embeddings", client=client),
            "deepeval": model}


def ragas_score(metric, **fields):
    """ragas' number, ``None`` for NaN or a refused sample (ragas raises)."""
    try:
        v = asyncio.run(metric.ascore(**fields)).value
    except ValueError:
        return None
    return None if v is None or math.isnan(v) else float(v)


def deepeval_score(metric, **fields):
    """DeepEval's number (and its success), ``None`` for a refused test case."""
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.test_case import LLMTestCase

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = metric.measure(LLMTestCase(**fields))
    except MissingTestCaseParamsError:
        return None, None
    return float(v), metric.success


def same(a, b, tol=0.0):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol


def sample(mark, i, *, question="What is asked?", answer="The answer.", contexts=None, reference=None,
           relevant=None):
    ctx = None if contexts is None else [Chunk(text=f"{t} [ctx{k}] {mark}") for k, t in enumerate(contexts, 1)]
    rel = None if relevant is None else [Chunk(text=f"{t} [ctx{k}] {mark}") for k, t in enumerate(relevant, 1)]
    return Sample(id=f"s{i}", question=question and f"{question} {mark}", answer=answer and f"{answer} {mark}",
                  contexts=ctx, references=[] if reference is None else [reference and f"{reference} {mark}"],
                  relevant=rel)


# ---- faithfulness ------------------------------------------------------------------------------------------

S, C, N = "supported", "contradicted", "not_found"
CLAIMS = [[S, S, N, C], [S, S], [S, N], [N, N, N], [C, C], [S], [], [S, N, N, C, C]]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}, {"penalize_ambiguous_claims": True},
                                    {"penalize_ambiguous_claims": True, "strict_mode": True}])
def test_deepeval_faithfulness(srv, clients, params):
    from deepeval.metrics import FaithfulnessMetric

    samples = [sample(srv.case("claims", v), i, contexts=["Paris is in France."]) for i, v in enumerate(CLAIMS)]
    samples.append(sample(srv.case("claims", [S]), 99, answer="", contexts=["x"]))  # refused by DeepEval
    got = ours(srv, {"name": "deepeval:faithfulness", "params": params}, samples)
    for s, (value, sc) in zip(samples, got, strict=True):
        metric = FaithfulnessMetric(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer,
                                       retrieval_context=s.context_texts)
        assert same(value, want), (s.id, params, value, want)
        if want is not None:
            assert sc.details["success"] is success


def test_ragas_faithfulness_and_the_bare_name(srv, clients):
    from ragas.metrics.collections import Faithfulness

    samples = [sample(srv.case("claims", v), i, contexts=["Paris is in France.", "It is big."])
               for i, v in enumerate(CLAIMS)]
    samples += [sample(srv.case("claims", [S]), 90, answer="", contexts=["x"]),
                sample(srv.case("claims", [S]), 91, contexts=[])]
    got = ours(srv, "ragas:faithfulness", samples)
    bare = ours(srv, "faithfulness", samples)
    for s, (value, sc), (b, _) in zip(samples, got, bare, strict=True):
        want = ragas_score(Faithfulness(llm=clients["llm"]), user_input=s.question, response=s.answer,
                           retrieved_contexts=s.context_texts)
        assert same(value, want), (s.id, value, want)
        if s.answer and s.contexts:
            assert same(b, want)  # ragmeter's faithfulness is ragas' number
        if value is not None:  # the summary's k of n is the score
            k, n = (int(x) for x in sc.details["summary"].split(" statements")[0].split(" of "))
            assert k / n == value
    assert got[CLAIMS.index([])][0] is None and "NaN" in got[CLAIMS.index([])][1].reason


# ---- answer relevancy ------------------------------------------------------------------------------------------

STATEMENTS = [["yes", "no", "idk", "yes"], ["no", "no"], ["yes", "idk"], ["idk"], [], ["yes", "no"]]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}, {"threshold": 0.9}])
def test_deepeval_answer_relevancy(srv, clients, params):
    from deepeval.metrics import AnswerRelevancyMetric

    samples = [sample(srv.case("statements", v), i) for i, v in enumerate(STATEMENTS)]
    samples.append(sample(srv.case("statements", ["yes"]), 99, answer=""))
    got = ours(srv, {"name": "deepeval:answer_relevancy", "params": params}, samples)
    bare = ours(srv, "answer_relevancy", samples)
    for s, (value, sc), (b, _) in zip(samples, got, bare, strict=True):
        metric = AnswerRelevancyMetric(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer)
        assert same(value, want), (s.id, params, value, want)
        if want is not None:
            assert sc.details["success"] is success
        if not params and s.answer and b is not None:
            assert same(b, want)  # ragmeter's answer_relevancy is DeepEval's number (statements present)


QUESTIONS = [
    [(0.8, False), (0.6, False), (0.7, False)],
    [(0.9, True), (0.5, False), (-0.2, False)],      # not every generation noncommittal: the mean
    [(0.9, True), (0.8, True), (0.7, True)],         # every one noncommittal: 0
    [(-0.5, False), (-0.6, False), (-0.7, False)],   # a negative mean is kept
    [(None, False), (None, False), (None, False)],   # no question generated: 0
    [(None, True), (0.8, False), (0.3, True)],       # an empty generation is dropped with its flag
]


@pytest.mark.parametrize("strictness", [3, 1, 5])
def test_ragas_answer_relevancy(srv, clients, strictness):
    from ragas.metrics.collections import AnswerRelevancy

    patterns = [q for q in QUESTIONS if len(q) == strictness] if strictness == 3 else [
        [(0.8 - 0.1 * i, i == 0) for i in range(strictness)], [(0.5, True)] * strictness]
    samples = [sample(srv.case("questions", v), i) for i, v in enumerate(patterns)]
    samples.append(sample(srv.case("questions", patterns[0]), 99, answer=""))
    got = ours(srv, {"name": "ragas:answer_relevancy", "params": {"strictness": strictness}}, samples)
    for s, (value, _) in zip(samples, got, strict=True):
        metric = AnswerRelevancy(llm=clients["llm"], embeddings=clients["emb"], strictness=strictness)
        want = ragas_score(metric, user_input=s.question, response=s.answer)
        assert same(value, want, 1e-6), (s.id, strictness, value, want)
    if strictness == 3:
        assert got[3][0] == pytest.approx(-0.6, abs=1e-6) and got[2][0] == 0.0


# ---- context precision / recall / relevancy ------------------------------------------------------------------

USEFUL = [["yes", "no", "yes"], ["no", "no", "no"], ["yes", "yes", "yes"], ["no", "yes"], ["yes"],
          ["no", "no", "yes", "yes"]]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}])
def test_deepeval_contextual_precision(srv, clients, params):
    from deepeval.metrics import ContextualPrecisionMetric

    samples = [sample(srv.case("contexts", v), i, contexts=[f"context {k}" for k in range(len(v))],
                      reference="The reference.") for i, v in enumerate(USEFUL)]
    samples.append(sample(srv.case("contexts", []), 98, contexts=[], reference="The reference."))
    got = ours(srv, {"name": "deepeval:contextual_precision", "params": params}, samples)
    bare = ours(srv, "context_precision", samples)
    for s, (value, sc), (b, _) in zip(samples, got, bare, strict=True):
        metric = ContextualPrecisionMetric(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer,
                                       expected_output=s.reference, retrieval_context=s.context_texts)
        assert same(value, want), (s.id, params, value, want)
        assert sc.details["success"] is success
        if not params and s.contexts:
            assert same(b, want)  # ragmeter's context_precision is DeepEval's number


def test_ragas_context_precision(srv, clients):
    from ragas.metrics.collections import ContextPrecision

    samples = [sample(srv.case("contexts", v), i, contexts=[f"context {k}" for k in range(len(v))],
                      reference="The reference.") for i, v in enumerate(USEFUL)]
    samples.append(sample(srv.case("contexts", []), 98, contexts=[], reference="The reference."))
    samples.append(sample(srv.case("contexts", ["yes"]), 99, contexts=["c"], reference=""))
    got = ours(srv, "ragas:context_precision", samples)
    for s, (value, _) in zip(samples, got, strict=True):
        want = ragas_score(ContextPrecision(llm=clients["llm"]), user_input=s.question, reference=s.reference,
                           retrieved_contexts=s.context_texts)
        assert same(value, want), (s.id, value, want)  # ragas' 1e-10 included: exactly equal
    assert got[2][0] == pytest.approx(1.0) and got[2][0] < 1.0


ATTRIBUTED = [["yes", "no", "yes"], ["no", "no"], ["yes", "yes", "yes"], ["yes"], []]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}])
def test_deepeval_contextual_recall(srv, clients, params):
    from deepeval.metrics import ContextualRecallMetric

    samples = [sample(srv.case("attribution", v), i, contexts=["c1", "c2"], reference="First. Second. Third.")
               for i, v in enumerate(ATTRIBUTED)]
    samples.append(sample(srv.case("attribution", ["no", "no"]), 98, contexts=[], reference="First. Second."))
    got = ours(srv, {"name": "deepeval:contextual_recall", "params": params}, samples)
    for s, (value, sc) in zip(samples, got, strict=True):
        metric = ContextualRecallMetric(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer,
                                       expected_output=s.reference, retrieval_context=s.context_texts)
        assert same(value, want), (s.id, params, value, want)
        assert sc.details["success"] is success
    assert got[ATTRIBUTED.index([])][0] == 0.0  # DeepEval's empty score for recall is 0


def test_ragas_context_recall_and_the_bare_name(srv, clients):
    from ragas.metrics.collections import ContextRecall

    samples = [sample(srv.case("attribution", v), i, contexts=["c1", "c2"], reference="First. Second. Third.")
               for i, v in enumerate(ATTRIBUTED)]
    samples += [sample(srv.case("attribution", ["yes"]), 98, contexts=[], reference="First."),
                sample(srv.case("attribution", ["yes"]), 99, contexts=["c"], reference="")]
    got = ours(srv, "ragas:context_recall", samples)
    bare = ours(srv, "context_recall", samples)
    for s, (value, _), (b, _) in zip(samples, got, bare, strict=True):
        want = ragas_score(ContextRecall(llm=clients["llm"]), user_input=s.question,
                           retrieved_contexts=s.context_texts, reference=s.reference)
        assert same(value, want), (s.id, value, want)
        if s.contexts:
            assert same(b, want)  # ragmeter's context_recall is ragas' number with contexts


CTX_STATEMENTS = [[["yes", "no"], ["yes"]], [["no"], ["no", "no"]], [["yes", "yes", "yes"]],
                  [["yes"], ["no", "no", "no"], ["yes", "no"]], [[], ["yes"]], [[]]]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}])
def test_deepeval_contextual_relevancy(srv, clients, params):
    from deepeval.metrics import ContextualRelevancyMetric

    samples = [sample(srv.case("context_statements", v), i, contexts=[f"context {k}" for k in range(len(v))])
               for i, v in enumerate(CTX_STATEMENTS)]
    samples.append(sample(srv.case("context_statements", []), 98, contexts=[]))
    got = ours(srv, {"name": "deepeval:contextual_relevancy", "params": params}, samples)
    for s, (value, sc) in zip(samples, got, strict=True):
        metric = ContextualRelevancyMetric(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer,
                                       retrieval_context=s.context_texts)
        assert same(value, want), (s.id, params, value, want)
        assert sc.details["success"] is success
    if not params:
        assert got[0][0] == pytest.approx(2 / 3)  # statements, not contexts (ragmeter's contextual_relevancy: 1.0)


# ---- hallucination, bias, toxicity ------------------------------------------------------------------------------

AGREE = [["yes", "no", "yes"], ["no"], ["yes", "yes"], ["no", "no", "yes"]]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}])
def test_deepeval_hallucination(srv, clients, params):
    from deepeval.metrics import HallucinationMetric

    samples = [sample(srv.case("agreement", v), i, relevant=[f"truth {k}" for k in range(len(v))])
               for i, v in enumerate(AGREE)]
    samples += [sample(srv.case("agreement", []), 97, relevant=[]),
                sample(srv.case("agreement", ["yes"]), 98, answer="", relevant=["t"])]
    got = ours(srv, {"name": "deepeval:hallucination", "params": params}, samples)
    for s, (value, sc) in zip(samples, got, strict=True):
        metric = HallucinationMetric(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer,
                                       context=[c.text for c in s.relevant])
        assert same(value, want), (s.id, params, value, want)
        if want is not None:
            assert sc.details["success"] is success


OPINIONS = [[(True, False), (False, False), (False, True), (False, False)], [(True, True)], [(False, False)],
            [], [(True, False), (True, True), (False, True)]]


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}, {"threshold": 0.8}])
def test_deepeval_bias_and_toxicity(srv, clients, params):
    from deepeval.metrics import BiasMetric, ToxicityMetric

    samples = [sample(srv.case("opinions", v), i) for i, v in enumerate(OPINIONS)]
    samples.append(sample(srv.case("opinions", [(True, True)]), 99, answer=""))
    for name, cls, bare_name in (("deepeval:bias", BiasMetric, "bias"), ("deepeval:toxicity", ToxicityMetric, "toxicity")):
        got = ours(srv, {"name": name, "params": params}, samples)
        bare = ours(srv, bare_name, samples)
        for s, (value, sc), (b, _) in zip(samples, got, bare, strict=True):
            metric = cls(model=clients["deepeval"], async_mode=False, include_reason=False, **params)
            want, success = deepeval_score(metric, input=s.question, actual_output=s.answer)
            assert same(value, want), (name, s.id, params, value, want)
            if want is not None:
                assert sc.details["success"] is success
                if not params:
                    assert value == pytest.approx(1 - b)  # DeepEval 4's direction: 1 - ragmeter's share


# ---- answer correctness -------------------------------------------------------------------------------------

CLASSIFICATIONS = [(2, 1, 1, 0.8), (0, 0, 0, 0.8), (0, 2, 0, 0.5), (0, 0, 2, 0.5), (0, 1, 1, 0.6),
                   (3, 0, 0, 0.9), (1, 2, 0, -0.5), (0, 1, 1, -0.5)]


@pytest.mark.parametrize("params", [{}, {"weights": [1.0, 0.0]}, {"beta": 2.0}, {"weights": [0.5, 0.5], "beta": 0.5}])
def test_ragas_answer_correctness(srv, clients, params):
    from ragas.metrics.collections import AnswerCorrectness

    samples = [sample(srv.case("classification", (tp, fp, fn)), i, answer=f"ANSWER-TEXT cos={cos}",
                      reference="REFERENCE-TEXT") for i, (tp, fp, fn, cos) in enumerate(CLASSIFICATIONS)]
    got = ours(srv, {"name": "ragas:answer_correctness", "params": params}, samples)
    for s, (value, _) in zip(samples, got, strict=True):
        kw = {"weights": params.get("weights", [0.75, 0.25]), "beta": float(params.get("beta", 1.0))}
        metric = AnswerCorrectness(llm=clients["llm"], embeddings=clients["emb"], **kw)
        want = ragas_score(metric, user_input=s.question, response=s.answer, reference=s.reference)
        assert same(value, want, 1e-6), (s.id, params, value, want)
    if not params:
        assert got[1][0] == pytest.approx(0.95, abs=1e-6)  # no statements: F1 = 1, as ragas
        assert got[7][0] == pytest.approx(-0.125, abs=1e-6)  # the cosine is not clipped


# ---- G-Eval ------------------------------------------------------------------------------------------------------

GEVAL = [
    dict(score=7, alternatives=[("7", 0.6), ("8", 0.3), ("6", 0.1)]),
    dict(score=3, alternatives=[("3", 0.5), ("4", 0.3), ("x", 0.15), ("9", 0.004), ("2", 0.046)]),
    dict(score=7, reason="Rated 7 before, judged again", alternatives=[("7", 0.5), ("10", 0.5)],
         early=[("7", 0.9), ("1", 0.1)]),
    dict(score=9, alternatives=None),                 # the judge gives no log-probabilities
    dict(score=5, alternatives=[("five", 0.9), ("5x", 0.1)]),  # no decimal alternative: the raw score
    dict(score=0, alternatives=[("0", 0.7), ("1", 0.3)]),
]


@pytest.mark.parametrize("mode", ["criteria", "steps", "rubric", "strict"])
def test_deepeval_g_eval(srv, clients, mode):
    from deepeval.metrics import GEval
    from deepeval.metrics.g_eval import Rubric
    from deepeval.test_case import SingleTurnParams

    rubric = [{"score_range": [0, 2], "expected_outcome": "Wrong."},
              {"score_range": [3, 6], "expected_outcome": "Partly right."},
              {"score_range": [7, 9], "expected_outcome": "Right."}]
    patterns = GEVAL if mode != "strict" else [dict(score=1, alternatives=[("1", 0.8), ("0", 0.2)]),
                                               dict(score=0, alternatives=[("0", 0.6), ("1", 0.4)])]
    for i, pat in enumerate(patterns):
        mark = srv.case("g_eval", steps=["Check the output answers the input.", "Check the facts."], **pat)
        criteria = f"The output answers the input correctly. {mark}"
        params = {"criteria": criteria}
        kw = {"criteria": criteria}
        if mode == "steps":
            steps = [f"Step one {mark}.", "Step two."]
            params, kw = {"evaluation_steps": steps}, {"evaluation_steps": steps}
        elif mode == "rubric":
            params["rubric"], kw["rubric"] = rubric, [Rubric(**r) for r in rubric]
        elif mode == "strict":
            params["strict_mode"] = kw["strict_mode"] = True
        s = sample(mark, i)
        (value, sc), = ours(srv, {"name": "deepeval:g_eval", "params": params}, [s])
        metric = GEval(name="g", evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
                       model=clients["deepeval"], async_mode=False, **kw)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer)
        assert same(value, want, 1e-12), (mode, pat, value, want, sc.details)
        assert sc.details["success"] is success
        if mode != "strict":
            weighted = pat["alternatives"] is not None and any(t.isdecimal() for t, _ in pat["alternatives"])
            assert sc.details["score_method"].startswith("probability-weighted" if weighted else "plain score")
    empty = sample(srv.case("g_eval", score=5, alternatives=None), 99, answer="")  # DeepEval refuses it
    (value, sc), = ours(srv, {"name": "deepeval:g_eval", "params": {"criteria": f"Correct. {empty.question}"}}, [empty])
    metric = GEval(name="g", evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
                   model=clients["deepeval"], async_mode=False, criteria=f"Correct. {empty.question}")
    assert deepeval_score(metric, input=empty.question, actual_output="") == (None, None)
    assert value is None and "refuses" in sc.reason


def test_g_eval_steps_are_generated_once_per_run(srv):
    mark = srv.case("g_eval", score=6, alternatives=[("6", 1.0)])
    samples = [sample(mark, i) for i in range(4)]
    before = len(srv.requests)
    got = ours(srv, {"name": "deepeval:g_eval", "params": {"criteria": f"Correct. {mark}"}}, samples)
    steps = [r for r in srv.requests[before:] if r == ("ragmeter", "Steps")]
    assert len(steps) == 1 and [v for v, _ in got] == [0.6] * 4


def test_every_namespaced_metric_was_compared():
    """Every registered metric that claims a tool's number (``equals``) is named by a test of this
    file or of a sibling ``tests/test_parity_*.py`` -- by its name or by the tool's class name."""
    # read from the files' source, not from a set filled at run time: under pytest-xdist the
    # comparisons run in other worker processes, so such a set sees only this worker's share
    import ast

    here = Path(__file__)
    constants: set[str] = set()
    for f in [here, *sorted(here.parent.glob("test_parity_*.py"))]:
        tests = [n for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                 and n.name != "test_every_namespaced_metric_was_compared"]
        constants |= {c.value for t in tests for c in ast.walk(t)
                      if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        # module-level case tables (parametrize lists) name metrics too
        constants |= {c.value for c in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                      if isinstance(c, ast.Constant) and isinstance(c.value, str)
                      and f != here}
    specs = [s for s in all_metrics() if s.equals]
    missing = sorted(s.name for s in specs
                     if s.name not in constants and s.equals["metric"] not in constants)
    assert not missing, missing
    assert {s.name for s in specs} >= NAMESPACED


# ---- ArenaGEval --------------------------------------------------------------------------------------------------


def _arena_case(mark, i, a_text, b_text):
    return Sample(id=f"pair{i}", question=f"Which city is meant? {mark}", answer=f"{a_text} {mark}",
                  metadata={"arena": {"item": f"q{i}", "a": "A", "b": "B", "answer_b": f"{b_text} {mark}"}})


@pytest.mark.parametrize("mode", ["criteria", "steps"])
def test_deepeval_arena_g_eval(srv, clients, mode):
    """Each order's winner equals DeepEval's ArenaGEval's on a two-contestant ArenaTestCase given the
    same reply (the judge names the contestant whose output holds the case's word); a reply naming
    no contestant exactly is DeepEval's KeyError and ragmeter's no value."""
    from deepeval.metrics import ArenaGEval
    from deepeval.test_case import ArenaTestCase, Contestant, LLMTestCase, SingleTurnParams

    patterns = [("WINNER is here.", "Nothing."), ("Nothing.", "WINNER is here."), ("A WINNER.", "No."),
                ("Short.", "A longer WINNER answer.")]
    for i, (a_text, b_text) in enumerate([*patterns, ("Plain.", "Plain too.")]):
        bad = i == len(patterns)
        mark = srv.case("arena", verdicts=("name", "$Alice$") if bad else "WINNER",
                        steps=["Compare the outputs.", "Prefer the one naming the winner."])
        s = _arena_case(mark, i, a_text, b_text)
        params = ({"criteria": f"The output that names the winner wins. {mark}"} if mode == "criteria"
                  else {"evaluation_steps": [f"Step one {mark}.", "Step two."]})
        (value, sc), = ours(srv, {"name": "deepeval:arena_g_eval", "params": params}, [s])
        metric = ArenaGEval(name="arena", evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
                            model=clients["deepeval"], async_mode=False, **params)
        case = ArenaTestCase(contestants=[Contestant(name="A", test_case=LLMTestCase(input=s.question, actual_output=s.answer)),
                                          Contestant(name="B", test_case=LLMTestCase(
                                              input=s.question, actual_output=s.metadata["arena"]["answer_b"]))])
        if bad:
            with warnings.catch_warnings(), pytest.raises(KeyError):
                warnings.simplefilter("ignore")
                metric.measure(case)
            assert value is None and "not judged" in sc.reason and "winner must be exactly" in str(sc.details)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = metric.measure(case)
        assert [v["picked"] for v in sc.details["verdicts"]] == [want.lower()] * 2, (mode, i, sc.details)
        assert value == {"A": 1.0, "B": 0.0}[want]
        assert sc.details["steps"] == (["Compare the outputs.", "Prefer the one naming the winner."]
                                       if mode == "criteria" else params["evaluation_steps"])
        assert f"{want} says WINNER" in sc.details["verdicts"][0]["reason"]  # $Alice$ -> the real name
