"""Streaming evaluation (ragmeter.run.stream): a large file of plain rows is read, scored and stored a
chunk at a time, never loaded whole, with the values, summary and stored rows of the in-memory run."""

from __future__ import annotations

import json
import random

import pytest

import ragmeter
from ragmeter.core.errors import DatasetError
from ragmeter.run import runner, stream
from ragmeter.store import open_store

METRICS = ["token_f1", "rouge1_fmeasure", "exact_match"]
WORDS = "the refund policy allows returns within thirty days of purchase Über café naïve".split()


def _write(path, n=230, seed=3, bad_answer_every=0):
    rnd = random.Random(seed)
    with path.open("w") as fh:
        for i in range(n):
            row = {"id": f"q{i}", "question": "why?", "answer": " ".join(rnd.choices(WORDS, k=rnd.randint(0, 9))),
                   "reference": " ".join(rnd.choices(WORDS, k=rnd.randint(1, 9))), "topic": "x"}
            if bad_answer_every and i % bad_answer_every == 0:
                del row["answer"]
            fh.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def small_chunks(monkeypatch):
    """Stream every file, 40 rows a chunk; count the chunks stored and their largest size."""
    monkeypatch.setattr(stream, "MIN_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_ROWS", 40)
    seen = {"chunks": 0, "largest": 0}
    from ragmeter.store.store import Store

    add = Store.add_samples

    def counted(self, run_id, samples, start):
        seen["chunks"] += 1
        seen["largest"] = max(seen["largest"], len(samples))
        return add(self, run_id, samples, start)

    monkeypatch.setattr(Store, "add_samples", counted)
    return seen


def _stored(db, run_id):
    store = open_store(db)
    rows = sorted((s.metric, s.sample_id, s.value, s.reason, json.dumps(s.details)) for s in store.scores(run_id))
    samples = [s.model_dump() for s in store.run_samples(run_id)]
    run = store.get_run(run_id)
    return rows, samples, run.dataset_fingerprint, run.n_samples


def _in_memory(tmp_path, data, monkeypatch, **kw):
    with monkeypatch.context() as m:
        m.setattr(stream, "MIN_BYTES", 10**15)
        db = f"sqlite:///{tmp_path / 'memory.db'}"
        return ragmeter.evaluate(str(data), METRICS, db=db, progress=False, **kw), db


def test_a_plain_run_is_streamed_in_chunks_with_the_in_memory_values(tmp_path, small_chunks, monkeypatch):
    data = _write(tmp_path / "rows.jsonl", bad_answer_every=7)
    expected, db_a = _in_memory(tmp_path, data, monkeypatch)
    # the whole-dataset loader is never called for a streamed run
    monkeypatch.setattr(runner, "load", lambda *a, **k: pytest.fail("the whole dataset was loaded"))
    db_b = f"sqlite:///{tmp_path / 'stream.db'}"
    got = ragmeter.evaluate(str(data), METRICS, db=db_b, progress=False)
    assert small_chunks["chunks"] == 6 and small_chunks["largest"] == 40  # 230 rows, 40 at a time
    assert got.summary.to_dict() == expected.summary.to_dict()
    assert got.status == expected.status and got.incomplete == expected.incomplete
    assert len(got.samples) == 230 and got.to_dict()["n_samples"] == 230
    for key in METRICS:
        assert got.scores.column(key).value_list() == expected.scores.column(key).value_list()
        assert got.scores.column(key).reason_list() == expected.scores.column(key).reason_list()
    assert _stored(db_b, got.run_id) == _stored(db_a, expected.run_id)
    store_a, store_b = open_store(db_a), open_store(db_b)
    from ragmeter.store.columns import DATASET_NAMESPACE

    assert store_b.kv_get(DATASET_NAMESPACE, got.run_id) is None  # kept for runs of more than 20,000
    # the result reads its samples back from the store when asked
    assert got.rows() == expected.rows()
    assert store_b.get_run(got.run_id).status == store_a.get_run(expected.run_id).status == "completed"


def test_a_metric_fitted_on_its_batch_or_a_corpus_score_is_not_streamed(tmp_path, small_chunks):
    data = _write(tmp_path / "rows.jsonl", n=60)
    cfg = runner._Settings.of(runner.EvalConfig.of(None, ["token_f1", "bleu"]))
    assert stream.streamable(str(data), runner.EvalConfig.of(None, ["token_f1", "bleu"]), cfg) is None
    res = ragmeter.evaluate(str(data), ["token_f1", "bleu"], db=f"sqlite:///{tmp_path / 'a.db'}", progress=False)
    assert small_chunks["chunks"] == 0 and len(res.samples) == 60


