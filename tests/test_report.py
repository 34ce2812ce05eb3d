"""The one-file HTML report: bands, safe JSON, views built from the store, paired differences,
plots' data, escaping of evaluated text, self-containment, and the ``ragmeter report`` command."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragmeter.apps.cli import app
from ragmeter.apps.report import (
    build_report,
    data,
    differences,
    figures,
    metric_views,
    sections,
    write_report,
)
from ragmeter.apps.report import samples as sample_views
from ragmeter.apps.report.bands import band, oriented
from ragmeter.apps.report.render import fmt_num, fmt_signed, json_for_script
from ragmeter.core.errors import StoreError
from ragmeter.core.schema import Sample, Score
from ragmeter.stats import aggregate, mean_ci
from ragmeter.stats.intervals import difference_bounds
from ragmeter.stats.paired import value_bounds
from ragmeter.store import Store
from test_report_support import METRICS, XSS_ANSWER, make_samples, make_store


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('rep') / 'r.db'}"
    ids = make_store(url, runs=2)
    return Store(url), ids


class _Tags(HTMLParser):
    """Collects start tags and the text of each <script> element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script: dict | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script, self._buf = dict(attrs), []

    def handle_data(self, d):
        if self._in_script is not None:
            self._buf.append(d)

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._buf)))
            self._in_script = None


def _parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    return p


# ---- bands -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value,name", [(1.0, "Excellent"), (0.9, "Excellent"), (0.8999, "Good"),
                                        (0.7, "Good"), (0.6999, "Fair"), (0.5, "Fair"),
                                        (0.4999, "Poor"), (0.3, "Poor"), (0.2999, "Critical"),
                                        (0.0, "Critical")])
def test_band_thresholds(value, name):
    assert band(value).name == name
    assert band(1.0 - value, higher_is_better=False).name == name


def test_band_no_value():
    assert band(None) is None and band(float("nan")) is None
    assert oriented(None) is None and oriented(0.25, higher_is_better=False) == 0.75


@given(st.floats(0, 1), st.booleans())
def test_band_agrees_with_composite_module(v, hib):
    from ragmeter.analysis.composite import band as composite_band

    assert band(v, hib).name == composite_band(v, hib)


# ---- safe JSON in <script> ---------------------------------------------------------------------
@settings(max_examples=300)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=12))
def test_json_for_script_roundtrips_and_is_inert(obj):
    out = str(json_for_script(obj))
    assert not set(out) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(out) == obj


def test_json_for_script_breakout_and_nan():
    out = str(json_for_script({"a": "</script><script>alert(1)</script>", "b": float("nan"),
                               "c": [float("inf"), 1.5], "d": "\u2028"}))
    assert "</script" not in out.lower()
    assert json.loads(out) == {"a": "</script><script>alert(1)</script>", "b": None,
                               "c": [None, 1.5], "d": "\u2028"}


def test_number_formatting():
    assert fmt_num(None) == "—" and fmt_num(float("nan")) == "—" and fmt_num(0.12345) == "0.123"
    assert fmt_num(3) == "3" and fmt_signed(0.1) == "+0.100" and fmt_signed(-0.00001) == "0.000"
    assert fmt_signed(None) == "—" and fmt_signed(-0.25, 2) == "-0.25"


# ---- judge reasoning ---------------------------------------------------------------------------
def test_reasoning_text_shapes():
    assert sample_views.reasoning_text(None) is None and sample_views.reasoning_text({}) is None
    assert sample_views.reasoning_text({"raw": "x"}) is None
    assert sample_views.reasoning_text({"reason": " because "}) == "because"
    got = sample_views.reasoning_text({"reasoning": "overall ok",
                               "verdicts": [{"claim": "Paris is big", "verdict": "yes", "reason": "ctx 1"},
                                            {"statement": "Rome", "verdict": "no"}, "plain"]})
    assert got.splitlines() == ["overall ok", "yes: Paris is big — ctx 1", "no: Rome", "plain"]
    assert sample_views.reasoning_text({"reason": "x" * 50}, limit=10) == "x" * 9 + "…"


