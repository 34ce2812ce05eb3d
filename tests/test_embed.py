"""Encoders and the embeddings service: offline loading, each text embedded once, persistent cache."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import ConfigError
from ragmeter.embed import (
    BERT_MODELS,
    DEFAULT_MODEL,
    EmbeddingError,
    EmbeddingService,
    ModelUnavailableError,
    bundled_model_path,
    get_encoder,
    normalise_rows,
    offline,
    resolve_model,
    text_hash,
)
from ragmeter.embed import service as service_mod
from ragmeter.store import open_store

# ---- a deterministic stand-in encoder for the service's bookkeeping (no torch) ----------------------


class FakeEncoder:
    """Hash-seeded unit vectors; records every text it is asked to embed."""

    def __init__(self, model_id: str = DEFAULT_MODEL, dim: int = 8, fail_after: int | None = None) -> None:
        self.model_id = model_id
        self.dim = dim
        self.seen: list[str] = []
        self.calls = 0
        self.fail_after = fail_after

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def encode(self, texts, *, batch_size=None):
        if self.fail_after is not None and len(self.seen) >= self.fail_after:
            raise RuntimeError("endpoint down")
        self.calls += 1
        self.seen.extend(texts)
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


@pytest.fixture
def fake(monkeypatch):
    enc = FakeEncoder()
    monkeypatch.setattr(service_mod, "load_encoder", lambda ref, **kw: enc)
    return enc


# ---- model names ----------------------------------------------------------------------------------


def test_default_model_resolves_to_the_bundled_package_without_importing_torch():
    code = ("import sys; from ragmeter.embed import resolve_model; r = resolve_model(None); "
            "print(r.model_id, r.local, r.location); "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    model_id, local, location = out[0].split(" ", 2)
    assert model_id == DEFAULT_MODEL and local == "True"
    assert Path(location) == bundled_model_path() and (Path(location) / "model.safetensors").is_file()
    assert out[1] == "[]"


@pytest.mark.parametrize("name", [None, "default", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
def test_names_of_the_default_model_share_one_id(name):
    ref = resolve_model(name)
    assert ref.model_id == DEFAULT_MODEL and ref.backend == "st" and ref.local


def test_resolve_model_forms(tmp_path):
    bare = resolve_model("bert-base-nli-mean-tokens")
    assert (bare.model_id, bare.location, bare.local) == (
        "sentence-transformers/bert-base-nli-mean-tokens", "sentence-transformers/bert-base-nli-mean-tokens", False)
    assert resolve_model("BAAI/bge-small-en-v1.5").model_id == "BAAI/bge-small-en-v1.5"
    folder = resolve_model(str(tmp_path))
    assert folder.local and folder.model_id == f"path:{tmp_path.resolve()}"
    oa = resolve_model("openai:text-embedding-3-small", base_url="http://127.0.0.1:9/v1/")
    assert (oa.backend, oa.location, oa.model_id) == (
        "openai", "text-embedding-3-small", "openai:text-embedding-3-small@http://127.0.0.1:9/v1")
    assert resolve_model("openai:text-embedding-3-small").model_id == "openai:text-embedding-3-small"
    assert resolve_model("onnx:all-MiniLM-L6-v2").model_id == f"onnx:{DEFAULT_MODEL}"
    assert resolve_model("all-MiniLM-L6-v2", backend="openai").backend == "openai"
    # int8 vectors differ from float32 ones: they are cached under their own id
    q = resolve_model("onnx-int8:all-MiniLM-L6-v2")
    assert (q.backend, q.model_id, q.local) == ("onnx-int8", f"onnx-int8:{DEFAULT_MODEL}", q.local)
    assert resolve_model(None, backend="onnx-int8").model_id == f"onnx-int8:{DEFAULT_MODEL}"
    assert resolve_model("onnx-int8:/models/e5").model_id == f"onnx-int8:path:{Path('/models/e5').resolve()}"
    assert EmbeddingService(options={"embedding_backend": "onnx-int8"}).model_id() == f"onnx-int8:{DEFAULT_MODEL}"
    assert EmbeddingService(options={"embedding_backend": "onnx"}).model_id() == f"onnx:{DEFAULT_MODEL}"
    assert resolve_model("openvino:all-MiniLM-L6-v2").model_id == f"openvino:{DEFAULT_MODEL}"
    assert EmbeddingService(options={"embedding_backend": "openvino"}).model_id() == f"openvino:{DEFAULT_MODEL}"
    with pytest.raises(ConfigError, match="onnx, onnx-int8, openvino, openai"):
        resolve_model("x", backend="onnx-int4")
    with pytest.raises(ConfigError, match="empty"):
        resolve_model("  ")
    with pytest.raises(ConfigError, match="unknown embedding backend"):
        resolve_model("x", backend="tensorflow")


@pytest.mark.parametrize("key", ["bert_base_nli_mean_tokens", "bert-base-nli-mean-tokens",
                                 "sentence-transformers/bert-base-nli-mean-tokens"])
def test_embedding_model_paths_accept_metric_keys_and_short_and_full_names(tmp_path, key):
    ref = resolve_model(BERT_MODELS["bert_base_nli_mean_tokens"], paths={key: str(tmp_path)})
    # the id stays the model's name, so the cache is shared whichever way it was provided
    assert ref.local and ref.location == str(tmp_path.resolve())
    assert ref.model_id == "sentence-transformers/bert-base-nli-mean-tokens"


def test_seed_002_keys_map_to_their_sentence_transformers_models():
    assert BERT_MODELS == {
        "bert_all_MiniLM_L6_v2": "sentence-transformers/all-MiniLM-L6-v2",
        "bert_base_nli_mean_tokens": "sentence-transformers/bert-base-nli-mean-tokens",
        "bert_large_nli_mean_tokens": "sentence-transformers/bert-large-nli-mean-tokens",
        "bert_large_nli_stsb_mean_tokens": "sentence-transformers/bert-large-nli-stsb-mean-tokens",
        "bert_distilbert_base_nli_stsb_mean_tokens": "sentence-transformers/distilbert-base-nli-stsb-mean-tokens",
        "bert_paraphrase_multilingual_MiniLM_L12_v2": "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
    }


def test_offline_sets_and_restores_the_hub_switches(monkeypatch):
    import huggingface_hub.constants as hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    with offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
        assert hub.HF_HUB_OFFLINE is True
    assert "HF_HUB_OFFLINE" not in os.environ and os.environ["TRANSFORMERS_OFFLINE"] == "0"
    assert hub.HF_HUB_OFFLINE is False


def test_normalise_rows_keeps_zero_rows_and_rejects_bad_shapes():
    x = normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert x.dtype == np.float32 and x.flags.c_contiguous
    np.testing.assert_allclose(x, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(ValueError):
        normalise_rows(np.zeros(3))


# ---- the real model (loaded once per test process: the encoder cache is process-wide) --------------


@pytest.fixture(scope="module")
def encoder():
    return get_encoder(backend="st")  # sentence-transformers itself (the default may run on ONNX Runtime)


@pytest.mark.slow
def test_default_model_loads_and_encodes_without_opening_a_socket(tmp_path):
    """In a fresh process with every way of reaching the network made to raise, and without
    HF_HUB_OFFLINE in the environment: ragmeter sets it around the load itself."""
    code = textwrap.dedent("""
        import json, socket
        def refuse(*a, **k):
            raise AssertionError(f"network access attempted: {a!r}")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from ragmeter.embed import get_encoder
        enc = get_encoder()
        x = enc.encode(["The capital of France is London", "The capital of France is Paris"])
        print(json.dumps({"id": enc.model_id, "shape": list(x.shape), "cos": float(x[0] @ x[1])}))
    """)
    env = {k: v for k, v in os.environ.items() if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}}
    env["HF_HOME"] = str(tmp_path / "empty-hf-home")  # nothing cached: only the bundled package can serve
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["id"] == DEFAULT_MODEL and out["shape"] == [2, 384]
    assert out["cos"] == pytest.approx(0.8372, abs=2e-3)


def test_encode_matches_sentence_transformers_and_is_unit_length(encoder):
    texts = ["The capital of France is Paris", "Ünïcödé — 東京は日本の首都です", "x", "a " * 400]
    x = encoder.encode(texts)
    assert x.dtype == np.float32 and x.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    ref = encoder.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(x, ref, atol=1e-5)
    # order-independent: the same text gives the same row wherever it is
    y = encoder.encode(texts[::-1])
    np.testing.assert_allclose(y[::-1], x, atol=1e-5)
    assert encoder.encode([]).shape == (0, 384)


def test_encoders_are_loaded_once_per_process(encoder):
    assert get_encoder(backend="st") is encoder
    assert get_encoder("st:all-MiniLM-L6-v2") is encoder
    assert get_encoder() is get_encoder("all-MiniLM-L6-v2")


def test_the_default_backend_gives_sentence_transformers_values_within_1e_6(encoder):
    """With no backend asked for, the model runs on its float32 ONNX export (with OpenVINO) only
    when that was measured equal to sentence-transformers within 1e-6; it keeps the model's id
    (one cache)."""
    from ragmeter.embed.onnx import EQUAL_WITHIN, agreement

    assert resolve_model(None).explicit is False and resolve_model(None, backend="st").explicit
    assert resolve_model("st:all-MiniLM-L6-v2").explicit and resolve_model("onnx:default").explicit
    from ragmeter.embed.openvino import OpenVinoEncoder

    default = get_encoder()
    # OpenVINO comes with the onnx extra: the default runs the export with it (it is faster)
    assert isinstance(default, OpenVinoEncoder) and not default.quantized
    assert default.model_id == DEFAULT_MODEL and encoder.model_id == DEFAULT_MODEL
    found = agreement(default)
    assert found["max_abs_diff"] <= EQUAL_WITHIN and found["max_cos_diff"] <= EQUAL_WITHIN
    texts = ["The capital of France is Paris", "Ünïcödé — 東京は日本の首都です", "x", "a " * 400,
             "O ferry para São Paulo sai às 8h15, e a bilheteira abre às 7h.", "Paris"]
    a, b = default.encode(texts), encoder.encode(texts)
    assert np.abs(a - b).max() <= EQUAL_WITHIN
    assert np.abs(a @ a.T - b @ b.T).max() <= 2 * EQUAL_WITHIN
    # a run on another device than the CPU, or an export that differs, keeps sentence-transformers
    from ragmeter.embed import encoders as enc_mod

    assert enc_mod._same_values_on_onnx(resolve_model(None), "cuda") is None
    assert enc_mod._same_values_on_onnx(resolve_model(None, backend="st"), None) is None


def test_the_two_measured_facts_of_the_issue(encoder):
    x = encoder.encode(["The capital of France is London", "The capital of France is Paris",
                        "Paris is the capital of France.", "Paris"])
    wrong, right = float(x[0] @ x[1]), float(x[2] @ x[3])
    assert wrong == pytest.approx(0.8372, abs=2e-3)
    assert right == pytest.approx(0.7338, abs=2e-3)
    # the wrong answer is closer to its reference than the right one: no threshold separates them
    assert wrong > right


def test_a_model_in_the_local_hf_cache_loads_offline(encoder, tmp_path, monkeypatch):
    """A Hub model present in the local cache (here: the bundled files laid out as a cache entry
    for another repo id) loads with no network, by name."""
    repo = tmp_path / "models--sentence-transformers--bert-base-nli-mean-tokens"
    snap = repo / "snapshots" / ("0" * 40)
    src = bundled_model_path()
    for f in src.rglob("*"):
        if f.is_file():
            dest = snap / f.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(f)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("SENTENCE_TRANSFORMERS_HOME", str(tmp_path))
    enc = get_encoder("bert-base-nli-mean-tokens")
    assert enc.model_id == "sentence-transformers/bert-base-nli-mean-tokens"
    np.testing.assert_allclose(enc.encode(["ferry timetable"]), encoder.encode(["ferry timetable"]), atol=1e-5)


def test_a_model_that_is_not_local_is_unavailable_with_how_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTENCE_TRANSFORMERS_HOME", str(tmp_path))
    with pytest.raises(ModelUnavailableError) as exc:
        get_encoder("bert-large-nli-stsb-mean-tokens")
    msg = str(exc.value)
    assert "not available locally" in msg and "embedding_model_paths" in msg and "Hugging Face cache" in msg
    with pytest.raises(ModelUnavailableError, match="no such folder"):
        get_encoder(str(tmp_path / "nowhere"))
    with pytest.raises(ModelUnavailableError, match="no loadable sentence-transformers model"):
        get_encoder(str(tmp_path))  # a folder, but no model in it


# ---- the service: dedupe, store cache, failures ------------------------------------------------------


def test_each_distinct_text_is_embedded_once(fake):
    svc = EmbeddingService()
    svc.request(["a", "b", "a", "  ", ""])
    svc.request(["b", "c"])
    svc.flush()
    assert sorted(fake.seen) == ["a", "b", "c"]
    m = svc.matrix(["c", "a", "a", " ", "d"])  # "d" was not requested: embedded on demand, once
    assert sorted(fake.seen) == ["a", "b", "c", "d"]
    np.testing.assert_allclose(m[0], fake.vector("c"))
    np.testing.assert_allclose(m[1], m[2])
    assert not m[3].any()  # blank text: zero row
    svc.matrix(["d", "a"])
    assert len(fake.seen) == 4
    assert svc.stats() == {"computed": 4, "cached": 0, "model": DEFAULT_MODEL, "encode_s": svc.stats()["encode_s"]}
    assert svc.matrix([]).shape == (0, fake.dim)


def test_longest_texts_go_first_in_blocks_with_progress(fake):
    events = []

    def progress(desc, total):
        events.append(("start", desc, total))
        return lambda n: events.append(("advance", n))

    svc = EmbeddingService(options={"embedding_batch_size": 2}, progress=progress)
    long_texts = [f"{'long ' * 30}{i:03d}" for i in range(41)]
    short_texts = [f"short {i:03d}" for i in range(40)]
    svc.request(short_texts + long_texts)
    svc.flush()
    assert fake.seen[:41] == long_texts and sorted(fake.seen[41:]) == short_texts
    per_call = 2 * service_mod.BLOCK_BATCHES
    assert events[0] == ("start", "embedding (all-MiniLM-L6-v2)", 81)
    # the last long text gets a batch of its own rather than share one with a short text
    assert [e[1] for e in events[1:]] == [per_call, 41 - per_call, per_call, 40 - per_call]


@settings(max_examples=100, deadline=None)
@given(lengths=st.lists(st.sampled_from([1, 2, 3, 5, 8, 40, 41, 60, 99, 100, 101, 200, 230]), max_size=80),
       batch_size=st.integers(1, 5), per_call=st.integers(1, 4))
def test_plan_calls_never_mixes_long_and_short_texts_in_a_batch(lengths, batch_size, per_call):
    items = [("x" * n, str(i)) for i, n in enumerate(sorted(lengths, reverse=True))]
    calls = service_mod.plan_calls(items, batch_size, per_call)
    assert [it for c in calls for it in c] == items  # every item once, order kept
    for k, call in enumerate(calls):
        # the encoder cuts each call into batch_size pieces: those are the batches
        batches = [call[i:i + batch_size] for i in range(0, len(call), batch_size)]
        assert 1 <= len(batches) <= per_call
        for b in batches:
            assert len(b[-1][0]) >= 0.5 * len(b[0][0])  # padding at most doubles a text
        if k + 1 < len(calls) and len(batches) < per_call:
            # a call ends early only with a batch cut short where the next text is much shorter
            assert len(batches[-1]) < batch_size
            assert len(calls[k + 1][0][0]) < 0.5 * len(batches[-1][0][0])


def test_store_cache_makes_a_second_run_embed_nothing(fake, db_url):
    store = open_store(db_url)
    texts = ["alpha", "beta", "gamma", "alpha"]
    first = EmbeddingService(store=store)
    first.request(texts)
    first.flush()
    m1 = first.matrix(texts)
    assert first.stats()["computed"] == 3 and first.stats()["cached"] == 0
    rows = store.get_embeddings(DEFAULT_MODEL, [text_hash(t) for t in texts])
    assert len(rows) == 3
    np.testing.assert_array_equal(np.frombuffer(rows[text_hash("beta")], dtype="<f4"), fake.vector("beta"))

    fake.seen.clear()
    second = EmbeddingService(store=open_store(db_url))
    second.request(texts + ["delta"])
    second.flush()
    assert fake.seen == ["delta"]
    assert second.stats()["computed"] == 1 and second.stats()["cached"] == 3
    np.testing.assert_array_equal(second.matrix(texts), m1)


def test_a_fully_cached_run_never_loads_the_model(db_url, monkeypatch):
    store = open_store(db_url)
    enc = FakeEncoder()
    store.put_embeddings(DEFAULT_MODEL, {text_hash(t): enc.vector(t).tobytes() for t in ["a", "b"]}, dim=enc.dim)

    def refuse(ref, **kw):
        raise AssertionError("the model was loaded although every text was cached")

    monkeypatch.setattr(service_mod, "load_encoder", refuse)
    svc = EmbeddingService(store=store)
    svc.request(["a", "b"])
    svc.flush()
    np.testing.assert_array_equal(svc.matrix(["b"])[0], enc.vector("b"))
    assert svc.stats()["cached"] == 2 and svc.stats()["computed"] == 0


def test_models_do_not_share_cache_entries(fake, db_url, monkeypatch):
    store = open_store(db_url)
    svc = EmbeddingService(store=store)
    svc.matrix(["same text"])
    other = FakeEncoder(model_id="sentence-transformers/other", dim=4)
    monkeypatch.setattr(service_mod, "load_encoder",
                        lambda ref, **kw: other if ref.model_id.endswith("other") else fake)
    svc2 = EmbeddingService(store=store)
    assert svc2.matrix(["same text"], model="sentence-transformers/other").shape == (1, 4)
    assert other.seen == ["same text"]
    assert svc2.stats()["cached"] == 0


def test_an_unavailable_model_is_remembered_and_raised_by_matrix(monkeypatch):
    calls = []

    def unavailable(ref, **kw):
        calls.append(ref.model_id)
        raise ModelUnavailableError(f"{ref.model_id} is not here")

    monkeypatch.setattr(service_mod, "load_encoder", unavailable)
    svc = EmbeddingService()
    svc.request(["a"], model="bert-large-nli-mean-tokens")
    svc.flush()
    with pytest.raises(ModelUnavailableError, match="is not here"):
        svc.matrix(["a"], model="bert-large-nli-mean-tokens")
    assert calls == ["sentence-transformers/bert-large-nli-mean-tokens"]  # tried once only
    assert "sentence-transformers/bert-large-nli-mean-tokens" in svc.stats()["unavailable"]


def test_an_encoder_failing_midway_keeps_what_it_embedded(db_url, monkeypatch):
    store = open_store(db_url)
    enc = FakeEncoder(fail_after=32)
    monkeypatch.setattr(service_mod, "load_encoder", lambda ref, **kw: enc)
    svc = EmbeddingService(store=store, options={"embedding_batch_size": 2})  # calls of 32 long texts
    texts = [f"{'text ' * 30}{i:03d}" for i in range(40)]
    svc.request(texts)
    svc.flush()
    with pytest.raises(EmbeddingError, match="failed after 32 texts: RuntimeError: endpoint down"):
        svc.matrix(texts)
    # a resumed run embeds only the rest
    enc.fail_after = None
    enc.seen.clear()
    again = EmbeddingService(store=store)
    again.request(texts)
    again.flush()
    assert len(enc.seen) == 8 and again.stats()["cached"] == 32


def test_service_options_are_validated(fake):
    with pytest.raises(ConfigError, match="embedding_batch_size"):
        EmbeddingService(options={"embedding_batch_size": "many"})
    with pytest.raises(ConfigError, match="embedding_batch_size"):
        EmbeddingService(options={"embedding_batch_size": 0})
    with pytest.raises(ConfigError, match="embedding_model_paths"):
        EmbeddingService(options={"embedding_model_paths": "not json"})
    with pytest.raises(ConfigError, match="embedding_model_paths"):
        EmbeddingService(options={"embedding_model_paths": [1, 2]})
    svc = EmbeddingService(options={"embedding_model_paths": '{"bert_base_nli_mean_tokens": "/m"}'})
    assert svc.ref("bert-base-nli-mean-tokens").location == str(Path("/m").resolve())
    with pytest.raises(TypeError):
        svc.request([1])
    with pytest.raises(TypeError):
        EmbeddingService().matrix([None])


def test_the_run_context_provides_the_service(fake, db_url):
    ctx = ScoringContext({"embedding_model": "all-MiniLM-L6-v2"}, store=open_store(db_url))
    svc = ctx.service("embeddings")
    assert isinstance(svc, EmbeddingService) and ctx.service("embeddings") is svc
    svc.request(["x", "y"])
    ctx.flush()
    assert ctx.stats()["embeddings"]["computed"] == 2


# ---- OpenAI-compatible endpoint ------------------------------------------------------------------------


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if body["model"] == "broken":
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "bad model", "type": "invalid_request_error"}}')
            return
        data = []
        for i, text in enumerate(body["input"]):
            v = np.array([len(text), text.count("a") + 1, 2.0], dtype=np.float32)  # not unit length
            emb = base64.b64encode(v.tobytes()).decode() if body.get("encoding_format") == "base64" else v.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        data.reverse()  # the order of the reply is not the order of the inputs
        payload = json.dumps({"object": "list", "data": data, "model": body["model"],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    _EmbeddingsHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _expected(text):
    v = np.array([len(text), text.count("a") + 1, 2.0])
    return v / np.linalg.norm(v)


def test_openai_compatible_endpoint(endpoint, monkeypatch):
    monkeypatch.setenv("MY_EMB_KEY", "sk-test")
    enc = get_encoder("openai:fake-embed", base_url=endpoint, api_key_env="MY_EMB_KEY")
    texts = ["banana", "kiwi", "a", "papaya", "b"]
    x = enc.encode(texts, batch_size=2)
    assert x.dtype == np.float32 and x.shape == (5, 3) and enc.dim == 3
    np.testing.assert_allclose(x, np.stack([_expected(t) for t in texts]), atol=1e-6)
    reqs = _EmbeddingsHandler.requests
    assert [r["body"]["input"] for r in reqs] == [["banana", "kiwi"], ["a", "papaya"], ["b"]]
    assert all(r["path"] == "/v1/embeddings" and r["auth"] == "Bearer sk-test" for r in reqs)


def test_openai_endpoint_through_the_service_and_its_failures(endpoint, monkeypatch, db_url):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    svc = EmbeddingService(store=open_store(db_url), options={
        "embedding_model": "openai:fake-embed", "embedding_base_url": endpoint})
    svc.request(["banana", "kiwi", "banana"])
    svc.flush()
    np.testing.assert_allclose(svc.matrix(["kiwi"])[0], _expected("kiwi"), atol=1e-6)
    assert svc.stats()["model"] == f"openai:fake-embed@{endpoint}" and svc.stats()["computed"] == 2

    broken = EmbeddingService(options={"embedding_model": "openai:broken", "embedding_base_url": endpoint})
    with pytest.raises(EmbeddingError, match="bad model"):
        broken.matrix(["x"])
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelUnavailableError, match="OPENAI_API_KEY"):
        get_encoder("openai:text-embedding-3-small")


# ---- ONNX Runtime backend --------------------------------------------------------------------------


@pytest.mark.slow
def test_onnx_backend_equals_sentence_transformers(encoder, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path))
    from ragmeter.embed.encoders import load_encoder
    from ragmeter.embed.onnx import OnnxEncoder

    ref = resolve_model("all-MiniLM-L6-v2", backend="onnx")
    onnx_enc = OnnxEncoder(ref)  # exports once into RAGMETER_CACHE_DIR
    assert onnx_enc.model_id == "onnx:sentence-transformers/all-MiniLM-L6-v2" and onnx_enc.pooling == "mean"
    assert onnx_enc.path.is_relative_to(tmp_path)
    texts = ["The capital of France is London", "Paris", "Ünïcödé — 東京は日本の首都です", "x",
             "word " * 300, "Check-in closes 20 minutes before departure.", "Paris"]
    got = onnx_enc.encode(texts, batch_size=3)
    assert got.dtype == np.float32 and got.shape == (7, 384)
    assert np.abs(got - encoder.encode(texts)).max() <= 1e-3
    np.testing.assert_array_equal(got[1], got[6])
    assert onnx_enc.encode([]).shape == (0, 384)
    # a second encoder reuses the exported file
    mtime = onnx_enc.path.stat().st_mtime_ns
    again = OnnxEncoder(ref)
    assert again.path == onnx_enc.path and again.path.stat().st_mtime_ns == mtime
    # and the service selects it by option
    monkeypatch.setattr(service_mod, "load_encoder", lambda r, **kw: again if r.backend == "onnx" else load_encoder(r))
    svc = EmbeddingService(options={"embedding_backend": "onnx"})
    assert svc.stats()["computed"] == 0
    np.testing.assert_allclose(svc.matrix(["Paris"])[0], got[1], atol=1e-6)
    assert svc.stats()["model"] == "onnx:sentence-transformers/all-MiniLM-L6-v2"


def test_openvino_backend_gives_sentence_transformers_values_within_1e_6(encoder):
    """The float32 export run with OpenVINO (float32 forced: on AMX/AVX-512 BF16 CPUs OpenVINO
    would otherwise run in bfloat16) equals sentence-transformers within 1e-6, component by
    component and as cosines; its compiled model is cached beside the export."""
    from ragmeter.embed.onnx import EQUAL_WITHIN, agreement
    from ragmeter.embed.openvino import OpenVinoEncoder

    enc = get_encoder("openvino:all-MiniLM-L6-v2")
    assert isinstance(enc, OpenVinoEncoder) and enc.model_id == f"openvino:{DEFAULT_MODEL}"
    assert enc.session.compiled.get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"
    assert any((enc.path.parent / "openvino").iterdir())  # the compiled model, reused by the next process
    texts = ["The capital of France is London", "Paris", "Ünïcödé — 東京は日本の首都です", "x", "word " * 300,
             "Check-in closes 20 minutes before departure. Bicycles travel free on the lower deck.",
             "O ferry para São Paulo sai às 8h15, e a bilheteira abre às 7h.", "Paris", "42", "a b c d e f g"]
    got = enc.encode(texts, batch_size=3)
    want = encoder.encode(texts)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    assert np.abs(got - want).max() <= EQUAL_WITHIN
    iu = np.triu_indices(len(texts), k=1)
    assert np.abs((got @ got.T)[iu] - (want @ want.T)[iu]).max() <= EQUAL_WITHIN
    np.testing.assert_array_equal(got[1], got[7])
    assert enc.encode([]).shape == (0, 384)
    found = agreement(enc)
    assert enc.fp32_path.with_name("agreement-openvino.json").is_file()
    assert max(found["max_abs_diff"], found["max_cos_diff"]) <= EQUAL_WITHIN
    # the same vectors from two threads at once (one infer request, used under a lock)
    out: list[np.ndarray] = []
    workers = [threading.Thread(target=lambda: out.append(enc.encode(texts))) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(out) == 2 and all(np.array_equal(o, enc.encode(texts)) for o in out)


def test_without_openvino_the_default_falls_back_to_onnx_runtime(encoder, monkeypatch):
    """No openvino package, or an export OpenVINO cannot compile: the default runs on ONNX Runtime
    (same values, same model id); asking for ``openvino`` then says how to install it."""
    import importlib.util

    from ragmeter.embed import encoders as enc_mod
    from ragmeter.embed.onnx import OnnxEncoder
    from ragmeter.embed.openvino import OpenVinoEncoder

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] == "openvino" else real_find_spec(name, *a))
    plain = enc_mod._same_values_on_onnx(resolve_model(None), None)
    assert type(plain) is OnnxEncoder and plain.model_id == DEFAULT_MODEL
    monkeypatch.undo()

    def broken(self, path):
        raise RuntimeError("cannot compile")

    monkeypatch.setattr(OpenVinoEncoder, "_open", broken)
    plain = enc_mod._same_values_on_onnx(resolve_model(None), None)
    assert type(plain) is OnnxEncoder
    texts = ["The capital of France is Paris", "Paris"]
    assert np.abs(plain.encode(texts) - encoder.encode(texts)).max() <= 1e-6
    monkeypatch.undo()

    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    with pytest.raises(ModelUnavailableError, match=r"pip install 'ragmeter-eval\[onnx\]'"):
        OpenVinoEncoder(resolve_model("openvino:all-MiniLM-L6-v2"))


#: largest |cosine difference| between onnx-int8 and sentence-transformers over every pair of texts
#: measured by benchmarks/embeddings.py --backends (0.080-0.086 over every pair of 500-2,000 texts; docs/metrics/semantic.md)
INT8_COSINE_TOLERANCE = 0.1

VARIED = ["The capital of France is Paris.", "Paris", "The capital of France is London.",
          "Ünïcödé — 東京は日本の首都です", "x", "word " * 300, "Check-in closes 20 minutes before departure.",
          "Refunds are paid within 14 days to the card used for booking.", "SELECT * FROM ferries;",
          "Dogs must be kept on a lead on the car deck.", "The ferry leaves at 8:15 from the north quay.",
          "I think the answer is probably 42, but I am not sure.", ""]


@pytest.mark.slow
def test_onnx_int8_is_cached_beside_the_export_and_close_to_sentence_transformers(encoder, tmp_path, monkeypatch):
    import onnx

    from ragmeter.embed import onnx as onnx_mod
    from ragmeter.embed.onnx import OnnxEncoder

    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path))
    q = OnnxEncoder(resolve_model("onnx-int8:all-MiniLM-L6-v2"))  # exports float32, then quantises it
    f = OnnxEncoder(resolve_model("onnx:all-MiniLM-L6-v2"))
    assert q.quantized and not f.quantized and q.model_id == f"onnx-int8:{DEFAULT_MODEL}"
    assert q.path.name == "model-int8.onnx" and q.path.parent == f.path.parent == q.fp32_path.parent
    assert q.path.is_relative_to(tmp_path)
    ops = {n.op_type for n in onnx.load(str(f.path)).graph.node}
    assert "Attention" in ops  # the export was fused by ONNX Runtime's transformer optimizer
    assert "MatMulInteger" in {n.op_type for n in onnx.load(str(q.path)).graph.node} or \
        "DynamicQuantizeMatMul" in {n.op_type for n in onnx.load(str(q.path)).graph.node}

    ref = encoder.encode(VARIED)
    want = ref @ ref.T
    got_f, got_q = f.encode(VARIED, batch_size=4), q.encode(VARIED, batch_size=4)
    assert got_q.dtype == np.float32 and got_q.shape == (len(VARIED), 384)
    assert np.abs(got_f @ got_f.T - want).max() <= 1e-5
    assert np.abs(got_q @ got_q.T - want).max() <= INT8_COSINE_TOLERANCE
    np.testing.assert_allclose(np.linalg.norm(got_q, axis=1), 1.0, atol=1e-5)
    # the token budget only changes how texts are batched, not their vectors
    f.max_batch_tokens = 8
    np.testing.assert_allclose(f.encode(VARIED, batch_size=32), got_f, atol=1e-5)

    # later encoders reuse both files: nothing is exported or quantised again
    stamps = {p: p.stat().st_mtime_ns for p in (f.path, q.path)}

    def boom(*a, **kw):
        raise AssertionError("exported or quantised again")

    monkeypatch.setattr(onnx_mod, "load_sentence_transformer", boom)
    monkeypatch.setattr("onnxruntime.quantization.quantize_dynamic", boom)
    again = OnnxEncoder(resolve_model("onnx-int8:all-MiniLM-L6-v2"))
    assert again.path == q.path and {p: p.stat().st_mtime_ns for p in stamps} == stamps
    np.testing.assert_allclose(again.encode(VARIED, batch_size=4), got_q, atol=1e-6)


def test_onnx_finds_a_model_in_the_hub_cache_layout(tmp_path, monkeypatch):
    from ragmeter.embed.onnx import _cached_snapshot

    repo = tmp_path / "hub" / "models--acme--tiny-encoder"
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # set after huggingface_hub was imported: still honoured
    assert _cached_snapshot("acme/tiny-encoder") == snap
    assert _cached_snapshot("acme/not-cached") is None
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert _cached_snapshot("acme/tiny-encoder") is None
