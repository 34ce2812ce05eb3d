"""The dataset-to-decision workflow (eval, runs, export, gate, test, dataset) as a new user meets it:
at 80 columns, with typos, truncated and mislabelled files."""

from __future__ import annotations

import csv
import datetime
import json
import re
from pathlib import Path

import pytest

import ragmeter
from cli_runner import run_main
from ragmeter.core.terminal import shorten_path


def test_shorten_path_drops_whole_directories_first():
    assert shorten_path("data/rows.jsonl", 40) == "data/rows.jsonl"
    assert shorten_path("very/long/directory/name/for/datasets/rows-200000.jsonl", 20) == "…/rows-200000.jsonl"
    assert shorten_path("a/b/c/rows-200000.jsonl", 22) == "…/c/rows-200000.jsonl"
    assert shorten_path("rows-200000.jsonl", 10) == "…000.jsonl"  # the end of a name: its digits, extension
    assert shorten_path(r"C:\data\sets\rows.csv", 10) == "…\\rows.csv"
    for width in range(0, 30):
        assert len(shorten_path("very/long/directory/rows-200000.jsonl", width)) <= width


def test_runs_shortens_a_long_dataset_path_from_the_left_at_80_columns(db_url, tmp_path, monkeypatch):
    deep = tmp_path / "very" / "long" / "directory" / "name" / "for" / "datasets"
    deep.mkdir(parents=True)
    data = deep / "rows-200000.jsonl"
    data.write_text('{"question": "q", "answer": "a b", "reference": "a b"}\n')
    ragmeter.evaluate(str(data), ["token_f1", "exact_match"], db=db_url, progress=False)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("runs", "--db", db_url)
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out  # nothing cropped at the terminal's edge
    row = next(line for line in lines if "completed" in line)
    assert row.rstrip().endswith("…/rows-200000.jsonl"), out
    # a named run beside it: the name wraps, the path keeps its end on the run's line
    ragmeter.evaluate(str(data), ["token_f1"], db=db_url, progress=False,
                      name="my-long-experiment-name-with-suffix")
    code, out, _ = run_main("runs", "--db", db_url)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    rows = [line for line in lines if "completed" in line]
    assert len(rows) == 2 and all(r.rstrip().endswith("200000.jsonl") and "…" in r for r in rows), out
    assert "jsonl" not in out.replace(rows[0], "").replace(rows[1], "")  # no path continued on a line
    assert run_main("runs", "--limit", "1", "--db", db_url)[1].startswith("1 run (n = samples")  # was "1 runs"
    monkeypatch.setenv("COLUMNS", "200")
    _, wide, _ = run_main("runs", "--db", db_url)
    assert "…/very/long/directory/name/for/datasets/rows-200000.jsonl" in wide  # more when there is room


def test_export_writes_the_format_the_output_file_names(db_url, tmp_path):
    """``export RUN -o rows.parquet`` wrote CSV text into rows.parquet (the format defaulted to csv);
    the suffix now chooses it, and a --format that contradicts the suffix is an error (exit 2)."""
    import pandas as pd

    rid = ragmeter.evaluate([{"id": "a", "answer": "x y", "reference": "x"},
                             {"id": "b", "answer": "z", "reference": "z"}], ["token_f1"], db=db_url,
                            progress=False).run_id
    for name, read in (("rows.parquet", pd.read_parquet), ("rows.jsonl", lambda p: pd.read_json(p, lines=True)),
                       ("rows.xlsx", pd.read_excel), ("rows.csv", pd.read_csv)):
        out = tmp_path / name
        code, _, err = run_main("export", rid, "-o", str(out), "--db", db_url)
        assert code == 0, err
        assert list(read(out)["token_f1"]) == pytest.approx([2 / 3, 1.0]), name
    code, _, err = run_main("export", rid, "-f", "csv", "-o", str(tmp_path / "x.parquet"), "--db", db_url)
    assert code == 2 and "--format csv does not match the output file" in err and "x.parquet" in err
    assert not (tmp_path / "x.parquet").exists()
    code, _, _ = run_main("export", rid, "-o", str(tmp_path / "rows.txt"), "--db", db_url)  # no known suffix: csv
    assert code == 0 and pd.read_csv(tmp_path / "rows.txt")["id"].tolist() == ["a", "b"]