# ---- histogram ---------------------------------------------------------------------------------
@settings(max_examples=100)
@given(st.lists(st.floats(0, 1), max_size=60))
def test_histogram_counts_every_value(values):
    h = metric_views.histogram(values, 0.0, 1.0)
    assert sum(h["counts"]) == len(values) and len(h["edges"]) == metric_views.HISTOGRAM_BINS + 1
    ref, _ = np.histogram(values, bins=metric_views.HISTOGRAM_BINS, range=(0, 1))
    assert h["counts"] == ref.tolist()


# ---- paired differences --------------------------------------------------------------------------
def test_paired_difference_matches_numpy():
    rng = np.random.default_rng(7)
    for _trial in range(12):
        n = int(rng.integers(2, 80))
        a = {f"s{i}": float(rng.random()) if rng.random() > 0.1 else None for i in range(n)}
        b = {f"s{i}": float(np.clip((a[f"s{i}"] or 0.5) + rng.normal(0.05, 0.2), 0, 1))
             if rng.random() > 0.1 else None for i in range(n)}
        b["only-b"] = 1.0  # not in a: never paired
        ids = [k for k in a if a[k] is not None and b.get(k) is not None]
        d = np.array([b[k] - a[k] for k in ids])
        for hib in (True, False):
            r = differences.paired_difference(a, b, higher_is_better=hib)
            assert r["n_pairs"] == len(ids)
            if not ids:
                assert r["diff"] is None and r["verdict"] == "no paired samples"
                continue
            assert r["diff"] == pytest.approx(d.mean())
            assert r["mean_a"] == pytest.approx(np.mean([a[k] for k in ids]))
            # a metric that declares no range: its differences are bounded by both runs' values
            xa, xb = np.array([a[k] for k in ids]), np.array([b[k] for k in ids])
            ci = mean_ci(d, bounds=difference_bounds(value_bounds(xa, xb, None))) if d.size > 1 else None
            if ci is None:
                assert r["ci_low"] is None
            else:
                assert (r["ci_low"], r["ci_high"]) == pytest.approx(ci)
            better = int((d > 1e-12).sum()) if hib else int((d < -1e-12).sum())
            worse = int((d < -1e-12).sum()) if hib else int((d > 1e-12).sum())
            assert (r["wins"], r["losses"], r["ties"]) == (better, worse, len(ids) - better - worse)
            # one test: Holm leaves the p-value as is; the verdict is compare's rule (p < 0.05)
            sig = r["p_value"] < 0.05 and d.mean() != 0
            assert r["p_adjusted"] == r["p_value"] and r["significant"] == sig
            if sig:
                assert r["verdict"] == ("better" if (d.mean() > 0) == hib else "worse")


def test_paired_difference_edge_cases():
    assert differences.paired_difference({}, {})["n_pairs"] == 0
    r = differences.paired_difference({"a": 0.5}, {"a": 0.7})
    assert r["n_pairs"] == 1 and r["diff"] == pytest.approx(0.2) and r["ci_low"] is None
    assert r["verdict"] == "no significant difference"
    same = differences.paired_difference({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5})
    assert same["diff"] == 0 and same["ties"] == 2 and not same["significant"]
    up = differences.paired_difference({str(i): 0.1 for i in range(30)}, {str(i): 0.9 for i in range(30)},
                                higher_is_better=False)
    assert up["verdict"] == "worse" and up["losses"] == 30


# ---- views from the store ----------------------------------------------------------------------
def test_run_view_aggregates_match_store(two_runs):
    store, ids = two_runs
    view = data.run_view(store, ids[0], max_samples=None)
    run = store.get_run(ids[0])
    assert not view["live"] and [m["key"] for m in view["metrics"]] == METRICS
    for m in view["metrics"]:
        s = run.summary[m["key"]]
        assert (m["mean"], m["ci_low"], m["ci_high"], m["n"], m["n_missing"]) == (
            s["mean"], s["ci_low"], s["ci_high"], s["n"], s["n_missing"])
        assert sum(m["histogram"]["counts"]) == m["n"]
        b = band(m["mean"], m["direction"] == "higher")
        # bands only where they were defined (judge family here), none for the lexical metric
        assert m["band"] == (b.name if m["family"] == "judge" else None)
    assert view["metrics"][1]["direction"] == "lower"
    # judge failure recorded as no value, with its reason
    judge = view["metrics"][2]
    assert judge["missing_reasons"] == {"judge failure: reply did not parse": 1}


