"""`--engine ray` for the heavy work: embeddings encoded by Ray actors (none on the driver, each
distinct text once, the local engine's vectors), judge calls sent from Ray workers under one
cluster-wide limit and budget."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import ray_spy
from cli_runner import run_main
from ragmeter.store import open_store
from references import require_extra

ray = require_extra("ray")  # in CI a stand-in when missing: conftest.py fails the tests

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu refund policy days "
         "customer order ferry timetable opening hours password reset").split()
SPY_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / f"ragmeter-ray-spy-{os.getpid()}"


@pytest.fixture(scope="module")
def ray_runtime():
    """A local Ray runtime of 2 CPUs whose workers run the encode spy (tests/ray_spy.py)."""
    import ray

    from ragmeter.run.engines.ray_runtime import worker_env

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


@pytest.mark.slow
def test_embeddings_encoded_on_ray_workers(ray_runtime, tmp_path, monkeypatch):
    from ragmeter.embed.encoders import SentenceTransformerEncoder
    from ragmeter.embed.onnx import OnnxEncoder  # the default model may run on ONNX Runtime

    data = tmp_path / "d.jsonl"
    write_dataset(data, 240)
    driver: list[int] = []

    def spy(real):  # noqa: ANN001, ANN202
        def encode(self, texts, *, batch_size=None):  # noqa: ANN001, ANN202
            texts = list(texts)
            driver.append(len(texts))
            return real(self, texts, batch_size=batch_size)
        return encode

    for cls in (SentenceTransformerEncoder, OnnxEncoder):
        monkeypatch.setattr(cls, "encode", spy(cls.encode))
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


# ---- judge calls from Ray workers ------------------------------------------------------------------
from judge_server import server_fixtures  # noqa: E402

judge_server_module, server = server_fixtures()
#: set only after the module's Ray runtime started: a worker gets it from ragmeter or not at all
JUDGE_KEY = "sk-ray-d41d8cd98f00b204e980"


def _judge_rows(n: int) -> list[dict]:
    return [{"id": f"q{i}", "question": "What is the capital of France?",
             "answer": f"Paris is the capital of France. Fact number {i} is invented.",
             "contexts": ["Paris is the capital of France.", f"Unrelated text {i}."]} for i in range(n)]


def _judge_eval(server, data: Path, db: str, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run_main("eval", str(data), "--metrics", "faithfulness", "--judge", "openai:test-model",
                              "--judge-base-url", f"{server.url}/v1", "--concurrency", "8", "--db", db,
                              "--json", "--no-progress", *extra)
    return code, (json.loads(out) if out.strip() else {}), err


@pytest.mark.slow
def test_judge_calls_from_ray_workers_under_one_limit(ray_runtime, server, tmp_path, monkeypatch):
    from ragmeter.llm.service import JudgeService

    monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"test-model": {"input": 0.5, "output": 1.5}}))
    data = tmp_path / "j.jsonl"
    n = 64
    data.write_text("".join(json.dumps(r) + "\n" for r in _judge_rows(n)), encoding="utf-8")
    on_driver: list[str] = []
    real = JudgeService._call

    async def spy(self, req, key):
        on_driver.append(key)
        return await real(self, req, key)

    monkeypatch.setattr(JudgeService, "_call", spy)
    server.delay = 0.1
    ray_db, local_db = f"sqlite:///{tmp_path / 'ray.db'}", f"sqlite:///{tmp_path / 'local.db'}"
    code, out, err = _judge_eval(server, data, ray_db, "--engine", "ray", "--option", f"judge_prices={prices}")
    assert code == 0, err
    assert on_driver == []  # every call was made by a Ray worker
    assert server.n_requests == n and 1 < server.max_inflight <= 8  # one limit across all workers
    assert out["judge"]["ray"]["callers"] >= 2 and out["judge"]["ray"]["peak_in_flight"] <= 8
    assert server.authorizations <= {f"Bearer {JUDGE_KEY}"}  # the workers had the key
    assert out["metrics"]["faithfulness"]["n"] == n
    # the same values as the local engine
    server.reset()
    code, local, err = _judge_eval(server, data, local_db, "--engine", "local")
    assert code == 0, err
    assert _values(local_db, local["run_id"]) == _values(ray_db, out["run_id"])
    # a re-run is served from the judge cache: no request at all (not even a pre-flight)
    server.reset()
    code, again, err = _judge_eval(server, data, ray_db, "--engine", "ray")
    assert code == 0, err
    assert server.n_requests == 0 and server.pings == [] and again["judge"]["calls"] == 0
    assert _values(ray_db, again["run_id"]) == _values(ray_db, out["run_id"])
    # --max-cost: the run stops spending; what is left is "no value" with the reason
    server.reset()
    budget_db = f"sqlite:///{tmp_path / 'budget.db'}"
    code, capped, err = _judge_eval(server, data, budget_db, "--engine", "ray", "--option", f"judge_prices={prices}",
                                    "--max-cost", "0.002")
    assert code == 0, err
    f, judge = capped["metrics"]["faithfulness"], capped["judge"]
    left = f["missing_reasons"].get("budget exhausted (max_cost=0.002)", 0)
    assert left > 0 and f["n"] > 0 and judge["left_unscored"] == {"faithfulness": left}
    assert judge["budget_exhausted"] is True and judge["cost_usd"] <= 0.002
    assert server.n_requests == f["n"] < n
    # a judge failure is no value with its reason
    server.reset()
    from judge_server import Forced

    server.force(*[Forced(status=400, message="scripted bad request")] * 3)
    fail_db = f"sqlite:///{tmp_path / 'fail.db'}"
    code, failed, err = _judge_eval(server, data, fail_db, "--engine", "ray")
    assert code in (0, 3), err
    reasons = failed["metrics"]["faithfulness"]["missing_reasons"]
    assert sum(reasons.values()) == 3 and all(r.startswith("judge failure") for r in reasons)
    # the key never reaches Ray's logs
    node = ray_runtime._private.worker._global_node
    for p in Path(node.get_session_dir_path(), "logs").rglob("*"):
        if p.is_file():
            assert JUDGE_KEY not in p.read_text(errors="replace"), p


# ---- how the encoder actors are planned (no Ray runtime needed) ------------------------------------
class _FakeRay:
    def __init__(self, resources: dict) -> None:
        self.resources = resources

    def cluster_resources(self) -> dict:
        return self.resources


def test_encoder_actors_ask_for_gpus_only_where_the_cluster_has_them():
    from ragmeter.run.engines.ray_embed import actor_plan

    assert actor_plan(_FakeRay({"CPU": 8.0}), 100, None) == (8, {"num_cpus": 1})
    assert actor_plan(_FakeRay({"CPU": 8.0}), 3, None) == (3, {"num_cpus": 1})  # never more actors than calls
    assert actor_plan(_FakeRay({"CPU": 8.0, "GPU": 2.0}), 100, None) == (2, {"num_gpus": 1, "num_cpus": 1})
    assert actor_plan(_FakeRay({"CPU": 8.0, "GPU": 2.0}), 100, "cuda:0") == (2, {"num_gpus": 1, "num_cpus": 1})
    assert actor_plan(_FakeRay({"CPU": 8.0, "GPU": 2.0}), 100, "cpu") == (8, {"num_cpus": 1})


@pytest.mark.parametrize(("gpu_ids", "option", "device"), [([0], None, "cuda"), ([], None, None), ([], "cpu", "cpu")])
def test_each_encoder_actor_chooses_its_device(monkeypatch, gpu_ids, option, device):
    import ray

    from ragmeter.embed import resolve_model
    from ragmeter.run.engines import ray_embed

    loaded: list = []
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: gpu_ids)
    monkeypatch.setattr(ray, "get_runtime_context", lambda: type("C", (), {"get_node_id": lambda self: "n1"})())
    monkeypatch.setattr("ragmeter.embed.encoders.load_encoder", lambda ref, device=None: loaded.append(device))
    worker = ray_embed.EmbedWorker(resolve_model(None), option)
    assert loaded == [device] and worker.device == device


def test_only_the_runs_texts_go_to_the_cluster(db_url):
    """flush() (the texts every metric asked for in prepare) is encoded remotely; the few texts a
    judge metric embeds while scoring (questions it generated) are encoded here, without starting
    an actor pool per sample."""
    from ragmeter.embed import EmbeddingService, get_encoder

    sent: list[list[str]] = []
    enc = get_encoder()

    def remote(ref, items, *, batch_size, batches_per_call, device):
        sent.append([t for t, _ in items])
        yield list(items), enc.encode([t for t, _ in items], batch_size=batch_size), {"pid": 1, "node": "n",
                                                                                       "device": "cpu"}

    svc = EmbeddingService(store=open_store(db_url))
    svc.remote = remote
    svc.request(["refund policy", "ferry timetable", "refund policy", "  "])
    svc.flush()
    assert sent == [["ferry timetable", "refund policy"]]  # distinct, not blank, longest first
    m = svc.matrix(["refund policy", "a question the judge generated"])
    assert sent == [["ferry timetable", "refund policy"]] and m.shape == (2, 384)
    assert abs(float(m[0] @ enc.encode(["refund policy"])[0]) - 1.0) < 1e-6
    assert svc.stats()["ray"] == {"texts": 2, "actors": 1, "devices": ["cpu"]}


@pytest.mark.slow
def test_more_requests_than_an_async_actor_runs_at_once(ray_runtime, server, db_url):
    """1,100 judge requests (more than the 1,000 tasks an async Ray actor runs at once by default):
    a release must never queue behind waiting requests, or the run would hang."""
    import threading

    from judge_server import judge_options
    from ragmeter.run.runner import evaluate

    done: list = []
    rows = _judge_rows(1100)
    t = threading.Thread(target=lambda: done.append(evaluate(rows, ["faithfulness"], db=db_url, engine="ray",
                                                             options=judge_options(server, judge_concurrency=4))),
                         daemon=True)
    t.start()
    t.join(600)
    assert done, "the run did not finish"
    assert server.n_requests == 1100 and server.max_inflight <= 4
    assert done[0].summary["faithfulness"]["n"] == 1100
