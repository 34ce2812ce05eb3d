"""The precise reason of a judge failure reaches every surface: the `eval` and `show` tables (at 80
columns), `show --json`, `export` (jsonl, csv, parquet, xlsx), the report (escaped) and the
dashboard's sample view, for replies of the local scripted judge that fail in different ways:
schema-invalid JSON, prose instead of JSON, an HTML page after the retries, HTTP 400 with the
provider's message (a key in it redacted), a refusal, and a conversation verdict naming a turn
that is not an assistant turn."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import openpyxl
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

import ragmeter
from cli_runner import run_main
from judge_server import Forced, server_fixtures
from ragmeter.apps.server.app import create_app
from ragmeter.core.reasons import DETAIL_LIMIT, detailed, summarise
from ragmeter.core.schema import Score
from ragmeter.stats.intervals import aggregate_many
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()

CHAT = Path(ragmeter.__file__).parent / "data" / "example_chat" / "samples.jsonl"
KEY = "sk-proj-ECHOEDKEY0123456789abcdef"
PAGE = "<html><body><h1>Login required</h1><script>alert(1)</script></body></html>"
REFUSAL_BODY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "test-model",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": None,
                                         "refusal": "I can't help with grading this."}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

#: marker in the answer -> (the judge's scripted answer, the sample's whole no-value reason)
SCRIPTED = {
    "SCHEMABAD": (Forced(text=json.dumps({"claims": [{"claim": "Paris", "reason": "r", "verdict": "maybe"}]})),
                  "judge failure: invalid reply — does not match the schema: claims.0.verdict: "
                  "Input should be 'supported', 'contradicted' or 'not_found'"),
    "PROSE": (Forced(text="Sure! Every claim is supported."),
              "judge failure: invalid reply — not valid JSON (Expecting value at line 1 column 1)"),
    "HTMLPAGE": (Forced(content_type="text/html", text=PAGE),
                 "judge failure: non-JSON reply after 2 attempts — the judge answered HTTP 200 with an "
                 f"HTML page, not a JSON reply (check --judge-base-url): {PAGE!r}"),
    "TOOLONG": (Forced(status=400, message="This model's maximum context length is 8 tokens; "
                                           "your messages resulted in 93 tokens."),
                "judge failure: HTTP 400 — This model's maximum context length is 8 tokens; "
                "your messages resulted in 93 tokens."),
    "KEYECHO": (Forced(status=400, message=f"Incorrect API key provided: {KEY}."),
                "judge failure: HTTP 400 — Incorrect API key provided: ***."),
    "TERMINAL": (Forced(status=400, message="\x1b[2J\x1b[31mcleared\x07 your screen"),
                 "judge failure: HTTP 400 — \\x1b[2J\\x1b[31mcleared\\x07 your screen"),
    "REFUSE": (Forced(content_type="application/json", text=json.dumps(REFUSAL_BODY)),
               "judge failure: refused — the judge refused: I can't help with grading this."),
}


def judge_args(srv, db):
    return ["--judge", "openai:test-model", "--judge-base-url", f"{srv.url}/v1", "--db", db, "--no-progress",
            "--option", "judge_backoff_base=0.01", "--option", "judge_backoff_max=0.05",
            "--option", "judge_max_retries=1", "--option", "judge_parse_retries=1"]


def flat(text):
    """Terminal output with its line wrapping undone."""
    return " ".join(text.split())


def surfaces(db, tmp_path, monkeypatch):
    """What the user sees of the latest run: (show table, show --json, jsonl rows, csv rows, report);
    the parquet and xlsx exports hold the csv's reasons."""
    monkeypatch.setenv("COLUMNS", "80")
    code, shown, err = run_main("show", "latest", "--db", db)
    assert code == 0, err
    assert max(len(line) for line in shown.splitlines()) <= 80
    code, out, err = run_main("show", "latest", "--db", db, "--json")
    assert code == 0, err
    as_json = json.loads(out)
    code, _, err = run_main("export", "latest", "--db", db, "-f", "jsonl", "-o", str(tmp_path / "rows.jsonl"))
    assert code == 0, err
    jsonl = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    code, _, err = run_main("export", "latest", "--db", db, "-f", "csv", "-o", str(tmp_path / "rows.csv"))
    assert code == 0, err
    with open(tmp_path / "rows.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for fmt in ("parquet", "xlsx"):  # the same rows; the reasons as one JSON text per sample
        code, _, err = run_main("export", "latest", "--db", db, "-f", fmt, "-o", str(tmp_path / f"rows.{fmt}"))
        assert code == 0, err
    parquet = pq.read_table(tmp_path / "rows.parquet").to_pylist()
    sheet = list(openpyxl.load_workbook(tmp_path / "rows.xlsx", read_only=True).active.values)
    xlsx = [dict(zip(sheet[0], r, strict=True)) for r in sheet[1:]]
    for other in (parquet, xlsx):
        assert [(r["id"], r["no_value_reasons"]) for r in other] == [(r["id"], r["no_value_reasons"]) for r in rows]
    code, _, err = run_main("report", "latest", "--db", db, "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    return shown, as_json, jsonl, rows, (tmp_path / "r.html").read_text(encoding="utf-8")


def test_each_kind_of_judge_failure_shows_its_precise_reason_everywhere(server, db_url, tmp_path, monkeypatch):
    rows = [{"id": f"ok{i}", "question": "What is the capital of France?", "answer": "Paris is the capital of France.",
             "contexts": ["Paris is the capital of France."]} for i in range(2)]
    for marker, (answer, _) in SCRIPTED.items():
        server.by_marker[marker] = answer
        rows.append({"id": marker, "question": "What is the capital of France?",
                     "answer": f"Paris is the capital of France. {marker}", "contexts": ["Paris is the capital of France."]})
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_main("eval", str(data), "--metrics", "faithfulness", *judge_args(server, db_url))
    assert code == 0, out + err
    assert max(len(line) for line in out.splitlines()) <= 80, out
    why = flat(out.split("why no value:")[1])
    shown, as_json, jsonl, csv_rows, html = surfaces(db_url, tmp_path, monkeypatch)
    summary = as_json["metrics"]["faithfulness"]
    assert (summary["n"], summary["n_missing"]) == (2, len(SCRIPTED))
    by_id = {r["id"]: r for r in jsonl}
    by_id_csv = {r["id"]: r for r in csv_rows}
    for marker, (_, reason) in SCRIPTED.items():
        assert f"{reason} (1)" in why, (marker, why)  # the eval table's "why no value"
        assert f"{reason} (1)" in flat(shown.split("why no value:")[1]), marker  # show
        assert summary["missing_reasons"][reason] == 1, marker  # show --json
        assert by_id[marker]["faithfulness"] is None
        assert by_id[marker]["no_value_reasons"] == {"faithfulness": reason}, marker  # export jsonl
        assert json.loads(by_id_csv[marker]["no_value_reasons"]) == {"faithfulness": reason}, marker  # csv
        assert str(escape(reason)) in html, marker  # the report, escaped
    assert "<h1>Login required" not in html and "<script>alert(1)" not in html
    # the dashboard's sample view (its JSON API and its page) reads the same stored reason
    store = open_store(db_url)
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        for marker, (_, reason) in SCRIPTED.items():
            api = client.get(f"/api/runs/{as_json['id']}/samples/{marker}")
            assert api.status_code == 200, api.text
            assert {x["metric"]: x["reason"] for x in api.json()["scores"]}["faithfulness"] == reason
            page = client.get(f"/runs/{as_json['id']}/samples/{marker}").text
            assert str(escape(reason)) in page, marker
    finally:
        store.close()
    assert "ECHOEDKEY" not in json.dumps(as_json) + out + shown + html
    assert "\x1b" not in out + shown + html and "\x07" not in out + shown + html  # a provider's escapes, shown
    assert "ECHOEDKEY" not in (tmp_path / "rows.jsonl").read_text() + (tmp_path / "rows.csv").read_text()
    assert by_id["ok0"]["no_value_reasons"] == {} and by_id["ok0"]["faithfulness"] == 1.0


def test_a_turn_that_is_not_an_assistant_turn_is_named_in_every_surface(server, db_url, tmp_path, monkeypatch):
    convs = [json.loads(x) for x in CHAT.read_text(encoding="utf-8").splitlines()[:4]]
    for c in convs[1:3]:
        c["chatbot_role"] += " OFFTURN"
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in convs))
    # the verdict names turn 1, the user's first message: rejected, re-asked, rejected again
    server.by_marker["OFFTURN"] = Forced(text=json.dumps({"verdicts": [{"turn": 1, "reason": "rude"}]}))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_main("eval", str(data), "--metrics", "role_adherence", *judge_args(server, db_url))
    assert code == 0, out + err
    shown, as_json, jsonl, csv_rows, html = surfaces(db_url, tmp_path, monkeypatch)
    expected = {}
    for c in convs[1:3]:
        n = sum(t["role"] in ("user", "assistant") for t in c["turns"])
        assistant = [i + 1 for i in range(n) if i % 2 == 1]  # the example's turns alternate, user first
        expected[c["id"]] = (f"judge failure: invalid reply — turn(s) [1] are not assistant turns "
                             f"(assistant turns: {assistant})")
    summary = as_json["metrics"]["role_adherence"]
    assert summary["n_missing"] == 2
    by_id = {r["id"]: r for r in jsonl}
    by_id_csv = {r["id"]: r for r in csv_rows}
    for cid, reason in expected.items():
        assert reason in flat(out) and reason in flat(shown), reason
        assert summary["missing_reasons"][reason] == sum(r == reason for r in expected.values())
        assert by_id[cid]["no_value_reasons"]["role_adherence"] == reason
        assert json.loads(by_id_csv[cid]["no_value_reasons"])["role_adherence"] == reason
        assert str(escape(reason)) in html
    assert all(by_id[c["id"]]["role_adherence"] is not None for c in (convs[0], convs[3]))


