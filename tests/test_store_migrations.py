"""Schema versioning: a database written before versioning upgrades in place with every row kept;
new databases are created at the head revision, also by several processes at once."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ragmeter.core.schema import Sample, Score
from ragmeter.store import Store, head_revision, open_store

DATA = Path(__file__).parent / "data"


def test_old_database_upgrades_in_place_without_losing_a_row(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(DATA / "store_v0.db", db)
    before = sqlite3.connect(db)
    n_scores = before.execute("SELECT count(*) FROM scores").fetchone()[0]
    assert "alembic_version" not in {r[0] for r in before.execute("SELECT name FROM sqlite_master")}
    before.close()
    expected = json.loads((DATA / "store_v0_expected.json").read_text())

    store = Store(f"sqlite:///{db}")
    assert store.schema_revision() == head_revision()
    assert store.count_scores() == n_scores
    assert {r.id for r in store.list_runs()} == set(expected)
    for rid, exp in expected.items():
        run = store.get_run(rid)
        assert (run.name, run.status, run.n_samples) == (exp["name"], exp["status"], exp["n_samples"])
        assert [s.id for s in store.run_samples(rid)] == exp["samples"]
        table = store.score_table(rid)
        got = {m: {sid: [sc.value, sc.reason, sc.details] for sid, sc in d.items()} for m, d in table.items()}
        assert got == exp["scores"]
    assert store.kv_get("fixture", "k1") == {"a": 1}
    assert store.get_embeddings("m", ["h1"]) == {"h1": b"\x00\x00\x80?"}
    store.close()
    # opening again is a no-op (already at head)
    again = Store(f"sqlite:///{db}")
    assert again.count_scores() == n_scores
    again.close()


def test_upgraded_database_takes_new_runs_and_resumes(tmp_path):
    from ragmeter.run.runner import evaluate

    db = tmp_path / "old.db"
    shutil.copy(DATA / "store_v0.db", db)
    res = evaluate("example", ["token_f1", "rouge1_fmeasure"], db=f"sqlite:///{db}")
    store = open_store(f"sqlite:///{db}")
    assert store.count_scores(res.run_id) == 2 * len(res.samples)
    store.close()


def test_new_database_is_created_at_head(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'new.db'}")
    assert store.schema_revision() == head_revision()
    store.close()


_OPEN = "import sys; from ragmeter.store import Store; Store(sys.argv[1]).close()"


def test_several_processes_create_one_new_database_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'race.db'}"
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN, url], stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errs
    assert Store(url).schema_revision() == head_revision()


def test_run_ids_match_exactly_or_by_prefix_never_as_like_patterns(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'ids.db'}")
    samples = [Sample(id="a", answer="x")]
    kw = dict(dataset_source="t", fingerprint="f", samples=samples, metrics=[], config={}, version="0")
    rid = store.create_run(**kw)
    other = store.create_run(**kw)
    for pattern in ("%", "_", rid[:3].replace(rid[1], "_"), "%" + rid[-3:]):
        if other.startswith(pattern) or rid.startswith(pattern):
            continue
        with pytest.raises(Exception, match="no run"):
            store.resolve_run(pattern)
    assert store.resolve_run(rid) == rid
    prefix = next(rid[:n] for n in range(1, 13) if not other.startswith(rid[:n]))
    assert store.resolve_run(prefix) == rid


def test_scores_are_stored_once_and_read_back(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    samples = [Sample(id=f"s{i}", answer="x") for i in range(3)]
    rid = store.create_run(dataset_source="t", fingerprint="f", samples=samples, metrics=[],
                           config={}, version="0")
    ids = [s.id for s in samples]
    store.add_scores(rid, "m", ids, [Score(0.5), Score.missing("why"), Score(1.0, None, {"k": 1})])
    store.add_scores(rid, "m", ids, [Score(0.0)] * 3)  # a second writer of the same pairs: ignored
    table = store.score_table(rid)
    assert table["m"]["s0"].value == 0.5 and table["m"]["s1"].reason == "why"
    assert table["m"]["s2"].details == {"k": 1} and table["m"]["s0"].details is None
    assert store.scored_pairs(rid) == {(i, "m") for i in ids}
    assert [r.sample_id for r in store.scores(rid, "m")] == ids
    store.delete_run(rid)
    assert store.count_scores() == 0


def test_upgraded_database_has_the_feature_tables_and_uses_them(tmp_path):
    """Monitoring, golden datasets and annotations work on a database from before versioning."""
    import sqlalchemy as sa

    from ragmeter.golden.datasets import save_dataset
    from ragmeter.io.stored import samples_of
    from ragmeter.monitor.calls import count_calls, insert_calls, normalise_call

    db = tmp_path / "old.db"
    shutil.copy(DATA / "store_v0.db", db)
    store = Store(f"sqlite:///{db}")
    names = set(sa.inspect(store.engine).get_table_names())
    assert {"monitor_calls", "corpus_documents", "datasets", "dataset_samples", "annotation_tasks",
            "annotation_items", "annotation_raters", "annotation_labels"} <= names
    assert store.schema_revision() == head_revision()
    insert_calls(store, [normalise_call({"query": "q", "latency_ms": 3.0})])
    assert count_calls(store) == 1
    save_dataset(store, "gold", [{"id": "a", "question": "q?", "references": ["r"]}])
    assert [d["id"] for d in samples_of(store, "gold")] == ["a"]


def test_schema_head_constant_is_alembics_head():
    from ragmeter.store.store import SCHEMA_HEAD

    assert SCHEMA_HEAD == head_revision()  # a new migration must update SCHEMA_HEAD


def test_a_run_name_wins_over_another_runs_id_prefix(tmp_path):
    # `ragmeter compare a b` of runs named "a" and "b": "a" must not resolve to a run whose id
    # happens to start with "a"
    store = Store(f"sqlite:///{tmp_path / 'names.db'}")
    samples = [Sample(id="a", answer="x")]
    kw = dict(dataset_source="t", fingerprint="f", samples=samples, metrics=[], config={}, version="0")
    unnamed = store.create_run(**kw)
    named = store.create_run(**kw, name=unnamed[0])
    assert named != unnamed
    assert store.resolve_run(unnamed[0]) == named
    assert store.resolve_run(unnamed) == unnamed