def test_run_view_samples_worst_first(two_runs):
    store, ids = two_runs
    view = data.run_view(store, ids[1], max_samples=None)
    rows = view["samples"]
    assert view["samples_total"] == len(rows) == len(make_samples())
    q = [r["quality"] for r in rows if r["quality"] is not None]
    assert q == sorted(q)
    # the quality of a row is the mean of its values turned so that higher is better
    table = store.score_table(ids[1])
    for r in rows[:5]:
        vals = [table["rmtest_overlap"][r["id"]].value, table["rmtest_judge"][r["id"]].value,
                table["rmtest_unsupported"][r["id"]].value]
        turned = [v for v in (vals[0], vals[1], None if vals[2] is None else 1 - vals[2]) if v is not None]
        assert r["quality"] == pytest.approx(np.mean(turned))
    xss = next(r for r in rows if r["id"] == "xss")
    assert xss["answer"] == XSS_ANSWER and xss["reasoning"]
    empty = next(r for r in rows if r["id"] == "empty")
    assert empty["values"]["rmtest_judge"] is None
    assert empty["reasons"]["rmtest_judge"] == "judge failure: reply did not parse"
    top = data.run_view(store, ids[1], max_samples=3)
    assert [r["id"] for r in top["samples"]] == [r["id"] for r in rows[:3]]
    assert top["samples_total"] == len(rows)


def test_dataset_summary(two_runs):
    store, ids = two_runs
    ds = data.run_view(store, ids[0], max_samples=0)["dataset"]
    n = len(make_samples())
    assert ds["n_samples"] == n and ds["fields"]["question"] == n and ds["fields"]["label"] == 0
    assert ds["mean_contexts"] == pytest.approx(np.mean([len(r["contexts"]) for r in make_samples()]))


def test_live_run_counts_pending(db_url):
    store = Store(db_url)
    samples = [Sample(id=f"s{i}", question="q", answer="a") for i in range(5)]
    rid = store.create_run(dataset_source="mem", fingerprint="f", samples=samples,
                           metrics=[{"name": "m_live", "params": {}, "key": "m_live"}],
                           config={}, version="t", name="live")
    store.add_scores(rid, "m_live", ["s0", "s1", "s2"], [Score(0.2), Score(0.9), Score.missing("x")])
    view = data.run_view(store, rid)
    m = view["metrics"][0]
    assert view["live"] and m["n"] == 2 and m["n_missing"] == 1 and m["n_pending"] == 2
    assert m["mean"] == pytest.approx(0.55)
    html = build_report(store, [rid])
    assert "is <b>running</b>" in html


def test_unregistered_metric_ranges(db_url):
    store = Store(db_url)
    samples = [Sample(id=f"s{i}", answer="a") for i in range(4)]
    rid = store.create_run(dataset_source="mem", fingerprint="f", samples=samples,
                           metrics=[{"name": "unit_m", "params": {}, "key": "unit_m"},
                                    {"name": "latency_ms", "params": {}, "key": "latency_ms"}],
                           config={}, version="t")
    store.add_scores(rid, "unit_m", [s.id for s in samples], [Score(v) for v in (0.1, 0.5, 0.95, 1.0)])
    store.add_scores(rid, "latency_ms", [s.id for s in samples], [Score(v) for v in (120, 80, 400, 95)])
    store.finish_run(rid, status="completed", timings={}, summary={
        k: aggregate([Score(v) for v in vals]) for k, vals in
        (("unit_m", (0.1, 0.5, 0.95, 1.0)), ("latency_ms", (120, 80, 400, 95)))})
    view = data.run_view(store, rid)
    unit, lat = view["metrics"]
    assert unit["banded"] and unit["range"] == [0.0, 1.0] and unit["band"] == "Fair"
    assert not lat["banded"] and lat["band"] is None and lat["range"] == [80.0, 400.0]
    assert sum(lat["histogram"]["counts"]) == 4
    # the latency does not enter the worst-first key
    assert view["samples"][0]["id"] == "s0" and view["samples"][0]["quality"] == pytest.approx(0.1)
    build_report(store, [rid])


