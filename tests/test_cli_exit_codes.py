"""Exit codes and run status (docs/exit-codes.md): 0 done, 1 the check failed, 2 usage/config/input
error with nothing stored, 3 finished but incomplete. The CLI runs both in a subprocess
(``python -m ragmeter.apps.cli``, as a user runs it) and in-process through ``ragmeter.apps.cli.main``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import ragmeter
from cli_runner import run_main
from ragmeter.core.errors import (
    CheckFailedError,
    ConfigError,
    DatasetError,
    IncompleteRunError,
    JudgeError,
    MetricError,
    RagmeterError,
    StoreError,
    exit_code_for,
)
from ragmeter.store import open_store
from references import require_extra

SRC = str(Path(ragmeter.__file__).resolve().parents[1])


def sub(*args: str, db: str, columns: int = 80) -> subprocess.CompletedProcess:
    """``python -m ragmeter.apps.cli ARGS`` in a fresh interpreter, at ``columns`` columns."""
    env = {**os.environ, "PYTHONPATH": SRC, "RAGMETER_DB": db, "COLUMNS": str(columns),
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _runs(db: str) -> list:
    return open_store(db).list_runs(100)


@pytest.fixture
def data(tmp_path) -> dict[str, Path]:
    rows = [{"id": f"s{i}", "question": f"q{i}", "answer": "paris" if i % 4 else "lyon",
             "reference": "paris"} for i in range(20)]
    files = {
        "good": [json.dumps(r) for r in rows],
        "noref": [json.dumps({k: v for k, v in r.items() if k != "reference"}) for r in rows],
        "partial": [json.dumps(r if i % 3 else {k: v for k, v in r.items() if k != "reference"})
                    for i, r in enumerate(rows)],
    }
    out = {}
    for name, lines in files.items():
        out[name] = tmp_path / f"{name}.jsonl"
        out[name].write_text("\n".join(lines) + "\n")
    out["empty"] = tmp_path / "empty.jsonl"
    out["empty"].write_text("")
    out["empty_list"] = tmp_path / "empty.json"
    out["empty_list"].write_text("[]")
    return out


# ---- one place maps errors to exit codes ----------------------------------------------------------

def test_every_error_class_has_its_exit_code():
    assert [c.exit_code for c in (DatasetError, ConfigError, MetricError, JudgeError, StoreError)] == [2] * 5
    assert RagmeterError.exit_code == 2 and CheckFailedError.exit_code == 1
    assert IncompleteRunError.exit_code == 3
    assert exit_code_for(ConfigError("x")) == 2 and exit_code_for(IncompleteRunError("r", ["why"])) == 3
    assert exit_code_for(ValueError("a bug")) == 1
    from ragmeter.llm.config import JudgeConfigError

    assert exit_code_for(JudgeConfigError("bad key")) == 2


# ---- usage errors: two lines, exit 2, no traceback, nothing stored --------------------------------

USAGE_ERRORS = [
    ["evall"],
    ["eval"],
    ["eval", "x.jsonl", "--on-error", "bogus"],
    ["eval", "example", "-m", "ndcg@ten"],
    ["eval", "example", "--metrics"],
    ["eval", "example", "-m", "token_f1", "--max-missing", "2"],
    ["eval", "example", "-m", "no_such_metric"],
    ["eval", "missing-file.jsonl", "-m", "token_f1"],
    ["runs", "--limit", "x"],
    ["show", "no-such-run"],
    ["metrics", "--family", "nosuch"],
    ["--no-such-option"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a))
def test_usage_errors_in_process(args, db_url, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", db_url)
    code, out, err = run_main(*args)
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    assert err.startswith("error: ") and len(err.strip().splitlines()) <= 2, err
    assert _runs(db_url) == []


@pytest.mark.slow
def test_usage_errors_as_a_user_runs_them(tmp_path, data):
    db = f"sqlite:///{tmp_path / 'u.db'}"
    run_id = json.loads(sub("eval", str(data["good"]), "-m", "exact_match", "--json", db=db).stdout)["run_id"]
    cases = {
        ("evall",): "Did you mean 'eval'",
        ("eval",): "give a dataset file or 'example'",
        ("eval", "x.jsonl", "--on-error", "bogus"): "use 'raise' or 'skip', got 'bogus'",
        ("eval", "example", "-m", "ndcg@ten"): "ndcg@k expects an integer k, got 'ten'",
        ("export", run_id, "-f", "pdf"): "use one of csv, parquet, jsonl",
        ("eval", "example", "--metrics"): "requires an argument",
    }
    for args, message in cases.items():
        p = sub(*args, db=db)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stdout + p.stderr and message in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) <= 2, p.stderr
    assert [r.id for r in _runs(db)] == [run_id]
    assert not list(tmp_path.glob("*.pdf"))
    v = sub("--version", db=db)
    assert v.returncode == 0 and v.stdout.strip() == f"ragmeter {ragmeter.__version__}"


def test_export_format_error_names_the_formats(data, db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("RAGMETER_DB", db_url)
    rid = ragmeter.evaluate(data["good"], ["exact_match"], db=db_url).run_id
    code, _, err = run_main("export", rid[:6], "-f", "pdf", "-o", str(tmp_path / "x.pdf"))
    assert code == 2 and "csv, parquet, jsonl" in err and not (tmp_path / "x.pdf").exists()
    require_extra("openpyxl")
    code, _, err = run_main("export", rid[:6], "-f", "xlsx", "-o", str(tmp_path / "x.xlsx"))
    assert code == 0 and (tmp_path / "x.xlsx").exists(), err  # the README's name for -f excel
    code, _, _ = run_main("export", rid[:6], "-f", "csv", "-o", str(tmp_path / "x.csv"))
    header = (tmp_path / "x.csv").read_text().splitlines()[0].split(",")
    assert code == 0 and header[0] == "id" and "exact_match" in header  # inputs first, then metrics


def test_help_shows_whole_option_names_and_the_exit_codes(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    from ragmeter.apps.cli import app
    from ragmeter.apps.cli.core import eval_cmd  # noqa: F401 - the command whose options are listed

    code, out, _ = run_main("eval", "--help")
    assert code == 0
    for opt in ("--judge-api-key-env", "--skip-unavailable", "--no-skip-unavailable", "--judge-base-url",
                "--max-missing", "--dry-run", "--on-error"):
        assert opt in out, opt
    assert "Exit status: 0 done" in out and "3 finished but incomplete" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, _ = run_main("--help")
    assert code == 0 and "Exit status" in out and "--version" in out
    assert all(cmd.name is None or cmd.name in out for cmd in app.registered_commands)


# ---- incomplete runs: exit 3, status "incomplete", reasons stored --------------------------------

@pytest.mark.parametrize("which", ["empty", "empty_list", "noref"])
def test_incomplete_runs_exit_3_and_are_stored_as_incomplete(which, data, db_url, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", db_url)
    code, out, err = run_main("eval", str(data[which]), "-m", "token_f1", "--no-progress")
    assert code == 3, (out, err)
    assert "incomplete" in err and "Traceback" not in out + err
    (run,) = _runs(db_url)
    assert run.status == "incomplete"
    reasons = run.extra["incomplete"]
    if which == "noref":
        assert reasons == ["token_f1: no value on 20 of 20 samples (e.g. missing field: reference)"]
    else:
        assert reasons == ["no samples: the dataset is empty"]
    shown = json.loads(run_main("show", run.id, "--json")[1])
    assert shown["status"] == "incomplete" and shown["incomplete"] == reasons


@pytest.mark.slow
def test_incomplete_runs_as_a_user_runs_them(tmp_path, data):
    db = f"sqlite:///{tmp_path / 's.db'}"
    for which in ("empty", "noref"):
        p = sub("eval", str(data[which]), "-m", "token_f1", db=db)
        assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert [r.status for r in _runs(db)] == ["incomplete", "incomplete"]
    listed = sub("runs", db=db)
    rows = [line.split() for line in listed.stdout.splitlines() if line[:1].isalnum() and " " in line]
    assert listed.returncode == 0 and [r[1] for r in rows if r[0] in {x.id for x in _runs(db)}] == [
        "incomplete", "incomplete"]


def test_max_missing_share(data, db_url, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", db_url)
    # 7 of 20 samples lack a reference: complete by default, incomplete above a 20% allowance
    assert run_main("eval", str(data["partial"]), "-m", "token_f1", "--no-progress")[0] == 0
    code, _, err = run_main("eval", str(data["partial"]), "-m", "token_f1", "--max-missing", "0.2", "--no-progress")
    assert code == 3 and "no value on 7 of 20 samples, more than the 20% allowed" in err
    assert run_main("eval", str(data["partial"]), "-m", "token_f1", "--max-missing", "0.4", "--no-progress")[0] == 0
    assert [r.status for r in _runs(db_url)] == ["completed", "incomplete", "completed"]
    code, out, _ = run_main("eval", str(data["good"]), "-m", "token_f1", "--json")
    assert code == 0 and json.loads(out)["status"] == "completed"


def test_python_api_returns_incomplete_results_and_raises_on_request(data, db_url):
    res = ragmeter.evaluate(data["noref"], ["token_f1", "exact_match"], db=db_url)
    assert res.status == "incomplete" and not res.complete and len(res.incomplete) == 2
    with pytest.raises(IncompleteRunError) as exc:
        res.raise_for_status()
    assert exc.value.run_id == res.run_id and exc.value.result is res and exc.value.exit_code == 3
    empty = ragmeter.evaluate([], ["token_f1"], db=db_url)
    assert empty.status == "incomplete" and empty.incomplete == ["no samples: the dataset is empty"]
    good = ragmeter.evaluate(data["good"], ["token_f1"], db=db_url)
    assert good.complete and good.raise_for_status() is good and good.incomplete == []
    with pytest.raises(ConfigError, match="between 0 and 1"):
        ragmeter.evaluate(data["good"], ["token_f1"], db=db_url, max_missing=1.5)


def test_a_resumed_run_gets_its_status_again(data, db_url):
    res = ragmeter.evaluate(data["noref"], ["token_f1"], db=db_url)
    again = ragmeter.evaluate(None, db=db_url, resume=res.run_id)
    assert again.status == "incomplete" and open_store(db_url).get_run(res.run_id).status == "incomplete"


# ---- judge pre-flight: an unusable judge stops the run before it is stored --------------------------

class _FakeJudge:
    """Stands in for the judge service: its pre-flight request fails as a dead endpoint's would."""

    calls = 0

    def __init__(self, ctx) -> None:
        self.cfg = type("Cfg", (), {"dry_run": False})()

    def preflight(self) -> None:
        type(self).calls += 1
        raise JudgeError("cannot reach the judge at http://127.0.0.1:9/v1: connection refused")

    def close(self) -> None:
        pass


