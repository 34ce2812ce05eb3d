"""The HTTP boundary of ``ragmeter serve``: no input answers 5xx, nothing acknowledged is lost.

Every endpoint gets the malformed requests of ``tests/http_fuzz.py`` and hypothesis-generated
bodies and queries (in process); a real server gets the OTLP restart case (children acknowledged,
``kill -9``, root sent after the restart), a label write waiting for another process's write lock,
and ``benchmarks/fuzz_http.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import http_fuzz
from monitor_support import Served, serve_command
from ragmeter.apps.server import create_app
from ragmeter.monitor.calls import read_calls
from ragmeter.store import Store, open_store

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    db = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}"
    seed = http_fuzz.seed_store(db)
    return db, seed


def _client(db: str, host: str = "127.0.0.1", allowed: tuple[str, ...] = ()) -> TestClient:
    old = os.environ.get("RAGMETER_INGEST_TOKEN")
    os.environ["RAGMETER_INGEST_TOKEN"] = TOKEN
    try:
        app = create_app(open_store(db), allowed_hosts=allowed)
    finally:
        if old is None:
            del os.environ["RAGMETER_INGEST_TOKEN"]
        else:
            os.environ["RAGMETER_INGEST_TOKEN"] = old
    return TestClient(app, base_url=f"http://{host}", client=("127.0.0.1", 5555), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def app_client(seeded):
    db, seed = seeded
    client = _client(db)
    targets = http_fuzz.Targets(
        ingest_token=TOKEN, run_id=seed["run_id"], sample_id=seed["sample_id"],
        annotate_token=seed["annotate_token"], review_token=http_fuzz.review_token(client, seed["dataset"]),
        dataset=seed["dataset"], review_sample=seed["review_sample"])
    return client, targets


# ---- the corpus, in process -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["calls", "traces", "label", "review", "get"])
def test_every_malformed_request_gets_a_4xx_naming_the_problem(app_client, kind):
    client, targets = app_client
    probes = [p for p in http_fuzz.probes(targets) if p.kind == kind]
    assert len(probes) >= 25
    wrong = []
    for p in probes:
        r = client.request(p.method, p.path, content=p.body, headers=p.headers)
        if r.status_code >= 500 or (r.status_code < 400) != p.accept:
            wrong.append(f"{p.what}: {r.status_code} {r.text[:200]}")
        elif r.status_code in (400, 413, 422) and r.headers.get("content-type", "").startswith("application/json"):
            detail = r.json()["detail"]
            assert detail and "Traceback" not in str(detail), p.what
    assert not wrong, "\n".join(wrong)


def test_the_issues_cases_name_the_field(app_client):
    client, t = app_client

    def calls(text: str) -> httpx.Response:
        return client.post("/api/v1/calls", content=text.encode("utf-8", "surrogatepass"), headers=AUTH)

    cases = {'{"calls": [{"timestamp": 1e20}]}': "timestamp", '{"calls": [{"timestamp": -5}]}': "timestamp",
             '{"calls": [{"latency_ms": ' + http_fuzz.INT_400 + "}]}": "latency_ms",
             '{"calls": [{"cost_usd": ' + http_fuzz.BIG_INT + "}]}": "cost_usd",
             '{"calls": [{"query": "\\ud800"}]}': "query", '{"calls": [{"metadata": ' + "[" * 3000 + "]" * 3000 + "}]}": "nested"}
    for body, field in cases.items():
        r = calls(body)
        assert r.status_code in (400, 422) and field in r.json()["detail"], (body[:80], r.text)
    span = http_fuzz._span(traceId=None)
    r = client.post("/v1/traces", json=http_fuzz._export(span), headers=AUTH)
    assert r.status_code == 422 and "traceId" in r.json()["detail"]
    assert client.post("/v1/traces", json={"resourceSpans": 5}, headers=AUTH).json()["detail"].endswith(
        "resourceSpans: must be a list, got a number")
    r = client.post("/v1/traces", json=http_fuzz._export(http_fuzz._span(startTimeUnixNano="soon")), headers=AUTH)
    assert r.status_code == 422 and "startTimeUnixNano" in r.json()["detail"]
    stored = read_calls(client.app.state.store, None, None, columns=("call_id",))["call_id"]
    assert "otel:" not in stored
    for path, field in (("/monitor?window=1000000d", "window"), ("/api/runs?limit=" + http_fuzz.HUGE_23, "limit"),
                        ("/api/v1/monitor/stats?window=1000000d", "window")):
        r = client.get(path)
        assert r.status_code in (400, 422) and field in r.text, path
    assert client.get("/datasets/gold@%C2%B2/review").status_code == 404
    assert client.get(f"/datasets/gold@{http_fuzz.HUGE_23}/review").status_code == 404


# ---- hypothesis, one strategy per endpoint ------------------------------------------------------
_text = st.text(st.characters(exclude_categories=()), max_size=12)
_scalar = (st.none() | st.booleans() | st.integers(min_value=-(10**130), max_value=10**130)
           | st.floats() | _text | st.sampled_from(["", "1e400", "NaN", "2026-11-23T10:00:00Z", "-1", "9" * 30]))
_json = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=8)


def _dump(obj) -> bytes:
    return json.dumps(obj, allow_nan=True).encode()


_CALL_KEYS = st.sampled_from(["call_id", "timestamp", "ts", "query", "answer", "contexts", "latency_ms",
                              "latency", "cost_usd", "cost", "error", "feedback", "input_tokens",
                              "output_tokens", "model", "metadata", "route"])


@FUZZ
@given(calls=st.lists(st.dictionaries(_CALL_KEYS, _json, max_size=5) | _json, max_size=3),
       wrap=st.booleans())
def test_fuzz_ingest_calls(app_client, calls, wrap):
    client, _ = app_client
    r = client.post("/api/v1/calls", content=_dump({"calls": calls} if wrap else calls), headers=AUTH)
    assert r.status_code < 500, r.text
    assert (r.status_code == 200) == (r.json().get("accepted") == len(calls))


@FUZZ
@given(body=st.binary(max_size=400), path=st.sampled_from(["/api/v1/calls", "/v1/traces"]),
       ctype=st.sampled_from(["application/json", "application/x-protobuf", ""]))
def test_fuzz_ingest_raw_bytes(app_client, body, path, ctype):
    client, _ = app_client
    r = client.post(path, content=body, headers={**AUTH, "Content-Type": ctype})
    assert r.status_code < 500, r.text


_ID = st.sampled_from(["5b8efff798038103d269b633813fc60c", "W47/95gDgQPSabYzgT/GDA==", "eee19b7ec3c1b174", ""]) | _json
_ANY_VALUE = st.one_of(
    st.fixed_dictionaries({"stringValue": _json}), st.fixed_dictionaries({"intValue": _json}),
    st.fixed_dictionaries({"doubleValue": _json}), st.fixed_dictionaries({"boolValue": _json}),
    st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": _json})}),
    st.fixed_dictionaries({"kvlistValue": _json}), _json)
_ATTR_KEYS = st.sampled_from(["input.value", "output.value", "gen_ai.usage.input_tokens", "ragmeter.cost_usd",
                              "ragmeter.contexts", "metadata", "gen_ai.request.model", "ragmeter.feedback",
                              "retrieval.documents.0.document.content", "gen_ai.input.messages"])
_SPAN = st.fixed_dictionaries({}, optional={
    "traceId": _ID, "spanId": _ID, "parentSpanId": _ID, "name": _json,
    "startTimeUnixNano": _json | st.integers(min_value=0, max_value=2**66),
    "endTimeUnixNano": _json | st.integers(min_value=0, max_value=2**66),
    "attributes": st.lists(st.fixed_dictionaries({"key": _ATTR_KEYS | _json, "value": _ANY_VALUE}), max_size=3) | _json,
    "status": st.fixed_dictionaries({}, optional={"code": _json, "message": _json}) | _json})


@FUZZ
@given(spans=st.lists(_SPAN | _json, max_size=3), resource=_json | st.none())
def test_fuzz_otlp_json(app_client, spans, resource):
    client, _ = app_client
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    r = client.post("/v1/traces", content=_dump(body), headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code < 500, r.text


@FUZZ
@given(body=st.dictionaries(st.sampled_from(["sample_id", "scale", "value"]), _json | st.sampled_from(
    ["doc/1", "overall", "3", "s1"]), max_size=3) | _json)
def test_fuzz_label_writes(app_client, body):
    client, t = app_client
    r = client.post("/annotate/api/labels", content=_dump(body), headers={
        "X-Annotate-Token": t.annotate_token, "Origin": t.origin, "Content-Type": "application/json"})
    assert r.status_code < 500, r.text


@FUZZ
@given(body=st.fixed_dictionaries({}, optional={
    "action": st.sampled_from(["accept", "edit", "reject", "reset"]) | _json,
    "changes": st.dictionaries(st.sampled_from(["question", "references", "relevant", "metadata", "id"]),
                               _json, max_size=3) | _json}) | _json,
    sample=st.sampled_from(["g%2F1", "g2", "nope", "%ED%A0%80"]))
def test_fuzz_review_writes(app_client, body, sample):
    client, t = app_client
    r = client.post(f"/api/datasets/gold/samples/{sample}/review", content=_dump(body), headers={
        "X-Ragmeter-Token": t.review_token, "Content-Type": "application/json"})
    assert r.status_code < 500, r.text


_QUERY = st.text(st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=30) | st.integers(
    min_value=-(10**30), max_value=10**30).map(str) | st.sampled_from(["1e400", "nan", "inf", "-0", "1000000d"])


@FUZZ
@given(route=st.sampled_from(["/monitor", "/api/v1/monitor/stats", "/api/runs", "/runs/{rid}",
                              "/api/runs/{rid}/samples", "/api/compare", "/compare", "/trend/token_f1",
                              "/api/v1/trend/token_f1", "/datasets/gold@{v}/review", "/metrics"]),
       params=st.dictionaries(st.sampled_from(["window", "bucket", "by", "limit", "offset", "sort", "metric",
                                               "q", "runs", "name", "max_p95_ms", "max_error_rate",
                                               "min_metric"]), _QUERY, max_size=4),
       version=_QUERY)
def test_fuzz_dashboard_gets(app_client, route, params, version):
    client, t = app_client
    path = route.replace("{rid}", t.run_id).replace("{v}", httpx.URL("/", params={"v": version}).query.decode()[2:])
    r = client.get(path, params=params)
    assert r.status_code < 500, (path, params, r.text[:300])


# ---- OTLP spans are stored when they arrive -------------------------------------------------------
_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
_ROOT = "00f067aa0ba902b7"


def _child(i: int, trace: str = _TRACE) -> dict:
    return http_fuzz._span(traceId=trace, spanId=f"{i + 1:016x}", parentSpanId=_ROOT, name="retrieve",
                           attributes=[http_fuzz._attr(f"retrieval.documents.0.document.{k}", {"stringValue": v})
                                       for k, v in (("id", f"d{i}"), ("content", f"document {i}"))])


def _root(trace: str = _TRACE, **attrs) -> dict:
    now = time.time_ns()
    extra = [http_fuzz._attr(k, {"stringValue": v}) for k, v in attrs.items()]
    return http_fuzz._span(traceId=trace, spanId=_ROOT, startTimeUnixNano=str(now - 2_000_000_000),
                           endTimeUnixNano=str(now - 1_500_000_000),
                           attributes=[http_fuzz._attr("input.value", {"stringValue": "Where is it?"}),
                                       http_fuzz._attr("output.value", {"stringValue": "Here."}), *extra])


def _pending(db: str) -> int:
    from ragmeter.monitor.spans import pending_spans

    return pending_spans(open_store(db))


def test_children_acknowledged_before_a_kill_9_join_their_root_after_the_restart(tmp_path):
    db = f"sqlite:///{tmp_path / 'otlp.db'}"
    first = Served(db)
    try:
        for i in range(0, 100, 25):  # four requests of 25 children, each acknowledged
            r = httpx.post(first.url + "/v1/traces", json=http_fuzz._export(*[_child(j) for j in range(i, i + 25)]),
                           headers=first.auth, timeout=30)
            assert r.status_code == 200, r.text
    finally:
        first.kill()  # SIGKILL: no shutdown hook runs
    assert _pending(db) == 100
    second = Served(db)
    try:
        r = httpx.post(second.url + "/v1/traces", json=http_fuzz._export(_root()), headers=second.auth, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        second.close()
    out = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "monitor", "stats", "--json", "--db", db],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["calls"] == 1
    cols = read_calls(open_store(db), None, None, columns=("call_id", "contexts", "query", "answer"))
    assert cols["call_id"] == [f"otel:{_TRACE}"]
    assert sorted(c["text"] for c in cols["contexts"][0]) == sorted(f"document {i}" for i in range(100))
    assert (cols["query"][0], cols["answer"][0]) == ("Where is it?", "Here.")
    assert _pending(db) == 0


def test_a_child_stays_stored_when_the_batch_with_its_root_fails(seeded):
    db, _ = seeded
    client = _client(db)
    trace = "5ce929d0e0e47364bf92f3577b34da6a"
    assert client.post("/v1/traces", json=http_fuzz._export(_child(0, trace)), headers=AUTH).status_code == 200
    # the root arrives with a broken sibling, then with a feedback the call cannot take
    broken = http_fuzz._span(traceId=trace, spanId="00000000000000aa", parentSpanId=_ROOT, startTimeUnixNano="x")
    bad = client.post("/v1/traces", json=http_fuzz._export(_root(trace), broken), headers=AUTH)
    assert bad.status_code == 422 and "startTimeUnixNano" in bad.json()["detail"]
    bad = client.post("/v1/traces", json=http_fuzz._export(_root(trace, **{"ragmeter.feedback": "sideways"})),
                      headers=AUTH)
    assert bad.status_code == 422 and "feedback" in bad.json()["detail"]
    ids = read_calls(open_store(db), None, None, columns=("call_id",))["call_id"]
    assert f"otel:{trace}" not in ids
    ok = client.post("/v1/traces", json=http_fuzz._export(_root(trace)), headers=AUTH)
    assert ok.status_code == 200
    cols = read_calls(open_store(db), None, None, columns=("call_id", "contexts"))
    contexts = cols["contexts"][cols["call_id"].index(f"otel:{trace}")]
    assert contexts == [{"id": "d0", "text": "document 0"}]
    # the same request again (an exporter's retry) stores nothing new
    assert client.post("/v1/traces", json=http_fuzz._export(_root(trace)), headers=AUTH).status_code == 200
    assert read_calls(open_store(db), None, None, columns=("call_id",))["call_id"].count(f"otel:{trace}") == 1


def test_spans_waiting_for_a_root_are_bounded_per_trace(seeded, monkeypatch):
    import ragmeter.monitor.spans as spans_mod

    db, _ = seeded
    monkeypatch.setattr(spans_mod, "MAX_PENDING_SPANS", 30)
    client = _client(db)
    trace = "6a3ce929d0e0e4736bf92f3577b34da4"
    before = _pending(db)
    assert client.post("/v1/traces", json=http_fuzz._export(*[_child(i, trace) for i in range(20)]),
                       headers=AUTH).status_code == 200
    r = client.post("/v1/traces", json=http_fuzz._export(*[_child(i, trace) for i in range(20, 40)]), headers=AUTH)
    assert r.status_code == 413 and "at most 30" in r.json()["detail"]
    assert _pending(db) == before + 20  # the refused request stored nothing; the first one is kept
    # the root completes the trace even at the bound
    assert client.post("/v1/traces", json=http_fuzz._export(_root(trace)), headers=AUTH).status_code == 200
    assert _pending(db) == before


def test_two_long_call_ids_are_both_stored_whole(seeded):
    db, _ = seeded
    client = _client(db)
    stem = "c" * 290
    ids = [stem + "-first-one", stem + "-second-on"]
    assert len(ids[0]) == len(ids[1]) == 300
    r = client.post("/api/v1/calls", json={"calls": [{"call_id": i, "query": "q", "latency_ms": 3} for i in ids]},
                    headers=AUTH)
    assert r.status_code == 200 and r.json() == {"accepted": 2}
    stored = read_calls(open_store(db), None, None, columns=("call_id",))["call_id"]
    assert set(ids) <= set(stored)
    too_long = client.post("/api/v1/calls", json={"calls": [{"call_id": "x" * 1025}]}, headers=AUTH)
    assert too_long.status_code == 422 and "call_id" in too_long.json()["detail"]


def test_an_old_store_gets_the_span_table_and_whole_ids(tmp_path):
    import shutil

    import sqlalchemy as sa

    from ragmeter.monitor.calls import insert_calls, normalise_call

    db = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "data" / "store_v0.db", db)
    store = Store(f"sqlite:///{db}")
    assert "otel_spans" in sa.inspect(store.engine).get_table_names()
    long_ids = ["k" * 299 + "1", "k" * 299 + "2"]
    insert_calls(store, [normalise_call({"call_id": i}) for i in long_ids])
    assert sorted(read_calls(store, None, None, columns=("call_id",))["call_id"]) == long_ids


# ---- the event loop is never blocked by the store ---------------------------------------------------
_HOLD_LOCK = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
con.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("ROLLBACK")
"""


