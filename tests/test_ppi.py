"""Prediction-powered inference: ``ragmeter.stats.ppi_mean_ci`` against the reference implementation
``ppi_py`` (package ppi-python), ``ragmeter calibrate`` (labels file or annotation task, JSON keys,
unknown samples, malformed files), and the calibrated estimate on the judge reliability card."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ragmeter
from judge_server import judge_options, server_fixtures
from ragmeter.apps.cli import app
from ragmeter.human import tasks as T
from ragmeter.stats import ppi_mean_ci
from ragmeter.stats.ppi import classical_mean_ci, ppi_lambda
from ragmeter.store import Store
from references import require_reference

runner = CliRunner()
judge_server_module, server = server_fixtures()


def _reference(y, yhat, unl, level, lam):
    """ppi_py's interval and point estimate; its tuning argument is ``lam`` (``lhat`` before 0.2)."""
    ppi_py = require_reference("ppi_py")
    name = "lam" if "lam" in inspect.signature(ppi_py.ppi_mean_ci).parameters else "lhat"
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, unl, alpha=1 - level, **{name: lam})
    est = ppi_py.ppi_mean_pointestimate(y, yhat, unl, **{name: lam})
    if lam is None:  # the point estimate of the power-tuned interval is the one at its lambda
        est = ppi_py.ppi_mean_pointestimate(y, yhat, unl, **{name: ppi_lambda(y, yhat, unl)})
    return float(np.squeeze(est)), float(np.squeeze(lo)), float(np.squeeze(hi))


@pytest.mark.contract
@pytest.mark.parametrize("lam", [None, 1.0, 0.4])
def test_ppi_mean_ci_equals_ppi_py_on_random_inputs(lam):
    rng = np.random.default_rng(7)
    for trial in range(120):
        n, big_n = int(rng.integers(2, 400)), int(rng.integers(1, 4000))
        truth = rng.beta(2, 3, n + big_n)
        kind = trial % 4
        if kind == 0:  # 0/1 labels, a judge score in [0, 1]
            y = (rng.random(n) < truth[:n]).astype(float)
        elif kind == 1:  # labels on a 1-5 scale
            y = np.round(1 + 4 * truth[:n])
        else:
            y = truth[:n]
        noise = rng.normal(0, rng.uniform(0.01, 0.5), n + big_n)
        pred = np.clip(truth + 0.15 + noise, 0, 1) if kind != 3 else rng.random(n + big_n)  # 3: a useless judge
        level = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
        # from 2 labels: the arithmetic equals ppi_py's at any n (ragmeter refuses below MIN_LABELS)
        ours = ppi_mean_ci(y, pred[:n], pred[n:], level=level, lam=lam, min_labels=2)
        ref = _reference(y, pred[:n], pred[n:], level, lam)
        assert ours == pytest.approx(ref, abs=1e-9), (trial, n, big_n)


@pytest.mark.contract
def test_lambda_zero_is_the_classical_interval_and_one_is_classic_ppi():
    ppi_py = require_reference("ppi_py")
    rng = np.random.default_rng(1)
    y, yhat, unl = rng.random(50), rng.random(50), rng.random(500)
    assert ppi_mean_ci(y, yhat, unl, lam=0) == pytest.approx(classical_mean_ci(y))
    lo, hi = ppi_py.classical_mean_ci(y, alpha=0.05)
    assert classical_mean_ci(y)[1:] == pytest.approx((float(lo), float(hi)), abs=1e-12)
    est, lo1, hi1 = ppi_mean_ci(y, yhat, unl, lam=1)
    assert est == pytest.approx(unl.mean() + (y - yhat).mean())
    assert 0 <= ppi_lambda(y, yhat, unl) <= 1


def test_power_tuning_never_widens_and_a_constant_judge_gives_the_labels_alone():
    rng = np.random.default_rng(3)
    truth = rng.random(2100)
    y = truth[:100]
    judge = truth + 0.15 + rng.normal(0, 0.05, 2100)
    _, lo, hi = ppi_mean_ci(y, judge[:100], judge[100:])
    _, clo, chi = classical_mean_ci(y)
    assert hi - lo < 0.5 * (chi - clo)
    const = np.full(2100, 0.7)
    assert ppi_lambda(y, const[:100], const[100:]) == 0.0
    assert ppi_mean_ci(y, const[:100], const[100:]) == pytest.approx(classical_mean_ci(y))