def _judge_args(port: int = 9) -> list[str]:
    return ["--judge", "openai:test-model", "--judge-base-url", f"http://127.0.0.1:{port}/v1"]


def test_runner_asks_the_judge_preflight_before_creating_the_run(data, db_url, monkeypatch):
    import ragmeter.llm  # noqa: F401 - registers the real factory first, so the fake replaces it
    from ragmeter.core import context

    monkeypatch.setitem(context._FACTORIES, "judge", _FakeJudge)
    monkeypatch.setenv("RAGMETER_DB", db_url)
    _FakeJudge.calls = 0
    code, out, err = run_main("eval", str(data["good"]), "-m", "faithfulness", *_judge_args(), "--no-progress")
    assert code == 2 and "connection refused" in err and "Traceback" not in out + err
    asked = _FakeJudge.calls
    assert asked >= 1 and _runs(db_url) == []
    # metrics that need no judge are not held up by one
    assert run_main("eval", str(data["good"]), "-m", "token_f1", *_judge_args(), "--no-progress")[0] == 0
    assert _FakeJudge.calls == asked
    # --skip-unavailable records no value for the judged metric: the run is stored, incomplete
    code, _, err = run_main("eval", str(data["good"]), "-m", "faithfulness,token_f1", *_judge_args(),
                            "--skip-unavailable", "--no-progress")
    assert code == 3 and "faithfulness: no value on 20 of 20 samples" in err
    # a JudgeError from the runner's pre-flight, or a ConfigError when the metric's own check
    # asked the judge first: either way exit status 2 and nothing stored
    with pytest.raises(RagmeterError, match="connection refused") as exc:
        ragmeter.evaluate(data["good"], ["faithfulness"], db=db_url,
                          options={"judge": "openai:test-model", "judge_base_url": "http://127.0.0.1:9/v1"})
    assert exc.value.exit_code == 2 and len(_runs(db_url)) == 2


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is: connections are refused