@pytest.mark.slow
def test_a_label_write_waiting_for_the_write_lock_stalls_no_other_request(seeded, tmp_path):
    db, seed = seeded
    path = db.removeprefix("sqlite:///")
    served = Served(db)
    holder = None
    try:
        assert httpx.get(served.url + "/", timeout=30).status_code == 200
        holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, path, "10"], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        result: dict = {}

        def label() -> None:
            result["response"] = httpx.post(
                served.url + "/annotate/api/labels", json={"sample_id": "s1", "scale": "overall", "value": 4},
                headers={"X-Annotate-Token": seed["annotate_token"], "Origin": served.url}, timeout=90)

        writer = threading.Thread(target=label)
        writer.start()
        time.sleep(1.0)
        assert writer.is_alive(), "the label write did not wait for the lock"
        timings = {}
        for path_ in ("/favicon.ico", "/"):
            t0 = time.perf_counter()
            r = httpx.get(served.url + path_, timeout=30)
            timings[path_] = time.perf_counter() - t0
            assert r.status_code == 200
        assert writer.is_alive(), "the lock was released before the reads were timed"
        assert max(timings.values()) < 1.0, timings
        writer.join(60)
        assert result["response"].status_code == 200, result["response"].text
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        served.close()


# ---- smaller items ----------------------------------------------------------------------------------
def test_label_writes_accept_allow_host_names(seeded):
    db, seed = seeded
    client = _client(db, host="ragbox.local:8765", allowed=("ragbox.local",))
    r = client.post("/annotate/api/labels", json={"sample_id": "s2", "scale": "overall", "value": 5},
                    headers={"X-Annotate-Token": seed["annotate_token"], "Origin": "http://ragbox.local:8765"})
    assert r.status_code == 200, r.text
    other = _client(db, host="elsewhere.local:8765")
    assert other.get("/").status_code == 400


