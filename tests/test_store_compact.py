"""Compressed run samples (ragmeter.store.codec): exact round trips, older JSON rows still read, and
RAG-length answers and references within 150 bytes of database file per stored score."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from ragmeter.core.schema import Chunk, Sample
from ragmeter.store import codec, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


SAMPLES = [
    Sample(id="a", question="Qual é a capital?", answer="A capital é Brasília. 首都是巴西利亚 🇧🇷",
           references=["Brasília", ""], metadata={"type": "multi_hop", "n": 3, "nested": {"x": [1, 2.5, None]}}),
    Sample(id="b", answer="", references=[]),
    Sample(id="c", question="q", answer="x" * 200_000, references=["y" * 70_000],
           contexts=[Chunk(text="ctx one", id="d1", source="doc.pdf", start=0, end=7, score=0.9, grade=2)]),
    Sample(id="d", answer="\x00\t\n\u2028 quotes \" and \\ backslashes", references=["\ud7ff"], label=0.5),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_codec_round_trip(sample: Sample) -> None:
    text = sample.model_dump_json(exclude_defaults=True)
    blob = codec.encode_json(text)
    assert blob[:1] == b"\x01"
    assert codec.decode(blob) == json.loads(text)
    assert codec.decode(codec.encode(json.loads(text))) == json.loads(text)
    assert codec.decode(memoryview(blob)) == json.loads(text)
    assert codec.decode(text) == json.loads(text)  # JSON text as older ragmeter wrote it
    assert codec.decode(json.loads(text)) == json.loads(text)


def test_store_writes_compressed_samples_and_reads_old_json_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = open_store(url)
    run_id = store.create_run(dataset_source="x", fingerprint="f", samples=SAMPLES, metrics=[], config={},
                              version="t")
    assert [s.model_dump() for s in store.run_samples(run_id)] == [s.model_dump() for s in SAMPLES]
    con = sqlite3.connect(tmp_path / "r.db")
    kinds = {r[0] for r in con.execute("SELECT typeof(data) FROM run_samples")}
    assert kinds == {"blob"}
    assert "ix_run_samples_run_id" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    # a row as ragmeter wrote it before compression (JSON text) reads back as well
    legacy = Sample(id="old", answer="written as JSON text", references=["r"])
    con.execute("INSERT INTO run_samples (run_id, sample_id, position, data) VALUES (?, ?, ?, ?)",
                (run_id, "old", len(SAMPLES), legacy.model_dump_json(exclude_defaults=True)))
    con.commit()
    con.close()
    again = open_store(url)
    got = again.run_samples(run_id)
    assert got[-1] == legacy and len(got) == len(SAMPLES) + 1
    # the dashboard's paged readers decode both kinds of rows too
    rows = list(again.iter_sample_rows(run_id))
    assert [r[2] for r in rows] == [s.id for s in SAMPLES] + ["old"]
    assert rows[0][3] == json.loads(SAMPLES[0].model_dump_json(exclude_defaults=True))
    pks = [r[0] for r in rows]
    page = again.samples_by_pk(run_id, [pks[0], pks[-1]])
    assert page[pks[0]][1] == SAMPLES[0] and page[pks[-1]][1] == legacy
    assert again.sample_by_id(run_id, "c")[2] == SAMPLES[2]


def test_rag_pairs_cost_at_most_150_bytes_per_score(tmp_path: Path) -> None:
    from end_to_end import METRICS, write_pairs

    from ragmeter.run.runner import evaluate

    data = tmp_path / "pairs.jsonl"
    write_pairs(data, 3000)
    db = tmp_path / "size.db"
    res = evaluate(str(data), METRICS.split(","), db=f"sqlite:///{db}")
    store = open_store(f"sqlite:///{db}")
    n = store.count_scores(res.run_id)
    store.engine.dispose()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    assert n == 3000 * 5
    assert db.stat().st_size / n <= 150