def test_eval_out_refuses_a_file_name_of_another_format(db_url, tmp_path):
    """``eval --out rows.parquet`` wrote JSONL text into rows.parquet; it is now a usage error (exit
    2, nothing stored) naming the JSONL name and the export command that writes that format."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a", "reference": "a"}\n')
    for name in ("rows.parquet", "rows.csv", "rows.xlsx"):
        code, out, err = run_main("eval", str(data), "--metrics", "token_f1", "--out", str(tmp_path / name),
                                  "--db", db_url)
        assert code == 2 and "--out writes JSONL" in out + err and "ragmeter export RUN -o" in " ".join((out + err).split())
        assert not (tmp_path / name).exists()
    assert not (tmp_path / "ragmeter.db").exists() or run_main("runs", "--json", "--db", db_url)[1].strip() == "[]"
    code, _, _ = run_main("eval", str(data), "--metrics", "token_f1", "--out", str(tmp_path / "rows.jsonl"),
                          "--db", db_url)
    assert code == 0 and (tmp_path / "rows.jsonl").read_text().count("\n") == 1


def test_gate_in_an_80_column_terminal_cuts_no_figure(tmp_path, monkeypatch):
    """In a terminal of 80 columns the gate's table showed the means as ``0.…`` and its p-values
    as ``<0.…``: the numbers a CI log reader looks for. They wrap or fold now, as compare's do."""
    from ragmeter.apps.cli import experiments
    from ragmeter.core.terminal import console

    db = str(tmp_path / "r.db")
    rows = [{"id": f"s{i}", "answer": f"the ferry leaves at {i}", "reference": f"the ferry leaves at {i}"}
            for i in range(12)]
    base = ragmeter.evaluate(rows, ["token_f1", "rougeL_fmeasure"], db=db, progress=False).run_id
    worse = [{**r, "answer": "no idea"} if i % 2 else r for i, r in enumerate(rows)]
    cand = ragmeter.evaluate(worse, ["token_f1", "rougeL_fmeasure"], db=db, progress=False).run_id
    monkeypatch.setattr(experiments, "_out", lambda: console(width=80))  # what a terminal of 80 columns gets
    code, out, _ = run_main("gate", cand, "--baseline", base, "--db", db)
    assert code == 1
    table = out.split("FAIL")[0]
    assert "…" not in table and max(len(line) for line in table.splitlines()) <= 80, table
    row = next(line for line in table.splitlines() if line.split() and line.split()[0] == "token_f1")
    assert row.split()[1:3] == ["1.000", "0.500"] and "REGRESSED" in row, table


@pytest.mark.parametrize(("row", "expected", "cut"), [
    # a row cut short (a killed writer) with a Windows line ending: the column was "1", on "line 2"
    ('{"question": "Q2",\r\n', "Expecting property name enclosed in double quotes at column 19", True),
    ('{"question": "Q2", "answer": "x', "Unterminated string starting at column 30", True),  # was "at at"
    ('{"question": "Q2" "answer": "x"}\n', "Expecting ',' delimiter at column 19", False),
])
def test_a_bad_jsonl_row_is_named_by_its_line_and_real_column(tmp_path, row, expected, cut):
    data = tmp_path / "rows.jsonl"
    data.write_bytes(('{"question": "Q1", "answer": "a", "reference": "a"}\r\n' + row).encode())
    code, out, err = run_main("eval", str(data), "--metrics", "token_f1", "--db", str(tmp_path / "r.db"))
    text = " ".join((out + err).split())
    assert code == 2 and f"rows.jsonl, line 2: invalid JSON: {expected}" in text, text
    assert ("the row is cut short" in text) is cut


