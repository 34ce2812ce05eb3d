"""Golden datasets: corpus ingestion with offsets, generation against a scripted local model with
deliberately bad replies (each filter must catch its own), exports with exact spans, versions,
review (API, CSV and a real browser) and diffs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge_server import GOLDEN_FAULTS, server_fixtures
from ragmeter.golden.corpus import Document, add_documents, chunk_document, corpus_documents, html_to_text
from ragmeter.store import Store

judge_server_module, server = server_fixtures()
CORPUS = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data" / "example" / "corpus"
KEY_ENV = {"RAGMETER_TEST_JUDGE_KEY": "test-key"}


def cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args, "--db", db], capture_output=True,
                          text=True, timeout=600, env={**os.environ, **KEY_ENV, "COLUMNS": "100"})


def judge_args(server) -> list[str]:
    return ["--judge", "openai:test-model", "--judge-base-url", server.url + "/v1",
            "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY"]


# ---- corpus ----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["fixed", "sentence", "paragraph", "markdown"])
def test_chunks_keep_offsets(method):
    for f in sorted(CORPUS.glob("*.md")):
        doc = Document(f.name, f.read_text(encoding="utf-8"), "md")
        chunks = chunk_document(doc, method=method, size=300)
        assert chunks and all(doc.text[c.start:c.end] == c.text for c in chunks)
        assert all(c.text == c.text.strip() for c in chunks)
        if method != "fixed":  # non-overlapping chunkers cover every non-blank character once
            covered = "".join(c.text for c in chunks).replace(" ", "").replace("\n", "")
            assert covered == doc.text.replace(" ", "").replace("\n", "")


def test_corpus_versions_and_formats(tmp_path, db_url):
    store = Store(db_url)
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.md").write_text("# Title\n\nFirst paragraph about ferries.\n", encoding="utf-8")
    (d / "sub" / "b.html").write_text("<html><head><style>x{}</style><script>alert(1)</script></head>"
                                      "<body><h1>Fares</h1><p>Adults pay &euro;5.</p></body></html>", encoding="utf-8")
    rep = add_documents(store, "kb", [d])
    assert sorted(rep["added"]) == ["a.md", "sub/b.html"]
    docs = {x.path: x for x in corpus_documents(store, "kb")}
    assert docs["sub/b.html"].text == "Fares\n\nAdults pay €5.\n" or "alert" not in docs["sub/b.html"].text
    assert "alert" not in docs["sub/b.html"].text and "€5" in docs["sub/b.html"].text
    assert add_documents(store, "kb", [d])["unchanged"] == ["a.md", "sub/b.html"]
    (d / "a.md").write_text("# Title\n\nChanged.\n", encoding="utf-8")
    assert add_documents(store, "kb", [d])["updated"] == ["a.md"]
    docs = {x.path: x for x in corpus_documents(store, "kb")}
    assert docs["a.md"].version == 2 and docs["a.md"].text.endswith("Changed.\n")


def test_pdf_and_bad_files(tmp_path, db_url):
    from ragmeter.core.errors import DatasetError

    pdf = tmp_path / "f.pdf"
    pdf.write_bytes(_tiny_pdf("Ferries leave at seven."))
    store = Store(db_url)
    add_documents(store, "p", [pdf])
    assert "Ferries leave at seven." in corpus_documents(store, "p")[0].text
    (tmp_path / "fake.pdf").write_bytes(b"not a pdf")
    with pytest.raises(DatasetError, match="fake.pdf"):
        add_documents(store, "p", [tmp_path / "fake.pdf"])
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(DatasetError, match="latin.txt: not UTF-8"):
        add_documents(store, "p", [tmp_path / "latin.txt"])


def _tiny_pdf(text: str) -> bytes:
    """A one-page PDF with one line of text (Helvetica), written by hand with a correct xref."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out


def test_html_to_text_drops_scripts():
    assert html_to_text("<p>a<script>x()</script></p><p>b &amp; c</p>") == "a\n\nb & c\n"


