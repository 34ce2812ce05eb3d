"""Text ragmeter did not write reaches the terminal with its control characters shown as ``\\xNN``:
a dataset's field, a judge's or a target's reply cannot clear the screen, retitle the window or
ring the bell. By construction: every rich console comes from ``ragmeter.core.terminal.console``
(checked below over the source), and the command's few other writes go through
``escape_controls``."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from judge_server import Forced, server_fixtures
from ragmeter.core.terminal import console, escape_controls, json_for_terminal

judge_server_module, server = server_fixtures()

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
PWN = "\x1b[2J\x1b]0;pwned\x07"
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07"


def test_escape_controls():
    assert escape_controls(f"a{PWN}b\r\x9b\x7f\x00") == f"a{SHOWN}b\\x0d\\x9b\\x7f\\x00"
    assert escape_controls("tab\tand\nnewline, é, 日本") == "tab\tand\nnewline, é, 日本"
    text = json.dumps({"a": "x\x9by\x7f"}, ensure_ascii=False)
    assert json.loads(json_for_terminal(text)) == {"a": "x\x9by\x7f"} and "\x9b" not in json_for_terminal(text)


def test_the_console_escapes_text_and_keeps_its_own_styles():
    from rich.table import Table
    from rich.text import Text

    out = io.StringIO()
    c = console(file=out, force_terminal=True, width=80)
    c.print(f"[bold]run[/bold] {PWN}", highlight=False)
    c.print(Text(f"built {PWN}"))
    t = Table("x")
    t.add_row(PWN)
    c.print(t)
    text = out.getvalue()
    assert "\x07" not in text and "\x1b[2J" not in text and "\x1b]" not in text
    assert text.count(SHOWN) == 2  # a Text built by code: rich itself drops the bell, shows the rest
    assert text.count("built \\x1b[2J\\x1b]0;pwned") == 1
    assert "\x1b[1m" in text  # rich's bold, not text


def test_no_module_makes_a_rich_console_of_its_own():
    """Every console comes from ragmeter.core.terminal.console, so every one escapes."""
    found = []
    for path in (ROOT / "src" / "ragmeter").rglob("*.py"):
        if path.name == "terminal.py" and path.parent.name == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "Console":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"rich Console made outside ragmeter.core.terminal: {found}"


def _ragmeter(*args, cwd, **env):
    """The ``ragmeter`` console script (its runtime policy included), output not a terminal."""
    full = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "COLUMNS": "400",
            "RAGMETER_TEST_JUDGE_KEY": "k", **env}
    out = subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *map(str, args)],
                         cwd=cwd, env=full, capture_output=True, text=True, timeout=300)
    return out.returncode, out.stdout + out.stderr


def _clean(text):
    assert "\x1b" not in text and "\x07" not in text, text
    return text


def test_eval_shows_a_files_and_a_judges_control_characters_escaped(tmp_path, server):
    """A CSV column name (the reader's warning) and a judge's error message carrying escapes."""
    (tmp_path / "d.csv").write_text(f"question,answer,reference,contexts,note{PWN}\n"
                                    "What is the capital?,Paris is the capital.,Paris,Paris is the capital.,x\n")
    server.force(Forced(status=400, message=f"rejected {PWN}"))
    code, out = _ragmeter("eval", "d.csv", "-m", "token_f1,faithfulness", "--judge", "openai:test-model",
                          "--judge-base-url", server.url + "/v1", "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY",
                          "--db", tmp_path / "s.db", "--no-progress", cwd=tmp_path)
    assert code == 3, out  # faithfulness has no value: the judge refused
    _clean(out)
    assert f"note{SHOWN}" in out and f"rejected {SHOWN}" in out


def test_show_shows_a_datasets_ids_and_a_run_name_escaped(tmp_path):
    turns = [{"role": "user", "content": f"Hello {PWN}"},
             {"role": "assistant", "content": "Hi there.", "reference": "Hi there."}]
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": f"conv{PWN}", "turns": turns}) + "\n")
    db = tmp_path / "s.db"
    code, out = _ragmeter("eval", "c.jsonl", "-m", "token_f1", "--name", f"night{PWN}", "--db", db, "--no-progress",
                          cwd=tmp_path)
    assert code == 0, out
    _clean(out)
    code, out = _ragmeter("show", "latest", "--db", db, cwd=tmp_path)
    assert code == 0, out
    _clean(out)
    assert f"night{SHOWN}" in out and f"conv{SHOWN}" in out


class _Target(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = f"garbage {PWN}".encode()
        self.send_response(500)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def garbage_target():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_simulate_shows_a_targets_reply_escaped(tmp_path, server, garbage_target):
    (tmp_path / "s.yaml").write_text("scenarios:\n  - id: one\n    persona: p\n    goal: Ask about fares.\n"
                                     "    expected_outcome: fares explained\n")
    code, out = _ragmeter("simulate", "--target", garbage_target, "--target-model", "m", "--scenarios", "s.yaml",
                          "--name", "sim", "--turns", "1", "--judge", "openai:sim-user", "--judge-base-url",
                          server.url + "/v1", "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY",
                          "--db", tmp_path / "s.db", cwd=tmp_path)
    assert code == 2, out  # no conversation could be held
    _clean(out)
    assert f"target: HTTP 500: garbage {SHOWN}" in out
