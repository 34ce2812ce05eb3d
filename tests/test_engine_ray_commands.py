"""`--engine ray` on `ragmeter grid` and `ragmeter monitor evaluate`: the same values as the local
engine; an unknown engine is a usage error (exit 2, nothing stored); what the Ray workers receive
through Ray's runtime_env (settings yes, secrets never)."""

from __future__ import annotations

import json
import os
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from cli_runner import run_main
from ragmeter.run.engines.ray_runtime import NOT_SENT, worker_env
from ragmeter.store import open_store
from references import require_extra

N_Q = 24
#: set before the module's Ray runtime starts; none of them may reach a worker or Ray's logs
SECRET = "pw-d41d8cd98f"
SECRET_ENV = {"RAGMETER_DB": f"postgresql+psycopg://ragmeter:{SECRET}@db.internal/ragmeter",
              "RAGMETER_INGEST_TOKEN": SECRET, "RAGMETER_EXTRA_URL": f"https://user:{SECRET}@example.org/x"}
SETTING = ("RAGMETER_TEST_SETTING", "visible-on-workers")

TOY = textwrap.dedent('''
    """A toy pipeline: right unless a per-question hash falls below ``noise``; contexts for retrieval."""
    import hashlib

    def _h(text, salt):
        return int(hashlib.sha256(f"{salt}:{text}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

    def answer(question, noise=0.0, top_k=1):
        n = int(question.split()[-1].rstrip("?"))
        good = _h(question, "s") >= noise
        ctx = [{"id": f"doc{n}", "text": f"item {n} is word{n}"}]
        ctx += [{"id": f"other{i}", "text": f"unrelated passage {i}"} for i in range(top_k - 1)]
        return {"answer": f"the answer is word{n}" if good else "I don't know", "contexts": ctx[:top_k]}
''')


@pytest.fixture(scope="module")
def ray_runtime():
    """One local Ray runtime (2 CPUs) for the module, started with secrets and a setting in the
    environment, which is how a user's shell would look."""
    require_extra("ray")
    from ragmeter.run.engines.ray_runtime import init

    saved = {k: os.environ.get(k) for k in [*SECRET_ENV, SETTING[0]]}
    os.environ.update({**SECRET_ENV, SETTING[0]: SETTING[1]})
    try:
        ray = init(num_cpus=2)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield ray
    ray.shutdown()


@pytest.fixture
def ray_blocks(monkeypatch):
    """The metric keys the Ray engine scored (so a test knows the work really went to Ray)."""
    from ragmeter.run.engines import ray_engine

    seen: list[str] = []
    real = ray_engine.score_blocks

    def spy(request, *args, **kwargs):
        seen.append(request.key)
        yield from real(request, *args, **kwargs)

    real_all = ray_engine.score_blocks_all

    def spy_all(requests, *args, **kwargs):  # pure metrics sent together, one task per block
        seen.extend(r.key for r in requests)
        yield from real_all(requests, *args, **kwargs)

    monkeypatch.setattr(ray_engine, "score_blocks", spy)
    monkeypatch.setattr(ray_engine, "score_blocks_all", spy_all)
    return seen


def _values(db: str, run_id: str) -> dict[str, dict[str, tuple]]:
    table = open_store(db).score_table(run_id)
    return {k: {sid: (sc.value, sc.reason) for sid, sc in per.items()} for k, per in table.items()}


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    (tmp_path / "toy_rag.py").write_text(TOY, encoding="utf-8")
    rows = [{"id": f"q{i}", "question": f"What is item {i}?", "reference": f"word{i}",
             "relevant_ids": [f"doc{i}"]} for i in range(N_Q)]
    data = tmp_path / "toy.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    cfg = {"name": "toy", "dataset": str(data), "pipeline": f"{tmp_path / 'toy_rag.py'}:answer",
           "grid": {"noise": [0.0, 0.4, 0.8], "top_k": [1, 3]}, "method": "keyword",
           "metrics": ["recall@1", "ndcg@3", "token_f1", "context_similarity"],
           "experiment": {"workers": 1, "top_n": 0, "halving": {"eta": 2, "min_questions": 6}}}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _grid(path: Path, db: str, *extra: str) -> dict:
    code, out, err = run_main("grid", str(path), "--db", db, "--json", *extra)
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_grid_on_ray_equals_local(ray_runtime, ray_blocks, grid_file, db_url):
    local = _grid(grid_file, db_url, "--engine", "local")
    assert ray_blocks == []
    on_ray = _grid(grid_file, db_url, "--engine", "ray")
    # every metric of every configuration and of every halving round went to Ray
    assert set(ray_blocks) == {"correctness", "recall@1", "ndcg@3", "token_f1", "context_similarity"}
    rounds = sum(rd["configs"] for rd in on_ray["halving"]["rounds"])
    assert len(ray_blocks) == 5 * (rounds + sum(1 for r in on_ray["runs"] if r["run_id"]))
    assert on_ray["halving"]["rounds"] and on_ray["halving"] == {**local["halving"]}
    by_params = {json.dumps(r["params"], sort_keys=True): r for r in local["runs"]}
    scored = [r for r in on_ray["runs"] if r["run_id"]]
    assert len(scored) >= 2
    for r in scored:
        twin = by_params[json.dumps(r["params"], sort_keys=True)]
        ray_values, local_values = _values(db_url, r["run_id"]), _values(db_url, twin["run_id"])
        assert set(ray_values) == {"correctness", "recall@1", "ndcg@3", "token_f1", "context_similarity"}
        assert ray_values == local_values  # every value and no-value reason identical
    strip = [{k: v for k, v in row.items() if k != "run_id"} for row in local["ranking"]]
    assert [{k: v for k, v in row.items() if k != "run_id"} for row in on_ray["ranking"]] == strip
    # the config file can choose the engine too (experiment.engine); the command line wins over it
    cfg = yaml.safe_load(grid_file.read_text(encoding="utf-8"))
    cfg["experiment"]["engine"] = "ray"
    grid_file.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    from ragmeter.analysis.grid import parse_grid_config

    assert parse_grid_config(grid_file).engine == "ray"
    assert parse_grid_config(grid_file, overrides={"engine": "local"}).engine == "local"


