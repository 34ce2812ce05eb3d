"""`--engine ray` for the heavy work: embeddings encoded by Ray actors (none on the driver, each
distinct text once, the local engine's vectors), judge calls sent from Ray workers under one
cluster-wide limit and budget."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

pytest.importorskip("ray")

import ray_spy
from cli_runner import run_main
from ragmeter.store import open_store

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu refund policy days "
         "customer order ferry timetable opening hours password reset").split()
SPY_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / f"ragmeter-ray-spy-{os.getpid()}"


@pytest.fixture(scope="module")
def ray_runtime():
    """A local Ray runtime of 2 CPUs whose workers run the encode spy (tests/ray_spy.py)."""
    import ray

    from ragmeter.engines.ray_engine import worker_env

    SPY_DIR.mkdir(parents=True, exist_ok=True)
    here = str(Path(__file__).parent)
    env = worker_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), here) if p)
    env["RAGMETER_TEST_SPY_DIR"] = str(SPY_DIR)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env, "worker_process_setup_hook": "ray_spy.install"})
    yield ray
    ray.shutdown()
    for p in SPY_DIR.iterdir():
        p.unlink()
    SPY_DIR.rmdir()


def write_dataset(path: Path, n: int, seed: int = 5, pool: int = 90) -> None:
    rnd = random.Random(seed)
    sentences = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 30))) for _ in range(pool)]
    rows = [{"id": f"q{i}", "question": rnd.choice(sentences), "answer": rnd.choice(sentences),
             "reference": rnd.choice(sentences), "contexts": [rnd.choice(sentences), rnd.choice(sentences)]}
            for i in range(n)]
    rows[3]["answer"] = "   "  # blank: no embedding, cosine 0 (as locally)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _values(db: str, run_id: str) -> dict[str, dict[str, tuple]]:
    table = open_store(db).score_table(run_id)
    return {k: {sid: (sc.value, sc.reason) for sid, sc in per.items()} for k, per in table.items()}


def _eval(data: Path, db: str, *extra: str) -> dict:
    code, out, err = run_main("eval", str(data), "--metrics", "semantic_similarity", "--db", db, "--json",
                              "--no-progress", *extra)
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_embeddings_encoded_on_ray_workers(ray_runtime, tmp_path, monkeypatch):
    from ragmeter.embed.encoders import SentenceTransformerEncoder

    data = tmp_path / "d.jsonl"
    write_dataset(data, 240)
    driver: list[int] = []
    real = SentenceTransformerEncoder.encode

    def spy(self, texts, *, batch_size=None):
        texts = list(texts)
        driver.append(len(texts))
        return real(self, texts, batch_size=batch_size)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", spy)
    local_db, ray_db = f"sqlite:///{tmp_path / 'local.db'}", f"sqlite:///{tmp_path / 'ray.db'}"
    local = _eval(data, local_db, "--engine", "local")
    assert sum(driver) > 0  # the spy sees the local engine's encoding
    driver.clear()
    before = ray_spy.calls(str(SPY_DIR))
    on_ray = _eval(data, ray_db, "--engine", "ray")
    assert driver == []  # nothing encoded on the driver
    calls = ray_spy.calls(str(SPY_DIR))[len(before):]
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    distinct = {t for r in rows for t in (r["answer"], r["reference"]) if t.strip()}
    assert calls and {pid for pid, _ in calls}.isdisjoint({os.getpid()})
    assert sum(n for _, n in calls) == len(distinct)  # each distinct text once across the cluster
    stats = open_store(ray_db).get_run(on_ray["run_id"]).extra["embeddings"]
    assert stats["computed"] == len(distinct) and stats["ray"]["texts"] == len(distinct)
    from ragmeter.embed import text_hash

    cached = open_store(ray_db).get_embeddings(stats["model"], [text_hash(t) for t in distinct])
    assert len(cached) == len(distinct)  # written to the store's embedding cache
    lv, rv = _values(local_db, local["run_id"]), _values(ray_db, on_ray["run_id"])
    assert set(lv["semantic_similarity"]) == set(rv["semantic_similarity"])
    for sid, (value, reason) in lv["semantic_similarity"].items():
        other, other_reason = rv["semantic_similarity"][sid]
        assert reason == other_reason
        assert (value is None) == (other is None)
        if value is not None:
            assert abs(value - other) <= 1e-6, sid
    # a re-run reads every vector from the store's cache: nothing encoded anywhere
    again = _eval(data, ray_db, "--engine", "ray")
    assert driver == [] and ray_spy.calls(str(SPY_DIR))[len(before) + len(calls):] == []
    assert open_store(ray_db).get_run(again["run_id"]).extra["embeddings"]["cached"] == len(distinct)
