"""`ragmeter export RUN --to sheets`: the five-worksheet layout, against a local fake of the
Sheets v4 API (tests/sheets_fake.py) with a real service-account JWT flow."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judge_server import judge_options, server_fixtures
from ragmeter.apps.cli import app
from ragmeter.apps.export import sheets as S
from ragmeter.core.errors import ConfigError
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from references import require_extra
from sheets_fake import TOKEN, FakeSheets

gspread = require_extra("gspread")  # in CI a stand-in when missing: conftest.py fails the tests
judge_server_module, server = server_fixtures()
AGENT_EXAMPLE = Path(str(resources.files("ragmeter"))) / "data" / "agent_example"
JUDGED = ["faithfulness", "hallucination", "answer_relevancy", "contextual_relevancy", "bias", "toxicity"]


@pytest.fixture
def fake():
    f = FakeSheets().start()
    yield f
    f.stop()


@pytest.fixture
def creds(fake, tmp_path, monkeypatch):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    fake.public_key = key.public_key()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = tmp_path / "sa.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": pem,
        "client_email": "ragmeter@p.iam.gserviceaccount.com", "client_id": "1",
        "token_uri": fake.url + "/token"}))
    monkeypatch.setenv("RAGMETER_SHEETS_CREDENTIALS", str(path))
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv(S.API_URL_ENV, fake.url)
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")
    return pem


def test_five_worksheets_get_the_expected_rows(fake, creds, server, db_url, monkeypatch):
    fake.books["BOOK1"] = {"Sheet1": []}
    rag = evaluate("example", JUDGED + ["token_f1"], db=db_url, name="rag-v1", options=judge_options(server))
    agent = evaluate(str(AGENT_EXAMPLE / "traces.jsonl"), config=str(AGENT_EXAMPLE / "expectations.yaml"),
                     db=db_url, name="agent-v1")
    fake.fail_next(1, 429)  # the first Sheets call is throttled: retried, not lost
    runner = CliRunner()
    for rid in (rag.run_id, agent.run_id):
        r = runner.invoke(app, ["export", rid, "--to", "sheets", "--spreadsheet", "BOOK1", "--db", db_url])
        assert r.exit_code == 0, r.output
    book = fake.books["BOOK1"]
    assert set(S.WORKSHEETS) <= set(book)
    for w in S.WORKSHEETS:  # header once, although two runs were appended
        assert book[w][0] == S.HEADERS[w]
        assert sum(row == S.HEADERS[w] for row in book[w]) == 1

    store = open_store(db_url)
    table = store.score_table(rag.run_id)
    n = len(rag.samples)
    deep = book["deepeval_metrics"][1:]
    assert [r[3] for r in deep] == [s.id for s in rag.samples]  # one row per sample, in order
    assert all(r[1] == rag.run_id and r[2] == "rag-v1" for r in deep)
    h = S.HEADERS["deepeval_metrics"]
    for row in deep:
        for m in JUDGED:
            v = table[m][row[3]].value
            assert row[h.index(m)] == ("" if v is None else pytest.approx(v))
    from ragmeter.analysis.composite import composite_from_values
    row = next(r for r in deep if all(r[h.index(m)] != "" for m in JUDGED[:5]))
    want = composite_from_values({m: row[h.index(m)] for m in JUDGED[:5]}, "deepeval")["value"]
    assert row[h.index("overall_score")] == pytest.approx(want)

    judge_rows = book["llm_judge_results"][1:]
    assert len(judge_rows) == n * len(JUDGED)  # one row per sample and judged metric; token_f1 is not judged
    assert {r[4] for r in judge_rows} == set(JUDGED)

    oe = book["openevals_metrics"][1:]
    ho = S.HEADERS["openevals_metrics"]
    at = store.score_table(agent.run_id)
    assert [r[3] for r in oe] == [s.id for s in agent.samples]
    for row in oe:
        assert row[1] == agent.run_id
        for m in S.OPENEVALS:
            key = next((k for k in at if k == m), None)
            if key:
                v = at[key][row[3]].value
                assert row[ho.index(m)] == ("" if v is None else pytest.approx(v))
    am = book["agent_metrics"][1:]
    assert len(am) == len(agent.samples) and all(json.loads(r[-1]) is not None for r in am)

    unified = book["unified_metrics"][1:]
    assert [r[1] for r in unified] == [rag.run_id, agent.run_id]  # one row per run
    means = json.loads(unified[0][-1])
    assert means["token_f1"] == pytest.approx(rag.summary["token_f1"]["mean"])

    # the requests: one token exchange, every Sheets call authorised; the throttled call was retried
    sheets_calls = [q for q in fake.requests if q["path"] != "/token"]
    assert all(q["authorization"] == f"Bearer {TOKEN}" for q in sheets_calls)
    adds = [q for q in sheets_calls if q["path"].endswith(":batchUpdate")]
    assert len(adds) == 1 and len(adds[0]["json"]["requests"]) == 5  # created once, in one call
    appends = [q for q in sheets_calls if q["path"].endswith(":append")]
    # the RAG run appends to all five (headers); the agent run to the three it has rows for
    assert sorted(q["path"].split("'")[1] for q in appends) == sorted(
        [*S.WORKSHEETS, "openevals_metrics", "agent_metrics", "unified_metrics"])
    assert all(q["query"]["valueInputOption"] == ["RAW"] for q in appends)
    # credentials are never sent to the Sheets API nor written to the store
    pem_line = creds.splitlines()[1]
    assert not any(pem_line in json.dumps(q["json"] or {}) for q in sheets_calls)
    assert pem_line not in Path(db_url.removeprefix("sqlite:///")).read_text(errors="ignore")


def test_user_errors_are_config_errors_with_a_message(fake, creds, db_url, monkeypatch):
    res = evaluate("example", ["token_f1"], db=db_url)
    runner = CliRunner()
    r = runner.invoke(app, ["export", res.run_id, "--to", "sheets", "--spreadsheet", "NOPE", "--db", db_url])
    assert isinstance(r.exception, ConfigError) and "not found" in str(r.exception)
    r = runner.invoke(app, ["export", res.run_id, "--to", "sheets", "--db", db_url])
    assert isinstance(r.exception, ConfigError) and "--spreadsheet" in str(r.exception)
    r = runner.invoke(app, ["export", res.run_id, "--to", "nowhere", "--db", db_url])
    assert isinstance(r.exception, ConfigError) and "unknown sink" in str(r.exception)
    fake.books["B2"] = {"deepeval_metrics": [["something", "else"]]}
    r = runner.invoke(app, ["export", res.run_id, "--to", "sheets", "--spreadsheet", "B2", "--db", db_url])
    assert isinstance(r.exception, ConfigError) and "different header row" in str(r.exception)
    assert fake.books["B2"]["deepeval_metrics"] == [["something", "else"]]  # nothing appended
    monkeypatch.delenv("RAGMETER_SHEETS_CREDENTIALS")
    r = runner.invoke(app, ["export", res.run_id, "--to", "sheets", "--spreadsheet", "X", "--db", db_url])
    assert isinstance(r.exception, ConfigError) and "RAGMETER_SHEETS_CREDENTIALS" in str(r.exception)
    assert creds not in str(r.exception)