def test_dataset_list_reads_at_80_columns(db_url, tmp_path, monkeypatch):
    """Each version was one padded line of 82 characters: at 80 columns its date went to a line of
    its own. A table now: every version on one line with its date; a long name wraps in its cell."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a", "reference": "a"}\n')
    for name, tag in (("a-rather-long-golden-dataset-name", "release-candidate-2026"), ("gold", None)):
        code, _, err = run_main("dataset", "import", str(data), "--name", name, *(["--tag", tag] if tag else []),
                                "--db", db_url)
        assert code == 0, err
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("dataset", "list", "--db", db_url)
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    assert lines[0].split() == ["dataset", "samples", "status", "tag", "hash", "created"], out
    row = next(line for line in lines if line.startswith("gold@1"))
    assert row.split()[1:3] == ["1", "final"] and row.rstrip()[-16:-6].startswith("20"), out  # its date
    dated = [line for line in lines if re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", line)]
    assert len(dated) == 2 and all(" final " in line for line in dated), out  # each version's date on its line


@pytest.mark.parametrize(("threshold", "hint"), [("token_f1=75", "75% is token_f1=0.75"), ("token_f1=1.5", ""),
                                                 ("token_f1<=-0.2", "")])
def test_a_threshold_outside_the_metrics_range_is_a_config_error(db_url, tmp_path, threshold, hint):
    """``--threshold token_f1=75`` (a percentage, as spreadsheets and seed-style 0-100 scales write it)
    failed every sample and exited 1 as if the system had regressed; it is a config error now (exit
    2, nothing stored), in the eval command, a config file and a suite alike."""
    data = tmp_path / "d.csv"
    data.write_text("question,answer,reference\nWhat is X?,X is Y,X is Y\nQ2,A2,R2\n")
    code, out, err = run_main("eval", str(data), "--metrics", "token_f1", "--threshold", threshold, "--db", db_url)
    text = " ".join((out + err).split())
    assert code == 2 and "is outside token_f1's range [0, 1]" in text and hint in text, text
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"dataset: {data}\nmetrics: [token_f1]\nthresholds: {{token_f1: 75}}\n")
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 2 and "75% is token_f1=0.75" in " ".join((out + err).split())
    assert run_main("runs", "--json", "--db", db_url)[1].strip() in ("", "[]")  # nothing stored
    code, _, _ = run_main("eval", str(data), "--metrics", "token_f1", "--threshold", "token_f1=1", "--db", db_url)
    assert code == 1  # the range's own end is a threshold a sample can meet


def test_a_toml_config_is_read_and_its_typos_named(db_url, tmp_path):
    """``--config run.toml`` was read as JSON ('Expecting value: line 1 column 1'); TOML is read
    as TOML, with the same checks as YAML (a misspelt key is named, a broken file exits 2)."""
    data = tmp_path / "d.csv"
    data.write_text("question,answer,reference\nWhat is X?,X is Y,X is Y\n")
    cfg = tmp_path / "run.toml"
    cfg.write_text('metrics = ["token_f1"]\n\n[thresholds]\ntoken_f1 = 0.5\n\n[options]\nlanguage = "en"\n')
    code, out, err = run_main("eval", str(data), "-c", str(cfg), "--json", "--db", db_url)
    assert code == 0, err
    assert json.loads(out)["metrics"]["token_f1"]["mean"] == 1.0
    cfg.write_text('metric = ["token_f1"]\n')
    code, out, err = run_main("eval", str(data), "-c", str(cfg), "--db", db_url)
    assert code == 2 and "run.toml: unknown key 'metric': did you mean 'metrics'?" in " ".join((out + err).split())
    cfg.write_text('metrics = ["token_f1"\n')
    code, out, err = run_main("eval", str(data), "-c", str(cfg), "--db", db_url)
    assert code == 2 and "run.toml: cannot parse config: Unclosed array" in out + err


def test_excel_semicolon_csv_is_read_as_a_dataset_and_a_review_sheet(db_url, tmp_path):
    """Excel saves "CSV" with semicolons where the decimal separator is a comma; the header was
    read as one column 'question;answer;reference' and the hint (--map) could not help."""
    data = tmp_path / "semi.csv"
    data.write_bytes("\ufeffquestion;answer;reference\r\nWhat is X?;X is Y;X is Y\r\n\"a; b\";c;d\r\n".encode())
    code, out, err = run_main("eval", str(data), "--metrics", "token_f1", "--json", "--db", db_url)
    assert code == 0, out + err
    summary = json.loads(out)
    assert summary["n_samples"] == 2 and summary["metrics"]["token_f1"]["mean"] == 0.5
    code, _, err = run_main("dataset", "import", str(data), "--name", "gold", "--db", db_url)
    assert code == 0, err
    sheet = tmp_path / "review.csv"
    assert run_main("dataset", "review-export", "gold", "-o", str(sheet), "--db", db_url)[0] == 0
    rows = list(csv.reader(sheet.read_text().splitlines()))
    rows[1][rows[0].index("review")] = "rejected"
    with sheet.open("w", newline="", encoding="utf-8-sig") as fh:  # as Excel saves it there
        csv.writer(fh, delimiter=";").writerows(rows)
    assert sheet.read_text().startswith("\ufeffid;review;")
    code, out, err = run_main("dataset", "review-import", "gold", str(sheet), "--db", db_url)
    assert code == 0 and "rejected 1" in out, out + err


def test_dataset_files_are_not_written_under_another_formats_name(db_url, tmp_path):
    """``dataset review-export -o review.xlsx`` wrote CSV text into review.xlsx (a spreadsheet then
    refuses it), ``dataset export -o gold.csv`` JSONL into gold.csv, ``report -o r.pdf`` HTML into
    r.pdf and ``baseline save -o b.csv`` JSON into b.csv: usage errors now (exit 2), nothing written."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a", "reference": "a"}\n')
    assert run_main("dataset", "import", str(data), "--name", "gold", "--db", db_url)[0] == 0
    for args, message in ((("review-export", "gold", "-o", str(tmp_path / "review.xlsx")),
                           "--output writes CSV, not Excel: name it review.csv"),
                          (("export", "gold", "-o", str(tmp_path / "gold.csv")),
                           "--output writes JSONL, not CSV: name it gold.jsonl")):
        code, out, err = run_main("dataset", *args, "--db", db_url)
        assert code == 2 and message in " ".join((out + err).split()), out + err
        assert not Path(args[-1]).exists()
    rid = ragmeter.evaluate(str(data), ["token_f1"], db=db_url, progress=False).run_id
    for args, message in ((("report", rid, "-o", str(tmp_path / "r.pdf")), "--output writes HTML, not PDF: name it r.html"),
                          (("baseline", "save", rid, "-o", str(tmp_path / "b.csv")),
                           "--output writes JSON, not CSV: name it b.json")):
        code, out, err = run_main(*args, "--db", db_url)
        assert code == 2 and message in " ".join((out + err).split()), out + err
        assert not Path(args[-1]).exists()
    assert run_main("dataset", "review-export", "gold", "-o", str(tmp_path / "review.csv"), "--db", db_url)[0] == 0
    assert run_main("dataset", "export", "gold", "-o", str(tmp_path / "gold.jsonl"), "--db", db_url)[0] == 0


