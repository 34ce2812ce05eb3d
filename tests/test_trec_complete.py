"""``ragmeter trec -c -q``: queries in the qrels but not in the run get per-query lines, as
trec_eval 10.0 prints them (its test file out.test.aqc has ``map 302 0.0000``)."""

from __future__ import annotations

import random

import pytest

from ragmeter.apps.trec import evaluate
from references import require_reference

pytrec_eval = require_reference("pytrec_eval")
pytestmark = pytest.mark.contract

MEASURES = ["map", "P_5", "recall_10", "ndcg_cut_10", "ndcg", "recip_rank", "Rprec", "num_ret", "num_rel",
            "num_rel_ret", "success_1", "bpref", "map_cut_10", "set_P", "set_F", "set_recall",
            "num_nonrel_judged_ret", "iprec_at_recall"]
THEIRS = {"map", "P.5", "recall.10", "ndcg_cut.10", "ndcg", "recip_rank", "Rprec", "num_ret", "num_rel",
          "num_rel_ret", "success.1", "bpref", "map_cut.10", "set_P", "set_F", "set_recall",
          "num_nonrel_judged_ret", "iprec_at_recall"}
#: the one-document ranking trec_eval 10.0 evaluates a query missing from the run against
#: (then it sets num_ret to 0)
BOGUS = {"ceci_nest_pas_un_docno": 1.0}


def _collection(seed: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(30)]
    qrels = {f"q{i}": {d: rng.choice([0, 1, 1, 2]) for d in rng.sample(pool, rng.randint(1, 12))}
             for i in range(rng.randint(3, 9))}
    present = rng.sample(sorted(qrels), rng.randint(1, len(qrels) - 1))
    run = {q: {d: rng.uniform(0, 1) for d in rng.sample(pool, rng.randint(1, 15))} for q in present}
    return qrels, run


@pytest.mark.parametrize("level", [1, 2])
def test_missing_queries_score_as_trec_eval_evaluates_them(level):
    checked = 0
    for seed in range(60):
        qrels, run = _collection(seed)
        res = evaluate(qrels, run, MEASURES, complete=True, relevance_level=level)
        missing = sorted(set(qrels) - set(run))
        assert sorted(res.missing) == missing
        ours = res.per_query()
        ref = pytrec_eval.RelevanceEvaluator(qrels, THEIRS, relevance_level=level).evaluate(
            {q: BOGUS for q in missing})
        for q in missing:
            for name, value in ref[q].items():
                expected = 0.0 if name == "num_ret" else value
                assert ours[q][name] == pytest.approx(expected, abs=1e-12), (seed, q, name)
                checked += 1
            # everything but the relevant-document count is 0
            assert ours[q]["num_rel"] == sum(1 for g in qrels[q].values() if g >= level)
        # the queries in both are unchanged, and the averages still divide by every qrels query
        for q in run:
            assert ours[q]["map"] == pytest.approx(
                pytrec_eval.RelevanceEvaluator(qrels, {"map"}, relevance_level=level).evaluate(run)[q]["map"])
        assert res.summary["map"] == pytest.approx(sum(ours[q]["map"] for q in qrels) / len(qrels))
    assert checked > 500


def test_cli_prints_missing_queries_in_qid_order(tmp_path):
    from ragmeter.apps.cli import main

    (tmp_path / "qrels").write_text("301 0 a 1\n301 0 b 0\n302 0 c 1\n302 0 d 2\n303 0 e 1\n")
    (tmp_path / "run").write_text("303 Q0 e 1 2.0 STANDARD\n301 Q0 b 1 2.0 STANDARD\n301 Q0 a 2 1.0 STANDARD\n")
    import contextlib
    import io

    def run(*args: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(list(args))  # returns on success; raises SystemExit otherwise
        return out.getvalue()

    assert run("trec", "-q", "-c", "-m", "num_ret", "-m", "num_rel", "-m", "map", "-m", "P.5",
               str(tmp_path / "qrels"), str(tmp_path / "run")) == (
        "num_ret               \t301\t2\n"
        "num_rel               \t301\t1\n"
        "map                   \t301\t0.5000\n"
        "P_5                   \t301\t0.2000\n"
        "num_ret               \t302\t0\n"
        "num_rel               \t302\t2\n"
        "map                   \t302\t0.0000\n"
        "P_5                   \t302\t0.0000\n"
        "num_ret               \t303\t1\n"
        "num_rel               \t303\t1\n"
        "map                   \t303\t1.0000\n"
        "P_5                   \t303\t0.2000\n"
        "num_ret               \tall\t3\n"
        "num_rel               \tall\t4\n"
        "map                   \tall\t0.5000\n"
        "P_5                   \tall\t0.1333\n"
    )
    # without -c the missing query is neither printed nor averaged over
    text = run("trec", "-q", "-m", "map", str(tmp_path / "qrels"), str(tmp_path / "run"))
    assert "\t302\t" not in text and "map                   \tall\t0.7500\n" in text
