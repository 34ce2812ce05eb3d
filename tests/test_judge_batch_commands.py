"""``--batch`` beyond ``eval``: ``meta-eval`` and ``golden generate`` through the real CLI against
tests/batch_server.py store what the same command stores online, at half the price (gpt-4o-mini's
batch price is half its online price), a cached re-run sends nothing, ``--no-wait`` exits 3 and the
same command run again collects the stored batch (0 new batches); ``simulate --batch`` is refused
(exit 2) because each simulated turn depends on the target's last reply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from batch_server import BatchServer
from ragmeter.store import open_store

CORPUS = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data" / "example" / "corpus"


@pytest.fixture(scope="module")
def module_server():
    srv = BatchServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(module_server):
    module_server.reset()
    yield module_server
    module_server.reset()


def cli(args: list[str], db: Path, server: BatchServer) -> subprocess.CompletedProcess[str]:
    judge = ["--judge", "openai:gpt-4o-mini", "--judge-base-url", server.url + "/v1",
             "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY"]
    env = {**os.environ, "RAGMETER_TEST_JUDGE_KEY": "k", "RAGMETER_BATCH_POLL": "0.05", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *args, *judge,
                           "--db", str(db)], env=env, capture_output=True, text=True, timeout=300)


def sent(server: BatchServer) -> tuple[int, int, int]:
    return len(server.files), len(server.batches), server.n_requests


@pytest.fixture
def labels(tmp_path):
    p = tmp_path / "labels.jsonl"
    with p.open("w") as fh:
        for k in range(8):
            good = k % 2 == 0
            fh.write(json.dumps({"id": f"s{k}", "question": f"Where is office {k}?",
                                 "contexts": [f"Office {k} is in Lisbon near the river."],
                                 "answer": f"Office {k} is in Lisbon." if good else f"Office {k} is on the Moon.",
                                 "reference": f"Office {k} is in Lisbon.",
                                 "human": {"ana": 5 if good else 1, "bruno": 4 if good else 2}}) + "\n")
    return p


def _scores(db: Path, run_id: str) -> dict[tuple[str, str], float | None]:
    store = open_store(f"sqlite:///{db}")
    try:
        return {(k, sid): s.value for k, col in store.score_table(run_id).items() for sid, s in col.items()}
    finally:
        store.close()


def test_meta_eval_batch_equals_online_at_half_the_price_and_a_rerun_sends_nothing(tmp_path, server, labels):
    args = ["meta-eval", str(labels), "--metrics", "faithfulness,answer_relevancy", "--json", "--bootstrap", "50",
            "--no-progress"]
    online = cli(args, tmp_path / "on.db", server)
    assert online.returncode == 0, online.stderr
    n_online = server.n_requests
    assert n_online == 8 and not server.batches  # one joint request per sample (tests/test_judge_joint.py)
    server.reset()
    batched = cli([*args, "--batch"], tmp_path / "b.db", server)
    assert batched.returncode == 0, batched.stderr
    assert sent(server) == (1, 1, 8) and len(server.batched) == 8
    a, b = json.loads(online.stdout), json.loads(batched.stdout)
    assert a["metrics"] == b["metrics"]  # the same correlations, intervals and counts
    assert _scores(tmp_path / "on.db", a["run_id"]) == _scores(tmp_path / "b.db", b["run_id"])
    assert b["judge"]["cost_usd"] == pytest.approx(a["judge"]["cost_usd"] / 2, abs=1e-6) and a["judge"]["cost_usd"] > 0
    assert (b["judge"]["batches"], b["judge"]["batched"]) == (1, 8)
    server.reset()
    again = cli([*args, "--batch"], tmp_path / "b.db", server)
    assert again.returncode == 0, again.stderr
    assert sent(server) == (0, 0, 0)
    assert json.loads(again.stdout)["metrics"] == b["metrics"]


def test_meta_eval_no_wait_then_the_same_command_collects_the_batch(tmp_path, server, labels):
    db = tmp_path / "w.db"
    args = ["meta-eval", str(labels), "--metrics", "faithfulness", "--json", "--bootstrap", "50", "--batch"]
    server.hold = True
    first = cli([*args, "--no-wait"], db, server)
    assert first.returncode == 3, first.stderr
    assert "submitted" in first.stderr and "Traceback" not in first.stderr and first.stdout == ""
    env = {**os.environ}
    listed = subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", "batches", "--json",
                             "--db", str(db)], env=env, capture_output=True, text=True)
    (row,) = json.loads(listed.stdout)
    assert row["state"] == "submitted" and row["requests"] == 8
    server.hold = False
    second = cli(args, db, server)
    assert second.returncode == 0, second.stderr
    assert len(server.batches) == 1 and len(server.batched) == 8  # collected, not sent again
    assert json.loads(second.stdout)["metrics"]["faithfulness"]["n"] == 8


def test_batch_flags_are_checked(tmp_path, server, labels):
    bad = cli(["meta-eval", str(labels), "--metrics", "faithfulness", "--batch", "--batch-fallback", "later"],
              tmp_path / "x.db", server)
    assert bad.returncode == 2 and "--batch-fallback" in bad.stderr
    alone = cli(["meta-eval", str(labels), "--metrics", "faithfulness", "--no-wait"], tmp_path / "x.db", server)
    assert alone.returncode == 2 and "--batch" in alone.stderr
    sim = cli(["simulate", "--target", server.url + "/v1", "--target-model", "m", "--name", "sim",
               "--scenarios", str(tmp_path / "none.yaml"), "--batch"], tmp_path / "x.db", server)
    assert sim.returncode == 2 and "cannot send its judge requests as a batch" in sim.stderr
    assert "ragmeter eval dataset:sim" in sim.stderr and sent(server) == (0, 0, 0)


@pytest.mark.slow
def test_golden_generate_batch_equals_online_at_half_the_price(tmp_path, server):
    dbs = {}
    for kind in ("online", "batch"):
        db = dbs[kind] = tmp_path / f"{kind}.db"
        env = {**os.environ}
        add = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "corpus", "add", str(CORPUS), "--name", "hb",
                              "--db", str(db)], env=env, capture_output=True, text=True, timeout=120)
        assert add.returncode == 0, add.stderr
    args = ["golden", "generate", "--corpus", "hb", "--n", "6", "--name", "gold", "--json"]
    online = cli(args, dbs["online"], server)
    assert online.returncode == 0, online.stderr
    n_online = server.n_requests
    server.reset()
    batched = cli([*args, "--batch"], dbs["batch"], server)
    assert batched.returncode == 0, batched.stderr
    a, b = json.loads(online.stdout), json.loads(batched.stdout)
    # a batch per round: the generation, then the support and the answerability checks of the
    # candidates each round kept (each depends on the one before)
    assert server.n_requests == n_online and len(server.batches) == 3 and len(server.batched) == n_online
    assert {k: a[k] for k in ("generated", "kept", "filters")} == {k: b[k] for k in ("generated", "kept", "filters")}
    assert b["judge"]["cost_usd"] == pytest.approx(a["judge"]["cost_usd"] / 2, abs=1e-6) and a["judge"]["cost_usd"] > 0
    exported = []
    for kind in ("online", "batch"):
        out = tmp_path / f"{kind}.jsonl"
        env = {**os.environ}
        r = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "dataset", "export", "gold", "-o", str(out),
                            "--db", str(dbs[kind])], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        exported.append(out.read_text())
    assert exported[0] == exported[1]
    server.reset()
    again = cli([*args, "--batch"], dbs["batch"], server)
    assert again.returncode == 0, again.stderr
    assert sent(server) == (0, 0, 0)
