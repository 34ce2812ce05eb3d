"""``--batch``: a judged run through the providers' batch APIs (tests/batch_server.py) stores the
values of the same run made online, at half the cost; a killed or ``--no-wait`` run is resumed
without submitting twice; per-request errors and expired batches give the provider's reason, or
are re-sent online; a cached re-run sends nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batch_server import BatchServer
from ragmeter.store import open_store

METRICS = "faithfulness,answer_relevancy,context_recall"
#: requests of a run of METRICS on the 6 samples: one joint request per sample (the three metrics
#: read the same sample's texts: tests/test_judge_joint.py)
CALLS = 6


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


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "data.jsonl"
    with p.open("w") as fh:
        for i in range(6):
            fh.write(json.dumps({"id": f"q{i}", "question": f"When does ferry {i} leave?",
                                 "answer": f"Ferry {i} leaves at nine. It docks at noon{' MARK' + str(i) if i < 2 else ''}.",
                                 "reference": f"Ferry {i} leaves at nine.",
                                 "contexts": [f"Ferry {i} leaves at nine and docks at noon."]}) + "\n")
    (tmp_path / "prices.json").write_text(json.dumps({"test-model": {"input": 0.5, "output": 1.5}}))
    return p


def _env() -> dict[str, str]:
    return {**os.environ, "RAGMETER_TEST_JUDGE_KEY": "k", "RAGMETER_BATCH_POLL": "0.05", "HF_HUB_OFFLINE": "1"}


def _cmd(args: list[str], server: BatchServer, db: Path, provider: str = "openai") -> list[str]:
    base = server.url + "/v1" if provider == "openai" else server.url
    return [sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *args,
            "--judge", f"{provider}:test-model", "--judge-base-url", base, "--judge-api-key-env",
            "RAGMETER_TEST_JUDGE_KEY", "--db", str(db), "--no-progress", "--json",
            "--option", f"judge_prices={db.parent / 'prices.json'}"]


def _run(args: list[str], server: BatchServer, db: Path, provider: str = "openai") -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(["eval", *args], server, db, provider), env=_env(), capture_output=True,
                          text=True, timeout=300)


def _values(db: Path, run_id: str) -> dict[tuple[str, str], tuple[float | None, str | None]]:
    store = open_store(f"sqlite:///{db}")
    try:
        return {(k, sid): (s.value, s.reason) for k, col in store.score_table(run_id).items() for sid, s in col.items()}
    finally:
        store.close()


def _cost(out: str) -> float:
    d = json.loads(out)
    return (d.get("judge") or d["extra"]["judge"])["cost_usd"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batched_run_equals_online_at_half_the_price_and_a_rerun_sends_nothing(tmp_path, data, server, provider):
    online = _run([str(data), "-m", METRICS], server, tmp_path / "online.db", provider)
    assert online.returncode == 0, online.stderr
    n_online = server.n_requests
    assert n_online == CALLS and not server.batches
    server.reset()
    batched = _run([str(data), "-m", METRICS, "--batch"], server, tmp_path / "batch.db", provider)
    assert batched.returncode == 0, batched.stderr
    assert len(server.batches) == 1 and len(server.batched) == CALLS
    assert len(server.files) == (1 if provider == "openai" else 0)
    a, b = json.loads(online.stdout)["run_id"], json.loads(batched.stdout)["run_id"]
    va, vb = _values(tmp_path / "online.db", a), _values(tmp_path / "batch.db", b)
    assert va == vb and any(v is not None for v, _ in vb.values())
    assert {k: json.loads(batched.stdout)["judge"][k] for k in ("batches", "batched")} == {"batches": 1, "batched": CALLS}
    assert _cost(batched.stdout) == pytest.approx(_cost(online.stdout) / 2, abs=1e-6) and _cost(online.stdout) > 0
    # the request bodies are the online ones
    bodies = sorted(json.dumps(r["body"], sort_keys=True) for r in server.requests)
    assert bodies == sorted(json.dumps(x, sort_keys=True) for x in server.batched)
    server.reset()
    again = _run([str(data), "-m", METRICS, "--batch"], server, tmp_path / "batch.db", provider)
    assert again.returncode == 0, again.stderr
    assert (len(server.files), len(server.batches), server.n_requests) == (0, 0, 0)


def test_no_wait_lists_the_batch_and_resume_finishes_it(tmp_path, data, server):
    db = tmp_path / "r.db"
    server.hold = True
    first = _run([str(data), "-m", METRICS, "--batch", "--no-wait"], server, db)
    assert first.returncode == 3, first.stderr
    assert "pending" in first.stderr and len(server.batches) == 1
    listed = subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", "batches",
                             "--json", "--db", str(db)], env=_env(), capture_output=True, text=True)
    rows = json.loads(listed.stdout)
    assert listed.returncode == 0 and len(rows) == 1 and rows[0]["state"] == "submitted"
    run_id = rows[0]["run"]
    store = open_store(f"sqlite:///{db}")
    assert store.get_run(run_id).status == "pending"
    store.close()
    server.hold = False
    resumed = _run(["--resume", run_id], server, db)
    assert resumed.returncode == 0, resumed.stderr
    assert len(server.batches) == 1 and len(server.batched) == CALLS and server.n_requests == CALLS
    assert all(v is not None for v, _ in _values(db, run_id).values())


def test_killed_while_waiting_then_resumed_submits_nothing_twice(tmp_path, data, server):
    db = tmp_path / "k.db"
    server.hold = True
    proc = subprocess.Popen(_cmd(["eval", str(data), "-m", METRICS, "--batch"], server, db), env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not server.batches and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # polling
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = open_store(f"sqlite:///{db}")
    run_id = store.list_runs(5)[0].id
    store.close()
    server.hold = False
    resumed = _run(["--resume", run_id], server, db)
    assert resumed.returncode == 0, resumed.stderr
    assert len(server.batches) == 1 and len(server.files) == 1
    assert len(server.batched) == CALLS and len({json.dumps(b, sort_keys=True) for b in server.batched}) == CALLS


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("fallback", [False, True])
def test_errored_and_expired_requests_get_the_providers_reason_or_go_online(tmp_path, data, server, fallback, provider):
    db = tmp_path / "e.db"
    server.batch_errors["MARK0"] = "scripted: the request was rejected"
    args = [str(data), "-m", METRICS, "--batch"] + (["--batch-fallback", "online"] if fallback else [])
    res = _run(args, server, db, provider)
    assert res.returncode == 0, res.stderr
    values = _values(db, json.loads(res.stdout)["run_id"])
    marked = {k: v for k, v in values.items() if k[1] == "q0" and k[0] != "context_recall"}
    assert len(marked) == 2
    if fallback:
        assert all(v is not None for v, _ in marked.values()) and server.n_requests == CALLS
    else:
        assert all(v is None and "judge failure: batch request failed" in r and "scripted: the request was rejected" in r
                   for v, r in marked.values()), marked
    server.reset()
    server.expire = True
    db2 = tmp_path / "x.db"
    res = _run([str(data), "-m", "answer_relevancy", "--batch"] + (["--batch-fallback", "online"] if fallback else []),
               server, db2, provider)
    values = _values(db2, json.loads(res.stdout)["run_id"])
    if fallback:
        assert res.returncode == 0 and all(v is not None for v, _ in values.values())
    else:
        assert res.returncode == 3
        assert all(v is None and "judge failure: batch expired" in r
                   and ("batch_expired: " if provider == "openai" else "expired: the request was not processed") in r
                   for v, r in values.values()), values


def _cli(args: list[str], db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *args, "--db", str(db)],
                          env=_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_sent_but_not_recorded_is_found_at_the_provider_not_sent_again(tmp_path, data, server, provider):
    """The window between the provider's answer and storing its id: the record still says 'to
    submit'; the resume finds the batch (OpenAI: its metadata; Anthropic: its time and size)."""
    db = tmp_path / "w.db"
    server.hold = True
    first = _run([str(data), "-m", METRICS, "--batch", "--no-wait"], server, db, provider)
    assert first.returncode == 3, first.stderr
    store = open_store(f"sqlite:///{db}")
    (bid, rec), = store.kv_list("judge_batches").items()
    store.kv_put("judge_batches", bid, {**rec, "state": "to submit", "provider_id": None})
    store.close()
    server.hold = False
    resumed = _run(["--resume", rec["run_id"]], server, db, provider)
    assert resumed.returncode == 0, resumed.stderr
    assert len(server.batches) == 1 and len(server.batched) == CALLS


