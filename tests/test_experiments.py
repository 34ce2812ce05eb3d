"""Grid search, A/B comparison and power analysis end to end (offline; the judge is the scripted server)."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from typer.testing import CliRunner

import ragmeter
from judge_server import judge_options, server_fixtures
from ragmeter.analysis.compare import compare_runs
from ragmeter.analysis.grid import KV_GRID, parse_grid_config, questions_of, rank, run_grid
from ragmeter.analysis.power import power_for_run
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError, RagmeterError
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()

N_Q = 30

TOY = textwrap.dedent('''
    """A toy pipeline: answers correctly unless a per-question hash falls below ``noise``."""
    import hashlib

    CALLS = []

    def _h(text, salt):
        return int(hashlib.sha256(f"{salt}:{text}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

    def answer(question, noise=0.0, top_k=1, fail_on=None, salt="s"):
        CALLS.append((question, noise, top_k))
        if fail_on and fail_on in question:
            raise RuntimeError("index unavailable")
        n = int(question.split()[-1].rstrip("?"))
        good = _h(question, salt) >= noise
        ctx = [{"id": f"doc{n}", "text": f"fact {n}"}] + [{"id": f"other{i}", "text": "x"} for i in range(top_k - 1)]
        return {"answer": f"the answer is word{n}" if good else "I don't know", "contexts": ctx[:top_k]}
''')


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "toy_rag.py").write_text(TOY, encoding="utf-8")
    rows = [{"id": f"q{i}", "question": f"What is item {i}?", "reference": f"word{i}",
             "relevant_ids": [f"doc{i}"]} for i in range(N_Q)]
    data = tmp_path / "toy.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return tmp_path


def _cfg(toy, **extra):
    cfg = {"name": "toy", "dataset": str(toy / "toy.jsonl"), "pipeline": f"{toy / 'toy_rag.py'}:answer",
           "grid": {"noise": [0.0, 0.5, 0.9], "top_k": [1, 2]}, "method": "keyword",
           "metrics": ["recall@1", "precision@2"], "experiment": {"workers": 2, "top_n": 0}}
    cfg.update(extra)
    return cfg


def test_grid_stores_one_run_per_configuration_and_ranks_with_noise_statements(toy, db_url):
    res = run_grid(_cfg(toy), db=db_url)
    store = open_store(db_url)
    assert len(res.results) == 6 and all(r.run_id for r in res.results)
    runs = {r.name: r for r in store.list_runs()}
    assert {r.name for r in res.results} <= set(runs)
    assert "toy noise=0.0 top_k=1" in runs
    best = res.ranking["rows"][0]
    assert best["params"]["noise"] == 0.0 and best["mean"] == 1.0 and best["ci_low"] <= best["mean"]
    # noise 0.0 at top_k 1 and 2 give identical per-question scores: the winner is within noise
    assert res.ranking["winner_within_noise"] is True and res.ranking["runner_up_p"] == 1.0
    worst = [row for row in res.ranking["rows"] if row["params"]["noise"] == 0.9]
    assert worst and all(not row["within_noise_of_winner"] for row in worst)
    assert [row["mean"] for row in res.ranking["rows"]] == sorted((row["mean"] for row in res.ranking["rows"]),
                                                                  reverse=True)
    rec = store.kv_get(KV_GRID, res.grid_id)
    assert set(rec) >= {"params", "runs", "ranking", "noise"} and len(rec["runs"]) == 6
    assert [row["name"] for row in rec["ranking"]] == res.ranking["order"] and rec["noise"]["winner_within_noise"]
    assert {"run_id", "params", "mean", "ci_low", "ci_high"} <= set(rec["runs"][0])
    run = store.get_run(best["run_id"])
    assert run.extra["grid"]["params"] == best["params"]
    samples = store.run_samples(best["run_id"])
    assert samples[0].answer.startswith("the answer") and samples[0].label is None
    assert res.pipeline["calls"] == 6 * N_Q and res.pipeline["cached"] == 0
    assert "no judge configured" in (res.judge_note or "") or res.config.top_n == 0


def test_grid_reuses_cached_pipeline_outputs(toy, db_url):
    run_grid(_cfg(toy), db=db_url)
    again = run_grid(_cfg(toy), db=db_url)
    assert again.pipeline["calls"] == 0 and again.pipeline["cached"] == 6 * N_Q
    assert [r["mean"] for r in again.ranking["rows"]] == [r["mean"] for r in run_grid(_cfg(toy), db=db_url).ranking["rows"]]
    fresh = run_grid(_cfg(toy, experiment={"cache": False, "top_n": 0}), db=db_url)
    assert fresh.pipeline["calls"] == 6 * N_Q


def test_pipeline_errors_are_missing_values_and_bad_outputs_are_clear_errors(toy, db_url, tmp_path):
    cfg = _cfg(toy, grid={"noise": [0.0]}, experiment={"fixed": {"fail_on": "item 3?"}, "top_n": 0})
    res = run_grid(cfg, db=db_url)
    assert res.pipeline["errors"] == 1
    r = res.results[0]
    assert r.n == N_Q - 1 and r.values["q3"] is None
    bad = tmp_path / "bad_rag.py"
    bad.write_text("def answer(question, x=1):\n    return ['not', 'a', 'mapping'] if x else {'answer': 'ok'}\n")
    mixed = run_grid(_cfg(toy, pipeline=f"{bad}:answer", grid={"x": [1, 0]}), db=db_url)
    assert "must return" in mixed.results[0].error and mixed.ranking["order"] == [mixed.results[1].name]
    with pytest.raises(ConfigError, match="every configuration failed.*must return"):
        run_grid(_cfg(toy, pipeline=f"{bad}:answer", grid={"x": [1]}), db=db_url)
    with pytest.raises(ConfigError, match="takes no parameter"):
        run_grid(_cfg(toy, grid={"chunk_size": [100]}), db=db_url)


def test_grid_config_parsing_and_errors(toy):
    cfg = parse_grid_config(_cfg(toy, grid=[{"noise": [0.0], "top_k": [1, 2]}, {"noise": [0.5], "top_k": 1}]))
    assert cfg.configurations() == [{"noise": 0.0, "top_k": 1}, {"noise": 0.0, "top_k": 2}, {"noise": 0.5, "top_k": 1}]
    assert parse_grid_config(_cfg(toy), overrides={"set": {"top_k": 3}}).configurations() == [
        {"noise": 0.0}, {"noise": 0.5}, {"noise": 0.9}]
    for bad, msg in [({"grid": None}, "grid"), ({"method": "magic"}, "correctness method"),
                     ({"experiment": {"alpha": 2}}, "alpha"), ({"grid": {"noise": []}}, "no value")]:
        c = _cfg(toy)
        c.update(bad)
        if bad.get("grid", 1) is None:
            del c["grid"]
        with pytest.raises((ConfigError, RagmeterError), match=msg):
            parse_grid_config(c)


def test_questions_of_groups_samples_by_question_and_drops_labels():
    ds = ragmeter.load("example")
    qs = questions_of(ds.samples)
    assert len(qs) == len({s.question for s in ds.samples})
    paris = next(q for q in qs if q.text == "What is the capital of France?")
    assert paris.id == "capital-france" and paris.references == ["Paris"] and paris.relevant
    assert len({q.id for q in qs}) == len(qs)


def test_successive_halving_saves_calls_and_keeps_the_best(toy, db_url):
    cfg = _cfg(toy, grid={"noise": [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]},
               experiment={"halving": {"eta": 3, "min_questions": 8}, "top_n": 0})
    res = run_grid(cfg, db=db_url)
    h = res.halving
    assert h["rounds"] and h["rounds"][0]["configs"] == 9 and h["rounds"][0]["questions"] < N_Q
    assert h["pipeline_calls_saved"] > 0 and h["scored_samples_saved"] > 0
    assert h["pipeline_pairs"] + h["pipeline_calls_saved"] == 9 * N_Q
    survivors = [r for r in res.results if r.eliminated_round is None]
    assert 3 <= len(survivors) < 9 and any(r.params["noise"] == 0.0 for r in survivors)
    assert res.ranking["rows"][0]["params"]["noise"] == 0.0 and len(res.ranking["rows"]) == len(survivors)
    stored = {r.name for r in open_store(db_url).list_runs()}
    assert all((r.name in stored) == (r.eliminated_round is None) for r in res.results)


def test_rank_handles_missing_and_single():
    from ragmeter.analysis.grid import ConfigResult

    a = ConfigResult({"k": 1}, "a", mean=0.5, values={"x": 1.0, "y": 0.0})
    b = ConfigResult({"k": 2}, "b", mean=None, error="failed")
    r = rank([a, b], alpha=0.05)
    assert r["order"] == ["a"] and r["runner_up_p"] is None and r["within_noise"] == ["a"]


def test_judge_rerank_of_the_top_n_after_a_confirmed_estimate(toy, db_url, server, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    cfg = _cfg(toy, options=judge_options(server), experiment={"top_n": 2})
    asked = []
    declined = run_grid(cfg, db=db_url, confirm=lambda est: asked.append(est) or False)
    # the top two (noise 0, top_k 1 and 2) give the same answers: one call per distinct prompt
    assert asked and asked[0]["requests"] == 2 * N_Q and asked[0]["planned_calls"] == N_Q
    assert declined.judge_ranking is None and "declined" in declined.judge_note and server.n_requests == 0
    res = run_grid(cfg, db=db_url, yes=True)
    assert res.judge_estimate["planned_calls"] == N_Q
    jr = res.judge_ranking
    assert len(jr["rows"]) == 2 and all(row["run_id"] for row in jr["rows"])
    assert {row["name"] for row in jr["rows"]} == set(res.ranking["order"][:2])
    assert server.n_requests == N_Q  # the second configuration's verdicts came from the cache
    assert all(row["mean"] == 1.0 for row in jr["rows"]) and jr["winner_within_noise"]
    rec = open_store(db_url).kv_get(KV_GRID, res.grid_id)
    assert rec["judge_ranking"][0]["mean"] is not None and rec["judge_noise"]["alpha"] == 0.05


@pytest.mark.slow
def test_demo_grid_runs_offline_over_the_bundled_pipeline(db_url, tmp_path):
    cfg = yaml.safe_load(open("examples/grid.yaml", encoding="utf-8"))
    cfg["grid"] = {"retriever": ["bm25", "hybrid"], "top_k": [1, 3]}
    cfg["experiment"]["fixed"] = {"chunk_size": 400, "overlap": 50}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    r = CliRunner().invoke(app, ["grid", str(path), "--db", db_url, "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(rec["runs"]) == 4 and all(x["run_id"] for x in rec["runs"])
    rows = rec["ranking"]
    assert all(row["ci_low"] <= row["mean"] <= row["ci_high"] for row in rows)
    assert "recall@5" in rec["runs"][0]["metrics"] and rec["runs"][0]["metrics"]["recall@5"] > 0.5  # spans match
    text = CliRunner().invoke(app, ["grid", str(path), "--db", db_url])
    assert text.exit_code == 0 and "ranking by semantic_guarded" in text.output and "95% CI" in text.output


def _two_runs(db_url):
    base = [{"id": f"s{i}", "answer": "paris" if i % 4 else "lyon", "reference": "paris"} for i in range(40)]
    worse = [dict(r, answer="lyon") if i % 2 else r for i, r in enumerate(base)]
    a = ragmeter.evaluate(base, ["correct_keyword", "exact_match"], db=db_url, name="A")
    b = ragmeter.evaluate(list(reversed(worse)), ["correct_keyword", "exact_match"], db=db_url, name="B")
    return a, b


def test_compare_pairs_by_id_and_declares_a_winner_only_when_significant(db_url):
    a, b = _two_runs(db_url)
    res = compare_runs([a.run_id, b.run_id], store=open_store(db_url))
    row = next(r for r in res.rows if r.metric == "correct_keyword")
    # pairing by id despite the reversed order: B lost exactly the odd ids that A had right
    lost = sum(1 for i in range(40) if i % 2 and i % 4)
    assert (row.wins, row.ties, row.losses) == (0, 40 - lost, lost) and row.n == 40
    assert row.diff == pytest.approx(-lost / 40) and row.winner == "a" and row.pvalue_adjusted < 0.05
    assert row.ci_low <= row.diff <= row.ci_high and row.wilcoxon_pvalue is not None
    same = compare_runs([a.run_id, a.run_id], store=open_store(db_url))
    assert all(r.winner is None and r.pvalue == 1.0 for r in same.rows)
    three = compare_runs([a.run_id, b.run_id, a.run_id], store=open_store(db_url))
    raw = [r.pvalue for r in three.rows]
    assert all(r.pvalue_adjusted >= r.pvalue for r in three.rows) and len(raw) == 4
    with pytest.raises(ConfigError):
        compare_runs([a.run_id], store=open_store(db_url))
    with pytest.raises(ConfigError, match="not in every run"):
        compare_runs([a.run_id, b.run_id], metrics=["bleu"], store=open_store(db_url))


def test_compare_and_power_cli(db_url):
    a, b = _two_runs(db_url)
    r = CliRunner().invoke(app, ["compare", "A", "B", "--db", db_url, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["correction"] == "holm" and {c["metric"] for c in out["comparisons"]} == {"correct_keyword", "exact_match"}
    t = CliRunner().invoke(app, ["compare", "A", "B", "--db", db_url])
    assert t.exit_code == 0 and "winner" in t.output
    p = CliRunner().invoke(app, ["power", "A", "-m", "correct_keyword", "--drop", "0.1", "--db", db_url])
    assert p.exit_code == 0 and "paired samples" in p.output and "assumptions" in p.output


def test_power_for_run_uses_the_paired_variance(db_url):
    a, b = _two_runs(db_url)
    store = open_store(db_url)
    alone = power_for_run(a.run_id, "correct_keyword", 0.1, store=store)
    import numpy as np

    x = np.array([0.0 if i % 4 == 0 else 1.0 for i in range(40)])
    assert alone.sd_diff == pytest.approx(np.std(x, ddof=1) * np.sqrt(2 * 0.5))
    assert any("0.5" in s for s in alone.assumptions)
    paired = power_for_run(a.run_id, "correct_keyword", 0.1, against=b.run_id, store=store)
    d = np.array([(1.0 if (i % 4 and not i % 2) else 0.0) - x[i] for i in range(40)])
    assert paired.sd_diff == pytest.approx(np.std(d, ddof=1)) and paired.n_current == 40
    assert power_for_run(a.run_id, "correct_keyword", 0.3, store=store).n_required < alone.n_required
    with pytest.raises(ConfigError):
        power_for_run(a.run_id, "correct_keyword", -0.1, store=store)
    with pytest.raises(ConfigError, match="no metric"):
        power_for_run(a.run_id, "bleu", 0.1, store=store)


def test_grid_scored_by_the_judge_asks_before_spending(toy, db_url, server, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    cfg = _cfg(toy, method="llm_judge", grid={"noise": [0.0, 0.9]}, options=judge_options(server),
               metrics=[], experiment={"top_n": 0})
    asked = []
    with pytest.raises(RagmeterError, match="not confirmed"):
        run_grid(cfg, db=db_url, confirm=lambda est: asked.append(est) or False)
    assert asked[0]["planned_calls"] == 2 * N_Q and server.n_requests == 0
    res = run_grid(cfg, db=db_url, yes=True)
    best, worst = res.ranking["rows"]
    assert best["params"]["noise"] == 0.0 and best["mean"] == 1.0 and worst["mean"] < 0.5
    assert not res.ranking["winner_within_noise"]