# ---- generation ------------------------------------------------------------------------------
@pytest.mark.slow
def test_generate_filter_export_eval(server, db_url, tmp_path):
    add = cli("corpus", "add", str(CORPUS), "--name", "handbook", db=db_url)
    assert add.returncode == 0, add.stderr
    n0 = server.n_requests
    dry = cli("golden", "generate", "--corpus", "handbook", "--n", "100", "--name", "gold",
              *judge_args(server), "--dry-run", db=db_url)
    assert dry.returncode == 0, dry.stderr
    assert "100 generation calls planned" in dry.stdout or "generation calls planned" in dry.stdout
    assert server.n_requests == n0  # no call
    assert cli("dataset", "list", db=db_url).stdout.startswith("no dataset")

    gen = cli("golden", "generate", "--corpus", "handbook", "--n", "100", "--name", "gold",
              *judge_args(server), "--json", db=db_url)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    res = json.loads(gen.stdout)
    removed = {r["filter"]: r["removed"] for r in res["filters"]}
    # every deliberately bad reply of the scripted model is caught by its own filter
    for fault in GOLDEN_FAULTS.values():
        assert removed[fault] >= 1, (fault, removed)
    assert res["kept"] == res["generated"] - sum(removed.values()) and res["kept"] >= 10
    text = cli("golden", "generate", "--corpus", "handbook", "--n", "100", "--name", "gold",
               *judge_args(server), db=db_url)  # a re-run: from the cache, a second version
    assert "from cache" in text.stdout and "evidence" in text.stdout and "near_duplicate" in text.stdout

    out = tmp_path / "gold.jsonl"
    exp = cli("dataset", "export", "gold@1", "-o", str(out), db=db_url)
    assert exp.returncode == 0, exp.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == res["kept"]
    spans = 0
    for r in rows:
        assert r["metadata"]["type"] in {"single_hop", "multi_hop", "comparison", "summary", "unanswerable"}
        assert r["metadata"]["generator"]["model"] == "openai:test-model"
        for sp in r.get("relevant", []):
            assert (CORPUS / sp["source"]).read_text(encoding="utf-8")[sp["start"]:sp["end"]] == sp["text"]
            spans += 1
        if r["metadata"]["type"] != "unanswerable":
            assert r["relevant"]
    assert spans >= res["kept"] // 2
    ev = cli("eval", "dataset:gold", "--metrics", "token_f1", "--where", "type=single_hop", "--no-progress",
             "--json", db=db_url)
    assert ev.returncode in (0, 3), ev.stderr  # golden samples carry references, not a system's answers
    summary = json.loads(ev.stdout)["metrics"]
    n_single = sum(1 for r in rows if r["metadata"]["type"] == "single_hop")
    assert summary["token_f1"]["n"] + summary["token_f1"]["n_missing"] == n_single


def test_generate_in_python_and_review_diff(server, db_url):
    from ragmeter.golden import add_documents as add
    from ragmeter.golden import generate
    from ragmeter.golden.datasets import apply_review_csv, diff, finalise, review, review_csv
    from ragmeter.io.stored import resolve, samples_of

    store = Store(db_url)
    add(store, "handbook", [CORPUS])
    res = generate(store, corpus="handbook", n=30, name="g", judge="openai:test-model",
                   judge_options={"base_url": server.url + "/v1", "api_key_env": "RAGMETER_TEST_JUDGE_KEY"},
                   types="single_hop=1")
    assert res.dataset is not None and res.dataset.ref == "g@1"
    ids = [d["id"] for d in samples_of(store, "g")]
    review(store, "g", ids[0], "accept")
    review(store, "g", ids[1], "edit", {"question": "How late is the last ferry?"})
    review(store, "g", ids[2], "reject")
    d = diff(store, "g@1", "g")
    assert d["b"] == "g@2" and d["removed"] == [ids[2]] and d["rejected"] == [ids[2]] and d["added"] == []
    changed = {c["id"]: c for c in d["changed"]}
    assert set(changed) == {ids[0], ids[1]}
    assert changed[ids[0]]["fields"] == [] and changed[ids[0]]["review"] == ["pending", "accepted"]
    assert changed[ids[1]]["fields"] == ["question"]
    # a CSV round trip: reject one more, accept another
    sheet = review_csv(store, "g").splitlines()
    header = sheet[0].split(",")
    assert header[:2] == ["id", "review"]
    csv_path = Path(store.url.removeprefix("sqlite:///")).parent / "review.csv"
    lines = [sheet[0]]
    for line in sheet[1:]:
        if line.startswith(ids[3] + ","):
            line = line.replace(",pending,", ",rejected,", 1)
        lines.append(line)
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = apply_review_csv(store, "g", csv_path)
    assert counts["rejected"] == 1
    assert diff(store, "g@1", "g")["removed"] == sorted([ids[2], ids[3]])
    v = finalise(store, "g", tag="reviewed")
    assert v.status == "final" and resolve(store, "g@reviewed").version == 2


