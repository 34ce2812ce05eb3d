"""`--engine ray`: the same values as the local engine, scores streamed to the store."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from references import require_extra

ray = require_extra("ray")  # in CI a stand-in when missing: conftest.py fails the tests

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega refund policy days customer order").split()
LEXICAL = ["token_f1", "exact_match", "rouge1_fmeasure", "jaccard", "levenshtein"]
RETRIEVAL = ["ndcg@5", "mrr", "recall@10", "precision@5", "map"]
SEMANTIC = ["semantic_similarity"]


def write_dataset(path, n: int, seed: int = 3, pool: int = 400) -> None:
    """``n`` samples; answers/references drawn from ``pool`` distinct sentences (so embedding them stays
    cheap), retrieved/relevant ids random."""
    rnd = random.Random(seed)
    sentences = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 14))) for _ in range(pool)]
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "question": rnd.choice(sentences), "answer": rnd.choice(sentences),
                                 "reference": rnd.choice(sentences),
                                 "retrieved_ids": rnd.sample(range(60), 10), "relevant_ids": rnd.sample(range(60), 3)})
                     + "\n")


@pytest.fixture(scope="module", autouse=True)
def ray_runtime():
    from ragmeter.run.engines.ray_runtime import init

    ray = init(num_cpus=2)
    yield
    ray.shutdown()


def _values(db, run_id):
    table = open_store(db).score_table(run_id)
    return {k: {sid: (sc.value, sc.reason) for sid, sc in per.items()} for k, per in table.items()}


def test_small_dataset_identical_and_resumable(tmp_path, db_url):
    data = tmp_path / "d.jsonl"
    write_dataset(data, 300)
    local = evaluate(str(data), LEXICAL + RETRIEVAL, db=db_url)
    on_ray = evaluate(str(data), LEXICAL + RETRIEVAL, db=db_url, engine="ray")
    assert _values(db_url, on_ray.run_id) == _values(db_url, local.run_id)
    assert on_ray.summary == local.summary
    # resume: drop half of one metric's stored scores, finish the run on Ray, same values again
    store = open_store(db_url)
    from sqlalchemy import delete

    from ragmeter.store.models import MetricName, ScoreRow

    positions = store._sample_positions(on_ray.run_id)  # the lean scores table keys samples by position
    with store.session() as s:
        metric_id = s.query(MetricName.id).filter(MetricName.name == "token_f1").scalar()
        gone = s.execute(delete(ScoreRow).where(ScoreRow.run_id == on_ray.run_id, ScoreRow.metric_id == metric_id,
                                                ScoreRow.position.in_([positions[f"q{i}"] for i in range(0, 300, 2)])))
        assert gone.rowcount == 150
        s.commit()
    store.update_run(on_ray.run_id, status="failed")
    resumed = evaluate(str(data), db=db_url, resume=on_ray.run_id, engine="ray")
    assert _values(db_url, resumed.run_id) == _values(db_url, local.run_id)


def test_unknown_engine_is_a_config_error(db_url):
    with pytest.raises(ConfigError, match="unknown engine"):
        evaluate("example", ["token_f1"], db=db_url, engine="spark")


@pytest.mark.slow
def test_cli_ray_equals_local_on_20000_samples(tmp_path, db_url):
    data = tmp_path / "big.jsonl"
    write_dataset(data, 20_000)
    metrics = ",".join(LEXICAL + RETRIEVAL + SEMANTIC)
    runner = CliRunner()
    ids = []
    for engine in ("local", "ray"):
        r = runner.invoke(app, ["eval", str(data), "--metrics", metrics, "--engine", engine, "--db", db_url,
                                "--json", "--no-progress"])
        assert r.exit_code == 0, r.output
        ids.append(json.loads(r.output.strip().splitlines()[-1])["run_id"])
    local, on_ray = (_values(db_url, i) for i in ids)
    assert set(local) == {*LEXICAL, *RETRIEVAL, *SEMANTIC}
    assert all(len(v) == 20_000 for v in local.values())
    assert on_ray == local  # every (sample, metric) value and reason identical