@pytest.mark.parametrize("args, kwargs, match", [
    (([1.0], [1.0], [1.0]), {}, "at least 2"),
    (([1.0, 0.0, 1.0], [1.0, 0.0], [1.0]), {}, "same length"),
    (([1.0, 0.0], [1.0, 0.0], []), {}, "at least 1"),
    (([1.0, float("nan")], [1.0, 0.0], [1.0]), {}, "NaN"),
    (([1.0, 0.0], [1.0, 0.0], [1.0]), {"level": 1.5}, "level"),
    (([1.0, 0.0], [1.0, 0.0], [1.0]), {"lam": float("inf")}, "lam"),
    (([[1.0, 0.0]], [1.0, 0.0], [1.0]), {}, "one-dimensional"),
    (([1.0, 0.0] * 10, [1.0, 0.0] * 10, [1.0]), {}, "20 labelled samples .* at least 50: .*normal approximation"),
    (([1.0, 0.0] * 10, [1.0, 0.0] * 10, [1.0]), {"min_labels": 1}, "min_labels"),
])
def test_ppi_rejects_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ppi_mean_ci(*args, **kwargs)


def test_stats_reexports_the_ppi_module():
    import ragmeter.stats
    import ragmeter.stats.ppi

    assert ragmeter.stats.ppi_mean_ci is ragmeter.stats.ppi.ppi_mean_ci


# ---- ragmeter calibrate -------------------------------------------------------------------------

def _judged_run(server, url, n=120):
    rows = []
    for i in range(n):
        good = i % 3 != 0
        rows.append({"id": f"s{i}", "question": f"Where is office {i}?",
                     "contexts": [f"Office {i} is in Lisbon near the river."],
                     "answer": f"Office {i} is in Lisbon." if good else f"Office {i} is on the Moon.",
                     "reference": f"Office {i} is in Lisbon."})
    return ragmeter.evaluate(rows, metrics=["faithfulness"], db=url, name="judged", options=judge_options(server))


