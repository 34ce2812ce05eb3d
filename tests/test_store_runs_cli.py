"""`ragmeter runs` and its delete / rename / tag subcommands; read-only commands refuse a
database file that does not exist."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ragmeter.apps.cli import app
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store

runner = CliRunner()


def test_read_only_commands_refuse_a_missing_database_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["runs", "--db", "typo.db"], ["show", "latest", "--db", "typo.db"],
                 ["export", "latest", "--db", "typo.db"], ["runs", "tag", "x", "t", "--db", "typo.db"]):
        r = runner.invoke(app, args)
        assert r.exit_code != 0 and "no database at typo.db" in str(r.exception or r.output), args
    assert not (tmp_path / "typo.db").exists()


def test_runs_delete_rename_tag(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    a = evaluate("example", ["token_f1"], db=url, name="first")
    b = evaluate("example", ["exact_match"], db=url, name="second")
    listed = runner.invoke(app, ["runs", "--db", url])
    assert listed.exit_code == 0 and a.run_id in listed.output and b.run_id in listed.output  # ids never cut
    assert runner.invoke(app, ["runs", "tag", "first", "nightly", "--db", url]).exit_code == 0
    tagged = json.loads(runner.invoke(app, ["runs", "--tag", "nightly", "--json", "--db", url]).output)
    assert [r["id"] for r in tagged] == [a.run_id] and tagged[0]["tags"] == ["nightly"]
    assert runner.invoke(app, ["runs", "rename", b.run_id[:8], "renamed", "--db", url]).exit_code == 0
    assert open_store(url).get_run(b.run_id).name == "renamed"
    store = open_store(url)
    store.put_embeddings("m", {"h": b"1234"}, 1)
    refused = runner.invoke(app, ["runs", "delete", "renamed", "--db", url], input="n\n")
    assert refused.exit_code != 0 and len(store.list_runs()) == 2
    done = runner.invoke(app, ["runs", "delete", "renamed", "--yes", "--db", url])
    assert done.exit_code == 0, done.output
    assert [r.id for r in store.list_runs()] == [a.run_id]
    assert store.count_scores(b.run_id) == 0 and store.count_scores(a.run_id) == a.summary["token_f1"]["n"]
    assert store.get_embeddings("m", ["h"]) == {"h": b"1234"}  # caches are kept