def test_empty_run_renders(db_url):
    store = Store(db_url)
    rid = store.create_run(dataset_source="mem", fingerprint="f", samples=[], metrics=[],
                           config={}, version="t")
    store.finish_run(rid, status="completed", summary={}, timings={})
    html = build_report(store, [rid])
    assert "0 of 0 samples" in html


def test_sample_view(two_runs):
    store, ids = two_runs
    v = data.sample_view(store, ids[0], "xss")
    assert v["sample"]["answer"] == XSS_ANSWER and v["prev_id"] and v["next_id"]
    assert len(v["sample"]["contexts"]) == 2
    uns = next(s for s in v["scores"] if s["metric"] == "rmtest_unsupported")
    assert uns["direction"] == "lower" and uns["details"]["verdicts"]
    with pytest.raises(StoreError):
        data.sample_view(store, ids[0], "no-such-sample")


def test_compare_view(two_runs):
    store, ids = two_runs
    v = data.compare_view(store, ids)
    assert v["baseline"] == ids[0] and [r["id"] for r in v["runs"]] == ids
    assert [m["key"] for m in v["metrics"]] == METRICS
    assert {d["metric"] for d in v["differences"]} == set(METRICS)
    base, other = store.score_table(ids[0]), store.score_table(ids[1])
    for d in v["differences"]:
        a = {k: s.value for k, s in base[d["metric"]].items()}
        b = {k: s.value for k, s in other[d["metric"]].items()}
        ref = differences.paired_difference(a, b, higher_is_better=d["direction"] == "higher")
        assert d["diff"] == pytest.approx(ref["diff"]) and d["n_pairs"] == ref["n_pairs"]
    # the second run is made worse on purpose: the judge drop is significant
    judge = next(d for d in v["differences"] if d["metric"] == "rmtest_judge")
    assert judge["verdict"] == "worse" and judge["diff"] < 0
    deltas = [r["worst_delta"] for r in v["sample_changes"]]
    assert deltas == sorted(deltas) and deltas[0] < 0
    with pytest.raises(StoreError):
        data.compare_view(store, [ids[0], ids[0]])


def test_compare_disjoint_samples(db_url):
    store = Store(db_url)
    rids = []
    for prefix in ("a", "b"):
        samples = [Sample(id=f"{prefix}{i}", answer="x") for i in range(3)]
        rid = store.create_run(dataset_source="mem", fingerprint=prefix, samples=samples,
                               metrics=[{"name": "m", "params": {}, "key": "m"}], config={}, version="t")
        store.add_scores(rid, "m", [s.id for s in samples], [Score(0.5)] * 3)
        rids.append(rid)
    v = data.compare_view(store, rids)
    assert v["differences"][0]["n_pairs"] == 0 and v["differences"][0]["verdict"] == "no paired samples"
    assert v["sample_changes"] == []
    html = build_report(store, rids)
    assert "no paired samples" in html