def test_cancel_a_pending_batch_and_batch_refuses_a_budget(tmp_path, data, server):
    db = tmp_path / "c.db"
    server.hold = True
    assert _run([str(data), "-m", METRICS, "--batch", "--no-wait"], server, db).returncode == 3
    (row,) = json.loads(_cli(["batches", "--json"], db).stdout)
    done = _cli(["batches", "cancel", row["provider_id"]], db)
    assert done.returncode == 0 and "cancelled" in done.stdout, done.stderr
    assert server.batches[row["provider_id"]]["status"] == "cancelled"
    assert json.loads(_cli(["batches", "--json"], db).stdout) == []
    assert _cli(["batches", "cancel", "nosuchbatch"], db).returncode == 2
    budget = _run([str(data), "-m", METRICS, "--batch", "--max-cost", "1"], server, tmp_path / "b.db")
    assert budget.returncode == 2 and "--max-cost" in budget.stderr and "Traceback" not in budget.stderr


def test_two_rounds_of_requests_are_two_batch_rounds_with_the_online_verdicts(tmp_path, server, monkeypatch):
    """A metric whose second request depends on the first verdict asks twice (``submit``): each
    ask is one batch round, answered with the verdicts the online path gets."""
    from judge_server import judge_options
    from ragmeter.core.context import ScoringContext
    from ragmeter.core.schema import Chunk, Sample
    from ragmeter.metrics.judge.generation import faithfulness

    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    monkeypatch.setenv("RAGMETER_BATCH_POLL", "0.05")
    samples = [Sample(id=f"s{i}", question="q", answer=f"Ferry {i} leaves at nine.",
                      contexts=[Chunk(text=f"Ferry {i} leaves at nine.")]) for i in range(4)]
    rounds = [faithfulness.requests(samples[:2], {}), faithfulness.requests(samples[2:], {})]

    def judged(options):
        store = open_store(f"sqlite:///{tmp_path / (str(len(list(tmp_path.iterdir()))) + '.db')}")
        judge = ScoringContext(options, store=store, run_id="r1").service("judge")
        try:
            return [[r.value.model_dump() for r in judge.submit(reqs)] for reqs in rounds]
        finally:
            judge.close()
            store.close()

    online = judged(judge_options(server))
    server.reset()
    batched = judged(judge_options(server, judge_batch=True))
    assert batched == online and len(server.batches) == 2 and len(server.batched) == 4