def test_streamed_errors_match_the_in_memory_run(tmp_path, small_chunks, monkeypatch):
    data = _write(tmp_path / "rows.jsonl", n=50)
    with data.open("a") as fh:
        fh.write('{"id": "q3", "answer": "a", "reference": "b"}\n')  # a duplicate id, line 51
    with pytest.raises(DatasetError) as streamed:
        ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'a.db'}", progress=False)
    with monkeypatch.context() as m:
        m.setattr(stream, "MIN_BYTES", 10**15)
        with pytest.raises(DatasetError) as whole:
            ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'b.db'}", progress=False)
    assert str(streamed.value) == str(whole.value) and "first seen on line 4" in str(streamed.value)
    with data.open("a") as fh:
        fh.write('{"answer": "no id", "reference": "b"}\n{"id": "q60", "answer": "a", "reference": "b"}\n')
    with monkeypatch.context() as m:
        m.setattr(stream, "MIN_BYTES", 10**15)
        whole_skip = ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'w.db'}", progress=False,
                                       on_error="skip")
    skipped = ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'c.db'}", progress=False,
                                on_error="skip")
    assert skipped.extra["skipped_rows"] == whole_skip.extra["skipped_rows"] and skipped.extra["skipped_rows"]["count"] == 1
    assert _stored(f"sqlite:///{tmp_path / 'c.db'}", skipped.run_id) == _stored(f"sqlite:///{tmp_path / 'w.db'}",
                                                                               whole_skip.run_id)
    assert [s.id for s in skipped.samples][-2:] == ["row-52", "q60"]  # an id-less row's id counts every row
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text("\n".join(json.dumps({"id": f"r{i}", "question": "q"}) for i in range(50)) + "\n")
    with pytest.raises(DatasetError, match="token_f1 needs answer, reference and no row has any of them"):
        ragmeter.evaluate(str(nothing), METRICS, db=f"sqlite:///{tmp_path / 'd.db'}", progress=False)


def test_a_streamed_run_stopped_part_way_resumes_to_the_same_rows(tmp_path, small_chunks, monkeypatch):
    data = _write(tmp_path / "rows.jsonl", bad_answer_every=5)
    expected, db_a = _in_memory(tmp_path, data, monkeypatch)
    from ragmeter.run.engines import checks

    calls = {"n": 0}
    real = checks.run_metric

    def dies(req, chunk, ctx):  # the process is interrupted while scoring the third chunk
        calls["n"] += 1
        if calls["n"] == 2 * len(METRICS) + 2:
            raise KeyboardInterrupt
        return real(req, chunk, ctx)

    monkeypatch.setattr(checks, "run_metric", dies)
    db = f"sqlite:///{tmp_path / 'stream.db'}"
    with pytest.raises(KeyboardInterrupt):
        ragmeter.evaluate(str(data), METRICS, db=db, progress=False)
    monkeypatch.setattr(checks, "run_metric", real)
    store = open_store(db)
    run_id = store.list_runs()[0].id
    assert store.get_run(run_id).status == "failed" and store.stored_sample_count(run_id) == 120
    with pytest.raises(Exception, match="give the dataset again"):
        ragmeter.evaluate(None, db=db, resume=run_id, progress=False)
    done = ragmeter.evaluate(str(data), db=db, resume=run_id, progress=False)
    assert done.status == "completed" and done.summary.to_dict() == expected.summary.to_dict()
    assert _stored(db, run_id) == _stored(db_a, expected.run_id)


def test_the_streamed_summary_equals_the_in_memory_one_across_chunk_boundaries(tmp_path, small_chunks, monkeypatch):
    """Chunks of 40 rows: the first 45 rows all score 1 (every value at a bound, and no deviation
    from the first value until the second chunk), then varying rows with a missing answer every
    sixth; exact_match stays 0/1 (Clopper-Pearson), token_f1 varies (quasi-score)."""
    rnd = random.Random(11)
    data = tmp_path / "rows.jsonl"
    with data.open("w") as fh:
        for i in range(210):
            ref = " ".join(rnd.choices(WORDS, k=rnd.randint(1, 9)))
            row = {"id": f"q{i}", "question": "why?", "reference": ref}
            if i < 45:
                row["answer"] = ref
            elif i % 6:
                row["answer"] = ref if i % 5 == 0 else " ".join(rnd.choices(WORDS, k=rnd.randint(1, 9)))
            fh.write(json.dumps(row) + "\n")
    expected, _ = _in_memory(tmp_path, data, monkeypatch)
    got = ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'stream.db'}", progress=False)
    assert small_chunks["chunks"] == 6
    assert got.summary.to_dict() == expected.summary.to_dict()
    em, f1 = got.summary["exact_match"], got.summary["token_f1"]
    assert em.ci_method == "clopper_pearson" and f1.ci_method == "quasi_score"
    assert em.n_missing == f1.n_missing == 27 and f1.n == 183
    assert f1.ci_low < f1.mean < f1.ci_high <= 1.0
    assert got.scores.column("token_f1").reason_list() == expected.scores.column("token_f1").reason_list()


