"""ragmeter's DeepEval single-turn metrics against DeepEval 4.3.1 itself.

The judged ones (misuse, non-advice, PII leakage, role violation, prompt alignment, summarization)
run DeepEval's own pipeline and ragmeter's one request against one scripted server giving both the
same verdicts (tests/parity_deepeval_support.py); the numbers and DeepEval's ``success`` must match
within 1e-6 (relative) on every verdict pattern, the empty ones and refused test cases included.
The deterministic ones (exact match, pattern match, JSON correctness) are compared on 200 generated
inputs each.
"""

from __future__ import annotations

import json
import os
import random
import string
import warnings

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from parity_deepeval_support import DeepEvalServer, close, deepeval_model, deepeval_score, ours  # noqa: E402
from ragmeter.core.context import ScoringContext  # noqa: E402
from ragmeter.core.schema import Sample  # noqa: E402
from ragmeter.metrics.registry import all_metrics, resolve  # noqa: E402

MINE = {"deepeval:exact_match": "ExactMatchMetric", "deepeval:pattern_match": "PatternMatchMetric",
        "deepeval:json_correctness": "JsonCorrectnessMetric", "deepeval:misuse": "MisuseMetric",
        "deepeval:non_advice": "NonAdviceMetric", "deepeval:pii_leakage": "PIILeakageMetric",
        "deepeval:prompt_alignment": "PromptAlignmentMetric", "deepeval:role_violation": "RoleViolationMetric",
        "deepeval:summarization": "SummarizationMetric"}
N = 200


@pytest.fixture(scope="module")
def srv():
    s = DeepEvalServer().start()
    yield s
    s.stop()


def test_every_metric_names_the_class_it_equals():
    assert deepeval.__version__ == "4.3.1"
    specs = {s.name: s for s in all_metrics()}
    for name, cls in MINE.items():
        assert specs[name].equals == {"tool": "deepeval", "version": "4.3.1", "metric": cls}, name
        assert getattr(deepeval.metrics, cls)  # the class exists in the release
        assert resolve(cls).spec.name == name and resolve(f"deepeval.metrics.{cls}").spec.name == name
        assert specs[name].parity.strip()


def sample(mark, i, *, question="What is asked?", answer="The answer."):
    return Sample(id=f"s{i}", question=None if question is None else f"{question} {mark}",
                  answer=answer and f"{answer} {mark}")


def compare(srv, name, cls, kw, params, patterns, kind, *, answer="The answer.", question="What is asked?"):
    samples = [sample(srv.case(kind, v), i, answer=answer, question=question) for i, v in enumerate(patterns)]
    samples.append(sample(srv.case(kind, patterns[0]), 99, answer=""))  # refused by DeepEval
    got = ours(srv, {"name": name, "params": params}, samples)
    for s, sc in zip(samples, got, strict=True):
        metric = cls(model=deepeval_model(srv), async_mode=False, include_reason=False, **kw)
        want, success = deepeval_score(metric, input=s.question, actual_output=s.answer)
        assert close(sc.value, want), (name, s.id, params, sc.value, want, sc.reason)
        if want is not None:
            assert sc.details["success"] is success, (name, s.id, sc.details)
    assert got[-1].value is None and "refuses" in got[-1].reason
    return got


FLAGGED = [["yes", "no", "no"], ["no", "no"], ["yes"], [], ["yes", "yes", "no", "no"]]


@pytest.mark.parametrize("mode", [{}, {"strict_mode": True}, {"threshold": 0.7}])
def test_misuse_non_advice_pii(srv, mode):
    from deepeval.metrics import MisuseMetric, NonAdviceMetric, PIILeakageMetric

    for name, cls, kw in (("deepeval:misuse", MisuseMetric, {"domain": " Medical "}),
                          ("deepeval:non_advice", NonAdviceMetric, {"advice_types": ["financial", "legal"]}),
                          ("deepeval:pii_leakage", PIILeakageMetric, {})):
        got = compare(srv, name, cls, {**kw, **mode}, {**kw, **mode}, FLAGGED, "flagged")
        if not mode:
            assert got[0].value == pytest.approx(2 / 3) and got[3].value == 1.0  # no statement: 1


def test_a_parameter_comes_from_the_run_option_of_deepevals_name(srv):
    mark = srv.case("flagged", ["yes", "no"])
    (sc,) = ours(srv, "deepeval:misuse", [sample(mark, 0)], options={"domain": "law"})
    assert sc.value == 0.5
    req = resolve("deepeval:misuse")
    msg = req.spec.check(ScoringContext({"judge": "openai:m", "judge_base_url": srv.url}), **req.params)
    assert msg and "domain" in msg


@pytest.mark.parametrize("mode", [{}, {"strict_mode": True}])
def test_role_violation(srv, mode):
    from deepeval.metrics import RoleViolationMetric

    kw = {"role": "helpful customer service agent", **mode}
    got = compare(srv, "deepeval:role_violation", RoleViolationMetric, kw, kw, FLAGGED, "flagged")
    assert [g.value for g in got[:5]] == [0.0, 1.0, 0.0, 1.0, 0.0]