def test_review_api_guards(server, db_url):
    from fastapi.testclient import TestClient

    from ragmeter.apps.server import create_app
    from ragmeter.golden import add_documents as add
    from ragmeter.golden import generate

    store = Store(db_url)
    add(store, "handbook", [CORPUS])
    generate(store, corpus="handbook", n=12, name="g", judge="openai:test-model",
             judge_options={"base_url": server.url + "/v1", "api_key_env": "RAGMETER_TEST_JUDGE_KEY"},
             types="single_hop=1", verify=False)
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    page = client.get("/datasets/g/review")
    assert page.status_code == 200
    token = page.text.split('name="ragmeter-token" content="')[1].split('"')[0]
    sid = json.loads(page.text.split('id="review-data">')[1].split("</script>")[0])["samples"][0]["id"]
    url = f"/api/datasets/g/samples/{sid}/review"
    assert client.post(url, json={"action": "accept"}).status_code == 403  # no token
    assert client.post(url, json={"action": "accept"}, headers={"X-Ragmeter-Token": token,
                                                                "Origin": "http://evil.example"}).status_code == 403
    assert client.post(url, content="action=accept", headers={"X-Ragmeter-Token": token,
                                                              "Content-Type": "application/x-www-form-urlencoded"}).status_code == 415
    ok = client.post(url, json={"action": "accept"}, headers={"X-Ragmeter-Token": token})
    assert ok.status_code == 200 and ok.json()["review"] == "accepted"
    bad = client.post(url, json={"action": "edit", "changes": {"relevant": [{"source": "safety.md", "start": 5, "end": 10**7}]}},
                      headers={"X-Ragmeter-Token": token})
    assert bad.status_code == 422 and "outside" in bad.json()["detail"]
    doc = client.get("/api/corpora/handbook/documents/safety.md").json()
    assert doc["text"] == (CORPUS / "safety.md").read_text(encoding="utf-8")


# ---- the same judge checks and pre-flight as eval ---------------------------------------------------
def test_dry_run_of_a_million_questions_plans_a_sample_and_scales(db_url, monkeypatch):
    import ragmeter.golden.generation as generation
    from ragmeter.golden import DRY_RUN_SAMPLE, generate

    store = Store(db_url)
    add_documents(store, "handbook", [CORPUS])
    asked: list[int] = []
    plan_tasks = generation.plan_tasks
    monkeypatch.setattr(generation, "plan_tasks", lambda docs, n, **kw: asked.append(n) or plan_tasks(docs, n, **kw))
    res = generate(store, corpus="handbook", n=1_000_000, name="big", judge="openai:gpt-4o-mini", dry_run=True)
    assert asked == [DRY_RUN_SAMPLE]  # not a million planned tasks and prompts
    assert res.generated == 1_000_000 and res.plan["planned_calls"] == 1_000_000
    assert res.plan["sampled"] == {"planned": DRY_RUN_SAMPLE, "asked": 1_000_000}
    assert res.plan["est_input_tokens"] > 100_000_000 and "scaled to 1,000,000" in res.plan["note"]
    assert cli("dataset", "list", db=db_url).stdout.startswith("no dataset")  # nothing stored


def test_unreachable_generator_exits_2_at_the_pre_flight(db_url, tmp_path):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there
    assert cli("corpus", "add", str(CORPUS), "--name", "handbook", db=db_url).returncode == 0
    p = cli("golden", "generate", "--corpus", "handbook", "--n", "5", "--name", "g", "--judge", "openai:m",
            "--judge-base-url", f"http://127.0.0.1:{port}/v1", db=db_url)
    assert p.returncode == 2, p.stderr  # not 3 after every request's retries
    assert "pre-flight" in p.stderr and "Traceback" not in p.stderr


def test_golden_and_eval_need_the_same_packages(server, db_url, monkeypatch, tmp_path):
    """One client path: without the openai package a dry run of either command works (it calls
    nothing) and a real run of either stops with the same message (exit 2)."""
    import sys

    from cli_runner import run_main

    monkeypatch.setitem(sys.modules, "openai", None)  # as if it were not installed
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")
    store = Store(db_url)
    add_documents(store, "handbook", [CORPUS])
    judge = judge_args(server)
    golden = ["golden", "generate", "--corpus", "handbook", "--n", "3", "--name", "g", *judge, "--db", db_url]
    evaluate = ["eval", "example", "-m", "faithfulness", *judge, "--db", db_url, "--no-progress"]
    for args in (golden, evaluate):
        code, out, err = run_main(*args, "--dry-run")
        assert code == 0, (args, out, err)
        code, out, err = run_main(*args)
        assert code == 2 and "needs the openai package" in err, (args, err)
