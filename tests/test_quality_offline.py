"""quality_offline: the fitting (grouped cross-validation that never scores an item it was fitted
on), ``ragmeter fit-quality``, the model file used by a run, and meta-eval's cross-validated figure."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from typer.testing import CliRunner

from ragmeter.analysis.quality_fit import (
    cross_validated_predictions,
    fit_quality_model,
    group_folds,
)
from ragmeter.apps.cli import app
from ragmeter.metrics.quality_model import FEATURES, bundled_model, check_model, predict

runner = CliRunner()

WORDS = ("the river crosses the old town where merchants sold salt and wool before the bridge was built "
         "by the duke who later lost the war against his brother and fled north to the sea").split()


def _rows(n: int, seed: int = 3) -> list[dict]:
    """Answers that keep a share of their question's reference (the label is that share)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        q = i // 3
        ref = " ".join(WORDS[(q * 5) % 20:(q * 5) % 20 + 18]) + "."
        keep = rng.random()
        words = ref.rstrip(".").split()
        answer = " ".join(w if rng.random() < keep else rng.choice(["blue", "cat", "seven", "maybe"]) for w in words)
        rows.append({"id": f"r{i}", "question": f"q{q}", "answer": answer.capitalize() + ".",
                     "reference": ref.capitalize(), "human": round(100 * keep), "metadata": {"topic": f"t{q % 4}"}})
    return rows


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_cross_validation_never_uses_an_item_or_its_group():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, len(FEATURES)))
    y = np.clip(0.5 + 0.1 * x[:, 0] + 0.05 * rng.normal(size=60), 0, 1)
    groups = [i // 3 for i in range(60)]
    folds = group_folds(groups, 5)
    assert all(len({folds[i] for i in range(60) if groups[i] == g}) == 1 for g in set(groups))
    pred, _ = cross_validated_predictions(x, y, groups)
    for i in (0, 1, 31):  # changing the labels of an item's group changes none of its group's predictions
        y2 = y.copy()
        y2[[j for j in range(60) if groups[j] == groups[i]]] = 1.0 - y2[[j for j in range(60) if groups[j] == groups[i]]]
        pred2, _ = cross_validated_predictions(x, y2, groups)
        same = [j for j in range(60) if groups[j] == groups[i]]
        assert np.array_equal(pred[same], pred2[same])
        assert not np.array_equal(pred, pred2)


def test_fit_scales_labels_and_refuses_too_few_or_one_group():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, len(FEATURES)))
    y = 50 + 40 * np.tanh(x[:, 1])
    model = fit_quality_model(x, y, [i // 2 for i in range(40)], label="human", source="t")
    check_model(model)
    assert model["label_range"] == [pytest.approx(y.min()), pytest.approx(y.max())]
    assert model["cv"]["cross_validated"] and model["cv"]["pearson"] > 0.8
    assert np.corrcoef(predict(model, x), y)[0, 1] > 0.9
    with pytest.raises(Exception, match="at least 20"):
        fit_quality_model(x[:5], y[:5], list(range(5)), label="human", source="t")
    with pytest.raises(Exception, match="one group"):
        fit_quality_model(x, y, [0] * 40, label="human", source="t")


def test_the_shipped_model_is_a_valid_model_fitted_on_example_human():
    m = bundled_model()
    assert m["fitted_on"] == "example-human" and m["features"] == list(FEATURES)
    assert m["cv"]["cross_validated"] and m["cv"]["folds"] == 5


def test_check_model_names_the_field():
    good = dict(bundled_model())
    for field, bad in (("coef", [1.0]), ("format", 9), ("features", ["nope"]), ("scale", [0.0] * len(FEATURES)),
                       ("intercept", "x")):
        with pytest.raises(Exception, match=field):
            check_model({**good, field: bad}, "m.json")


def test_fit_quality_then_eval_uses_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_DB", str(tmp_path / "r.db"))
    data = _write(tmp_path / "labels.jsonl", _rows(30))
    out = tmp_path / "model.json"
    res = runner.invoke(app, ["fit-quality", data, "--label", "human", "--out", str(out), "--groups", "topic"])
    assert res.exit_code == 0, res.output
    assert "cross-validated (4 folds, 4 groups by field topic)" in res.output
    model = json.loads(out.read_text())
    check_model(model)
    assert model["n"] == 30 and model["label_range"] == [min(r["human"] for r in _rows(30)),
                                                          max(r["human"] for r in _rows(30))]
    res = runner.invoke(app, ["eval", data, "--metrics", "quality_offline", "--option", f"quality_model={out}",
                              "--json"])
    assert res.exit_code == 0, res.output
    from ragmeter.store import open_store

    store = open_store(str(tmp_path / "r.db"))
    run = store.get_run("latest")
    scores = store.score_table(run.id)["quality_offline"]
    assert {s.details["model"] for s in scores.values()} == {model["name"]}
    bundled = runner.invoke(app, ["eval", data, "--metrics", "quality_offline", "--json"])
    assert bundled.exit_code == 0, bundled.output


@pytest.mark.parametrize("case", ["too_few", "bad_label", "no_group_field", "no_reference", "bad_range"])
def test_fit_quality_bad_input_exits_2(tmp_path, case):
    rows = _rows(30)
    args = ["--label", "human"]
    if case == "too_few":
        rows = rows[:5]
    elif case == "bad_label":
        rows[7]["human"] = "great"
    elif case == "no_group_field":
        args += ["--groups", "shelf"]
    elif case == "no_reference":
        rows[4].pop("reference")
    elif case == "bad_range":
        args += ["--label-range", "5,1"]
    data = _write(tmp_path / "labels.jsonl", rows)
    res = runner.invoke(app, ["fit-quality", data, *args, "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    want = {"too_few": "at least 20", "bad_label": "line 8, field 'human'", "no_group_field": "line 1, field 'shelf'",
            "no_reference": "line 5, field 'reference'",
            "bad_range": "--label-range"}[case]
    assert want in res.output
    assert not (tmp_path / "m.json").exists()


def test_eval_with_a_broken_model_file_exits_2(tmp_path, monkeypatch):
    from cli_runner import run_main

    monkeypatch.setenv("RAGMETER_DB", str(tmp_path / "r.db"))
    data = _write(tmp_path / "labels.jsonl", _rows(3))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1, "features": ["token_f1"], "mean": [0], "scale": [1]}')
    code, out, err = run_main("eval", data, "--metrics", "quality_offline", "--option", f"quality_model={bad}")
    assert code == 2 and "'coef'" in err and "bad.json" in err, (out, err)
    bad.write_text("{not json")
    code, out, err = run_main("eval", data, "--metrics", "quality_offline", "--option", f"quality_model={bad}")
    assert code == 2 and "line 1" in err and "Traceback" not in err, (out, err)


@pytest.mark.slow
def test_meta_eval_reports_the_cross_validated_figure(tmp_path):
    res = runner.invoke(app, ["meta-eval", "example-human", "--metrics", "bertscore_f1,claim_f1,quality_offline,token_f1",
                              "--json", "--bootstrap", "200", "--db", str(tmp_path / "m.db")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    q = out["metrics"]["quality_offline"]
    assert q["cross_validated"] is True and q["cross_validation"]["folds"] == 5
    assert q["pearson"]["value"] > out["metrics"]["token_f1"]["pearson"]["value"]
    assert "cross_validated" not in out["metrics"]["token_f1"]


def test_meta_eval_uses_cross_validated_values_of_a_learned_metric(tmp_path):
    from ragmeter.analysis.meta_eval.evaluation import _cross_validate_learned, analyse, stored_item_values
    from ragmeter.analysis.meta_eval.reader import read_labels
    from ragmeter.core.schema import Score

    labels = read_labels(_write(tmp_path / "labels.jsonl", _rows(30)), label="human")
    rng = np.random.default_rng(5)
    feats = rng.normal(size=(30, len(FEATURES)))
    feats[:, 0] += labels.human / 50  # the first feature carries the label
    fitted = [Score(0.5, None, {"model": "m", "features": dict(zip(FEATURES, row.tolist(), strict=True))})
              for row in feats]
    plain = [Score(float(v), None, None) for v in feats[:, 1]]
    cv = _cross_validate_learned(labels, {"quality_offline": fitted, "token_f1": plain})
    assert list(cv) == ["quality_offline"]  # only a metric whose scores carry their features and model
    values, how = cv["quality_offline"]
    # the 30 answers have 4 distinct references: 4 groups, one fold each
    assert set(values) == {s.id for s in labels.samples} and how["cross_validated"] and how["folds"] == how["n_groups"] == 4
    assert len(set(values.values())) > 1  # not the fitted model's constant 0.5
    rec = analyse(labels, {"quality_offline": values}, {}, n_bootstrap=0)
    rec.metrics["quality_offline"].cross_validation = how
    again = type(rec).from_record(rec.to_record())
    assert again.metrics["quality_offline"].to_dict()["cross_validated"] is True
    assert np.allclose(stored_item_values(None, again, "quality_offline"), [values[i] for i in labels.items])
    pair = read_labels(_write(tmp_path / "pairs.jsonl", [{"id": "p1", "question": "q", "answer_a": "a", "answer_b": "b",
                                                          "reference": "r", "preference": 1}]), pairwise=True)
    assert _cross_validate_learned(pair, {"quality_offline": fitted[:2]}) == {}
