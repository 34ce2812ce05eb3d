"""The range of a metric built at run time reaches every surface (issue 38, "intervals out of range").

An OpenAI Evals definition run with ``ragmeter eval items.jsonl --openai-eval eval.json``: a
``score_model`` grader with ``"range": [1, 7]`` whose every value is 1.0, a ``bleu``
``text_similarity`` grader, a 0/1 ``python`` grader without a range and one with ``[0, 1]`` whose
every value is 1, a ``multi`` grader ``likert / 7`` and a ``cosine`` grader. Each grader's 95%
interval, as ``eval`` and ``show`` print it, as ``show --json`` stores it, as ``report`` writes it
and as ``trend`` prints it across two runs, lies in the range its definition sets; the paired
differences of ``compare`` lie in the range a difference can take. Before, the score_model grader
showed ``1.0000 [-264648469396.3, 264648469397.8]`` (range taken as +-1e12), the bleu grader
``[-0.0611, 0.4382]`` (range taken as [-1, 1] for every evaluation metric) and the python grader
``[0.5582, 1.2754]``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_runner import run_main
from judge_server import server_fixtures

judge_server_module, server = server_fixtures()

ITEMS = [
    {"item": {"question": "Capital of France? SCORE=1", "reference": "Paris is the capital of France"},
     "sample": {"output_text": "Paris is the capital of France"}},
    {"item": {"question": "Capital of Japan? SCORE=1", "reference": "Tokyo is the capital of Japan"},
     "sample": {"output_text": "Kyoto"}},
    {"item": {"question": "Boiling point? SCORE=1", "reference": "Water boils at 100 degrees"},
     "sample": {"output_text": "water boils at 100 degrees at sea level"}},
    {"item": {"question": "Sky colour? SCORE=1", "reference": "The sky is blue"},
     "sample": {"output_text": "blue"}},
    {"item": {"question": "Two plus two? SCORE=1", "reference": "Four"},
     "sample": {"output_text": "four, of course"}},
    {"item": {"question": "Largest planet? SCORE=1", "reference": "Jupiter"},
     "sample": {"output_text": "Saturn"}},
]

PY01 = ("def grade(sample, item):\n"
        "    first = item['reference'].split()[0].lower()\n"
        "    return 1.0 if first in sample['output_text'].lower() else 0.0\n")
LIKERT = {"type": "score_model", "name": "likert", "model": "test-model", "range": [1, 7],
          "input": [{"role": "user", "content": "{{item.question}} Grade: {{sample.output_text}}"}]}


def _similarity(name: str, metric: str) -> dict:
    return {"type": "text_similarity", "name": name, "input": "{{sample.output_text}}",
            "reference": "{{item.reference}}", "evaluation_metric": metric, "pass_threshold": 0.3}


DEFINITION = {"name": "ranges", "testing_criteria": [
    LIKERT,
    _similarity("bleu_sim", "bleu"),
    {"type": "python", "name": "py01", "source": PY01},
    {"type": "python", "name": "py_all", "source": "def grade(sample, item):\n    return 1.0\n", "range": [0, 1]},
    {"type": "multi", "name": "likert_share", "calculate_output": "likert / 7", "graders": {"likert": LIKERT}},
    _similarity("cos_sim", "cosine"),
]}

#: the range each grader's definition sets (for py01, which declares none: its values are 0/1)
RANGES = {"likert": (1.0, 7.0), "bleu_sim": (0.0, 1.0), "py01": (0.0, 1.0), "py_all": (0.0, 1.0),
          "likert_share": (1 / 7, 1.0), "cos_sim": (-1.0, 1.0)}
#: the summary's record of each range (null: declared none)
RECORDED = {**{k: list(v) for k, v in RANGES.items()}, "py01": None}
_NUM = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"


def _write(tmp_path: Path) -> tuple[Path, Path]:
    items, defn = tmp_path / "items.jsonl", tmp_path / "eval.json"
    items.write_text("".join(json.dumps(r) + "\n" for r in ITEMS))
    defn.write_text(json.dumps(DEFINITION))
    return items, defn


def _eval(tmp_path: Path, server, db: str) -> str:
    items, defn = _write(tmp_path)
    code, out, err = run_main("eval", str(items), "--openai-eval", str(defn), "--allow-python-graders",
                              "--judge-base-url", server.url + "/v1", "--no-progress", "--db", db)
    assert code == 0, out + err
    return out


def _table_intervals(out: str) -> dict[str, tuple[float, float, float]]:
    """``{metric: (mean, low, high)}`` of a printed table (eval, show: ``name mean [low, high]``)."""
    got = {}
    for name in RANGES:
        m = re.search(rf"^\s*{name}\s+{_NUM}\s+\[{_NUM}, {_NUM}\]", out, re.M)
        assert m, f"no interval printed for {name}:\n{out}"
        got[name] = tuple(float(x) for x in m.groups())
    return got


def _assert_within(name: str, mean: float, low: float, high: float, tol: float, what: str) -> None:
    lo, hi = RANGES[name]
    assert lo - tol <= low <= mean + tol and mean - tol <= high <= hi + tol, (
        f"{what}: {name} {mean} [{low}, {high}] outside its range [{lo}, {hi}]")
    assert high - low > 0, f"{what}: {name} has a zero-width interval [{low}, {high}]"


@pytest.fixture
def two_runs(tmp_path, server, db_url):
    first = _eval(tmp_path, server, db_url)
    second = _eval(tmp_path, server, db_url)
    return first, second, db_url


def test_eval_and_show_print_each_graders_interval_inside_its_range(two_runs):
    first, _, db = two_runs
    for name, (mean, low, high) in _table_intervals(first).items():
        _assert_within(name, mean, low, high, 5e-5, "eval")
    assert _table_intervals(first)["likert"][0] == 1.0
    code, out, err = run_main("show", "latest", "--db", db)
    assert code == 0, out + err
    for name, (mean, low, high) in _table_intervals(out).items():
        _assert_within(name, mean, low, high, 5e-5, "show")


def test_show_json_records_each_range_and_an_interval_inside_it(two_runs):
    _, _, db = two_runs
    code, out, err = run_main("show", "latest", "--json", "--db", db)
    assert code == 0, out + err
    metrics = json.loads(out)["metrics"]
    for name in RANGES:
        m = metrics[name]
        assert m["range"] == RECORDED[name], (name, m["range"])
        _assert_within(name, m["mean"], m["ci_low"], m["ci_high"], 0.0, "show --json")
    assert metrics["likert"]["mean"] == 1.0 and metrics["likert"]["min"] == metrics["likert"]["max"] == 1.0
    assert metrics["py_all"]["mean"] == 1.0 and metrics["py01"]["min"] == 0.0 and metrics["py01"]["max"] == 1.0
    assert metrics["likert_share"]["mean"] == pytest.approx(1 / 7)


def test_report_writes_each_graders_interval_inside_its_range(two_runs, tmp_path):
    _, _, db = two_runs
    path = tmp_path / "report.html"
    code, out, err = run_main("report", "latest", "-o", str(path), "--db", db)
    assert code == 0, out + err
    html = path.read_text(encoding="utf-8")
    table = html[html.index('class="rm-table rm-sortable aggregates"'):]
    for name in RANGES:
        row = table[table.index(f'data-value="{name}"'):]
        mean = float(re.search(rf'class="num" data-value="{_NUM}"', row).group(1))
        low, high = (float(x) for x in re.search(rf'class="ci">\[{_NUM}, {_NUM}\]', row).groups())
        _assert_within(name, mean, low, high, 5e-4, "report")


def test_trend_prints_each_runs_interval_inside_the_range(two_runs):
    _, _, db = two_runs
    for name in RANGES:
        code, out, err = run_main("trend", name, "--json", "--db", db)
        assert code == 0, out + err
        rows = json.loads(out)["runs"]
        assert len(rows) == 2
        for r in rows:
            _assert_within(name, r["mean"], r["ci_low"], r["ci_high"], 0.0, "trend --json")
        code, out, err = run_main("trend", name, "--db", db)
        assert code == 0, out + err
        printed = re.findall(rf"{_NUM}\s+\[{_NUM}, {_NUM}\]", out)
        assert len(printed) == 2, out
        for mean, low, high in printed:
            _assert_within(name, float(mean), float(low), float(high), 5e-4, "trend")


def test_compare_keeps_each_difference_inside_the_range_a_difference_can_take(two_runs):
    _, _, db = two_runs
    code, out, err = run_main("runs", "--json", "--db", db)
    assert code == 0, out + err
    ids = [r["id"] for r in json.loads(out)][:2]
    code, out, err = run_main("compare", *ids, "--json", "--db", db)
    assert code == 0, out + err
    rows = {c["metric"]: c for c in json.loads(out)["comparisons"]}
    for name, (lo, hi) in RANGES.items():
        c = rows[name]
        assert c["diff"] == 0.0, c  # the same items graded twice
        # nothing changed: the interval is around 0 on both sides, within [lo - hi, hi - lo]
        assert lo - hi <= c["ci_low"] < 0.0 < c["ci_high"] <= hi - lo, (name, c)
        assert c["ci_low"] == pytest.approx(-c["ci_high"]), (name, c)


def test_python_grader_value_outside_its_declared_range_is_no_value_with_the_reason(tmp_path, db_url):
    items, _ = _write(tmp_path)
    defn = tmp_path / "py.json"
    src = ("def grade(sample, item):\n"
           "    return 7.0 if 'Saturn' in sample['output_text'] else 0.5\n")
    defn.write_text(json.dumps({"testing_criteria": [{"type": "python", "name": "py", "source": src,
                                                      "range": [0, 1]}]}))
    code, out, err = run_main("eval", str(items), "--openai-eval", str(defn), "--allow-python-graders",
                              "--no-progress", "--db", db_url)
    assert code == 0, out + err
    code, out, err = run_main("show", "latest", "--json", "--db", db_url)
    m = json.loads(out)["metrics"]["py"]
    assert m["n"] == 5 and m["n_missing"] == 1 and m["range"] == [0.0, 1.0]
    assert any("python grader 'py' returned 7, outside its declared range [0, 1]" in r for r in m["missing_reasons"])
    assert 0.0 <= m["ci_low"] <= 0.5 <= m["ci_high"] <= 1.0


@pytest.mark.parametrize("rng", [[1, 1], [2, 1], ["0", 1], [0, float("inf")], [0]])
def test_a_bad_python_grader_range_is_refused_naming_the_field(tmp_path, db_url, rng):
    items, _ = _write(tmp_path)
    defn = tmp_path / "bad.json"
    defn.write_text(json.dumps({"testing_criteria": [{"type": "python", "name": "py", "source": PY01,
                                                      "range": rng}]}).replace("Infinity", "1e999"))
    code, out, err = run_main("eval", str(items), "--openai-eval", str(defn), "--allow-python-graders",
                              "--no-progress", "--db", db_url)
    assert code == 2, out + err
    assert "testing_criteria[0].range" in out + err and "Traceback" not in out + err