INSTRUCTED = [["yes", "no", "yes"], ["yes", "yes", "yes"], ["no", "no", "no"], ["no", "yes", "yes"]]


@pytest.mark.parametrize("mode", [{}, {"strict_mode": True}])
def test_prompt_alignment(srv, mode):
    from deepeval.metrics import PromptAlignmentMetric

    kw = {"prompt_instructions": ["Reply in English.", "Be brief.", "Never apologise."], **mode}
    got = compare(srv, "deepeval:prompt_alignment", PromptAlignmentMetric, kw, kw, INSTRUCTED, "instructions")
    if not mode:
        assert got[0].value == pytest.approx(2 / 3)
    one = {"prompt_instructions": ["Answer in one word."], **mode}
    compare(srv, "deepeval:prompt_alignment", PromptAlignmentMetric, one, one, [["yes"], ["no"]], "instructions")


Y, NO, B = "yes", "no", "borderline"
SUMMARIES = [
    ([Y, Y, B], [(Y, Y), (Y, NO), (NO, NO), (Y, Y)]),   # alignment 2/3, coverage 2/3
    ([Y, Y], [(Y, Y), (Y, Y)]),                         # both 1
    ([], [(Y, Y)]),                                     # no claim: alignment 0
    ([Y, NO], [(NO, Y), (NO, NO)]),                     # no question the original answers: coverage 0
    ([Y, Y, Y, NO], [(Y, NO), (Y, Y), (Y, Y)]),         # alignment 3/4, coverage 2/3
]


@pytest.mark.parametrize("mode", [{}, {"strict_mode": True}, {"questions": True}])
def test_summarization(srv, mode):
    from deepeval.metrics import SummarizationMetric

    params = {"strict_mode": True} if mode.get("strict_mode") else {}
    patterns = SUMMARIES
    if mode.get("questions"):
        patterns = [p for p in SUMMARIES if len(p[1]) == 2]
        params = {"assessment_questions": ["Is the sky blue?", "Is it raining?"]}
    got = compare(srv, "deepeval:summarization", SummarizationMetric, params, params, patterns, "summary",
                  answer="SUMMARY-TEXT", question="ORIGINAL-TEXT")
    if not mode:
        assert got[0].value == pytest.approx(2 / 3) and got[2].value == 0.0 and got[3].value == 0.0
        assert got[4].details["alignment"] == 0.75 and got[4].value == pytest.approx(2 / 3)


# ---- deterministic: 200 generated inputs each -------------------------------------------------------


def _measure(metric, **fields):
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.test_case import LLMTestCase

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(metric.measure(LLMTestCase(**fields), _show_indicator=False)), metric.success
    except MissingTestCaseParamsError:
        return None, None


def _text(rng):
    pool = ["", " ", "Paris", "paris", " Paris\n", "Paris.", "42", "4 2", "\tyes ", "YES", "é", "a  b", "1.5"]
    return rng.choice(pool) if rng.random() < 0.6 else "".join(
        rng.choice(string.ascii_letters + string.digits + " \n\t.-") for _ in range(rng.randint(0, 8)))


def _run(entry, samples):
    req = resolve(entry)
    return req.spec.fn(samples, ScoringContext({}), **req.params)


def test_exact_match_on_generated_inputs():
    from deepeval.metrics import ExactMatchMetric

    rng = random.Random(43)
    rows = [(_text(rng), _text(rng)) for _ in range(N)]
    rows[:3] = [("", "x"), ("x", ""), (" x ", "x")]
    samples = [Sample(id=f"e{i}", question="q", answer=a, references=[e]) for i, (a, e) in enumerate(rows)]
    for threshold in (1.0, 0.0):
        got = _run({"name": "deepeval:exact_match", "params": {"threshold": threshold}}, samples)
        for s, sc in zip(samples, got, strict=True):
            want, ok = _measure(ExactMatchMetric(threshold=threshold), input="q", actual_output=s.answer,
                                expected_output=s.reference)
            assert sc.value == want, (s.answer, s.reference, sc.value, want)
            assert want is None or sc.details["success"] is ok


PATTERNS = [r"\d+", r"[A-Z][a-z]+", r"yes|no", r" (?i:paris)\.? ", r"a\s+b", r".*", r"[0-9]+(\.[0-9]+)?"]


@pytest.mark.parametrize("ignore_case", [False, True])
def test_pattern_match_on_generated_inputs(ignore_case):
    from deepeval.metrics import PatternMatchMetric

    rng = random.Random(7 + ignore_case)
    answers = [_text(rng) for _ in range(N)]
    samples = [Sample(id=f"p{i}", question="q", answer=a) for i, a in enumerate(answers)]
    for pattern in PATTERNS:
        got = _run({"name": "deepeval:pattern_match", "params": {"pattern": pattern, "ignore_case": ignore_case}},
                   samples)
        for s, sc in zip(samples, got, strict=True):
            want, ok = _measure(PatternMatchMetric(pattern=pattern, ignore_case=ignore_case), input="q",
                                actual_output=s.answer)
            assert sc.value == want, (pattern, s.answer, sc.value, want)
            assert want is None or sc.details["success"] is ok


