"""The redaction layer: credentials never leave the process (errors, stored config, reasons,
dashboard bodies, CLI output), and config files that hold one are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragmeter import evaluate
from ragmeter.core.config import env_secret, load_config
from ragmeter.core.errors import ConfigError, StoreError
from ragmeter.core.redact import endpoint_id, find_secrets, is_secret_name, redact, redact_obj
from ragmeter.core.schema import Sample, Score
from ragmeter.llm.config import JudgeConfigError, config_from_options
from ragmeter.store import Store

SECRET = "BARSSECRET"
PG_URL = f"postgresql+psycopg://u:{SECRET}@127.0.0.1:1/x"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args], capture_output=True, text=True,
                          env=e, cwd=cwd, timeout=120)


@pytest.mark.parametrize("text, secret", [
    (f"no run 'x' in {PG_URL}", SECRET),
    ("GET https://generativelanguage.googleapis.com/v1beta/models?key=AIzaSyA1234567890abcdefghijk", "AIzaSy"),
    ("https://proxy.example/v1?api_key=plainsecret1&region=eu", "plainsecret1"),
    ("Authorization: Bearer tok_abcdefgh12345", "tok_abcdefgh12345"),
    ('{"error": {"message": "Incorrect API key provided: sk-proj-AbCdEf0123456789xyz"}}', "sk-proj-AbCdEf"),
    ("key sk-ant-api03-abcdefghijklmnop rejected", "sk-ant-api03"),
    ("password=hunter2hunter and token: s3cr3tvalue", "hunter2hunter"),
    ("password=hunter2hunter and token: s3cr3tvalue", "s3cr3tvalue"),
    ("x-api-key: a1b2c3d4e5f6", "a1b2c3d4e5f6"),
    ("hf_abcdefghijklmnopqrstuvwxyz and ghp_abcdefghijklmnopqrstuvwxyz", "hf_abcdef"),
])
def test_redact_masks_secrets(text, secret):
    out = redact(text)
    assert secret not in out
    assert "***" in out


@pytest.mark.parametrize("text", [
    "judge failure: timeout after 3 attempts",
    "tokens: 1,234 in, 56 out; cost $0.000120",
    "api_key_env=OPENAI_API_KEY max_tokens=5",
    "missing field: reference",
    "no run 'abc' in sqlite:////tmp/x.db (see `ragmeter runs`)",
    "ollama:llama3.1:8b",
    "a basic question; each token counted; send a bearer token in the header",
])
def test_redact_keeps_ordinary_text(text):
    assert redact(text) == text


def test_secret_names():
    for name in ("api_key", "judge_api_key", "x-api-key", "Authorization", "password", "judge_token",
                 "client_secret", "apiKey", "secret_access_key"):
        assert is_secret_name(name), name
    for name in ("api_key_env", "judge_api_key_env", "max_tokens", "key", "token_param", "credentials_file",
                 "model", "expected_output_tokens"):
        assert not is_secret_name(name), name


def test_redact_obj_and_find_secrets():
    cfg = {"judge": {"model": "openai:m", "api_key": "sk-x"}, "judge_headers": {"Authorization": "Bearer abcdefgh"},
           "judge_api_key_env": "K", "metrics": [{"name": "m", "key": "m@3"}], "n": 3}
    out = redact_obj(cfg)
    assert out["judge"]["api_key"] == "***" and out["judge_headers"]["Authorization"] == "***"
    assert out["judge_api_key_env"] == "K" and out["metrics"] == cfg["metrics"] and out["n"] == 3
    assert sorted(find_secrets(cfg)) == ["judge.api_key", "judge_headers.Authorization"]


def test_endpoint_id_normalises_and_strips_secrets():
    a = endpoint_id("HTTP://User:pw@LocalHost:80/v1/?key=abc&api-version=1")
    assert a == endpoint_id("http://localhost/v1?api-version=1")
    assert "pw" not in a and "abc" not in a
    assert endpoint_id("http://127.0.0.1:8001/v1") != endpoint_id("http://127.0.0.1:8002/v1")
    assert endpoint_id(None) == ""


def test_error_messages_are_redacted():
    err = StoreError(f"cannot open database {PG_URL!r}: refused")
    assert SECRET not in str(err) and SECRET not in repr(err.args)
    assert "u:***@127.0.0.1" in str(err)


def test_missing_reasons_and_details_are_redacted():
    s = Score.missing("judge failure: HTTP 400 (key=sk-proj-abcdefghijklmnop0123)",
                      {"judge_error": f"echo {PG_URL}"})
    assert "sk-proj" not in s.reason and SECRET not in json.dumps(s.details)


def test_cli_runs_never_prints_the_db_password():
    r = _cli("runs", "--db", PG_URL)
    assert r.returncode != 0
    assert SECRET not in r.stdout + r.stderr


def test_cli_show_unknown_run_hides_password(tmp_path, monkeypatch):
    # the store's URL reaches StoreError messages ("no run X in URL"): they are redacted
    store = Store(str(tmp_path / "r.db"))
    store.url = PG_URL
    with pytest.raises(StoreError) as e:
        store.resolve_run("nosuchrun")
    assert SECRET not in str(e.value) and "nosuchrun" in str(e.value)


def test_dashboard_404_body_hides_password(tmp_path):
    from ragmeter.apps.server import create_app

    store = Store(str(tmp_path / "d.db"))
    store.url = PG_URL  # a store reached by a URL with a password
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    for path in ("/api/runs/nosuchrun", "/runs/nosuchrun", "/api/runs/nosuchrun/samples/x"):
        r = client.get(path)
        assert r.status_code in (404, 400), path
        assert SECRET not in r.text, path
    assert "nosuchrun" in client.get("/api/runs/nosuchrun").json()["detail"]


@pytest.mark.parametrize("body", [
    "metrics: [token_f1]\njudge:\n  model: openai:gpt-4o-mini\n  api_key: sk-proj-abcdefghijklmnopqrst\n",
    "metrics: [token_f1]\noptions:\n  judge_headers:\n    Authorization: Bearer abcdefghijk\n",
    "metrics: [token_f1]\noptions:\n  judge_base_url: https://proxy.example/v1?key=zzzzzzzz\n",
    "metrics: [token_f1]\noptions:\n  password: hunter2\n",
])
def test_config_file_with_a_secret_is_refused(tmp_path, body):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(body)
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    msg = str(e.value)
    assert "environment" in msg and "judge_api_key_env" in msg
    assert "hunter2" not in msg and "abcdefghijk" not in msg


def test_cli_config_with_api_key_exits_2_and_stores_nothing(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("metrics: [token_f1]\njudge:\n  model: openai:gpt-4o-mini\n  api_key: sk-proj-abcdefghijklmnopqrst\n")
    db = tmp_path / "s.db"
    r = _cli("eval", "example", "--config", str(cfg), "--db", str(db), "--no-progress")
    assert r.returncode == 2, r.stderr
    assert "api_key" in r.stderr and "OPENAI_API_KEY" in r.stderr
    assert "sk-proj" not in r.stdout + r.stderr
    assert not db.exists() or Store(str(db)).list_runs() == []


def test_judge_options_refuse_secrets():
    with pytest.raises(JudgeConfigError, match="environment"):
        config_from_options({"judge": {"model": "openai:m", "api_key": "sk-abc"}})
    with pytest.raises(JudgeConfigError, match="judge_api_key"):
        config_from_options({"judge": "openai:m", "judge_api_key": "sk-abc"})
    with pytest.raises(JudgeConfigError):
        config_from_options({"judge": "openai:m", "judge_base_url": "https://h/v1?api_key=zzz"})


def test_stored_config_is_redacted(tmp_path):
    db = Store(str(tmp_path / "o.db"))
    res = evaluate([Sample(id="a", question="q", answer="a b", references=["a b"])], ["token_f1"], db=db,
                   options={"extra_headers": {"Authorization": "Bearer abcdefghijk"}, "db_password": "pw123456",
                            "note": f"see {PG_URL}"}, progress=False)
    cfg = json.dumps(db.get_run(res.run_id).config)
    assert "abcdefghijk" not in cfg and "pw123456" not in cfg and SECRET not in cfg


def test_credentials_file_named_by_env(tmp_path, monkeypatch):
    f = tmp_path / "creds"
    f.write_text("# judge keys\nexport MY_JUDGE_KEY='sk-from-file'\nOTHER=1\n")
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    monkeypatch.setenv("RAGMETER_CREDENTIALS", str(f))
    assert env_secret("MY_JUDGE_KEY") == "sk-from-file"
    assert env_secret("NOT_THERE") is None
    monkeypatch.setenv("MY_JUDGE_KEY", "from-env")
    assert env_secret("MY_JUDGE_KEY") == "from-env"


def test_report_and_dashboard_redact_reasons_stored_before_redaction(tmp_path):
    from ragmeter.apps.report import data
    from ragmeter.apps.server import create_app

    store = Store(str(tmp_path / "legacy.db"))
    res = evaluate([Sample(id="a", question="q", answer="a b", references=["a b"])], ["token_f1"], db=store,
                   progress=False)
    leaked = "judge failure: HTTP 400 Incorrect API key provided: sk-proj-LEAKEDLEAKED0123456789"
    from sqlalchemy import update

    from ragmeter.store.models import ScoreRow

    with store.session() as s, s.begin():  # as an older version stored it
        s.execute(update(ScoreRow).where(ScoreRow.run_id == res.run_id).values(value=None, reason=leaked))
    view = json.dumps(data.run_view(store, res.run_id), default=str)
    assert "LEAKEDLEAKED" not in view and "judge failure: HTTP 400" in view
    body = TestClient(create_app(store), base_url="http://127.0.0.1").get(f"/runs/{res.run_id}").text
    assert "LEAKEDLEAKED" not in body


TOKEN_URL = "http://ZZTOKEN123@127.0.0.1:9/v1"


def test_a_token_in_a_urls_user_part_is_masked_and_prose_is_kept():
    assert redact(TOKEN_URL) == "http://***@127.0.0.1:9/v1"
    assert redact("postgresql://u:pw123@h/db") == "postgresql://u:***@h/db"
    text = "no Google credentials: set RAGMETER_SHEETS_CREDENTIALS (or GOOGLE_APPLICATION_CREDENTIALS)"
    assert redact(text) == text
    assert redact("token: abcdef") == "token: ***" and redact("password: hunter2 then") == "password: *** then"
    assert list(find_secrets({"judge_base_url": TOKEN_URL})) == ["judge_base_url"]


@pytest.mark.slow
def test_a_judge_url_with_a_token_is_refused_and_shown_nowhere(tmp_path):
    """``--judge-base-url http://TOKEN@host/v1``: refused (exit 2) before anything is stored; the token
    is in no output and nowhere in the store; a URL like it in another option is stored masked, and
    ``show --json``, the report and the dashboard show it masked."""
    from ragmeter.apps.server import create_app

    db = tmp_path / "t.db"
    for args in (["eval", "example", "-m", "faithfulness"], ["eval", "example", "-m", "faithfulness", "--dry-run"],
                 ["golden", "generate", "--corpus", "c", "--n", "2", "--name", "g"]):
        p = _cli(*args, "--judge", "openai:m", "--judge-base-url", TOKEN_URL, "--db", str(db), cwd=tmp_path,
                 env={"OPENAI_API_KEY": "sk-test"})
        assert p.returncode == 2, (args, p.stderr)
        assert "ZZTOKEN123" not in p.stdout + p.stderr and "judge_base_url" in p.stderr
    ok = _cli("eval", "example", "-m", "token_f1", "--option", f"callback={TOKEN_URL}", "--json", "--db", str(db),
              cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    run_id = json.loads(ok.stdout)["run_id"]
    shown = _cli("show", run_id, "--json", "--db", str(db), cwd=tmp_path)
    report = _cli("report", run_id, "-o", str(tmp_path / "r.html"), "--db", str(db), cwd=tmp_path)
    assert shown.returncode == 0 and report.returncode == 0
    assert "http://***@127.0.0.1:9/v1" in shown.stdout
    client = TestClient(create_app(Store(str(db))), base_url="http://127.0.0.1")
    pages = [client.get(u).text for u in ("/", f"/runs/{run_id}", "/api/runs", f"/api/runs/{run_id}")]
    for text in [shown.stdout, (tmp_path / "r.html").read_text(), *pages]:
        assert "ZZTOKEN123" not in text
    for f in tmp_path.glob("t.db*"):  # the database and its write-ahead log
        assert b"ZZTOKEN123" not in f.read_bytes(), f


def test_every_run_view_redacts_the_stored_config():
    """The report, the dashboard and the large-run (columnar) view show a run's configuration through
    one function, which masks secrets even of a run stored before redaction existed."""
    from types import SimpleNamespace

    from ragmeter.apps.report import data, paged_columns, sections

    run = SimpleNamespace(config={"options": {"judge_api_key": "sk-canary-XYZ1234567890abcdef",
                                              "judge_extra_headers": {"Authorization": "Bearer abc"}}},
                          metrics=[], extra={}, timings={})
    shown = sections.run_settings(run)
    assert "sk-canary" not in str(shown) and "Bearer abc" not in str(shown)
    assert "Authorization" in str(shown)
    for module in (data, paged_columns):  # the two view builders use it, not a copy of it
        assert "run_settings" in vars(module)