# ---- calibration and grid search ----------------------------------------------------------------
def test_calibration_and_grid_plots(two_runs, tmp_path):
    store, ids = two_runs
    url = f"sqlite:///{tmp_path / 'g.db'}"
    g_ids = make_store(url, runs=1)
    st_ = Store(url)
    rid = g_ids[0]
    st_.update_run(rid, extra={**st_.get_run(rid).extra,
                               "calibration": {"thresholds": [0.5, 0.6, 0.7, 0.8],
                                               "accuracy": [0.6, 0.7, 0.8, 0.75],
                                               "f1": [0.55, 0.72, 0.78, 0.7], "chosen": 0.7,
                                               "objective": "accuracy", "n_validation": 40}})
    runs = [{"run_id": rid if (cs, k, r) == (256, 3, "dense") else f"other{cs}{k}{r}",
             "params": {"chunk_size": cs, "top_k": k, "retriever": r},
             "mean": 0.1 * k + cs / 1000 + (0.05 if r == "bm25" else 0), "ci_low": 0.0, "ci_high": 1.0}
            for cs in (128, 256) for k in (1, 3, 5) for r in ("bm25", "dense")]
    st_.kv_put("grid", "g1", {"params": {}, "runs": runs, "ranking": [], "metric": "rmtest_judge"})
    st_.kv_put("grid", "unrelated", {"params": {}, "runs": [{"run_id": "zzz", "params": {"a": 1}, "mean": 1}]})
    view = data.run_view(st_, rid)
    assert view["calibration"]["chosen"] == 0.7 and view["calibration"]["n_validation"] == 40
    (g,) = view["grids"]
    assert g["axes"] == ["top_k", "chunk_size"] or g["axes"] == ["chunk_size", "top_k"]
    assert g["others"] == ["retriever"]
    # each cell: the best mean over the other parameter (bm25 adds 0.05)
    for yi, y in enumerate(g["y"]):
        for xi, x in enumerate(g["x"]):
            p = dict(zip(g["axes"], (x, y), strict=True))
            assert g["z"][yi][xi] == pytest.approx(0.1 * p["top_k"] + p["chunk_size"] / 1000 + 0.05)
    figs = figures.run_figures(view | {"prefix": "r0"}, "r0")
    assert figs["r0-grid-0"]["data"][0]["type"] == "heatmap"
    # this run's cell is outlined although the cell shows a better configuration (bm25)
    (shape,) = figs["r0-grid-0"]["layout"]["shapes"]
    xi, yi = g["highlight_cell"]
    assert (g["x"][xi], g["y"][yi]) in ((256, 3), (3, 256)) and g["run_ids"][yi][xi] != rid
    assert shape["x0"] == xi - 0.5 and shape["y0"] == yi - 0.5
    assert [t["name"] for t in figs["r0-calibration"]["data"]] == ["accuracy", "F1"]
    html = build_report(st_, [rid])
    assert 'id="r0-calibration"' in html and 'id="r0-grid-0"' in html


def test_grid_single_axis():
    g = sections.grid_view("g", {"runs": [{"run_id": "a", "params": {"k": 1, "m": "x"}, "mean": 0.2},
                                      {"run_id": "b", "params": {"k": 3, "m": "x"}, "mean": 0.4}]},
                       highlight="b")
    assert g["axes"] == ["k"] and g["z"] == [[0.2, 0.4]] and g["run_ids"] == [["a", "b"]]
    assert g["highlight_cell"] == [1, 0]
    fig = figures.grid_heatmap(g)
    assert fig["data"][0]["type"] == "bar"


# ---- composite scores and hints -----------------------------------------------------------------
def test_composites_and_hints(db_url):
    store = Store(db_url)
    samples = [Sample(id=f"s{i}", question="q", answer="a") for i in range(6)]
    keys = {"faithfulness": [0.2, 0.4, 0.3, 0.5, 0.1, 0.3], "hallucination": [0.6, 0.5, 0.7, 0.4, 0.8, 0.5],
            "answer_relevancy": [0.9, 0.8, 0.95, 0.85, 0.9, 1.0]}
    rid = store.create_run(dataset_source="mem", fingerprint="f", samples=samples,
                           metrics=[{"name": k, "params": {}, "key": k} for k in keys], config={}, version="t")
    summary = {}
    for k, vals in keys.items():
        store.add_scores(rid, k, [s.id for s in samples], [Score(v) for v in vals])
        summary[k] = {**aggregate([Score(v) for v in vals]),
                      "direction": "lower" if k == "hallucination" else "higher", "family": "llm"}
    store.finish_run(rid, status="completed", summary=summary, timings={})
    view = data.run_view(store, rid)
    names = [c["composite"] for c in view["composites"]]
    assert "deepeval" in names
    deep = next(c for c in view["composites"] if c["composite"] == "deepeval")
    assert deep["mean"] is not None and deep["band"] == band(deep["mean"]).name
    hinted = {h["metric"] for h in view["hints"]}
    assert {"faithfulness", "hallucination"} <= hinted and "answer_relevancy" not in hinted
    html = build_report(store, [rid])
    assert "Composite scores" in html and "deepeval" in html and "likely cause" in html