def _models():
    from typing import Literal, Optional

    from pydantic import BaseModel, ConfigDict, Field

    class Address(BaseModel):
        city: str
        zip: Optional[str] = None  # noqa: UP045 - what a DeepEval user writes

    class Person(BaseModel):
        name: str = Field(min_length=1, max_length=12)
        age: int = Field(ge=0, le=150)
        score: float = 0.0
        tags: list[str] = []
        kind: Literal["a", "b"] = "a"
        address: Optional[Address] = None  # noqa: UP045
        extra: dict[str, int] = {}

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        ok: bool
        items: list[int] = Field(default_factory=list, max_length=3)

    return [Person, Strict]


def _json(rng):
    values = [0, 1, -1, 151, 2.5, "7", "x", "", True, None, [], [1, "2"], [1, 2, 3, 4], {"city": "Rome"},
              {"city": 3}, {"a": "1"}, {}]
    keys = ["name", "age", "score", "tags", "kind", "address", "extra", "ok", "items", "other"]
    if rng.random() < 0.1:
        return rng.choice(["", "not json", "[]", "null", "{", '{"name": "a", "age": 3}'])
    obj = rng.choice([{"name": "Ann", "age": 30}, {"ok": True}, {}])  # valid for one of the models
    for k in rng.sample(keys, rng.choice([0, 0, 1, 1, 2, 3])):
        obj[k] = rng.choice(values)
    if rng.random() < 0.2:
        obj["age"] = rng.choice([30, "30", 30.0, 30.5])
    if rng.random() < 0.2:
        obj["ok"] = rng.choice([True, "true", 1, "yes", 2])
    return json.dumps(obj)


def test_json_correctness_on_generated_inputs():
    from deepeval.metrics import JsonCorrectnessMetric

    rng = random.Random(11)
    answers = [_json(rng) for _ in range(N)]
    answers[0] = ""
    samples = [Sample(id=f"j{i}", question="q", answer=a) for i, a in enumerate(answers)]
    for model in _models():
        for strict in (True, False):
            params = {"expected_schema": model.model_json_schema(), "strict_mode": strict}
            got = _run({"name": "deepeval:json_correctness", "params": params}, samples)
            valid = 0
            metric = JsonCorrectnessMetric(expected_schema=model, model=deepeval_model_stub(), include_reason=False,
                                           async_mode=False, strict_mode=strict)
            for s, sc in zip(samples, got, strict=True):
                metric.error = None  # a refused case leaves its error on the object, failing the next success
                want, ok = _measure(metric, input="q", actual_output=s.answer)
                assert sc.value == want, (model.__name__, s.answer, sc.value, want)
                assert want is None or sc.details["success"] is ok
                valid += sc.value == 1.0
            assert 10 < valid < N - 10  # both outcomes are exercised


def deepeval_model_stub():
    from deepeval.models import GPTModel

    return GPTModel(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="parity")


def test_json_correctness_refuses_a_schema_it_cannot_rebuild():
    req = resolve({"name": "deepeval:json_correctness",
                   "params": {"expected_schema": {"type": "object", "properties": {"a": {"type": "string",
                                                                                          "format": "email",
                                                                                          "not": {}}}}}})
    msg = req.spec.check(ScoringContext({}), **req.params)
    assert msg and "not" in msg and "properties/a" in msg


def test_the_json_schema_file_is_read_before_the_run(tmp_path):
    """``--option expected_schema=FILE``: the run reads the file (the metric gets the schema); a
    missing or malformed file exits 2 naming it."""
    from cli_runner import run_main

    class City(__import__("pydantic").BaseModel):
        city: str

    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(City.model_json_schema()), encoding="utf-8")
    data = tmp_path / "cases.jsonl"
    data.write_text('{"input": "Where?", "actual_output": "{\\"city\\": \\"Paris\\"}"}\n'
                    '{"input": "Where?", "actual_output": "Paris"}\n', encoding="utf-8")
    code, out, err = run_main("eval", str(data), "-m", "deepeval:json_correctness", "--option",
                              f"expected_schema={schema}", "--db", str(tmp_path / "r.db"), "--json", "--no-progress")
    assert code == 0, err
    assert json.loads(out)["metrics"]["deepeval:json_correctness"]["mean"] == 0.5
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    for path, words in ((tmp_path / "none.json", "no such file"), (bad, "the JSON schema file is not valid JSON")):
        code, out, err = run_main("eval", str(data), "-m", "deepeval:json_correctness", "--option",
                                  f"expected_schema={path}", "--db", str(tmp_path / "r.db"))
        assert code == 2 and words in err.replace("\n", " ") and "Traceback" not in err, (out, err)