def test_exact_sum_is_the_exact_sum_in_any_grouping():
    from fractions import Fraction

    import numpy as np

    from ragmeter.stats.intervals import exact_sum

    rnd = random.Random(5)
    xs = [rnd.choice([1e16, -1e16, 1.0, 0.1, -3.5e-17, 1e-300, 5e-324, 1e300]) * rnd.random() for _ in range(500)]
    xs += [0.0, -0.0, 2.0**-1074, -(2.0**-1074), 1.7e308]
    exact = sum(map(Fraction, xs))
    assert Fraction(exact_sum(np.array(xs)), 2**1126) == exact
    parts = sum(exact_sum(np.array(xs[a:a + 37])) for a in range(0, len(xs), 37))
    assert Fraction(parts, 2**1126) == exact
    assert exact_sum(np.array([])) == 0


def _moments_cases():
    rnd = random.Random(7)
    yield [1.0] * 30 + [0.0] * 5, (0.0, 1.0)  # all at the bounds
    yield [0.25] * 40, (0.0, 1.0)  # constant
    yield [0.5] * 25 + [0.5 + 2.0**-40, 0.5 - 2.0**-41] + [0.5] * 10, (0.0, 1.0)  # tiny spread after a run of one value
    yield [rnd.random() for _ in range(300)], (0.0, 1.0)
    yield [rnd.choice([0.0, 1.0, rnd.random()]) for _ in range(200)], None
    yield [rnd.uniform(-3, 40) for _ in range(150)], (0.0, float("inf"))  # a metric below its declared range
    yield [float(rnd.randint(0, 1)) for _ in range(77)], None


@pytest.mark.parametrize("case", list(_moments_cases()))
def test_moments_summary_does_not_depend_on_the_chunks(case):
    """What a streamed run relies on: the summary of values fed in chunks (with missing values
    between them) is the summary of the whole column, bit for bit, and keeps the interval's
    guarantees (in the range, around the mean, strictly when the values vary)."""
    import numpy as np

    from ragmeter.stats import aggregate_many, mean_ci
    from ragmeter.stats.intervals import Moments

    values, bounds = case
    rnd = random.Random(len(values))
    col = np.array(values)
    col[rnd.sample(range(len(values)), len(values) // 7)] = np.nan
    reasons = [("error: x" if i % 2 else None) if np.isnan(v) else None for i, v in enumerate(col)]
    whole = aggregate_many({"m": (col, reasons)}, bounds={"m": bounds})["m"]
    for size in (1, 3, 16, 40, len(col)):
        acc = Moments()
        for a in range(0, len(col), size):
            acc.add(col[a:a + size], reasons[a:a + size])
        assert acc.summary(bounds=bounds) == whole
    present = col[~np.isnan(col)]
    assert whole["n"] == present.size and whole["n_missing"] == len(col) - present.size
    assert whole["missing_reasons"] == aggregate_many({"m": (col, reasons)})["m"]["missing_reasons"]
    assert (whole["ci_low"], whole["ci_high"]) == mean_ci(present, bounds=bounds)
    assert whole["mean"] == pytest.approx(float(np.mean(present)), rel=1e-12)
    assert whole["std"] == pytest.approx(float(np.std(present, ddof=1)), rel=1e-9, abs=1e-300)
    assert (whole["min"], whole["max"]) == (present.min(), present.max())
    lo_b = min(bounds[0], present.min()) if bounds else present.min()
    hi_b = max(bounds[1], present.max()) if bounds and np.isfinite(bounds[1]) else present.max()
    if bounds is None and set(present.tolist()) <= {0.0, 1.0}:
        lo_b, hi_b = 0.0, 1.0
    assert lo_b <= whole["ci_low"] <= whole["mean"] <= whole["ci_high"] <= hi_b
    if present.min() < present.max():
        assert whole["ci_low"] < whole["mean"] < whole["ci_high"]
