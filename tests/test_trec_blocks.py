"""``ragmeter trec`` evaluates run files block by block of whole queries: the same values as the
whole-file path and as pytrec_eval when queries straddle block boundaries, when a query's lines
are not together (the whole-file path takes over), with tied scores, and with doc ids whose
fingerprints collide; duplicate documents are refused as trec_eval refuses them."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ragmeter.apps import trec as T
from ragmeter.apps.trec import blocks as B
from ragmeter.apps.trec import evaluate
from ragmeter.apps.trec.text import format_lines
from ragmeter.core.errors import DatasetError
from ragmeter.io import trec as trec_io
from ragmeter.io.trec import read_qrels, read_run, run_blocks
from ragmeter.metrics.retrieval import trec_measures as TM
from references import require_reference

pytrec_eval = require_reference("pytrec_eval")
pytestmark = pytest.mark.contract

OURS = ["map", "P_5", "recall_100", "ndcg_cut_10", "recip_rank", "success_10", "Rprec", "bpref", "num_ret",
        "num_rel", "num_rel_ret", "ndcg", "iprec_at_recall", "num_nonrel_judged_ret"]
THEIRS = {"map", "P.5", "recall.100", "ndcg_cut.10", "recip_rank", "success.10", "Rprec", "bpref", "num_ret",
          "num_rel", "num_rel_ret", "ndcg", "iprec_at_recall", "num_nonrel_judged_ret"}


def _doc_id(rng: random.Random, i: int) -> str:
    """Doc ids of every length class the fingerprints treat differently (<8, 8-16, 16-32, >32
    bytes), some non-ASCII, many sharing prefixes."""
    kind = i % 6
    if kind == 0:
        return f"d{i}"
    if kind == 1:
        return f"doc-{i:08d}"
    if kind == 2:
        return f"clueweb12-{i % 7:04d}tw-{i % 13:02d}-{i:05d}"
    if kind == 3:
        return f"msmarco_passage_{i % 3:02d}_{i:09d}_" + "x" * rng.randint(0, 20)
    if kind == 4:
        return f"é{i}ü"
    return f"d{i}a"


def collection(seed: int, nq: int = 40, ties: bool = False) -> tuple[dict, dict]:
    rng = random.Random(seed)
    pool = [_doc_id(rng, i) for i in range(300)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for k in range(nq):
        q = f"q{k}"
        if rng.random() < 0.9:
            qrels[q] = {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(pool, rng.randint(1, 12))}
        if rng.random() < 0.9:
            docs = rng.sample(pool, rng.randint(1, 60))
            run[q] = {d: float(rng.randint(0, 3)) if ties else round(rng.uniform(-5, 5), 6) for d in docs}
    return qrels, run


def write(tmp: Path, qrels: dict, run: dict, *, order: str = "grouped", name: str = "run") -> tuple[Path, Path]:
    qf, rf = tmp / "qrels.txt", tmp / f"{name}.txt"
    qf.write_text("".join(f"{q} 0 {d} {g}\n" for q, dd in qrels.items() for d, g in dd.items()), encoding="utf-8")
    rows = [(q, d, s) for q, dd in run.items() for d, s in sorted(dd.items(), key=lambda kv: -kv[1])]
    if order == "split":  # every query's second half comes after all the first halves
        first, second = [], []
        for q in run:
            part = [r for r in rows if r[0] == q]
            first += part[: len(part) // 2]
            second += part[len(part) // 2:]
        rows = first + second
    rf.write_text("".join(f"{q} Q0 {d} {i} {s!r} tag\n" for i, (q, d, s) in enumerate(rows)), encoding="utf-8")
    return qf, rf


def assert_like_pytrec_eval(result: T.TrecResult, qrels: dict, run: dict) -> None:
    ref = pytrec_eval.RelevanceEvaluator(qrels, THEIRS).evaluate(run)
    ours = result.per_query()
    assert set(ours) == set(ref)
    for q, row in ref.items():
        for name, v in row.items():
            assert abs(ours[q][name] - v) <= 1e-12, (q, name, ours[q][name], v)


def _values(path: Path, qf: Path, block_bytes: int | None, workers: int) -> tuple[np.ndarray, dict]:
    qc = read_qrels(qf)
    ix = B.QrelsIndex.build(qc.qid, qc.doc, qc.value, qc.name)
    parsed = TM.parse_measures(OURS)
    opts = B.Options(1, None, str(path), lambda m: TM.query_values(m, parsed))
    if block_bytes is None:
        rc = read_run(path)
        return B.evaluate_columns(ix, rc.qid, rc.doc, rc.value, opts, workers=workers)
    qi, values, run_id = B.evaluate_run_file(ix, path, opts, block_bytes=block_bytes, workers=workers)
    assert run_id == "tag"
    return qi, values


@pytest.mark.parametrize("block_bytes", [150, 700, 4096])
def test_queries_straddling_blocks_give_the_whole_file_values(tmp_path, block_bytes):
    qrels, run = collection(1)
    qf, rf = write(tmp_path, qrels, run)
    data = rf.read_bytes()
    blocks = [bytes(d[:e]) for d, e in run_blocks(rf, block_bytes)]
    assert len(blocks) > 5 and b"".join(blocks) == data
    owners = [{line.split(b" ")[0] for line in b.splitlines()} for b in blocks]
    assert sum(map(len, owners)) == len(set().union(*owners))  # no query in two blocks
    assert any(len(b) > block_bytes for b in blocks)  # some query straddled a boundary
    whole_qi, whole = _values(rf, qf, None, 1)
    for workers in (1, 2):
        qi, values = _values(rf, qf, block_bytes, workers)
        assert np.array_equal(qi, whole_qi) and list(values) == list(whole)
        for name in whole:
            assert np.array_equal(values[name], whole[name]), name


def test_evaluate_reads_big_runs_in_blocks_with_the_same_results(tmp_path, monkeypatch):
    qrels, run = collection(2, nq=80)
    qf, rf = write(tmp_path, qrels, run)
    whole = evaluate(qf, rf, OURS)
    monkeypatch.setattr(trec_io, "BLOCK_BYTES", 512)
    assert len(list(run_blocks(rf))) > 10
    for workers in (1, 2, None):
        blocks = evaluate(qf, rf, OURS, workers=workers)
        assert blocks.summary == whole.summary and blocks.qids == whole.qids
        assert "".join(blocks.text(per_query=True)) == "".join(whole.text(per_query=True))
    assert_like_pytrec_eval(whole, qrels, run)


def test_a_query_whose_lines_are_apart_falls_back_to_the_whole_file(tmp_path, monkeypatch):
    qrels, run = collection(3, nq=50)
    qf, rf = write(tmp_path, qrels, run, order="split")
    with pytest.raises(B.Fallback):  # across blocks
        _values(rf, qf, 300, 2)
    with pytest.raises(B.Fallback):  # inside one block
        _values(rf, qf, 1 << 20, 1)
    monkeypatch.setattr(trec_io, "BLOCK_BYTES", 300)
    assert_like_pytrec_eval(evaluate(qf, rf, OURS), qrels, run)


def test_ties_are_broken_by_docid_descending_in_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(trec_io, "BLOCK_BYTES", 400)
    for seed in range(10, 16):
        qrels, run = collection(seed, nq=30, ties=True)
        qf, rf = write(tmp_path, qrels, run)
        assert_like_pytrec_eval(evaluate(qf, rf, OURS), qrels, run)
    # trec_eval ranks d3 before d1 when their scores tie; d10 sorts after d1 as a string
    (tmp_path / "q").write_text("q 0 d1 1\n")
    (tmp_path / "r").write_text("q Q0 d1 1 1.0 t\nq Q0 d3 2 1.0 t\nq Q0 d10 3 1.0 t\nq Q0 d2 4 2.0 t\n")
    assert evaluate(tmp_path / "q", tmp_path / "r", ["recip_rank"]).summary["recip_rank"] == 1 / 4


def _fp(ids: list[str]) -> np.ndarray:
    return B.fingerprints(pa.array(ids, type=pa.string()))


def test_fingerprints_are_equal_for_equal_ids_wherever_they_sit():
    rng = random.Random(0)
    alphabet = "ab0é"
    ids = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    ids += rng.sample(ids, 1000)  # the same ids again, next to other neighbours
    rng.shuffle(ids)
    fp = _fp(ids)
    seen: dict[str, int] = {}
    for s, h in zip(ids, fp.tolist(), strict=True):
        assert seen.setdefault(s, h) == h, s
    # ids up to 32 bytes are covered entirely: distinct ones (almost surely) differ
    short = {s: h for s, h in seen.items() if len(s.encode()) <= 32}
    assert len(set(short.values())) == len(short)
    sliced = pa.array(["xx", *ids], type=pa.string()).slice(1)  # an array with an offset
    assert np.array_equal(B.fingerprints(sliced), fp)


def test_colliding_fingerprints_are_not_duplicates_but_real_duplicates_are(tmp_path, monkeypatch):
    monkeypatch.setattr(trec_io, "BLOCK_BYTES", 200)
    a = "shard-0000000000" + "AAAAAAAA" + "-00000000000000-"
    b = "shard-0000000000" + "BBBBBBBB" + "-00000000000000-"  # 40 bytes: only bytes 16-23 differ
    assert _fp([a])[0] == _fp([b])[0]
    qrels = {"q1": {a: 1, "d2": 1, b: 0}, "q2": {b: 2}}  # judged both: not a repeated judgement
    run = {"q1": {"d0": 3.0, b: 2.5, a: 2.0, "d2": 1.0}, "q2": {a: 1.0, b: 0.5}}
    qf, rf = write(tmp_path, qrels, run)
    assert_like_pytrec_eval(evaluate(qf, rf, OURS), qrels, run)
    for dup in ("d2", a, "é", "doc-00000001", "clueweb12-0000tw-00-00001"):
        (tmp_path / "dup").write_text(
            "".join(f"q0 Q0 x{i} {i} {9 - i}.0 t\n" for i in range(8))
            + f"q1 Q0 {dup} 1 3.0 t\nq1 Q0 {b} 2 2.0 t\nq1 Q0 {dup} 3 1.0 t\n", encoding="utf-8")
        with pytest.raises(DatasetError, match=f"query 'q1' retrieves document '{dup}' more than once"):
            evaluate(qf, tmp_path / "dup", ["map"])
    # a query the qrels do not judge is not evaluated, so its duplicates do not matter
    (tmp_path / "other").write_text("q9 Q0 d1 1 1.0 t\nq9 Q0 d1 2 0.5 t\nq1 Q0 d2 1 1.0 t\n")
    assert evaluate(qf, tmp_path / "other", ["num_ret"]).summary["num_ret"] == 1


def test_block_reader_handles_blank_lines_crlf_and_a_query_longer_than_a_block(tmp_path):
    lines = [f"q1 Q0 d{i} {i} {100 - i}.0 t" for i in range(60)] + ["", "q2 Q0 d1 1 1.0 t", "",
                                                                     "q2 Q0 d2 2 0.5 t"]
    path = tmp_path / "r"
    for eol in ("\n", "\r\n"):
        path.write_bytes(eol.join(lines).encode())  # no final newline
        blocks = [bytes(d[:e]) for d, e in run_blocks(path, 64)]
        assert b"".join(blocks) == path.read_bytes()
        assert blocks[0].count(b"q1 ") == 60 and b"q1 " not in b"".join(blocks[1:])
        (tmp_path / "q").write_text("q1 0 d5 1\nq2 0 d2 1\n")
        res = evaluate(tmp_path / "q", path, ["recip_rank", "num_ret"])
        assert res.per_query() == {"q1": {"recip_rank": 1 / 6, "num_ret": 60.0},
                                   "q2": {"recip_rank": 0.5, "num_ret": 2.0}}


def test_fixed_bytes_sort_like_python_strings():
    rng = random.Random(1)
    ids = ["".join(rng.choice("aZ0é\u4e2d~") for _ in range(rng.randint(1, 9))) for _ in range(500)]
    keys = B.fixed_bytes(pa.array(ids))
    assert [ids[i] for i in np.argsort(keys, kind="stable")] == sorted(ids)


def test_per_query_lines_are_formatted_as_printf_does():
    rng = np.random.default_rng(0)
    specials = [0.0, 1.0, 0.5, 1 / 3, 2 / 3, 0.03125, 0.00005, 0.99995, 0.12345, 0.00015, 1e-300,
                12345.678, 4.99995, 2.0 ** 40 + 0.5, -0.25, -1e-9, math.nan, math.inf]
    grid = (rng.integers(0, 20000, 3000) + 0.5) / 10000  # values right at a rounding half
    values = np.concatenate([specials, grid, rng.random(3000), rng.random(200) * 1000]).astype(np.float64)
    names = ["map", "num_ret", "P_5"]
    mat = np.stack([values, np.floor(values * 7), values[::-1]], axis=1)
    mat[:, 1] = np.where(np.isfinite(mat[:, 1]), mat[:, 1], 0.0)  # counts are finite
    qids = [f"q{i}" for i in range(len(values))]
    expected = "".join(T._line(n, q, float(mat[i, j]), n in TM.COUNTS) + "\n"
                       for i, q in enumerate(qids) for j, n in enumerate(names))
    assert format_lines(names, qids, mat, TM.COUNTS) == expected


@pytest.mark.parametrize("options", [{"max_docs": 3}, {"relevance_level": 2}, {"complete": True},
                                     {"complete": True, "relevance_level": 2, "max_docs": 7}])
def test_block_path_equals_the_dict_path_with_options(tmp_path, monkeypatch, options):
    monkeypatch.setattr(trec_io, "BLOCK_BYTES", 300)
    qrels, run = collection(4, nq=40)
    qf, rf = write(tmp_path, qrels, run)
    measures = [*OURS, "gm_map", "set_F", "map_cut_5", "num_q"]
    files = evaluate(qf, rf, measures, workers=2, **options)
    dicts = evaluate(qrels, {q: d for q, d in run.items() if d}, measures, **options)
    assert files.qids == dicts.qids and files.missing == dicts.missing
    assert files.summary == dicts.summary
    for name, v in dicts.values.items():
        assert np.array_equal(files.values[name], v), name
    assert "".join(files.text(per_query=True)) == "".join(dicts.text(per_query=True))


def test_the_trec_command_loads_neither_pandas_nor_rich_nor_the_dataset_readers(tmp_path):
    import subprocess
    import sys

    qrels, run = collection(5, nq=10)
    qf, rf = write(tmp_path, qrels, run)
    code = ("import sys; from ragmeter.apps.cli import main\n"
            f"sys.argv = ['ragmeter', 'trec', '-q', '-c', {str(qf)!r}, {str(rf)!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pandas', 'rich', 'ragmeter.io.readers', 'ragmeter.core.schema') if m in sys.modules),"
            " file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "[]"
    assert "map                   \tall\t" in out.stdout