def test_runs_never_cuts_a_count_at_80_columns(db_url, tmp_path, monkeypatch):
    """A run of 12,345 samples beside a long path showed n as '1234…': the one-line columns (id,
    status, created, n, metrics) keep their width and the path shortens instead."""
    deep = tmp_path / "a-rather-long-directory-name" / "and-another-one"
    deep.mkdir(parents=True)
    data = deep / "production-calls-2026-11.jsonl"
    data.write_text("".join(f'{{"id": "r{i}", "answer": "a b", "reference": "a c"}}\n' for i in range(12345)))
    ragmeter.evaluate(str(data), ["token_f1", "exact_match"], db=db_url, progress=False)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("runs", "--db", db_url)
    assert code == 0
    row = next(line for line in out.splitlines() if "completed" in line)
    assert " 12345 " in row and row.rstrip().endswith("2026-11.jsonl") and len(row) <= 80, out


def test_compare_of_runs_sharing_no_sample_is_incomplete(db_url):
    """Two runs of different files (ids that never meet) were 'compared' with exit 0 and a table of
    dashes; gate said INCOMPLETE with exit 3 for the same runs. compare exits 3 too and says why."""
    a = ragmeter.evaluate([{"id": f"a{i}", "answer": "x", "reference": "x"} for i in range(3)], ["token_f1"],
                          db=db_url, progress=False).run_id
    b = ragmeter.evaluate([{"id": f"b{i}", "answer": "x", "reference": "y"} for i in range(3)], ["token_f1"],
                          db=db_url, progress=False).run_id
    for extra in ((), ("--json",)):
        code, out, err = run_main("compare", a, b, *extra, "--db", db_url)
        assert code == 3, out + err
        assert "no sample has a value in both runs for token_f1" in " ".join(err.split())
    assert run_main("gate", b, "--baseline", a, "--db", db_url)[0] == 3
    c = ragmeter.evaluate([{"id": f"a{i}", "answer": "x", "reference": "y"} for i in range(3)], ["token_f1"],
                          db=db_url, progress=False).run_id
    assert run_main("compare", a, c, "--db", db_url)[0] == 0


