"""After the run, in bulk: score columns, the bulk export (byte for byte the row-by-row files), the
closed-form permutation test and Wilcoxon of large runs, and the comparison cache."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import wilcoxon

from ragmeter.analysis.compare import compare_runs
from ragmeter.apps.export.files import _flat, export_run, run_rows
from ragmeter.run.rows import select_columns
from ragmeter.stats.large_sample import berry_esseen_bound, normal_pvalue, wilcoxon_asymptotic
from ragmeter.stats.paired import paired_permutation_test
from ragmeter.store import Store
from ragmeter.store.columns import run_columns
from test_report_support import METRICS, ensure_test_metrics, make_samples


@pytest.fixture(scope="module")
def store_runs(tmp_path_factory):
    import ragmeter

    ensure_test_metrics()
    url = f"sqlite:///{tmp_path_factory.mktemp('after') / 'r.db'}"
    ids = []
    for i in range(2):
        res = ragmeter.evaluate(make_samples(24, quality=1.0 - 0.35 * i, seed=i), metrics=METRICS, db=url,
                                name=f"run-{i}", thresholds=["rmtest_overlap>=0.5", "rmtest_unsupported<=0.3"])
        ids.append(res.run_id)
    return Store(url), ids


def _row_by_row(store, rid, fmt, path, columns=None):
    """The export as it was written before: every row built, then a DataFrame of the rows."""
    _, rows = run_rows(store, rid)
    rows = select_columns(rows, columns)
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return path
    df = pd.DataFrame([{k: _flat(v) for k, v in r.items()} for r in rows])
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    return path


def test_score_columns_hold_what_score_table_holds(store_runs):
    store, ids = store_runs
    for rid in ids:
        cols, reasons = run_columns(store, rid, reasons=True)
        table = store.score_table(rid)
        assert set(cols.values) == set(table)
        for m, by_id in table.items():
            for i, sid in enumerate(cols.sample_ids):
                sc = by_id.get(sid)
                v = cols.values[m][i]
                assert cols.scored[m][i] == (sc is not None)
                assert (sc is None or sc.value is None) == bool(np.isnan(v))
                if sc is not None and sc.value is not None:
                    assert v == sc.value
                assert reasons[m][i] == (sc.reason if sc is not None else None)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("columns", [None, ["id", "rmtest_judge", "judge", "no_value_reasons", "rmtest_overlap__pass"]])
def test_bulk_export_writes_the_row_by_row_file(store_runs, tmp_path, fmt, columns):
    store, ids = store_runs
    for rid in ids:
        new = export_run(store, rid, fmt, tmp_path / f"new.{fmt}", columns=columns)
        old = _row_by_row(store, rid, fmt, tmp_path / f"old.{fmt}", columns)
        if fmt == "parquet":
            a, b = pd.read_parquet(new), pd.read_parquet(old)
            pd.testing.assert_frame_equal(a, b)
        else:
            assert new.read_bytes() == old.read_bytes()
    text = (tmp_path / "new.csv").read_text() if fmt == "csv" else ""
    assert not text or "rmtest_judge" in text


@pytest.mark.slow
def test_normal_limit_agrees_with_the_drawn_permutation_test():
    rng = np.random.default_rng(3)
    a = rng.random(60_000)
    for shift in (0.0, 0.0008):  # nothing, and a p-value near 0.05
        b = np.clip(a + rng.normal(shift, 0.1, a.size), 0, 1)
        d = b - a
        assert 2 * berry_esseen_bound(d[d != 0]) <= 0.01  # the rule picks the closed form here
        auto = paired_permutation_test(a, b)
        drawn = paired_permutation_test(a, b, method="monte-carlo")
        assert auto.n_resamples == 0 and drawn.n_resamples == 10_000
        se = np.sqrt(max(drawn.pvalue * (1 - drawn.pvalue), 1e-4) / 10_000)
        assert abs(auto.pvalue - drawn.pvalue) <= 4 * se + 1e-4
        for alt in ("less", "greater") if shift else ():
            p1 = paired_permutation_test(a, b, alternative=alt).pvalue
            p2 = paired_permutation_test(a, b, alternative=alt, method="monte-carlo").pvalue
            assert abs(p1 - p2) <= 4 * np.sqrt(max(p2 * (1 - p2), 1e-4) / 10_000) + 1e-4
    # a small run is never approximated: the bound is too wide
    small = paired_permutation_test(a[:200], b[:200])
    assert small.n_resamples == 10_000
    assert normal_pvalue(np.array([1.0, -1.0]), "two-sided") == 1.0
    with pytest.raises(Exception, match="method"):
        paired_permutation_test(a, b, method="bogus")


@pytest.mark.parametrize("alt", ["two-sided", "less", "greater"])
def test_wilcoxon_in_numpy_is_scipys_normal_approximation(alt):
    rng = np.random.default_rng(5)
    for n in (51, 300, 20_000):
        for d in (rng.normal(0.05, 1, n), rng.integers(-2, 3, n).astype(float), np.round(rng.normal(0, 0.1, n), 2)):
            ref = wilcoxon(d, zero_method="wilcox", alternative=alt)
            p, stat = wilcoxon_asymptotic(d, alt)
            assert p == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-300)
            assert stat == pytest.approx(float(ref.statistic))


def test_compare_is_cached_per_run_versions(store_runs):
    store, ids = store_runs
    first = compare_runs(ids, store=store)
    again = compare_runs(ids, store=store)
    assert [r.to_dict() for r in again.rows] == [r.to_dict() for r in first.rows]
    assert [r.label for r in again.runs] == [r.label for r in first.runs]
    assert again.runs[0].values == {}  # from the cache: nothing was loaded
    other = compare_runs(ids, store=store, alpha=0.01)  # another question: computed, not the cached one
    assert other.alpha == 0.01 and other.runs[0].values
    # a new score changes the run's version: the comparison is computed again
    from ragmeter.core.schema import Score

    store.add_scores(ids[1], "rmtest_extra", ["q0"], [Score(0.5)])
    fresh = compare_runs(ids, store=store)
    assert fresh.runs[0].values
    assert [r.to_dict() for r in fresh.rows] == [r.to_dict() for r in first.rows]


# ---- the report of a large run, from the columns ----------------------------------------------------
def _strip(view):
    return json.loads(json.dumps(view, default=str))


def test_large_run_views_match_the_row_by_row_views(store_runs, monkeypatch):
    from ragmeter.apps.report import columnar, data

    store, ids = store_runs
    small = [_strip(data.run_view(store, rid, max_samples=None, with_details=True)) for rid in ids]
    small_cmp = _strip(data.compare_view(store, ids, max_samples=None))
    monkeypatch.setattr(data, "LARGE_RUN", 5)  # every run here is "large": the column path
    monkeypatch.setattr(columnar, "SHOWN", {"worst": 4, "best": 3, "random": 2})
    for rid, old in zip(ids, small, strict=True):
        new = _strip(data.run_view(store, rid, max_samples=9, with_details=True))
        assert new["metrics"] == old["metrics"] and new["dataset"] == old["dataset"]
        assert new["samples_total"] == old["samples_total"] == 27
        assert "4 worst, the 3 best and 2 random" in new["samples_note"]
        by_id = {r["id"]: r for r in old["samples"]}
        assert [r["id"] for r in new["samples"][:4]] == [r["id"] for r in old["samples"][:4]]
        assert [r["id"] for r in new["samples"][-3:]] == [r["id"] for r in old["samples"][-3:]]
        assert len(new["samples"]) == 9
        for r in new["samples"]:
            assert r == by_id[r["id"]]
        # without a cap every row is there, in the same order
        every = _strip(data.run_view(store, rid, max_samples=None, with_details=True))
        assert every["samples"] == old["samples"] and every["samples_note"] is None
    new_cmp = _strip(data.compare_view(store, ids, max_samples=None))
    assert new_cmp["metrics"] == small_cmp["metrics"] and new_cmp["runs"] == small_cmp["runs"]
    assert new_cmp["differences"] == small_cmp["differences"]
    assert new_cmp["sample_changes_total"] == small_cmp["sample_changes_total"]
    old_rows = small_cmp["sample_changes"][:9]  # qualities summed in numpy, not math.fsum: to 1e-12
    assert [r["id"] for r in new_cmp["sample_changes"]] == [r["id"] for r in old_rows]
    for a, b in zip(new_cmp["sample_changes"], old_rows, strict=True):
        assert a["question"] == b["question"] and a["answer"] == b["answer"]
        assert a["worst_delta"] == pytest.approx(b["worst_delta"], abs=1e-12)
        for k in ("qualities", "deltas"):
            assert [x is None for x in a[k]] == [x is None for x in b[k]]
            assert [x for x in a[k] if x is not None] == pytest.approx([x for x in b[k] if x is not None], abs=1e-12)


def test_large_run_report_is_small_and_names_the_dashboard(store_runs, monkeypatch, tmp_path):
    from ragmeter.apps.report import columnar, data, write_report

    store, ids = store_runs
    monkeypatch.setattr(data, "LARGE_RUN", 5)
    monkeypatch.setattr(columnar, "SHOWN", {"worst": 4, "best": 3, "random": 2})
    html = write_report(store, ids, tmp_path / "r.html", max_samples=20).read_text(encoding="utf-8")
    assert "ragmeter serve" in html and f"/runs/{ids[0]}" in html
    assert "2 random" in html
    assert len(html) < 3_000_000


def test_large_run_dashboard_view_matches_the_row_by_row_one(store_runs, monkeypatch):
    from ragmeter.apps.report import data, paged

    store, ids = store_runs
    run = store.get_run(ids[1])
    old = paged._build(store, run, "v")
    monkeypatch.setattr(data, "LARGE_RUN", 5)
    new = paged._build(store, run, "v")
    assert _strip(new["view"]) == _strip(old["view"])
    assert new["positions"] == old["positions"]
    assert set(new["orders"]) == set(old["orders"])
    for k in old["orders"]:
        assert list(paged._unpack(new["orders"][k])) == list(paged._unpack(old["orders"][k])), k


def test_gate_is_cached_per_run_versions(store_runs):
    from ragmeter.analysis.gate import gate

    store, ids = store_runs
    first = gate(ids[1], ids[0], store=store, max_drop=0.01)
    again = gate(ids[1], ids[0], store=store, max_drop=0.01)
    assert again.to_dict() == first.to_dict() and again.exit_code == first.exit_code
    assert first.failed  # the second run is worse: the cached gate still fails
    other = gate(ids[1], ids[0], store=store, max_drop=0.9)
    assert other.to_dict() != first.to_dict()


def test_the_dense_reading_equals_the_general_one(tmp_path):
    """A SQLite run whose metrics scored every sample is read one metric at a time (values and
    reasons only); the general reading places every (metric, position, value) tuple. Both must
    give the same columns, NaN and reasons included; a run with a metric scored on only some
    samples is left to the general reading."""
    import ragmeter
    from ragmeter.store.columns import _from_rows, _sqlite_dense

    url = f"sqlite:///{tmp_path / 'd.db'}"
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "answer": f"Answer {i} é 🙂",
             **({"reference": f"Answer {i % 3}"} if i % 4 else {})} for i in range(40)]
    res = ragmeter.evaluate(rows, metrics=["token_f1", "exact_match", "levenshtein"], db=url)
    store = Store(url)
    for reasons in (False, True):
        dense = _sqlite_dense(store, res.run_id, reasons)
        general = _from_rows(store, res.run_id, reasons)
        assert dense is not None
        (dc, dr), (gc, gr) = dense, general
        assert dc.sample_ids == gc.sample_ids and set(dc.values) == set(gc.values) == {"token_f1", "exact_match", "levenshtein"}
        for m in gc.values:
            np.testing.assert_array_equal(dc.values[m], gc.values[m])  # NaN where no value, in both
            np.testing.assert_array_equal(dc.scored[m], gc.scored[m])
        assert dr == gr
    assert np.isnan(dc.values["token_f1"]).sum() == 10 and dr["token_f1"][0] == "missing field: reference"
    # a conversation run: per-turn metrics do not score the conversation samples
    chat = ragmeter.evaluate("example-chat", ["token_f1"], db=url)
    assert _sqlite_dense(store, chat.run_id, True) is None
    cols, _ = run_columns(store, chat.run_id)
    assert 0 < cols.scored["token_f1"].sum() < len(cols.sample_ids)


_TEXT = st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
                  st.sampled_from(["", ",", '"', 'say "hi"', "a\nb", "a\rb", "é 🙂", "nan", " x "]))
_FLOAT = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=False, width=64))
_BOOL = st.one_of(st.none(), st.booleans())


@given(st.integers(1, 8).flatmap(lambda n: st.lists(
    st.one_of(st.lists(_TEXT, min_size=n, max_size=n), st.lists(_FLOAT, min_size=n, max_size=n),
              st.lists(_BOOL, min_size=n, max_size=n), st.just([None] * n)), min_size=1, max_size=5)))
@settings(max_examples=150, deadline=None)
def test_the_csv_writer_writes_what_pandas_writes(columns):
    import tempfile
    from pathlib import Path

    from ragmeter.apps.export.files import _write_csv

    table = {f"c{i}": col for i, col in enumerate(columns)}
    with tempfile.TemporaryDirectory() as d:
        ours = _write_csv(table, Path(d) / "a.csv").read_bytes()
        pd.DataFrame(table).to_csv(Path(d) / "b.csv", index=False)
        assert ours == (Path(d) / "b.csv").read_bytes()