def test_a_sample_id_with_a_slash_can_be_reviewed(seeded):
    from ragmeter.io.stored import samples_of

    db, seed = seeded
    client = _client(db)
    token = http_fuzz.review_token(client, "gold")
    r = client.post("/api/datasets/gold/samples/g%2F1/review", json={"action": "accept"},
                    headers={"X-Ragmeter-Token": token})
    assert r.status_code == 200 and r.json()["sample_id"] == "g/1" and r.json()["review"] == "accepted"
    reviewed = {d["id"]: d["_review"] for d in samples_of(open_store(db), "gold", include_rejected=True)}
    assert reviewed["g/1"] == "accepted"


def test_annotation_links_name_the_port_serve_listens_on(seeded):
    import inspect

    from cli_runner import run_main
    from ragmeter.apps.cli.report import serve_cmd

    db, seed = seeded
    port = inspect.signature(serve_cmd).parameters["port"].default
    code, out, err = run_main("annotate", "create", seed["run_id"], "--raters", "zoe", "--scales", "overall",
                              "--json", "--db", db)
    assert code == 0, err
    assert json.loads(out)["links"]["zoe"].startswith(f"http://127.0.0.1:{port}/annotate#")


def test_a_server_dies_with_the_process_that_started_it(tmp_path):
    import psutil

    db = f"sqlite:///{tmp_path / 'orphan.db'}"
    parent_code = ("import subprocess, sys, time\n"
                   f"p = subprocess.Popen({serve_command('--port', '0', '--db', db)!r}, stdin=subprocess.PIPE, "
                   "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                   "print(p.pid, flush=True)\n"
                   "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    server_pid = int(parent.stdout.readline())
    assert psutil.pid_exists(server_pid)
    parent.kill()  # kill -9: the parent cannot clean up
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        psutil.Process(server_pid).kill()
        raise AssertionError("the server outlived its parent")


@pytest.mark.slow
def test_fuzz_http_benchmark(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_http.py"),
                          "--db", f"sqlite:///{tmp_path / 'bench.db'}"],
                         capture_output=True, text=True, timeout=900)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert figures["requests"] >= 300 and figures["status_5xx"] == 0 and figures["server_alive"] is True
    assert set(figures["by_endpoint"]) >= {"calls", "traces", "label", "review", "get"}