def test_a_spreadsheet_header_is_read_whatever_its_case_and_spaces(tmp_path):
    """``Question, Answer, Expected Answer`` (a header typed in a spreadsheet) was 'no known field in
    this row' with a --map hint that guessed nothing; the aliases match up to case, spaces and
    hyphens now, and an exact name still wins."""
    data = tmp_path / "sheet.csv"
    data.write_text('ID,Question,Answer,Expected Answer,Retrieved-Contexts,Notes\n'
                    'q1,What is X?,X is Y,X is Z,"[""X is Y""]",checked\n')
    s = ragmeter.load(str(data)).samples[0]
    assert (s.id, s.question, s.answer, s.references) == ("q1", "What is X?", "X is Y", ["X is Z"])
    assert [c.text for c in s.contexts] == ["X is Y"] and s.metadata == {"Notes": "checked"}
    both = tmp_path / "both.csv"
    both.write_text("Answer,answer,reference\nfrom the sheet,exact,exact\n")
    s = ragmeter.load(str(both)).samples[0]
    assert s.answer == "exact" and s.metadata == {"Answer": "from the sheet"}


def test_a_suite_with_datasets_runs_each(db_url, tmp_path):
    """``ragmeter test --help`` offers ``datasets`` (a list instead of one ``dataset``), but the
    config check took it for a misspelt ``dataset`` and stopped with exit 2."""
    files = []
    for i, answer in enumerate(("X is Y", "no idea")):
        f = tmp_path / f"d{i}.csv"
        f.write_text(f"id,question,answer,reference\nq1,What is X?,{answer},X is Y\n")
        files.append(str(f))
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"datasets: [{files[0]}, {files[1]}]\nmetrics: [token_f1]\nthresholds: {{token_f1: 0.5}}\n")
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 1, out + err  # the second dataset fails its threshold
    assert "suite[0]  token_f1" in out and "suite[1]  token_f1" in out, out
    suite.write_text(f"datsets: [{files[0]}]\nmetrics: [token_f1]\n")
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 2 and "unknown key 'datsets': did you mean 'datasets'?" in " ".join((out + err).split())


