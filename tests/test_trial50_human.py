"""`ragmeter agreement` on the label files people really bring: a Label Studio CSV export (the label
column is named after the labelling control), spreadsheet rows with a decimal comma, a rating given
twice, a file of one rater; numbers checked against the krippendorff package and statsmodels."""

from __future__ import annotations

import json

import krippendorff  # the reference for alpha (an extra of ragmeter's): missing, this module fails, never skips
import numpy as np
import pytest
from typer.testing import CliRunner

from ragmeter.apps.cli import app
from ragmeter.stats.agreement import Ratings, agreement
from references import require_reference

runner = CliRunner()

# Label Studio's CSV export: one row per annotation; the task's data, its id, one column per control
# (here `sentiment`), the annotator's e-mail and bookkeeping columns
LABEL_STUDIO = """text,id,sentiment,annotator,annotation_id,created_at,updated_at,lead_time
"Great product, works",1,Positive,alice@x.org,11,2024-05-01T10:00:00Z,2024-05-01T10:00:00Z,3.2
"Great product, works",1,Positive,bob@x.org,12,2024-05-01T10:01:00Z,2024-05-01T10:01:00Z,4.0
Terrible,2,Negative,alice@x.org,13,2024-05-01T10:02:00Z,2024-05-01T10:02:00Z,2.1
Terrible,2,Negative,bob@x.org,14,2024-05-01T10:03:00Z,2024-05-01T10:03:00Z,1.9
Meh,3,Neutral,alice@x.org,15,2024-05-01T10:04:00Z,2024-05-01T10:04:00Z,5.5
Meh,3,Negative,bob@x.org,16,2024-05-01T10:05:00Z,2024-05-01T10:05:00Z,6.0
"""


def _file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_label_studio_export_without_label_column_is_an_error_not_a_wide_table(tmp_path):
    # before: every other column (text, dates, annotation ids) was read as a rater: alpha 0.015, exit 0
    f = _file(tmp_path, "project-1.csv", LABEL_STUDIO)
    res = runner.invoke(app, ["agreement", f, "--bootstrap", "0"])
    assert res.exit_code == 2, res.output
    assert "line 1" in res.output and "'annotator'" in res.output and "--label-column" in res.output