# ---- the HTML file -------------------------------------------------------------------------------
def test_report_is_self_contained_and_escaped(two_runs, tmp_path):
    store, ids = two_runs
    path = write_report(store, ids, tmp_path / "out" / "report.html")
    html = path.read_text(encoding="utf-8")
    parsed = _parse(html)
    # only two scripts run: plotly.js and the table script, both inline; the rest is JSON data
    executable = [(a, t) for a, t in parsed.scripts if a.get("type") != "application/json"]
    assert len(executable) == 2 and all("src" not in a for a, _ in executable)
    assert "Plotly" in executable[0][1] and len(executable[0][1]) > 1_000_000
    for tag, attrs in parsed.tags:
        for attr in ("src", "href", "action"):
            v = attrs.get(attr) or ""
            assert not re.match(r"^\s*(https?:)?//", v), (tag, attrs)
    # the CSP allows exactly those two scripts and no network
    csp = next(a["content"] for t, a in parsed.tags
               if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    for _, text in executable:
        h = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{h}'" in csp
    assert "default-src 'none'" in csp and "unsafe-eval" not in csp
    # evaluated text is escaped everywhere, including inside the JSON blocks
    for raw in (XSS_ANSWER, "<script>alert(2)</script>", "<script>alert(4)</script>", "<img src=x"):
        assert raw not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;alert(3)&#34;&gt; Marie Curie" in html
    assert not any(a.get("onerror") for _, a in parsed.tags)
    # the figures block parses and holds one figure per plot element
    figs_text = next(t for a, t in parsed.scripts if a.get("id") == "rm-figures")
    figs = json.loads(figs_text)
    plot_ids = [a["id"] for t, a in parsed.tags if t == "div" and "plot" in (a.get("class") or "").split()]
    assert sorted(figs) == sorted(plot_ids) and len(plot_ids) == 2 + 3 * 2
    assert {"cmp-bars", "cmp-diffs"} <= set(figs)


def test_report_contents(two_runs):
    store, ids = two_runs
    html = build_report(store, [ids[0]], max_samples=5)
    assert "Showing the 5 worst of" in html
    for key in METRICS:
        assert key in html
    assert "judge failure: reply did not parse" in html  # why a sample has no value
    assert "(of 1 − mean)" in html  # lower-is-better band said so
    assert "Excellent" in html and "95% CI" in html
    assert "Comparison" not in html.split("<main", 1)[1].split("</h1>", 1)[0]
    assert 'id="r0-samples"' in html and 'class="rm-detail"' in html
    with pytest.raises(StoreError):
        build_report(store, ["no-such-run"])
    with pytest.raises(ValueError):
        build_report(store, [])


def test_distribution_figure_band_colours():
    m = {"histogram": metric_views.histogram([0.05, 0.95, 0.95], 0, 1), "banded": True,
         "higher_is_better": False, "mean": 0.65}
    fig = figures.distribution(m)
    colors = fig["data"][0]["marker"]["color"]
    assert colors[0] == figures.BAND_COLORS["excellent"] and colors[-1] == figures.BAND_COLORS["critical"]
    assert fig["layout"]["shapes"][0]["x0"] == 0.65


def test_cli_report(two_runs, tmp_path):
    store, ids = two_runs
    runner = CliRunner()
    out = tmp_path / "cli.html"
    res = runner.invoke(app, ["report", "latest", ids[0][:6], "-o", str(out), "--db", store.url,
                              "--max-samples", "3"])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and out.stat().st_size > 1_000_000
    html = out.read_text(encoding="utf-8")
    assert "ragmeter comparison — run-b vs run-a" in html
    res = runner.invoke(app, ["report", "nope", "-o", str(tmp_path / "x.html"), "--db", store.url])
    assert res.exit_code != 0 and isinstance(res.exception, StoreError)
    assert not (tmp_path / "x.html").exists()


def test_figures_are_finite(two_runs):
    store, ids = two_runs
    view = data.compare_view(store, ids)
    figs = figures.compare_figures(view, "cmp")
    text = json.dumps(figs, allow_nan=False)  # raises on NaN/Infinity
    assert "error_y" in text and math.isfinite(figs["cmp-bars"]["data"][0]["y"][0])


def test_missing_extra_is_a_clear_error():
    from ragmeter.apps.cli.report import _require
    from ragmeter.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"pip install 'ragmeter-eval\[report\]'"):
        _require(("jinja2", "no_such_module_for_ragmeter"), "report")
    _require(("jinja2", "plotly"), "report")