def test_calibrate_with_a_labels_file_gives_the_three_estimates(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    res = _judged_run(server, url)
    values = {s.id: sc.value for s, sc in zip(res.samples, res.scores["faithfulness"], strict=True)}
    # people disagree with the judge on a few samples (it is too kind on s1, s2)
    human = {f"s{i}": (0.0 if i in (1, 2) else values[f"s{i}"]) for i in range(0, 60)}
    labels = tmp_path / "labels.csv"
    labels.write_text("sample_id,label\n" + "".join(f"{k},{v:g}\n" for k, v in human.items()))
    r = runner.invoke(app, ["calibrate", res.run_id, "--labels", str(labels), "--metric", "faithfulness",
                            "--json", "--db", url])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for key in ("metric_mean", "human_mean", "calibrated"):
        assert {"value", "ci_low", "ci_high"} <= set(out[key]) and out[key]["ci_low"] <= out[key]["ci_high"]
    assert out["n_labeled"] == 60 and out["n_unlabeled"] == 60
    ids = list(human)
    y = np.array([human[k] for k in ids])
    yhat = np.array([values[k] for k in ids])
    unl = np.array([values[f"s{i}"] for i in range(60, 120)])
    est, lo, hi = ppi_mean_ci(y, yhat, unl)
    assert (out["calibrated"]["value"], out["calibrated"]["ci_low"], out["calibrated"]["ci_high"]) == \
        pytest.approx((est, lo, hi))
    assert out["metric_mean"]["value"] == pytest.approx(np.mean(list(values.values())))
    assert out["human_mean"]["value"] == pytest.approx(y.mean())
    assert out["judge_bias"] == pytest.approx(float(np.mean(yhat - y)))
    text = runner.invoke(app, ["calibrate", res.run_id, "--labels", str(labels), "--metric", "faithfulness",
                               "--db", url])
    assert text.exit_code == 0 and "calibrated (PPI)" in text.output and "human mean" in text.output
    classic = json.loads(runner.invoke(app, ["calibrate", res.run_id, "--labels", str(labels), "--metric",
                                             "faithfulness", "--lam", "1", "--json", "--db", url]).output)
    assert classic["calibrated"]["lam"] == 1.0
    assert classic["calibrated"]["value"] == pytest.approx(ppi_mean_ci(y, yhat, unl, lam=1)[0])


def test_calibrate_refuses_unknown_samples_and_malformed_files(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    res = _judged_run(server, url, n=12)

    def run(text, *extra):
        f = tmp_path / "l.csv"
        f.write_text(text)
        return runner.invoke(app, ["calibrate", res.run_id, "--labels", str(f), "--metric", "faithfulness",
                                   "--db", url, *extra])

    r = run("sample_id,label\ns1,1\nnot-there,0\n")
    assert r.exit_code == 2 and "not-there" in r.output and "line 3" in r.output
    for text, words in [
        ("id_only\ns1\n", ["l.csv", "line 2", "sample_id"]),
        ("sample_id,label\ns1,maybe\n", ["line 2", "label", "maybe"]),
        ("sample_id,label\ns1,1\ns1,0\n", ["line 3", "twice"]),
        ("sample_id,label\ns1,4\n", ["line 2", "outside", "--label-range"]),
        ("sample_id,label\ns1,\n", ["line 2", "no label"]),
        ('sample_id,label\n"s1,1\n', ["l.csv", "line 2"]),
        ("sample_id,label\n", ["no labels"]),
    ]:
        r = run(text)
        assert r.exit_code == 2, (text, r.output)
        assert all(w in r.output for w in words), (text, r.output)
        assert "Traceback" not in r.output
    # every sample labelled: the labels' own interval is the estimate (no PPI, no minimum beyond 2)
    ok = run("sample_id,label\n" + "".join(f"s{i},{1 + 4 * (i % 2)}\n" for i in range(12)), "--label-range", "1,5",
             "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["human_mean"]["value"] == pytest.approx(0.5)
    assert json.loads(ok.output)["calibrated"]["method"] == "labels only"
    assert run("sample_id,label\ns1,1\n", "--label-range", "5,1").exit_code == 2
    assert run("sample_id,label\ns1,1\ns2,0\n", "--metric", "nope").exit_code == 2
    r = runner.invoke(app, ["calibrate", res.run_id, "--metric", "faithfulness", "--db", url])
    assert r.exit_code == 2 and "--labels" in r.output


def test_calibrate_from_an_annotation_task_and_the_reliability_card_shows_it(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    res = _judged_run(server, url, n=80)
    store = Store(url)
    values = {sid: sc.value for sid, sc in store.score_table(res.run_id)["faithfulness"].items()}
    task_id, _ = T.create_task(store, res.run_id, raters=["ana", "bruno"], scales=T.parse_scales("faithfulness"), n=55)
    task = T.get_task(store, task_id)
    labelled = [it.sample_id for it in T.task_items(store, task_id)]
    for sid in labelled:
        good = values[sid] == 1.0
        T.save_label(store, task, "ana", sid, "faithfulness", 5 if good else 1)
        T.save_label(store, task, "bruno", sid, "faithfulness", 4 if good else 1)
    r = runner.invoke(app, ["calibrate", res.run_id, "--task", task_id, "--scale", "faithfulness",
                            "--metric", "faithfulness", "--json", "--db", url])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    h = T.human_labels(store, task_id, "faithfulness", "mean")
    assert out["n_labeled"] == len(h) and out["n_unlabeled"] == 80 - len(h)
    y = np.array([h[s] for s in h])
    yhat = np.array([values[s] for s in h])
    unl = np.array([v for s, v in values.items() if s not in h])
    assert out["calibrated"]["value"] == pytest.approx(ppi_mean_ci(y, yhat, unl)[0])
    from ragmeter.human.reliability import card_lines, reliability_card

    card = reliability_card(store, res.run_id, "faithfulness")
    cal = card["human"]["calibrated"]
    assert cal["value"] == pytest.approx(out["calibrated"]["value"])
    assert any("calibrated mean" in line for line in card_lines(card))
    assert "calibrated mean" in runner.invoke(app, ["show", res.run_id, "--db", url]).output
    bad = runner.invoke(app, ["calibrate", res.run_id, "--task", task_id, "--metric", "faithfulness", "--db", url])
    assert bad.exit_code == 2 and "--scale" in bad.output


@pytest.fixture(scope="module")
def lexical_run(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('cal') / 'c.db'}"
    rows = [{"id": f"s{i}", "answer": "a b c"[: 1 + i % 5], "reference": "a b c"} for i in range(20)]
    return url, ragmeter.evaluate(rows, metrics=["token_f1"], db=url).run_id


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.one_of(st.sampled_from([f"s{i}" for i in range(20)]), st.text(max_size=5)),
                          st.one_of(st.floats(allow_nan=True), st.integers(-3, 3), st.text(max_size=5),
                                    st.booleans())), max_size=8))
def test_fuzzed_label_files_exit_0_or_2(tmp_path, lexical_run, rows):
    url, run_id = lexical_run
    f = tmp_path / "fz.jsonl"
    f.write_text("".join(json.dumps({"sample_id": a, "label": b}, allow_nan=True) + "\n" for a, b in rows))
    r = runner.invoke(app, ["calibrate", run_id, "--labels", str(f), "--metric", "token_f1", "--json", "--db", url])
    assert r.exit_code in (0, 2), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code == 2:
        assert "fz.jsonl" in r.output or "labels" in r.output
    else:
        out = json.loads(r.output)
        assert out["calibrated"]["ci_low"] <= out["calibrated"]["value"] <= out["calibrated"]["ci_high"]


# ---- the minimum number of labels ----------------------------------------------------------------

@pytest.fixture(scope="module")
def lexical_run_120(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('cal120') / 'c.db'}"
    rows = [{"id": f"s{i}", "answer": "a b c d"[: 1 + i % 7], "reference": "a b c d"} for i in range(120)]
    return url, ragmeter.evaluate(rows, metrics=["token_f1"], db=url).run_id


def test_calibrate_refuses_fewer_labels_than_the_minimum_and_says_why(tmp_path, lexical_run_120):
    """2 labels used to give an interval 7% as wide as the labels' own that missed the truth:
    below MIN_LABELS labelled samples ``calibrate`` exits 2 naming the minimum, the reason (a normal
    approximation) and its sources; the Python API raises the same."""
    from ragmeter.core.errors import ConfigError
    from ragmeter.human.calibrated import calibrate_values, calibrated_estimate
    from ragmeter.stats.ppi import MIN_LABELS, MIN_LABELS_REASON

    assert MIN_LABELS == 50
    url, run_id = lexical_run_120
    f = tmp_path / "few.csv"
    for n in (2, MIN_LABELS - 1):
        f.write_text("sample_id,label\n" + "".join(f"s{i},{(i % 3) / 2}\n" for i in range(n)))
        r = runner.invoke(app, ["calibrate", run_id, "--labels", str(f), "--metric", "token_f1", "--db", url])
        assert r.exit_code == 2, r.output
        text = " ".join(r.output.split())
        for words in ("few.csv", f"{n} labelled samples", f"at least {MIN_LABELS}", "normal approximation",
                      "central limit theorem", "Angelopoulos", "Science 2023", "ppi_py",
                      "benchmarks/ppi.py --small-n"):
            assert words in text, (words, text)
        assert "Traceback" not in r.output
    f.write_text("sample_id,label\n" + "".join(f"s{i},{(i % 3) / 2}\n" for i in range(MIN_LABELS)))
    r = runner.invoke(app, ["calibrate", run_id, "--labels", str(f), "--metric", "token_f1", "--json", "--db", url])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_labeled"] == MIN_LABELS
    store = Store(url)
    few = {f"s{i}": 0.5 for i in range(10)}
    with pytest.raises(ConfigError, match=f"at least {MIN_LABELS}: the interval of prediction-powered"):
        calibrated_estimate(store, run_id, "token_f1", few)
    with pytest.raises(ConfigError, match=f"at least {MIN_LABELS}"):
        calibrate_values(np.full(10, 0.5), np.full(10, 0.4), np.full(100, 0.4))
    with pytest.raises(ValueError, match="normal approximation"):
        ppi_mean_ci(np.full(10, 0.5), np.full(10, 0.4), np.full(100, 0.4))
    assert "Angelopoulos" in MIN_LABELS_REASON and "benchmarks/ppi.py" in MIN_LABELS_REASON


def test_rare_zero_one_labels_get_a_loud_warning(tmp_path, lexical_run_120):
    url, run_id = lexical_run_120
    f = tmp_path / "rare.csv"
    f.write_text("sample_id,label\n" + "".join(f"s{i},{0 if i < 3 else 1}\n" for i in range(60)))
    r = runner.invoke(app, ["calibrate", run_id, "--labels", str(f), "--metric", "token_f1", "--db", url])
    assert r.exit_code == 0, r.output
    assert "WARNING: only 3 of the 60 labels are 0" in " ".join(r.output.split())
    r = runner.invoke(app, ["calibrate", run_id, "--labels", str(f), "--metric", "token_f1", "--json", "--db", url])
    assert r.exit_code == 0, r.output
    (warning,) = json.loads(r.stdout)["calibrated"]["warnings"]
    assert "success-failure condition" in warning and "warning: only 3" in " ".join(r.stderr.split())
    f.write_text("sample_id,label\n" + "".join(f"s{i},{i % 2}\n" for i in range(60)))
    r = runner.invoke(app, ["calibrate", run_id, "--labels", str(f), "--metric", "token_f1", "--json", "--db", url])
    assert json.loads(r.stdout)["calibrated"]["warnings"] == []


def test_the_reliability_card_says_why_it_has_no_calibrated_mean_with_few_labels():
    from ragmeter.core.schema import Score
    from ragmeter.human.reliability import _calibrated

    scores = {f"s{i}": Score(value=(i % 4) / 4) for i in range(100)}
    items = [f"s{i}" for i in range(12)]
    cal = _calibrated(scores, items, np.array([(i % 4) / 4 for i in range(12)]), lower=False)
    assert cal["value"] is None and "at least 50" in cal["reason"] and cal["n_labeled"] == 12