@pytest.mark.contract
def test_label_studio_export_with_label_column_equals_krippendorff(tmp_path):
    f = _file(tmp_path, "project-1.csv", LABEL_STUDIO)
    res = runner.invoke(app, ["agreement", f, "--label-column", "sentiment", "--bootstrap", "0", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    ref = krippendorff.alpha(reliability_data=[["Positive", "Negative", "Neutral"],  # alice
                                               ["Positive", "Negative", "Negative"]],  # bob
                             level_of_measurement="nominal")
    assert out["n_raters"] == 2 and out["n_items"] == 3
    assert out["value"] == pytest.approx(ref)


def test_a_named_column_that_is_not_in_the_header(tmp_path):
    f = _file(tmp_path, "project-1.csv", LABEL_STUDIO)
    res = runner.invoke(app, ["agreement", f, "--label-column", "sentimnt"])
    assert res.exit_code == 2
    assert "no column 'sentimnt'" in res.output and "--label-column" in res.output


def test_a_row_longer_than_the_header_names_its_line(tmp_path):
    # a spreadsheet saved with a decimal comma: "3,5" split the row; before, "3" was read silently
    f = _file(tmp_path, "sheet.csv", "item,rater,label\n1,a,4.0\n1,b,4\n2,a,3,5\n2,b,3\n")
    res = runner.invoke(app, ["agreement", f])
    assert res.exit_code == 2
    assert "sheet.csv, line 4" in res.output and "4 fields but the header has 3" in res.output
    wide = _file(tmp_path, "wide.csv", "item,a,b\n1,yes,yes\n2,no,no,extra\n")
    res = runner.invoke(app, ["agreement", wide])
    assert res.exit_code == 2 and "wide.csv, line 3" in res.output


def test_a_rating_given_twice_is_an_error_naming_both_lines(tmp_path):
    # before: the last rating silently replaced the first
    f = _file(tmp_path, "long.csv", "item,rater,label\n1,a,1\n1,a,2\n1,b,2\n2,a,1\n2,b,1\n")
    res = runner.invoke(app, ["agreement", f])
    assert res.exit_code == 2
    assert "rater 'a' rated item '1' twice (lines 2 and 3)" in res.output
    wide = _file(tmp_path, "wide.csv", "item,a,b\n1,1,1\n2,2,2\n1,2,2\n")
    res = runner.invoke(app, ["agreement", wide])
    assert res.exit_code == 2 and "item '1' appears twice (lines 2 and 4)" in res.output


def test_an_empty_label_cell_is_not_a_second_rating(tmp_path):
    f = _file(tmp_path, "long.csv", "item,rater,label\n1,a,\n1,a,yes\n1,b,yes\n2,a,no\n2,b,yes\n")
    res = runner.invoke(app, ["agreement", f, "--method", "percent", "--bootstrap", "0", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["value"] == pytest.approx(0.5)


@pytest.mark.contract
def test_one_rater_is_undefined_for_every_method_as_statsmodels_says(tmp_path):
    inter_rater = require_reference("statsmodels.stats.inter_rater")
    # statsmodels: one rating per item gives nan (0/0), not an error
    with np.errstate(all="ignore"):
        assert np.isnan(inter_rater.fleiss_kappa(np.array([[1, 0], [0, 1], [1, 0]])))
    f = _file(tmp_path, "one.csv", "item,rater,label\n1,a,yes\n2,a,no\n3,a,yes\n")
    # before: fleiss (and so --method all) stopped with exit 2 while alpha said undefined (exit 3)
    res = runner.invoke(app, ["agreement", f, "--method", "all", "--bootstrap", "0", "--json"])
    assert res.exit_code == 3, res.output
    out = json.loads(res.output)
    assert [r["method"] for r in out] == ["alpha", "fleiss", "percent"]
    assert all(r["value"] is None and "one rater" in r["undefined"] for r in out)
    r = Ratings.from_long([(1, "a", "yes"), (2, "a", "no")])
    assert agreement(r, "fleiss").undefined == "one rater: agreement needs at least two"


def test_counts_agree_with_their_nouns(tmp_path):
    f = _file(tmp_path, "one.csv", "item,rater,label\n1,a,yes\n")
    res = runner.invoke(app, ["agreement", f, "--bootstrap", "0"], env={"COLUMNS": "200"})
    assert "1 item, 1 rater (a)" in res.output


# `ragmeter annotate export TASK --labels`: one row per (item, rater, scale)
LABELS = """item,rater,scale,label,question,answer
q1,ana,overall,4,Q1,A1
q1,ana,topic,billing,Q1,A1
q2,ana,topic,login,Q2,A2
q3,ana,topic,login,Q3,A3
q4,ana,topic,other,Q4,A4
q1,bruno,topic,billing,Q1,A1
q2,bruno,topic,billing,Q2,A2
q3,bruno,topic,login,Q3,A3
q4,bruno,topic,other,Q4,A4
q1,bruno,overall,4,Q1,A1
"""


def test_a_labels_export_with_several_scales_needs_scale(tmp_path):
    # before: the scales were mixed into one table, a rater's later scale replacing the earlier one
    f = _file(tmp_path, "labels.csv", LABELS)
    res = runner.invoke(app, ["agreement", f])
    assert res.exit_code == 2
    assert "labels.csv, line 3, field 'scale'" in res.output and "--scale" in res.output
    res = runner.invoke(app, ["agreement", f, "--scale", "topc"])
    assert res.exit_code == 2 and "no ratings on scale 'topc' (scales: overall, topic)" in res.output


@pytest.mark.contract
def test_one_scale_of_a_labels_export_equals_the_references(tmp_path):
    sklearn_metrics = require_reference("sklearn.metrics")
    inter_rater = require_reference("statsmodels.stats.inter_rater")
    f = _file(tmp_path, "labels.csv", LABELS)
    res = runner.invoke(app, ["agreement", f, "--scale", "topic", "--method", "all", "--bootstrap", "0",
                              "--json"])
    assert res.exit_code == 0, res.output
    got = {r["method"]: r["value"] for r in json.loads(res.output)}
    ana, bruno = ["billing", "login", "login", "other"], ["billing", "billing", "login", "other"]
    assert got["alpha"] == pytest.approx(krippendorff.alpha(reliability_data=[ana, bruno],
                                                            level_of_measurement="nominal"))
    assert got["kappa"] == pytest.approx(sklearn_metrics.cohen_kappa_score(ana, bruno))
    table = inter_rater.aggregate_raters(np.array([ana, bruno]).T)[0]
    assert got["fleiss"] == pytest.approx(inter_rater.fleiss_kappa(table))
    assert got["percent"] == pytest.approx(0.75)
    res = runner.invoke(app, ["agreement", f, "--scale", "overall", "--bootstrap", "0"], env={"COLUMNS": "200"})
    assert res.exit_code == 3 and "1 item, 2 raters" in res.output


def test_notes_count_with_their_noun():
    r = Ratings.from_long([(1, "a", "yes"), (1, "b", "no"), (2, "a", "yes"), (3, "a", "no"), (3, "b", "no")])
    assert "1 item with fewer than two ratings left out (no pair to compare)" in agreement(r, "alpha").notes


def test_an_argilla_export_is_not_read_as_a_wide_table(tmp_path):
    # Argilla's flattened records: list-valued response cells, status and text columns; before, every
    # column was a "rater" and alpha came out of texts and statuses with exit 0
    f = _file(tmp_path, "argilla.csv", "id,status,text,label.responses,label.responses.users\n"
              "r1,completed,Great,\"['positive', 'positive']\",\"['u1', 'u2']\"\n"
              "r2,completed,Bad,\"['negative', 'positive']\",\"['u1', 'u2']\"\n")
    res = runner.invoke(app, ["agreement", f])
    assert res.exit_code == 2
    assert "argilla.csv, line 1, field 'status': column 'status' is not a rater" in res.output


def test_min_applies_to_percent_agreement_asked_for_alone(tmp_path):
    f = _file(tmp_path, "wide.csv", "item,a,b\n1,yes,yes\n2,no,no\n3,yes,no\n4,no,no\n")
    res = runner.invoke(app, ["agreement", f, "--method", "percent", "--min", "0.9", "--bootstrap", "0"])
    assert res.exit_code == 1 and "below --min 0.9" in res.output  # before: exit 0 (percent was never checked)
    res = runner.invoke(app, ["agreement", f, "--method", "percent", "--min", "0.7", "--bootstrap", "0"])
    assert res.exit_code == 0  # 0.75


def test_a_named_long_column_never_falls_back_to_the_wide_layout(tmp_path):
    # a Label Studio export whose annotator column is `completed_by`: before, --label-column alone
    # read the file as wide (text, id and completed_by compared as raters)
    f = _file(tmp_path, "ls.csv", "text,id,sentiment,completed_by\nx,1,Pos,u1\nx,1,Neg,u2\ny,2,Neg,u1\ny,2,Neg,u2\n")
    res = runner.invoke(app, ["agreement", f, "--label-column", "sentiment"])
    assert res.exit_code == 2
    assert "ls.csv, line 1: no rater (rater, coder, annotator, judge, observer; --rater-column) column" in res.output
    res = runner.invoke(app, ["agreement", f, "--label-column", "sentiment", "--rater-column", "completed_by",
                              "--method", "percent", "--bootstrap", "0", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["value"] == pytest.approx(0.5)


def test_numeric_labels_match_the_value_domain_by_value(tmp_path):
    # a spreadsheet writes 4.0 for 4: before, "label '4.0' is not in the value domain", exit 2
    f = _file(tmp_path, "num.csv", "item,a,b\n1,4.0,4\n2,2,3.0\n3,1,1\n")
    res = runner.invoke(app, ["agreement", f, "--level", "ordinal", "--value-domain", "1,2,3,4,5",
                              "--bootstrap", "0", "--json"])
    assert res.exit_code == 0, res.output
    ref = krippendorff.alpha(reliability_data=np.array([[4, 2, 1], [4, 3, 1]], float),
                             level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert json.loads(res.output)["value"] == pytest.approx(ref)
    res = runner.invoke(app, ["agreement", f, "--value-domain", "1,2,3,4,4.0"])
    assert res.exit_code == 2 and "repeats a value" in res.output
