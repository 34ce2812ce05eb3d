"""`ragmeter annotate import` on sheets as people return them: the blank sheet unfilled, a label
given twice, a sheet of one rater imported as another, a decimal comma that splits a row."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ragmeter
from ragmeter.apps.cli import app
from ragmeter.human import tasks as T
from ragmeter.store import Store

runner = CliRunner()


@pytest.fixture
def task(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    samples = [{"id": f"s{i}", "question": f"q{i}", "answer": f"a{i}", "reference": f"a{i}"} for i in range(4)]
    ragmeter.evaluate(samples, metrics=["token_f1"], db=url, name="base")
    res = runner.invoke(app, ["annotate", "create", "base", "--raters", "ana,bruno", "--scales", "overall",
                              "--n", "4", "--json", "--db", url])
    assert res.exit_code == 0, res.output
    return url, json.loads(res.output)["task"]


def _import(tmp_path, url, task_id, text, *extra):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(text)
    return runner.invoke(app, ["annotate", "import", task_id, str(sheet), *extra, "--db", url])


def test_the_blank_sheet_imported_unfilled_is_incomplete(tmp_path, task):
    url, task_id = task
    sheet = tmp_path / "blank.csv"
    assert runner.invoke(app, ["annotate", "export", task_id, "-o", str(sheet), "--db", url]).exit_code == 0
    res = runner.invoke(app, ["annotate", "import", task_id, str(sheet), "--db", url])
    assert res.exit_code == 3  # before: "stored 0 labels", exit 0
    assert "no labels to store (every label cell is empty)" in res.output


def test_a_label_given_twice_in_one_sheet_names_both_lines(tmp_path, task):
    url, task_id = task
    res = _import(tmp_path, url, task_id, "item,rater,scale,label\ns0,ana,overall,3\ns0,ana,overall,4\n")
    assert res.exit_code == 2  # before: "stored 2 labels", the second silently replacing the first
    assert "line 3, field 'label'" in res.output and "(the first is on line 2)" in res.output
    assert T.labels(Store(url), task_id) == []  # nothing stored


def test_rater_option_never_relabels_another_raters_rows(tmp_path, task):
    url, task_id = task
    res = _import(tmp_path, url, task_id, "item,rater,scale,label\ns0,ana,overall,3\n", "--rater", "bruno")
    assert res.exit_code == 2  # before: ana's label was stored as bruno's
    assert "line 2, field 'rater'" in res.output and "'ana' but --rater is 'bruno'" in res.output
    res = _import(tmp_path, url, task_id, "item,rater,scale,label\ns0,,overall,3\n", "--rater", "bruno")
    assert res.exit_code == 0 and "stored 1 label\n" in res.output
    assert [(x.rater, x.value) for x in T.labels(Store(url), task_id)] == [("bruno", "3")]


def test_a_row_longer_than_the_header_is_an_error(tmp_path, task):
    url, task_id = task
    res = _import(tmp_path, url, task_id, "item,rater,scale,label\ns0,ana,overall,3,5\n")
    assert res.exit_code == 2  # before: the label "3" of "3,5" was stored
    assert "line 2: 5 fields but the header has 4" in res.output


@pytest.mark.parametrize("command", [["agreement"], ["labels", "-o", "out.jsonl"]])
def test_an_unknown_scale_lists_the_tasks_scales(tmp_path, task, command):
    url, task_id = task
    res = runner.invoke(app, ["annotate", command[0], task_id, *command[1:], "--scale", "overal", "--db", url])
    # before: agreement said "no labels yet on 'overal'" (exit 3); labels named no scale to pick
    assert res.exit_code == 2
    assert f"task {task_id} has no scale 'overal' (scales: overall; --scale)" in res.output


def test_annotate_agreement_with_one_rater_so_far_is_incomplete(tmp_path, task):
    url, task_id = task
    res = _import(tmp_path, url, task_id, "item,rater,scale,label\n" + "".join(
        f"s{i},ana,overall,{1 + i}\n" for i in range(4)))
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["annotate", "agreement", task_id, "--db", url])
    assert res.exit_code == 3  # before: exit 0 with every coefficient undefined
    assert "undefined — one rater: agreement needs at least two" in res.output
    res = runner.invoke(app, ["annotate", "agreement", task_id, "--json", "--db", url])
    assert res.exit_code == 3 and json.loads(res.output)["overall"][0]["value"] is None