def test_a_csv_cell_longer_than_the_csv_modules_limit_is_read(tmp_path):
    """A CSV cell of more than 131,072 characters (a long document or many contexts; pandas writes
    any length) stopped the run with 'field larger than field limit'; it is read, and the csv
    module's limit is put back afterwards."""
    import pandas as pd

    long = "the ferry leaves at noon " * 8000  # 200,000 characters
    data = tmp_path / "long.csv"
    pd.DataFrame([{"question": "When?", "answer": long, "reference": "noon"}]).to_csv(data, index=False)
    before = csv.field_size_limit()
    s = ragmeter.load(str(data)).samples[0]
    assert s.answer == long and s.references == ["noon"]
    assert csv.field_size_limit() == before


def test_an_excel_workbook_is_a_dataset(db_url, tmp_path):
    """``ragmeter export -f xlsx`` wrote a workbook that ``ragmeter eval`` refused ('unknown dataset
    format xlsx'): a spreadsheet user's round trip. The first sheet is read, typed cells as text,
    a date as ISO text, empty rows skipped; a file that is not a workbook is one line, exit 2."""
    import openpyxl

    rows = [{"id": f"s{i}", "question": f"q{i}", "answer": "the ferry leaves at noon",
             "references": [f"the ferry leaves at {'noon' if i % 2 else 'nine'}"]} for i in range(6)]
    rid = ragmeter.evaluate(rows, ["token_f1"], db=db_url, progress=False).run_id
    book = tmp_path / "run.xlsx"
    assert run_main("export", rid, "-o", str(book), "--db", db_url)[0] == 0
    code, out, err = run_main("eval", str(book), "--metrics", "token_f1", "--json", "--db", db_url)
    assert code == 0, out + err
    again = json.loads(out)
    assert again["n_samples"] == 6
    assert again["metrics"]["token_f1"]["mean"] == pytest.approx(ragmeter.evaluate(
        rows, ["token_f1"], db=db_url, progress=False).summary["token_f1"].mean)
    wb = openpyxl.Workbook()
    wb.active.append(["Question", "Answer", "Expected Answer", "When"])
    wb.active.append(["What is 6*7?", 42, "42", datetime.datetime(2026, 1, 2)])
    wb.active.append([None, None, None, None])
    wb.active.append(["Q2", "A2", "A2", None])
    wb.save(tmp_path / "typed.xlsx")
    samples = ragmeter.load(str(tmp_path / "typed.xlsx")).samples
    assert [(s.answer, s.references) for s in samples] == [("42", ["42"]), ("A2", ["A2"])]
    assert samples[0].metadata == {"When": "2026-01-02T00:00:00"}
    (tmp_path / "fake.xlsx").write_text("question,answer\n")
    code, out, err = run_main("eval", str(tmp_path / "fake.xlsx"), "--metrics", "token_f1", "--db", db_url)
    assert code == 2 and "fake.xlsx: not a readable .xlsx workbook" in out + err


def test_a_json_object_holding_its_rows_under_another_key(tmp_path):
    """``{"items": [...]}`` was one row with the column 'items' ('no known field in this row') and a
    --map hint that could not help; the one list of objects of an object without fields is read.
    An object with fields of its own stays one sample, whatever lists it holds."""
    (tmp_path / "items.json").write_text(json.dumps(
        {"version": 2, "items": [{"question": "q1", "answer": "a", "reference": "a"},
                                 {"question": "q2", "answer": "b", "reference": "c"}]}))
    assert [s.question for s in ragmeter.load(str(tmp_path / "items.json")).samples] == ["q1", "q2"]
    (tmp_path / "one.json").write_text(json.dumps(
        {"question": "q", "answer": "a", "reference": "a", "contexts": [{"text": "c1"}, {"text": "c2"}]}))
    (s,) = ragmeter.load(str(tmp_path / "one.json")).samples
    assert s.question == "q" and [c.text for c in s.contexts] == ["c1", "c2"]
