"""llm_judge and hybrid correctness against the local scripted judge server (no key, no network)."""

from __future__ import annotations

import pytest

import ragmeter
from judge_server import blocks, judge_options, server_fixtures
from ragmeter.core.errors import ConfigError

judge_server_module, server = server_fixtures()

Q = "What is the capital of France?"
ANSWERS = ["The capital of France is Paris", "Paris is the capital of France.", "The capital of France is Lyon",
           "I don't know", "Paris", "France's seat of government is in Paris", "The capital city is Paris",
           "The capital of France is London GARBLE"]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


@pytest.fixture(scope="module")
def sims():
    from ragmeter.embed import get_encoder

    x = get_encoder().encode(ANSWERS + ["Paris is the capital of France."])
    return [float(x[i] @ x[-1]) for i in range(len(ANSWERS))]


def _rows():
    return [{"id": f"a{i}", "question": Q, "answer": a, "reference": "Paris is the capital of France."}
            for i, a in enumerate(ANSWERS)]


def test_llm_judge_method_is_the_graded_correctness_and_failures_are_not_zero(server, db_url):
    res = ragmeter.evaluate(_rows(), ["correct_llm_judge"], db=db_url, options=judge_options(server))
    vals = [sc.value for sc in res.scores["correct_llm_judge"]]
    # the scripted judge grades by reference-word overlap on seed 003's 0/.2/.../1 scale
    assert vals[1] == 1.0 and vals[3] == 0.0
    assert all(v is None or v in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) for v in vals)
    garbled = res.scores["correct_llm_judge"][7]
    assert garbled.value is None and "judge" in garbled.reason.lower()
    rec = res.extra["method"]["methods"]["llm_judge"]
    assert rec["judge_calls"] == len(ANSWERS) and rec["n_scored"] == len(ANSWERS) - 1


@pytest.mark.slow
def test_hybrid_sends_only_the_uncertain_band_to_the_judge(server, db_url, sims):
    t, band = 0.75, 0.1
    res = ragmeter.evaluate(_rows(), [{"name": "correct_hybrid", "params": {"threshold": t, "band": band}, "key": "h"}],
                            db=db_url, options=judge_options(server))
    in_band = [i for i, s in enumerate(sims) if abs(s - t) < band]
    assert 0 < len(in_band) < len(ANSWERS)
    rec = res.extra["method"]["methods"]["hybrid"]
    assert rec["judge_calls"] == len(in_band) and rec["judge_calls_saved"] == len(ANSWERS) - len(in_band)
    judged = {blocks(req["body"]["messages"][-1]["content"])["GENERATED"] for req in server.requests}
    assert judged == {ANSWERS[i] for i in in_band}  # only the uncertain answers reached the judge
    for i, sc in enumerate(res.scores["h"]):
        if i in in_band:
            assert sc.details["route"] == "judge"
            assert sc.value is None or sc.value in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
        else:
            assert sc.details["route"] == "semantic" and sc.value == float(sims[i] >= t)
    # band 0: nothing to judge, identical to semantic_fixed
    res0 = ragmeter.evaluate(_rows(), [{"name": "correct_hybrid", "params": {"band": 0.0}, "key": "h0"}],
                             db=db_url, options=judge_options(server))
    assert res0.extra["method"]["methods"]["hybrid"]["judge_calls"] == 0
    assert [s.value for s in res0.scores["h0"]] == [float(s >= 0.75) for s in sims]


@pytest.mark.slow
def test_hybrid_audit_reports_agreement_with_judging_everything(server, db_url, sims):
    opts = judge_options(server)
    res = ragmeter.evaluate(_rows(), [{"name": "correct_hybrid", "params": {"band": 0.15, "audit": True}, "key": "h"},
                                      "correct_llm_judge"], db=db_url, options=opts)
    rec = res.extra["method"]["methods"]["hybrid"]
    pairs = [(h.value, a.value) for h, a in zip(res.scores["h"], res.scores["correct_llm_judge"], strict=True)
             if h.value is not None and a.value is not None]
    expected = sum((h >= 0.5) == (a >= 0.5) for h, a in pairs) / len(pairs)
    assert rec["agreement_with_judge_all"] == pytest.approx(expected)
    assert rec["audit_judge_calls"] == len(ANSWERS) and rec["audit_pairs"] == len(pairs)
    assert rec["judge_calls"] + rec["judge_calls_saved"] == len(ANSWERS)


def test_judge_methods_without_a_judge_fail_fast_with_how_to_configure(db_url):
    for m in ("correct_llm_judge", "correct_hybrid"):
        with pytest.raises(ConfigError, match="judge"):
            ragmeter.evaluate(_rows(), [m], db=db_url)
    res = ragmeter.evaluate(_rows(), ["correct_hybrid", "correct_keyword"], db=db_url, skip_unavailable=True)
    assert res.summary["correct_hybrid"]["n"] == 0 and res.summary["correct_keyword"]["n"] == len(ANSWERS)