def _has_judge_preflight() -> bool:
    from ragmeter.llm.service import JudgeService

    return callable(getattr(JudgeService, "preflight", None))


@pytest.mark.skipif(not _has_judge_preflight(),
                    reason="needs JudgeService.preflight() from the llm branch (the runner calls it when present)")
def test_a_judge_at_a_closed_port_exits_2_and_stores_nothing(data, tmp_path):
    db = f"sqlite:///{tmp_path / 'j.db'}"
    rows = tmp_path / "with_contexts.jsonl"  # faithfulness has something to judge: the pre-flight is sent
    rows.write_text("".join(json.dumps({**json.loads(line), "contexts": ["Paris is the capital."]}) + "\n"
                            for line in data["good"].read_text().splitlines()))
    p = sub("eval", str(rows), "-m", "faithfulness", *_judge_args(_closed_port()), "--no-progress", db=db)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and _runs(db) == []
    # without contexts nothing would be sent: no pre-flight, and the run is incomplete (no value, 3)
    p = sub("eval", str(data["good"]), "-m", "faithfulness", *_judge_args(_closed_port()), "--no-progress",
            db=db)
    assert p.returncode == 3 and "missing field: context_texts" in p.stderr, (p.stdout, p.stderr)


# ---- gate: 1 regression, 2 misconfigured, 3 incomplete --------------------------------------------

