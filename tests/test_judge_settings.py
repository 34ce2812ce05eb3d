"""The judge's settings are a closed list: an unknown ``judge_*`` option or key of a ``judge:``
mapping (``headers``: ragmeter sends no extra headers) is refused with exit 2, naming the key and
the accepted ones, before anything is stored; and header values never reach the store, ``show``
or the report (only the header names)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragmeter import evaluate
from ragmeter.core.redact import is_headers_name, redact_obj
from ragmeter.core.schema import Sample
from ragmeter.llm import JudgeConfigError, config_from_options
from ragmeter.llm.config import SETTINGS
from ragmeter.store import Store

SRC = str(Path(__file__).resolve().parents[1] / "src")
TENANT = "tenant-secret-7f3a9c"


@pytest.mark.parametrize("options, named", [
    ({"judge": {"model": "openai:m", "headers": {"X-Tenant": TENANT}}}, "judge.headers"),
    ({"judge": "openai:m", "judge_headers": {"X-Tenant": TENANT}}, "judge_headers"),
    ({"judge": "openai:m", "judge_concurency": 4}, "judge_concurency (did you mean judge_concurrency?)"),
    ({"judge": {"model": "openai:m", "base_ulr": "http://h/v1"}}, "judge.base_ulr (did you mean judge.base_url?)"),
])
def test_an_unknown_judge_setting_is_refused_naming_it_and_the_accepted_ones(options, named):
    with pytest.raises(JudgeConfigError) as err:
        config_from_options(options)
    msg = str(err.value)
    assert named in msg and "judge_base_url" in msg and "judge_max_reply_mb" in msg
    assert TENANT not in msg  # a value is never repeated


def test_every_documented_setting_is_accepted():
    for name, value in {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "K", "concurrency": 2, "rpm": 60,
                        "timeout": 5, "max_retries": 1, "parse_retries": 1, "backoff_base": 0.1,
                        "backoff_max": 1, "max_cost": None, "temperature": 0, "max_tokens": 10, "draw": 1,
                        "max_reply_mb": 2, "dry_run": True, "prices": None, "api_version": "2024-10-21",
                        "response_format": "text", "http_client": "httpx", "batch": True, "batch_wait": False,
                        "batch_fallback": "online", "batch_poll": 5, "joint": False}.items():
        assert name in SETTINGS
        config_from_options({"judge": "openai:m", f"judge_{name}": value})
        config_from_options({"judge": {"model": "openai:m", name: value}})
    assert set(SETTINGS) == {*{"base_url", "api_key_env", "dry_run", "prices", "api_version", "response_format",
                                "http_client"}, "concurrency", "rpm", "timeout", "max_retries", "parse_retries",
                             "backoff_base", "backoff_max", "max_cost", "temperature", "max_tokens", "draw",
                             "max_reply_mb", "batch", "batch_wait", "batch_fallback", "batch_poll", "joint"}


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("how", ["config", "option"])
def test_the_command_refuses_an_unknown_judge_key_with_exit_2_and_stores_nothing(tmp_path, how):
    db = tmp_path / "s.db"
    if how == "config":
        (tmp_path / "c.yaml").write_text("metrics: [token_f1]\njudge:\n  model: openai:gpt-4o-mini\n"
                                         f"  headers:\n    X-Tenant: {TENANT}\n")
        args = ["--config", "c.yaml"]
    else:
        args = ["-m", "token_f1", "--option", f'judge_headers={{"X-Tenant": "{TENANT}"}}']
    r = _cli("eval", "example", *args, "--db", db, "--no-progress", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    said = r.stdout + r.stderr
    assert ("judge.headers" if how == "config" else "judge_headers") in said
    assert "judge_base_url" in said and "Traceback" not in said and TENANT not in said
    assert not db.exists() or Store(str(db)).list_runs() == []


def test_header_values_are_never_stored_or_shown(tmp_path):
    """Headers under a run option that is not the judge's (kept with the run): names shown, values
    masked in the stored config, ``show --json`` and the report."""
    assert is_headers_name("headers") and is_headers_name("extra_headers") and is_headers_name("judgeHeaders")
    assert not is_headers_name("header_name") and not is_headers_name("headers_file")
    assert redact_obj({"h": {"extra_headers": {"X-Tenant": TENANT, "Accept": "json"}}}) == \
        {"h": {"extra_headers": {"X-Tenant": "***", "Accept": "***"}}}
    db = tmp_path / "s.db"
    store = Store(str(db))
    res = evaluate([Sample(id="a", question="q", answer="a b", references=["a b"])], ["token_f1"], db=store,
                   options={"extra_headers": {"X-Tenant": TENANT, "api-key": "k-123456"}}, progress=False)
    stored = json.dumps(store.get_run(res.run_id).config)
    assert TENANT not in stored and "k-123456" not in stored and "X-Tenant" in stored
    shown = _cli("show", res.run_id, "--json", "--db", db, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert TENANT not in shown.stdout and "X-Tenant" in shown.stdout
    report = _cli("report", res.run_id, "-o", tmp_path / "r.html", "--db", db, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert TENANT not in html and "k-123456" not in html