# ---- the checks themselves ---------------------------------------------------------------------------
def test_safejson_refuses_what_later_fails_and_names_the_path():
    from ragmeter.core.safejson import JSONInputError, loads

    assert loads(b'{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    cases = {'{"a": {"b": [' + "9" * 101 + "]}}": ("a.b[0]", "101 digits"),
             '{"a": 1e400}': ("a", "outside the range"), '{"a": NaN}': ("a", "NaN is not a JSON number"),
             '{"a": ["\\ud800"]}': ("a[0]", "lone surrogate"), '{"a": "x\\u0000"}': ("a", "NUL"),
             '{"\\udc00": 1}': ('"?"', "a key holds a lone surrogate"),
             "[" * 65 + "]" * 65: ("[0]", "nested deeper than 64")}
    for text, (path, why) in cases.items():
        with pytest.raises(JSONInputError) as info:
            loads(text)
        assert path in info.value.path and why in info.value.message, (text[:40], str(info.value))
        assert not info.value.syntax
    for text in ("{", "[" * 100_000 + "]" * 100_000, b"\xff"):
        with pytest.raises(JSONInputError) as info:
            loads(text)
        assert info.value.syntax


def test_normalise_call_bounds_and_whole_ids():
    from ragmeter.core.errors import DatasetError
    from ragmeter.monitor.calls import normalise_call

    assert normalise_call({"call_id": "x" * 1024})["call_id"] == "x" * 1024
    assert normalise_call({"call_id": 12345})["call_id"] == "12345"
    assert normalise_call({"call_id": ""})["call_id"] is None
    for call, field in (({"call_id": "x" * 1025}, "call_id"), ({"call_id": 1.5}, "call_id"),
                        ({"timestamp": 1e20}, "timestamp"), ({"timestamp": -1}, "timestamp"),
                        ({"timestamp": "0001-01-01"}, "timestamp"), ({"timestamp": "9999-12-31T23:59:59-01:00"}, "timestamp"),
                        ({"latency_ms": 10**400}, "latency_ms"), ({"latency_ms": 2e12}, "latency_ms"),
                        ({"cost_usd": 1e10}, "cost_usd"), ({"input_tokens": 2**60}, "input_tokens"),
                        ({"input_tokens": 1.5}, "input_tokens"), ({"query": "a\ud800"}, "query"),
                        ({"model": "m" * 201}, "model"), ({"error": [10**5000]}, "error"),
                        ({"contexts": [{"id": "\udfff"}]}, "contexts[0].id")):
        with pytest.raises(DatasetError, match=field.replace("[", r"\[").replace("]", r"\]")):
            normalise_call(call, where="calls[0]")


def test_otlp_decoding_names_the_place_of_a_bad_value():
    from ragmeter.core.errors import DatasetError
    from ragmeter.monitor.otlp import decode_export

    spans = decode_export(http_fuzz._export(http_fuzz._span(), http_fuzz._span(spanId="W47/95gDgQM=",
                                                                             parentSpanId=http_fuzz._SID)))
    assert [s.span_id for s in spans] == [http_fuzz._SID, "5b8efff798038103"]
    assert spans[0].attributes == {"input.value": "q?", "output.value": "a."} and spans[1].parent_id == http_fuzz._SID
    for span, where in ((http_fuzz._span(traceId=None), "spans[0].traceId"),
                        (http_fuzz._span(traceId="0" * 32), "spans[0].traceId"),
                        (http_fuzz._span(endTimeUnixNano=str(2**64)), "spans[0].endTimeUnixNano"),
                        (http_fuzz._span(attributes=[{"key": "k", "value": {"intValue": str(2**63)}}]),
                         "attributes[0].value.intValue")):
        with pytest.raises(DatasetError, match=re.escape(where)):
            decode_export(http_fuzz._export(span))