def _seed_calls(db: str, n: int = 60) -> None:
    from ragmeter.monitor.calls import insert_calls, normalise_call

    now = datetime.now(UTC)
    topics = ["refund policy", "ferry timetable", "opening hours", "password reset"]
    rows = [normalise_call({"query": f"what about the {topics[i % 4]} {i}?",
                            "answer": f"the {topics[(i * 7) % 4]} answer is {i % 5}",
                            "contexts": [f"the {topics[i % 4]} page", f"note {i % 3}"], "latency_ms": 100.0 + i,
                            "error": "timeout" if i % 20 == 0 else None,
                            "timestamp": (now - timedelta(minutes=i)).isoformat()})
            for i in range(n)]
    insert_calls(open_store(db), rows)


@pytest.mark.slow
def test_monitor_evaluate_on_ray_equals_local(ray_runtime, ray_blocks, db_url):
    _seed_calls(db_url)
    recs = []
    for engine in ("local", "ray"):
        # token_f1 needs references, which production calls lack: no value, with its reason
        code, out, err = run_main("monitor", "evaluate", "--since", "1d", "--sample", "0.5",
                                  "--metrics", "correct_keyword,context_similarity,token_f1", "--json",
                                  "--no-progress", "--db", db_url, "--engine", engine)
        assert code in (0, 3), err
        recs.append((code, json.loads(out)))
    assert recs[0][0] == recs[1][0]
    assert sorted(ray_blocks) == ["context_similarity", "correct_keyword"]  # token_f1: no eligible sample, nothing to send
    local, on_ray = (rec for _, rec in recs)
    window = ("start", "end")  # "the last day" ends when each command runs
    assert {k: v for k, v in local["monitor"].items() if k not in window} == {
        k: v for k, v in on_ray["monitor"].items() if k not in window}
    assert 0 < local["monitor"]["n_scored"] < 57
    ray_values = _values(db_url, on_ray["run_id"])
    assert ray_values == _values(db_url, local["run_id"])
    assert set(ray_values) == {"correct_keyword", "context_similarity", "token_f1"}
    assert any(v[0] is not None for v in ray_values["context_similarity"].values())
    assert on_ray["summary"] == local["summary"]


def test_workers_get_settings_and_ray_logs_no_secret(ray_runtime):
    ray = ray_runtime

    @ray.remote
    def worker_environ() -> dict[str, str]:
        return dict(os.environ)

    # (a local runtime's workers also inherit the driver's environment; a cluster's get only the runtime_env)
    assert ray.get(worker_environ.remote()).get(SETTING[0]) == SETTING[1]
    # Ray writes every runtime_env in plain text to its logs: the secrets must not be there
    node = getattr(getattr(ray, "_private", None), "worker", None)
    session = getattr(getattr(node, "_global_node", None), "get_session_dir_path", lambda: None)()
    if session:
        for p in Path(session, "logs").rglob("*"):
            if p.is_file():
                assert SECRET not in p.read_text(errors="replace"), p


def test_worker_env_rules():
    environ = {"RAGMETER_PLUGINS": "my_metrics", "RAGMETER_CACHE_DIR": "/cache", "RAGMETER_DB": "sqlite:///x.db",
               "RAGMETER_CREDENTIALS": "/secrets/ragmeter", "RAGMETER_INGEST_TOKEN": "t0k3n-abc",
               "RAGMETER_MIRROR": "postgresql://u:pw@h/db", "HF_HUB_OFFLINE": "1", "PYTHONPATH": "/src",
               "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstuvwx", "HOME": "/home/me"}
    local = worker_env(local=True, environ=environ)
    assert local == {"RAGMETER_PLUGINS": "my_metrics", "RAGMETER_CACHE_DIR": "/cache", "HF_HUB_OFFLINE": "1",
                     "PYTHONPATH": "/src"}
    assert worker_env(local=False, environ=environ) == {k: v for k, v in local.items() if k != "PYTHONPATH"}
    assert "RAGMETER_DB" in NOT_SENT


@pytest.mark.parametrize("command", ["eval", "grid", "monitor"])
def test_unknown_engine_exits_2_and_stores_nothing(command, grid_file, db_url):
    _seed_calls(db_url, n=5)
    args = {"eval": ["eval", "example", "-m", "token_f1"], "grid": ["grid", str(grid_file)],
            "monitor": ["monitor", "evaluate", "-m", "correct_keyword"]}[command]
    code, _out, err = run_main(*args, "--db", db_url, "--engine", "spark")
    assert code == 2, err
    assert "unknown engine 'spark'" in err and "Traceback" not in err
    assert open_store(db_url).list_runs(10) == []
