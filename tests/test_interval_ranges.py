"""No interval ragmeter prints or stores leaves its metric's range (issue: intervals at every n).

1. Every registered metric's range, and the range of one metric of every kind built at run time
   from a definition (tests/runtime_metrics.py), goes through the run aggregation (``ragmeter.run.runner.summarise``,
   what ``eval`` stores and ``show`` prints) with adversarial value sets: all at a bound, one outlier,
   n = 2, constant values, a tiny spread against a bound.
2. The same value sets, scored by test metrics on [0, 1] and on [-5, 20] and stored as runs, are read
   back by every presenter: ``eval``/``show`` (CLI), ``compare`` and ``gate`` (paired differences,
   relative gates), ``composite``, the report's data, the dashboard's API and the MLflow export.
3. The issue's three examples, produced by ``token_f1`` from a JSONL file, through ``ragmeter eval``
   and ``ragmeter show``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import ragmeter
from cli_runner import run_main
from ragmeter.core.schema import Score
from ragmeter.metrics.registry import _REGISTRY, MetricSpec, all_metrics, register_metric, resolve
from ragmeter.run.runner import summarise
from runtime_metrics import CUSTOM_JUDGED, RUNTIME


def adversarial(low: float, high: float) -> dict[str, list[float]]:
    """Value sets that broke the intervals before (scaled onto ``[low, high]``)."""
    span = high - low

    def at(*fractions: float) -> list[float]:
        return [low + f * span for f in fractions]

    return {
        "all at low, n=2": at(0, 0),
        "all at high, n=2": at(1, 1),
        "both bounds, n=2": at(0, 1),
        "interior, n=2": at(0.3, 0.35),
        "interior and a bound, n=2": at(0.5, 1),
        "all at low, n=20": at(*[0] * 20),
        "all at high, n=20": at(*[1] * 20),
        "one outlier at low": at(*[1] * 19, 0),
        "one outlier at high": at(*[0] * 19, 1),
        "interior with an outlier at low": at(*[0.9] * 9, 0),
        "tiny spread against the high bound": at(*[1 - 1e-9] * 5, 1),
        "constant interior": at(*[0.5] * 10),
        "issue example 1": at(0.2, 0.4, 0.9, 0.95, 1, 1, 1, 1, 1, 1),
        "issue example 2": at(1, 1, 1, 0.833),
        "issue example 3": at(0, 0, 0.5, 1, 1),
        "agent traces": at(0.5875, 0, 1, 1, 0.35, 1, 0.5, 0.85),
    }


def check_interval(lo, hi, mean, low, high, *, varies: bool, what: str) -> None:
    assert lo is not None and hi is not None, what
    assert low <= lo <= mean <= hi <= high, f"{what}: [{lo}, {hi}] mean {mean} range [{low}, {high}]"
    if varies and low < mean < high:
        assert lo < mean < hi, f"{what}: [{lo}, {hi}] does not contain the mean {mean} strictly"


#: every registered metric by name, and one of every kind a definition builds at run time (an
#: OpenAI grader's range is set by its grader: tests/runtime_metrics.py), as metric entries
ENTRIES: dict[str, dict] = {
    **{s.name: {"name": s.name} for s in all_metrics() if s.range_for is None},
    **{f"runtime:{rid}": {"name": rt.name, "params": rt.params} for rid, rt in RUNTIME.items()
       if rt.name != CUSTOM_JUDGED},
}


def test_every_metric_whose_definition_sets_its_range_has_run_time_entries():
    by_definition = {s.name for s in all_metrics() if s.range_for is not None}
    assert by_definition, "the OpenAI grader metrics take their range from their grader (range_for)"
    covered = {e["name"] for e in ENTRIES.values() if "params" in e}
    assert by_definition <= covered, f"no run-time entry in tests/runtime_metrics.py for {by_definition - covered}"


@pytest.mark.parametrize("entry", list(ENTRIES), ids=str)
def test_every_registered_range_through_the_run_aggregation(entry):
    req = resolve(ENTRIES[entry])
    rng = req.spec.range
    if entry.startswith("runtime:") and RUNTIME[entry.split(":", 1)[1]].expected is None:
        # a definition that declares no range: recorded as null, intervals by the no-bounds rule
        for name, values in adversarial(0.0, 1.0).items():
            agg = summarise({req.key: (np.asarray(values), [None] * len(values))}, [req])[req.key]
            assert agg["range"] is None, entry
            low, high = (0.0, 1.0) if set(values) <= {0.0, 1.0} else (min(values), max(values))
            check_interval(agg["ci_low"], agg["ci_high"], agg["mean"], low, high,
                           varies=min(values) < max(values), what=f"{entry}, {name}")
        return
    low, high = (float(b) for b in rng)
    assert np.isfinite([low, high]).all() and low < high, f"{entry} declares no range: {rng}"
    for name, values in adversarial(low, high).items():
        x = np.asarray(values + [np.nan])  # plus one sample without a value
        agg = summarise({req.key: (x, [None] * (len(values)) + ["judge failed"])}, [req])[req.key]
        assert agg["range"] == [low, high] and agg["n"] == len(values) and agg["n_missing"] == 1
        check_interval(agg["ci_low"], agg["ci_high"], agg["mean"], low, high,
                       varies=min(values) < max(values), what=f"{entry}, {name}")


# ---- stored runs read back by every presenter ---------------------------------------------------
RANGES = {"t_unit": (0.0, 1.0), "t_wide": (-5.0, 20.0)}


def _given(key):
    def fn(samples, ctx):
        return [Score(float(s.metadata[key])) if key in s.metadata else Score.missing("no value given")
                for s in samples]
    return fn


@pytest.fixture(scope="module")
def test_metrics():
    """Two metrics that return the value a sample carries, on [0, 1] and on [-5, 20]; registered for
    this module's tests only (the registry is process-wide: other tests list every metric)."""
    for name, rng in RANGES.items():
        register_metric(MetricSpec(name=name, family="test", fn=_given(name), requires=("answer",),
                                   range=rng, description=f"the sample's metadata['{name}'] (tests)"))
    yield
    for name in RANGES:
        _REGISTRY.pop(name, None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, test_metrics):
    """One stored run per adversarial value set, every sample carrying both test metrics."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ranges')}/r.db"
    out = {}
    sets = {k: adversarial(*RANGES["t_unit"])[k] for k in adversarial(0, 1)}
    for name, unit in sets.items():
        rows = [{"id": f"s{i}", "question": f"q{i}", "answer": "a",
                 "metadata": {"t_unit": u, "t_wide": -5.0 + 25.0 * u}} for i, u in enumerate(unit)]
        res = ragmeter.evaluate(rows, list(RANGES), db=url, name=re.sub(r"\W+", "-", name))
        out[name] = (res.run_id, unit)
    return url, out


def _check_summary(summary, what, varies):
    for key, (low, high) in RANGES.items():
        a = summary[key]
        check_interval(a["ci_low"], a["ci_high"], a["mean"], low, high, varies=varies, what=f"{what}: {key}")


def test_eval_and_show_print_intervals_in_range(runs):
    url, by_name = runs
    for name, (rid, unit) in by_name.items():
        code, out, err = run_main("show", rid, "--json", "--db", url)
        assert code == 0, err
        _check_summary(json.loads(out)["metrics"], f"show --json {name}", min(unit) < max(unit))
        code, out, _ = run_main("show", rid, "--db", url)
        for key, (low, high) in RANGES.items():
            row = next(line for line in out.splitlines() if line.strip(" │|").startswith(key))
            lo, hi = (float(v) for v in re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]", row).groups())
            assert low <= lo <= hi <= high, f"show {name}: {row}"


def test_report_dashboard_and_mlflow_export_in_range(runs):
    from fastapi.testclient import TestClient

    from ragmeter.apps.export.mlflow import metric_name, mlflow_metrics
    from ragmeter.apps.report.data import run_view
    from ragmeter.apps.server import create_app
    from ragmeter.store import Store

    url, by_name = runs
    store = Store(url)
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    for name, (rid, unit) in by_name.items():
        varies = min(unit) < max(unit)
        view = {m["key"]: m for m in run_view(store, rid)["metrics"]}
        _check_summary(view, f"report {name}", varies)
        api = client.get(f"/api/runs/{rid}")
        assert api.status_code == 200
        _check_summary({m["key"]: m for m in api.json()["metrics"]}, f"dashboard {name}", varies)
        logged = mlflow_metrics(store.get_run(rid).summary)
        for key, (low, high) in RANGES.items():
            assert low <= logged[f"{metric_name(key)}.ci_low"] <= logged[f"{metric_name(key)}.ci_high"] <= high


@pytest.mark.slow
def test_compare_and_gate_differences_stay_in_the_difference_range(runs):
    from ragmeter.analysis.compare import compare_runs
    from ragmeter.analysis.gate import gate
    from ragmeter.apps.report.data import compare_view
    from ragmeter.store import Store

    url, by_name = runs
    store = Store(url)
    names = list(by_name)
    pairs = [(a, b) for a, b in zip(names, names[1:], strict=False)
             if len(by_name[a][1]) == len(by_name[b][1])]
    assert len(pairs) >= 5
    for a, b in pairs:
        ra, rb = by_name[a][0], by_name[b][0]
        for row in compare_runs([ra, rb], store=store).rows:
            low, high = RANGES[row.metric]
            check_interval(row.ci_low, row.ci_high, row.diff, low - high, high - low,
                           varies=True, what=f"compare {a} / {b}: {row.metric}")
        for d in compare_view(store, [ra, rb])["differences"]:
            low, high = RANGES[d["metric"]]
            assert low - high <= d["ci_low"] <= d["diff"] <= d["ci_high"] <= high - low, (a, b, d)
        code, out, err = run_main("compare", ra, rb, "--json", "--db", url)
        assert code == 0, err
        for row in json.loads(out)["comparisons"]:
            low, high = RANGES[row["metric"]]
            assert low - high <= row["ci_low"] <= row["diff"] <= row["ci_high"] <= high - low
        for relative in (False, True):
            for r in gate(rb, ra, max_drop=1.0, relative=relative, store=store).rows:
                low, high = RANGES[r.metric]
                if r.ci_low is None:  # relative change of a zero baseline: undefined
                    assert relative and r.baseline == 0
                    continue
                if relative:
                    low, high = (low - r.baseline) / abs(r.baseline), (high - r.baseline) / abs(r.baseline)
                    point = r.change / abs(r.baseline)
                else:
                    low, high, point = low - high, high - low, r.change
                assert low <= r.ci_low <= point <= r.ci_high <= high, (a, b, relative, r)


def test_composite_interval_in_range(runs, tmp_path):
    url, by_name = runs
    spec = tmp_path / "mine.json"
    spec.write_text(json.dumps({"name": "mine", "components": {"t_unit": 2, "q": {"metric": "t_unit", "weight": 1}}}))
    for name, (rid, unit) in by_name.items():
        code, out, err = run_main("composite", rid, "--preset", str(spec), "--json", "--db", url)
        assert code == 0, err
        (res,) = json.loads(out)["composites"].values()
        check_interval(res["ci_low"], res["ci_high"], res["mean"], 0.0, 1.0, varies=min(unit) < max(unit),
                       what=f"composite {name}")


# ---- the issue's examples end to end ------------------------------------------------------------
def _f1_rows(prefix: str, values: list[float]) -> list[dict[str, str]]:
    """Rows whose SQuAD token F1 is each value: F1 = 2c / (|answer| + |reference|) with c shared tokens."""
    shapes = {0.2: (1, 1, 9), 0.4: (2, 2, 8), 0.9: (9, 9, 11), 0.95: (19, 19, 21), 1.0: (3, 3, 3),
              0.833: (5, 5, 7), 0.0: (0, 2, 2), 0.5: (1, 1, 3)}
    rows = []
    for i, v in enumerate(values):
        shared, n_answer, n_ref = shapes[v]
        common = [f"w{j}" for j in range(shared)]
        answer = common + [f"x{j}" for j in range(n_answer - shared)]
        reference = common + [f"y{j}" for j in range(n_ref - shared)]
        rows.append({"id": f"{prefix}{i}", "question": f"q{i}", "answer": " ".join(answer),
                     "reference": " ".join(reference)})
    return rows


@pytest.mark.parametrize("values", [[0.2, 0.4, 0.9, 0.95, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                                    [1.0, 1.0, 1.0, 0.833], [0.0, 0.0, 0.5, 1.0, 1.0]])
def test_issue_examples_through_eval_and_show(values, tmp_path):
    url = f"sqlite:///{tmp_path}/x.db"
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in _f1_rows("s", values)) + "\n")
    code, out, err = run_main("eval", str(data), "--metrics", "token_f1", "--db", url)
    assert code == 0, err
    row = next(line for line in out.splitlines() if "token_f1" in line and "[" in line)
    mean, lo, hi = (float(v) for v in re.search(r"token_f1\s+([\d.]+)\s.*?\[([\d.]+), ([\d.]+)\]", row).groups())
    expected = float(np.mean([5 / 6 if v == 0.833 else v for v in values]))
    assert mean == pytest.approx(expected, abs=1e-4)
    assert 0 <= lo < mean < hi <= 1, row
    code, out, err = run_main("show", "latest", "--json", "--db", url)
    assert code == 0, err
    s = json.loads(out)["metrics"]["token_f1"]
    assert s["mean"] == pytest.approx(expected) and s["ci_method"] == "quasi_score"
    assert 0 <= s["ci_low"] < s["mean"] < s["ci_high"] <= 1
    # 5/6 as token F1 computes it, 2PR / (P + R) with P = 1, R = 5/7: one bit below the double 5/6
    assert (s["ci_low"], s["ci_high"]) == ragmeter.stats.mean_ci(
        [2 * (5 / 7) / (1 + 5 / 7) if v == 0.833 else v for v in values], bounds=(0, 1))
