"""``ragmeter simulate``: simulated users (through the judge client) talk to a system under test;
the conversations are stored as a dataset that ``ragmeter eval dataset:NAME`` scores."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli_runner import run_main
from judge_server import server_fixtures
from ragmeter.apps.cli import app
from ragmeter.golden.datasets import samples_of
from ragmeter.store import open_store

runner = CliRunner()
judge_server_module, server = server_fixtures()

SCENARIOS = """scenarios:
  - persona: A commuter from Halden Isle.
    goal: Find the cheapest daily fare to Port Averly.
    expected_outcome: The resident card discount is explained.
  - id: late-driver
    persona: A driver running late.
    goal: Know what happens after vehicle check-in closes.
    expected_outcome: The car moves to the next sailing.
    max_turns: 2
  - id: stopper
    persona: Someone in a hurry.
    goal: Ask one thing about luggage.
    expected_outcome: Any answer.
    stop: what I know
"""


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=True)


def main(*args):
    """``ragmeter ARGS`` through ``cli.main`` (its exit codes): (status, stdout + stderr)."""
    code, out, err = run_main(*map(str, args))
    return code, out + err


@pytest.fixture
def scenarios(tmp_path):
    p = tmp_path / "scenarios.yaml"
    p.write_text(SCENARIOS)
    return p


def judge_args(server):
    return ["--judge", "openai:sim-user", "--judge-base-url", f"{server.url}/v1"]


def test_simulate_stores_conversations_as_a_dataset_that_eval_scores(server, scenarios, db_url):
    r = invoke("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--scenarios", scenarios,
               "--turns", 4, "--name", "sim", *judge_args(server), "--db", db_url, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["dataset"] == "dataset:sim@1" and out["conversations"] == 3
    assert out["ended"] == {"sim-scenario-1": "max_turns", "sim-late-driver": "max_turns", "sim-stopper": "stop"}
    rows = samples_of(open_store(db_url), "sim")
    convs = {r["id"]: r["metadata"]["conversation"] for r in rows if "conversation" in r["metadata"]}
    assert [len(c["turns"]) for c in convs.values()] == [8, 4, 2]
    first = convs["sim-scenario-1"]["turns"]
    assert (first[0]["role"], first[0]["content"]) == ("user", "Find the cheapest daily fare to Port Averly.")
    assert first[1]["content"].startswith("Here is what I know about that: Find the cheapest")
    assert convs["sim-scenario-1"]["chatbot_role"] == "You are a helpful assistant."
    assert convs["sim-scenario-1"]["user_description"] == "A commuter from Halden Isle."
    # the target got the whole conversation each time, with the role as its system message
    # (the conversations advance together: the first scenario's chats are picked by their first message)
    mine = [c for c in server.chats if c["messages"][1]["content"].startswith("Find the cheapest daily fare")]
    assert [len(c["messages"]) for c in mine] == [2, 4, 6, 8]
    assert server.chats[0]["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert server.chats[0]["model"] == "M"
    r = invoke("eval", "dataset:sim", "--metrics", "role_adherence", *judge_args(server), "--db", db_url, "--no-progress")
    assert r.exit_code == 0, r.output
    run = open_store(db_url).list_runs()[0]
    assert run.summary["role_adherence"]["n"] == 3 and run.summary["role_adherence"]["n_missing"] == 0


def test_the_simulated_user_ends_when_the_goal_is_reached(server, tmp_path, db_url, monkeypatch):
    p = tmp_path / "s.yaml"
    p.write_text("scenarios:\n  - {persona: p, goal: say DONE please, expected_outcome: DONE}\n")
    r = invoke("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--scenarios", p,
               "--name", "g", *judge_args(server), "--db", db_url, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["ended"] == {"g-scenario-1": "goal_reached"} and out["turns"] == 2


def echo_target(messages):
    return f"echo {len(messages)}: {messages[-1]['content']}"


def test_a_python_callable_target(server, scenarios, db_url, monkeypatch):
    monkeypatch.setitem(sys.modules, "sim_targets", sys.modules[__name__])
    r = invoke("simulate", "--target", "python:sim_targets:echo_target", "--scenarios", scenarios,
               "--turns", 2, "--name", "py", *judge_args(server), "--db", db_url, "--json")
    assert r.exit_code == 0, r.output
    rows = samples_of(open_store(db_url), "py")
    conv = next(r["metadata"]["conversation"] for r in rows if r["id"] == "py-scenario-1")
    assert conv["turns"][1]["content"] == "echo 2: Find the cheapest daily fare to Port Averly."


def test_an_http_target_and_a_failing_one(server, scenarios, db_url):
    calls = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            calls.append(body)
            last = body["messages"][-1]["content"]
            status, reply = (500, {"error": "boom"}) if "check-in" in last else (200, {"content": f"ok: {last}"})
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        r = invoke("simulate", "--target", f"http://127.0.0.1:{httpd.server_port}/chat", "--target-kind", "http",
                   "--scenarios", scenarios, "--turns", 2, "--name", "h", *judge_args(server), "--db", db_url,
                   "--json")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert r.exit_code == 3, r.output  # one scenario failed, the others are stored
    out = json.loads([ln for ln in r.output.splitlines() if ln.startswith("{")][-1])
    assert out["conversations"] == 2 and "HTTP 500" in out["failed"]["late-driver"]
    # the first scenario's first call (calls of the conversations arrive in any order)
    assert any(len(c["messages"]) == 2 and c["messages"][-1]["content"] == "Find the cheapest daily fare to Port Averly."
               for c in calls)


BAD = [
    ("scenarios: []\n", "scenarios"),
    ("other: 1\nscenarios: [{persona: a, goal: b, expected_outcome: c}]\n", "other"),
    ("- just a list\n", "scenarios"),
    ("scenarios: [{persona: a, goal: b}]\n", "scenarios[0].expected_outcome"),
    ("scenarios: [{persona: a, goal: 3, expected_outcome: c}]\n", "scenarios[0].goal"),
    ("scenarios: [{persona: a, goal: b, expected_outcome: c, max_turns: 0}]\n", "scenarios[0].max_turns"),
    ("scenarios: [{persona: a, goal: b, expected_outcome: c, max_turns: true}]\n", "scenarios[0].max_turns"),
    ("scenarios: [{persona: a, goal: b, expected_outcome: c, stop: [x]}]\n", "scenarios[0].stop"),
    ("scenarios: [{persona: a, goal: b, expected_outcome: c, colour: red}]\n", "scenarios[0].colour"),
    ("scenarios: [{persona: a, goal: b, expected_outcome: c, id: x}, {persona: a, goal: b, expected_outcome: c, id: x}]\n",
     "scenarios[1].id"),
    ("scenarios: [oops]\n", "scenarios[0]"),
    ("scenarios: [{persona: a, goal: b\n", None),
]


@pytest.mark.parametrize("text, field", BAD)
def test_a_malformed_scenarios_file_exits_2_naming_the_file_and_field(server, tmp_path, db_url, text, field):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    code, out = main("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--scenarios", p,
                     "--name", "x", *judge_args(server), "--db", db_url)
    assert code == 2, out
    assert "bad.yaml" in out and (field is None or f"field '{field}'" in out)
    assert server.chats == [] and server.requests == []


@pytest.mark.parametrize("args, needle", [
    (["--target", "ftp://x", "--target-model", "M"], "--target"),
    (["--target", "http://127.0.0.1:9/v1"], "--target-model"),
    (["--target", "python:no_such_module_xyz:f"], "cannot import"),
    (["--target", "http://127.0.0.1:9/v1", "--target-model", "M", "--target-kind", "grpc"], "--target-kind"),
    (["--target", "http://127.0.0.1:9/v1", "--target-model", "M", "--turns", "0"], "--turns"),
])
def test_bad_options_exit_2(server, scenarios, db_url, args, needle):
    code, out = main("simulate", *args, "--scenarios", scenarios, "--name", "x", *judge_args(server), "--db", db_url)
    assert code == 2, out
    assert needle in out


def test_no_judge_or_an_unreachable_target_exit_2_and_store_nothing(server, scenarios, db_url):
    code, out = main("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--scenarios", scenarios,
                     "--name", "x", "--db", db_url)
    assert code == 2 and "--judge" in out, out
    code, out = main("simulate", "--target", "http://127.0.0.1:9/v1", "--target-model", "M", "--scenarios", scenarios,
                     "--name", "x", "--timeout", "2", *judge_args(server), "--db", db_url)
    assert code == 2 and "no conversation could be held" in out, out
    from ragmeter.io.stored import list_datasets

    assert list_datasets(open_store(db_url)) == []


def test_simulated_users_from_a_golden_datasets_samples(server, tmp_path, db_url):
    from ragmeter.golden.datasets import save_dataset

    save_dataset(open_store(db_url), "gold", [
        {"id": "q 1", "question": "How long is the crossing to Halden Isle?", "references": ["55 minutes."]},
        {"id": "q2", "question": "Can I bring a dog?"}])
    r = invoke("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--from-dataset", "gold",
               "--turns", 1, "--name", "fromgold", *judge_args(server), "--db", db_url, "--json")
    assert r.exit_code == 0, r.output
    rows = samples_of(open_store(db_url), "fromgold")
    convs = {r["id"]: r["metadata"]["conversation"] for r in rows if "conversation" in r["metadata"]}
    assert set(convs) == {"fromgold-q-1", "fromgold-q2"}
    assert convs["fromgold-q-1"]["expected_outcome"] == "55 minutes."
    assert convs["fromgold-q-1"]["turns"][0]["content"] == "How long is the crossing to Halden Isle?"
    code, out = main("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--name", "x",
                     *judge_args(server), "--db", db_url)
    assert code == 2 and "--from-dataset" in out


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=20)
_scenario = st.fixed_dictionaries({}, optional={k: _json | st.text(max_size=5) for k in
                                                ("id", "persona", "goal", "expected_outcome", "max_turns", "stop",
                                                 "chatbot_role", "extra")})


@settings(max_examples=400, deadline=None)
@given(doc=st.one_of(_json, st.fixed_dictionaries({"scenarios": st.lists(_scenario | _json, max_size=4)})))
def test_fuzz_scenarios_give_scenarios_or_a_dataset_error(doc):
    from ragmeter.core.errors import DatasetError
    from ragmeter.simulate.scenarios import parse_scenarios

    try:
        got = parse_scenarios(doc, "f.yaml")
    except DatasetError as exc:
        assert "f.yaml" in str(exc)
        return
    assert got and all(s.persona.strip() and s.goal.strip() and s.expected_outcome.strip() for s in got)


_SLOW = {"now": 0, "most": 0}
_SLOW_LOCK = threading.Lock()


def slow_target(messages):
    """A target that takes 50 ms and counts how many calls it serves at once."""
    import time

    with _SLOW_LOCK:
        _SLOW["now"] += 1
        _SLOW["most"] = max(_SLOW["most"], _SLOW["now"])
    time.sleep(0.05)
    with _SLOW_LOCK:
        _SLOW["now"] -= 1
    return f"noted: {messages[-1]['content']}"


def test_conversations_advance_together_and_the_outcome_does_not_depend_on_concurrency(server, scenarios, db_url,
                                                                                        monkeypatch):
    monkeypatch.setitem(sys.modules, "sim_targets", sys.modules[__name__])
    stored, most = {}, {}
    for conc in (1, 4):
        _SLOW.update(now=0, most=0)
        r = invoke("simulate", "--target", "python:sim_targets:slow_target", "--scenarios", scenarios,
                   "--turns", 3, "--name", f"c{conc}", "--concurrency", conc, *judge_args(server), "--db", db_url,
                   "--json")
        assert r.exit_code == 0, r.output
        most[conc] = _SLOW["most"]
        rows = samples_of(open_store(db_url), f"c{conc}")
        stored[conc] = {r["id"].split("-", 1)[1]: r["metadata"]["conversation"]["turns"]
                        for r in rows if "conversation" in r["metadata"]}
    assert stored[1] == stored[4] and len(stored[1]) == 3
    assert most[1] == 1 and most[4] == 3  # three scenarios, each with its own thread
    r = invoke("simulate", "--target", "python:sim_targets:slow_target", "--scenarios", scenarios,
               "--name", "c0", "--concurrency", 0, *judge_args(server), "--db", db_url)
    assert r.exit_code == 2 and "concurrency" in r.output