def test_a_summary_lists_three_precise_texts_per_kind_and_counts_the_rest():
    reasons = ([detailed("judge failure: invalid reply", f"turn(s) [{i}] are not assistant turns")
                for i in range(1, 6) for _ in range(6 - i)]
               + ["missing field: answer"] * 2 + ["judge failure: HTTP 400 — bad request"])
    got = summarise(reasons)
    assert sum(got.values()) == len(reasons)
    assert got == {"judge failure: invalid reply — turn(s) [1] are not assistant turns": 5,
                   "judge failure: invalid reply — turn(s) [2] are not assistant turns": 4,
                   "judge failure: invalid reply — turn(s) [3] are not assistant turns": 3,
                   "judge failure: invalid reply — 2 other details (each sample's reason: ragmeter export)": 3,
                   "missing field: answer": 2,
                   "judge failure: HTTP 400 — bad request": 1}
    # the summary of a run is built the same way
    scores = [Score.missing(r) for r in reasons] + [Score(0.5)]
    assert aggregate_many({"m": scores})["m"]["missing_reasons"] == got


@pytest.mark.parametrize("at", [DETAIL_LIMIT - 20, DETAIL_LIMIT - 5, DETAIL_LIMIT + 3])
def test_a_precise_reason_is_redacted_before_it_is_cut(at):
    text = "x" * at + f" {KEY} and more"
    reason = detailed("judge failure: HTTP 400", text)
    assert "sk-proj" not in reason and "ECHOED" not in reason
    assert len(reason.split(" — ", 1)[1]) <= DETAIL_LIMIT
    assert detailed("judge failure: timeout", None) == "judge failure: timeout"
    assert detailed("judge failure: x", "two\nlines\t here") == "judge failure: x — two lines here"
