"""``--engine ray --batch``: the run's judge requests go out as one provider batch from the driver
(tests/batch_server.py), the metrics are scored on Ray, and the stored values equal the same run
made online with the local engine; a request the batch failed goes online through the Ray
workers with ``--batch-fallback online``; a re-run sends nothing."""

from __future__ import annotations

import json

import pytest

from batch_server import BatchServer
from cli_runner import run_main
from ragmeter.store import open_store
from references import require_extra

METRICS = "faithfulness,answer_relevancy,context_recall"


@pytest.fixture(scope="module")
def ray_runtime():
    require_extra("ray")
    from ragmeter.run.engines.ray_runtime import init

    ray = init(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def server():
    srv = BatchServer().start()
    yield srv
    srv.stop()


def _eval(server: BatchServer, data, db: str, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run_main("eval", str(data), "--metrics", METRICS, "--judge", "openai:gpt-4o-mini",
                              "--judge-base-url", f"{server.url}/v1", "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY",
                              "--db", db, "--json", "--no-progress", *extra)
    return code, (json.loads(out) if out.strip() else {}), err


def _values(db: str, run_id: str) -> dict[tuple[str, str], tuple]:
    store = open_store(db)
    try:
        return {(k, sid): (s.value, s.reason) for k, col in store.score_table(run_id).items() for sid, s in col.items()}
    finally:
        store.close()


@pytest.mark.slow
def test_a_batched_run_on_ray_stores_the_online_values(ray_runtime, server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    monkeypatch.setenv("RAGMETER_BATCH_POLL", "0.05")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({
        "id": f"q{i}", "question": f"When does ferry {i} leave?",
        "answer": f"Ferry {i} leaves at nine. It docks at noon{' MARK' if i == 0 else ''}.",
        "reference": f"Ferry {i} leaves at nine.", "contexts": [f"Ferry {i} leaves at nine and docks at noon."]}) + "\n"
        for i in range(6)), encoding="utf-8")
    server.reset()
    local_db, ray_db = f"sqlite:///{tmp_path / 'local.db'}", f"sqlite:///{tmp_path / 'ray.db'}"
    code, online, err = _eval(server, data, local_db, "--engine", "local")
    assert code == 0, err
    # one joint request per sample (the three metrics read its texts: tests/test_judge_joint.py)
    assert server.n_requests == 6 and not server.batches
    server.reset()
    code, batched, err = _eval(server, data, ray_db, "--engine", "ray", "--batch")
    assert code == 0, err
    assert (len(server.files), len(server.batches), len(server.batched)) == (1, 1, 6)
    assert "ray" not in batched["judge"]  # no online call went to the Ray workers
    assert _values(ray_db, batched["run_id"]) == _values(local_db, online["run_id"])
    assert batched["judge"]["cost_usd"] == pytest.approx(online["judge"]["cost_usd"] / 2, abs=1e-6)
    server.reset()
    code, again, err = _eval(server, data, ray_db, "--engine", "ray", "--batch")
    assert code == 0, err
    assert (len(server.files), len(server.batches), server.n_requests) == (0, 0, 0)
    # a request the batch failed goes online, from the Ray workers
    server.reset()
    server.batch_errors["MARK"] = "scripted: the request was rejected"
    fb_db = f"sqlite:///{tmp_path / 'fallback.db'}"
    code, fb, err = _eval(server, data, fb_db, "--engine", "ray", "--batch", "--batch-fallback", "online")
    assert code == 0, err
    # sample q0's joint request fails in the batch and goes online
    assert len(server.batches) == 1 and len(server.batched) == 5 and server.n_requests == 6
    assert _values(fb_db, fb["run_id"]) == _values(local_db, online["run_id"])
    assert fb["judge"]["ray"]["callers"] >= 1