def test_gate_exit_codes(tmp_path, db_url, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", db_url)
    rows = [{"id": f"s{i}", "answer": "lyon" if i % 4 == 0 else "paris", "reference": "paris"} for i in range(40)]
    worse = [dict(r, answer="lyon") if i % 3 == 1 else r for i, r in enumerate(rows)]
    ragmeter.evaluate(rows, ["exact_match"], db=db_url, name="good")
    ragmeter.evaluate(worse, ["exact_match"], db=db_url, name="worse")
    ragmeter.evaluate([{"id": r["id"], "answer": r["answer"]} for r in rows], ["exact_match"], db=db_url,
                      name="noref")
    assert run_main("gate", "good", "-b", "good")[0] == 0
    code, out, _ = run_main("gate", "worse", "-b", "good")
    assert code == 1 and "REGRESSED" in out
    for args in (["gate", "good", "-b", "nosuch"], ["gate", "good", "-b", "good", "-m", "bleu"],
                 ["gate", "good", "-b", "good", "--max-drop", "-1"], ["gate", "good", "-b", "good", "--alpha", "2"],
                 ["gate", "good", "-b", str(tmp_path / "missing.json")], ["gate", "good"]):
        code, out, err = run_main(*args)
        assert code == 2 and "Traceback" not in out + err, (args, err)
    code, out, err = run_main("gate", "noref", "-b", "good")
    assert code == 3 and "INCOMPLETE" in out and "no value" in err
    code, out, _ = run_main("gate", "noref", "-b", "good", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["exit_code"] == 3 and doc["incomplete"]


# ---- 80 columns -----------------------------------------------------------------------------------

def test_metrics_at_80_columns_show_family_and_direction_of_every_metric(monkeypatch):
    from ragmeter.metrics.registry import all_metrics

    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("metrics")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    for s in all_metrics():
        name = s.name + (f"@{s.param}" if s.param else "")
        row = next((line for line in lines if line.split() and line.split()[0] == name), None)
        assert row is not None, name
        cells = row.split()
        assert cells[1] == s.family and cells[2] == ("higher" if s.higher_is_better else "lower"), row
        assert s.requires[0] in row if s.requires else True
    code, out, _ = run_main("metrics", "--long", "--family", "lexical")
    assert code == 0 and "SQuAD token F1" in out


@pytest.mark.parametrize("columns", [80, 60])
def test_runs_at_narrow_widths_show_whole_run_ids(columns, data, db_url, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", db_url)
    ids = [ragmeter.evaluate(data["good"], ["token_f1", "exact_match", "rouge1_fmeasure", "bleu", "chrf"],
                             db=db_url, name="a run with a rather long name for a narrow terminal").run_id
           for _ in range(2)]
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = run_main("runs")
    assert code == 0
    for rid in ids:
        assert any(line.split() and line.split()[0] == rid for line in out.splitlines()), out
    assert max(len(line) for line in out.splitlines()) <= columns


@pytest.mark.slow
def test_metrics_and_runs_at_80_columns_in_a_terminal(tmp_path, data):
    db = f"sqlite:///{tmp_path / 'w.db'}"
    rid = json.loads(sub("eval", str(data["good"]), "-m", "token_f1", "--json", db=db).stdout)["run_id"]
    m = sub("metrics", db=db)
    assert m.returncode == 0 and "retrieval" in m.stdout and "lower" in m.stdout
    r = sub("runs", db=db)
    assert r.returncode == 0 and rid in r.stdout
