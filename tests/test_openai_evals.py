"""OpenAI Evals definitions run end to end: ``ragmeter eval --openai-eval``, ``show --json``, python
graders in a child process, ``ragmeter test`` with ``openai_eval:``, and the judge requests of model
graders (their own messages and sampling parameters) against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli_runner import run_main
from judge_server import Forced, server_fixtures, words
from references import require_reference

judge_server_module, server = server_fixtures()

ITEMS = [
    {"item": {"question": "Capital of France?", "answer": "Paris"}, "sample": {"output_text": "Paris"}},
    {"item": {"question": "Capital of Italy?", "answer": "Rome"}, "sample": {"output_text": "The capital is rome."}},
    {"item": {"question": "Capital of Spain?", "answer": "Madrid"}, "sample": {"output_text": "Barcelona"}},
    {"item": {"question": "Capital of Peru?", "answer": "Lima"}, "sample": {"output_text": "Lima, Peru"}},
    {"item": {"question": "Capital of Japan?", "answer": "Tokyo"}, "sample": {"output_text": "tokyo"}},
]


def _sim(name: str, metric: str, threshold: float) -> dict:
    return {"type": "text_similarity", "name": name, "input": "{{sample.output_text}}",
            "reference": "{{item.answer}}", "evaluation_metric": metric, "pass_threshold": threshold}


def _check(name: str, op: str) -> dict:
    return {"type": "string_check", "name": name, "input": "{{ sample.output_text }}",
            "reference": "{{ item.answer }}", "operation": op}


DEFINITION = {
    "name": "capitals",
    "data_source_config": {"type": "custom", "include_sample_schema": True, "item_schema": {
        "type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["question", "answer"]}},
    "testing_criteria": [
        _check("eq check", "eq"), _check("ne_check", "ne"), _check("like_check", "like"),
        _check("ilike_check", "ilike"),
        _sim("bleu", "bleu", 0.3), _sim("rouge_l", "rouge_l", 0.5), _sim("fuzzy", "fuzzy_match", 0.8),
        {"type": "label_model", "name": "verdict", "model": "gpt-4o-mini",
         "input": [{"role": "developer", "content": "Is the model's answer correct? Label it."},
                   {"role": "user", "content": {"type": "input_text", "text":
                    "Question: {{item.question}}\nReference answer: {{item.answer}}\n"
                    "Model answer: {{sample.output_text}}"}}],
         "labels": ["correct", "incorrect"], "passing_labels": ["correct"]},
        {"type": "multi", "name": "combined", "calculate_output": "0.5 * name_ok + 0.5 * sim ^ 2",
         "pass_threshold": 0.7, "graders": {
             "name_ok": _check("name_ok", "ilike") | {"name": "name_ok"},
             "sim": {"type": "text_similarity", "input": "{{sample.output_text}}", "reference": "{{item.answer}}",
                     "evaluation_metric": "fuzzy_match"}}},
    ],
}


def _write(tmp_path: Path, definition: dict, items: list[dict] | None = None) -> tuple[Path, Path]:
    e = tmp_path / "eval.json"
    e.write_text(json.dumps(definition))
    d = tmp_path / "items.jsonl"
    d.write_text("".join(json.dumps(r) + "\n" for r in (ITEMS if items is None else items)))
    return d, e


def _show(db: str) -> dict:
    code, out, err = run_main("show", "latest", "--json", "--db", db)
    assert code == 0, err
    return json.loads(out)


def _export_rows(db: str, tmp_path: Path) -> list[dict]:
    path = tmp_path / "rows.jsonl"
    code, _, err = run_main("export", "latest", "-f", "jsonl", "-o", str(path), "--db", db)
    assert code == 0, err
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.contract
def test_eval_runs_every_grader_and_show_has_one_metric_per_grader(tmp_path, server, db_url):
    data, defn = _write(tmp_path, DEFINITION)
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress",
                              "--judge-base-url", server.url + "/v1")
    assert code == 0, out + err
    info = _show(db_url)
    names = [g["name"] for g in DEFINITION["testing_criteria"]]
    assert list(info["metrics"]) == names
    for name in names:
        m = info["metrics"][name]
        assert m["family"] == "openai_evals" and m["n"] == len(ITEMS)
        p = m["pass"]
        assert p["n"] == len(ITEMS) and 0 <= p["rate_low"] <= p["rate"] <= p["rate_high"] <= 1
        assert m["pass_rate"] == p["rate"] == p["passed"] / p["n"]
    outputs = [r["sample"]["output_text"] for r in ITEMS]
    answers = [r["item"]["answer"] for r in ITEMS]
    rows = {r["id"]: r for r in _export_rows(db_url, tmp_path)}
    assert len(rows) == len(ITEMS)
    by_row = [rows[f"row-{i + 1}"] for i in range(len(ITEMS))]
    # string_check: exactly OpenAI's definitions
    assert [r["eq check"] for r in by_row] == [float(o == a) for o, a in zip(outputs, answers, strict=True)]
    assert [r["ne_check"] for r in by_row] == [float(o != a) for o, a in zip(outputs, answers, strict=True)]
    assert [r["like_check"] for r in by_row] == [float(a in o) for o, a in zip(outputs, answers, strict=True)]
    assert [r["ilike_check"] for r in by_row] == [float(a.casefold() in o.casefold())
                                                  for o, a in zip(outputs, answers, strict=True)]
    assert [r["eq check"] for r in by_row] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [r["ilike_check"] for r in by_row] == [1.0, 1.0, 0.0, 1.0, 1.0]
    # text_similarity: the reference implementations, and pass == value >= pass_threshold
    import sacrebleu
    from rapidfuzz import fuzz, utils

    rouge_scorer = require_reference("rouge_score.rouge_scorer")

    rl = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    for r, o, a in zip(by_row, outputs, answers, strict=True):
        assert r["bleu"] == pytest.approx(sacrebleu.sentence_bleu(o, [a]).score / 100, abs=1e-12)
        assert r["rouge_l"] == pytest.approx(rl.score(a, o)["rougeL"].fmeasure, abs=1e-12)
        assert r["fuzzy"] == pytest.approx(fuzz.WRatio(o, a, processor=utils.default_process) / 100, abs=1e-12)
        for g in DEFINITION["testing_criteria"]:
            if g["type"] == "text_similarity":
                assert r[f"{g['name']}__pass"] is (r[g["name"]] >= g["pass_threshold"])
        assert r["verdict"] == (1.0 if words(a) <= words(o) else 0.0)  # the scripted judge's rule
        sim = fuzz.WRatio(o, a, processor=utils.default_process) / 100
        assert r["combined"] == pytest.approx(0.5 * float(a.lower() in o.lower()) + 0.5 * sim ** 2)
    for g in DEFINITION["testing_criteria"]:
        if g["type"] == "text_similarity":
            p = info["metrics"][g["name"]]["pass"]
            assert p["passed"] == sum(r[g["name"]] >= g["pass_threshold"] for r in by_row)
    # the label grader's request: its own messages (developer -> system), the labels as an enum
    # requests run concurrently: the first item's request is found by its content
    body = next(r["body"] for r in server.requests
                if "Reference answer: Paris" in r["body"]["messages"][-1]["content"])
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"][0]["role"] == "system" and "Is the model's answer correct?" in body["messages"][0]["content"]
    assert body["messages"][1]["role"] == "user" and "Reference answer: Paris" in body["messages"][1]["content"]
    schema = body["response_format"]["json_schema"]
    assert schema["name"] == "LabelModelOutput"
    assert schema["schema"]["properties"]["result"]["enum"] == ["correct", "incorrect"]
    assert info["config"]["options"]["openai_eval"]["graders"] == names


def test_score_model_range_sampling_params_and_judge_of_any_provider(tmp_path, server, db_url):
    grader = {"type": "score_model", "name": "quality", "model": "o4-mini", "range": [1, 5], "pass_threshold": 4,
              "sampling_params": {"temperature": 0.2, "top_p": 0.9, "seed": 7, "max_completions_tokens": 300},
              "input": [{"role": "system", "content": "Grade the answer."},
                        {"role": "user", "content": "Reference answer: {{item.answer}}\nModel answer: {{sample.output_text}}"}]}
    data, defn = _write(tmp_path, {"testing_criteria": [grader]})
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress",
                              "--judge", "openai:my-local-model", "--judge-base-url", server.url + "/v1")
    assert code == 0, out + err
    body = server.requests[0]["body"]
    assert body["model"] == "my-local-model"  # --judge answers every model grader
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.2, 0.9, 7)
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 300
    assert "a number from 1 to 5" in body["messages"][0]["content"]
    rows = {r["id"]: r for r in _export_rows(db_url, tmp_path)}
    assert rows["row-1"]["quality"] == 5.0 and rows["row-3"]["quality"] == 1.0
    info = _show(db_url)
    assert info["metrics"]["quality"]["pass"]["passed"] == sum(r["quality"] >= 4 for r in rows.values())


def test_score_model_out_of_range_is_clipped_and_bad_reply_is_no_value(tmp_path, server, db_url):
    grader = {"type": "score_model", "name": "s", "model": "m", "input": [{"role": "user", "content": "SCORE=7 {{item.answer}}"}]}
    data, defn = _write(tmp_path, {"testing_criteria": [grader]}, ITEMS[:2])
    server.force(Forced(text="not json"), Forced(text="still not json"), Forced(text="nope"))
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress",
                              "--judge-base-url", server.url + "/v1", "--option", "judge_parse_retries=1",
                              "--option", "judge_backoff_base=0.01")
    values = [r["s"] for r in _export_rows(db_url, tmp_path)]
    # one item's request got two replies that are not JSON (no value), the other a bad one and then
    # SCORE=7, clipped to the default range [0, 1]
    assert sorted(values, key=lambda v: v is None) == [1.0, None]
    assert code == 0, out + err
    reasons = _show(db_url)["metrics"]["s"]["missing_reasons"]
    assert list(reasons) == ["judge failure: invalid reply — not valid JSON (Expecting value at line 1 column 1)"]


PY_OK = "def grade(sample, item):\n    return 1.0 if sample['output_text'] == item['answer'] else 0.0\n"
PY_LOOP = "def grade(sample, item):\n    while True:\n        pass\n"


def test_python_grader_refused_without_the_flag(tmp_path, db_url):
    data, defn = _write(tmp_path, {"testing_criteria": [{"type": "python", "name": "py", "source": PY_OK}]})
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress")
    assert code == 2
    assert "--allow-python-graders" in err and "'py'" in err and "Traceback" not in err
    assert not (tmp_path / "ragmeter.db").exists() or _runs(db_url) == []


def _runs(db: str) -> list:
    from ragmeter.store import Store

    return Store(db).list_runs()


def test_python_grader_runs_and_an_endless_one_is_stopped_at_its_time_limit(tmp_path, db_url):
    data, defn = _write(tmp_path, {"testing_criteria": [
        {"type": "python", "name": "py", "source": PY_OK, "pass_threshold": 1},
        {"type": "python", "name": "forever", "source": PY_LOOP}]}, ITEMS[:3])
    t0 = time.monotonic()
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress",
                              "--allow-python-graders", "--option", "python_grader_timeout=1")
    assert time.monotonic() - t0 < 60
    assert code == 3, out + err  # a grader without any value: the run is incomplete
    info = _show(db_url)
    assert info["metrics"]["py"]["mean"] == pytest.approx(1 / 3)
    forever = info["metrics"]["forever"]
    assert forever["n"] == 0 and forever["n_missing"] == 3
    (reason,) = forever["missing_reasons"]
    assert "stopped at its time limit (1 s)" in reason
    rows = _export_rows(db_url, tmp_path)
    assert all(r["forever"] is None for r in rows)


def test_python_grader_errors_and_memory_limit_are_no_value(tmp_path, db_url):
    src = textwrap.dedent("""
        def grade(sample, item):
            if item["answer"] == "Paris":
                raise KeyError("nope")
            if item["answer"] == "Rome":
                return "high"
            if item["answer"] == "Madrid":
                return float("nan")
            x = bytearray(3 * 1024 ** 3)
            return 1.0
    """)
    data, defn = _write(tmp_path, {"testing_criteria": [{"type": "python", "name": "py", "source": src}]}, ITEMS[:4])
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress",
                              "--allow-python-graders", "--option", "python_grader_memory_mb=512")
    assert code == 3, out + err
    reasons = json.dumps(_show(db_url)["metrics"]["py"]["missing_reasons"])
    assert "raised KeyError" in reasons and "returned str, not a number" in reasons
    assert "not a finite number" in reasons and "MemoryError" in reasons


@pytest.mark.parametrize("isolated", [True, False], ids=["sandboxed", "unisolated"])
def test_python_grader_child_dies_with_its_parent(tmp_path, isolated):
    """Every process of a grader (bwrap, its init and the grader's Python in the sandbox; the child
    Python unisolated) ends when the process that started it is killed with SIGKILL."""
    import psutil

    src = "def grade(sample, item):\n    while True:\n        pass\n"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        from ragmeter.sandbox.python_grader import run_python_grader
        run_python_grader("g", {src!r}, [({{}}, {{}})], timeout_s=300, isolated={isolated})
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        deadline = time.monotonic() + 60
        while True:  # the grader's Python runs (its command line: python -I -c PROGRAM ...)
            kids = psutil.Process(parent.pid).children(recursive=True)
            if any("-I" in _cmdline(k) for k in kids):
                break
            assert time.monotonic() < deadline, "the grader process did not start"
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(k.pid) for k in kids):
            assert time.monotonic() < deadline, "a grader process outlived its parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()


def _cmdline(proc) -> list[str]:
    import psutil

    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _suite(tmp_path: Path, server, thresholds: dict | None, **extra) -> Path:
    import yaml

    data, defn = _write(tmp_path, {"testing_criteria": [_check("exact", "eq"), _check("mentions", "ilike")]})
    suite = {"dataset": str(data), "openai_eval": "eval.json", **extra}
    if thresholds is not None:
        suite["thresholds"] = thresholds
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def test_suite_fails_when_a_grader_pass_rate_is_under_its_target(tmp_path, server, db_url, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path, server, None)  # exact passes 1/5, mentions 4/5
    import yaml

    spec = yaml.safe_load(suite.read_text())
    spec["openai_eval"] = {"path": "eval.json", "pass_rate": {"exact": 0.5, "mentions": 0.8}}
    suite.write_text(yaml.safe_dump(spec))
    junit = tmp_path / "out.xml"
    code, out, err = run_main("test", str(suite), "--junit", str(junit), "--db", db_url)
    assert code == 1, out + err
    assert "FAILED" in err and junit.exists()
    assert 'name="suite.exact"' in junit.read_text()
    info = _show(db_url)
    assert info["metrics"]["exact"]["pass"]["ok"] is False and info["metrics"]["exact"]["pass"]["target"] == 0.5
    assert info["metrics"]["mentions"]["pass"]["ok"] is True
    spec["openai_eval"]["pass_rate"] = {"exact": 0.2, "mentions": 0.8}
    suite.write_text(yaml.safe_dump(spec))
    code, out, err = run_main("test", str(suite), "--junit", str(junit), "--db", db_url)
    assert code == 0, out + err


def test_suite_threshold_naming_a_grader_is_refused_with_the_pass_rate_key(tmp_path, server, db_url, monkeypatch):
    """A threshold is a per-sample threshold everywhere: one naming a grader (its pass-rate target
    before) stops with exit 2 and names openai_eval.pass_rate, nothing stored."""
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path, server, {"exact": 0.5})
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 2, out + err
    assert "threshold exact: 0.5 names a grader" in err and "pass_rate: {exact: 0.5}" in err
    code, out, err = run_main("test", str(_suite(tmp_path, server, None)), "--threshold", "mentions=0.8", "--db", db_url)
    assert code == 2 and "pass_rate: {mentions: 0.8}" in err
    assert run_main("runs", "--db", db_url, "--json")[1].strip() in ("", "[]")


def test_suite_pass_rate_key_and_default_rule(tmp_path, server, db_url, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path, server, None)  # no target: every sample must pass (ragmeter test's default)
    assert run_main("test", str(suite), "--db", db_url)[0] == 1
    suite = _suite(tmp_path, server, None, pass_rule=0.0)
    assert run_main("test", str(suite), "--db", db_url)[0] == 0
    import yaml

    spec = yaml.safe_load(suite.read_text())
    spec["openai_eval"] = {"path": "eval.json", "pass_rate": {"exact": 0.1, "mentions": 0.9}}
    spec.pop("pass_rule")
    suite.write_text(yaml.safe_dump(spec))
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 1 and "mentions" in out
    spec["openai_eval"] = {"path": "eval.json", "pass_rate": 0.2}
    suite.write_text(yaml.safe_dump(spec))
    assert run_main("test", str(suite), "--db", db_url)[0] == 0
    spec["openai_eval"] = {"path": "eval.json", "bogus": 1}
    suite.write_text(yaml.safe_dump(spec))
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 2 and "bogus" in err


def test_eval_pass_rate_target_and_the_one_meaning_of_threshold(tmp_path, db_url):
    data, defn = _write(tmp_path, {"testing_criteria": [_check("exact", "eq"), _check("mentions", "ilike")]})
    base = ["eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress"]
    assert run_main(*base)[0] == 0  # pass rates reported, nothing checked
    code, out, err = run_main(*base, "--pass-rate-target", "mentions=0.9")
    assert code == 1 and "pass rate >= 0.9" in out
    assert run_main(*base, "--pass-rate-target", "mentions=0.8")[0] == 0
    assert run_main(*base, "--pass-rate-target", "0.8")[0] == 1  # every grader: exact passes 1 of 5
    assert run_main(*base, "--pass-rate-target", "0.2")[0] == 0
    assert run_main(*base, "--pass-rule", "0.5")[0] == 1
    # --threshold is a per-sample threshold: naming a grader (its pass-rate target before) is refused
    code, out, err = run_main(*base, "--threshold", "mentions=0.9")
    assert code == 2 and "--threshold mentions=0.9 names a grader" in err and "--pass-rate-target mentions=0.9" in err
    for bad, why in (("nope=0.5", "neither a grader of the eval (exact, mentions)"), ("mentions=1.5", "between 0 and 1"),
                     ("mentions=high", "not a number")):
        code, out, err = run_main(*base, "--pass-rate-target", bad)
        assert code == 2 and why in err, (bad, err)
    # other metrics keep their per-sample threshold and may have a pass-rate target of their own
    code, out, err = run_main(*base, "-m", "evals_match", "--threshold", "evals_match>=1",
                              "--pass-rate-target", "evals_match=0.1")
    assert code != 2 and "evals_match >= 1 (pass rate >= 0.1)" in out, out + err


def test_pass_rate_target_without_openai_eval(db_url):
    base = ["eval", "example", "-m", "token_f1", "--db", db_url, "--no-progress", "--threshold", "token_f1>=0.3"]
    code, out, err = run_main(*base, "--pass-rate-target", "token_f1=0.5")
    assert code == 0 and "token_f1 >= 0.3 (pass rate >= 0.5): 106/145 passed" in out, out + err
    assert run_main(*base, "--pass-rate-target", "0.8")[0] == 1  # 106/145 = 0.73
    code, out, err = run_main("eval", "example", "-m", "token_f1", "--db", db_url, "--pass-rate-target", "0.5")
    assert code == 2 and "--threshold METRIC>=VALUE" in err
    code, out, err = run_main(*base, "--pass-rate-target", "mrr=0.5")
    assert code == 2 and "'mrr' has no per-sample threshold" in err


def test_map_sample_column_and_flat_rows(tmp_path, db_url):
    rows = [{"id": "a", "answer": "Paris", "completion": "Paris"},
            {"id": "b", "answer": "Rome", "completion": "{\"city\": \"Rome\"}"}]
    definition = {"testing_criteria": [
        _check("exact", "eq"),
        {"type": "string_check", "name": "city", "input": "{{sample.output_json.city}}", "reference": "{{item.answer}}",
         "operation": "eq"}]}
    data, defn = _write(tmp_path, definition, rows)
    base = ["eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress"]
    code, out, err = run_main(*base)
    assert code == 2 and "--map sample=COLUMN" in err  # the graders read the sample and no row has one
    code, out, err = run_main(*base, "--map", "sample=completion")
    assert code == 0, out + err
    got = {r["id"]: r for r in _export_rows(db_url, tmp_path)}
    assert got["a"]["exact"] == 1.0 and got["b"]["exact"] == 0.0
    assert got["a"]["city"] is None and got["b"]["city"] == 1.0
    reasons = _show(db_url)["metrics"]["city"]["missing_reasons"]
    assert any("output_json" in r for r in reasons)
    code, out, err = run_main(*base, "--map", "answer=completion")
    assert code == 2 and "--map sample=COLUMN" in err


def test_item_schema_is_enforced_with_line_and_field(tmp_path, db_url):
    items = [ITEMS[0], {"item": {"question": "Q?"}, "sample": {"output_text": "x"}}]
    data, defn = _write(tmp_path, DEFINITION | {"testing_criteria": [_check("exact", "eq")]}, items)
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress")
    assert code == 2 and "line 2" in err and "'answer'" in err and "item_schema" in err


def test_registry_rows_and_basic_templates(tmp_path, db_url):
    rows = [
        {"input": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Capital of France?"}],
         "ideal": "Paris", "completion": "Paris, of course."},
        {"input": [{"role": "user", "content": "2+2?"}], "ideal": ["4", "four"], "completion": "It is Four."},
        {"input": [{"role": "user", "content": "Color of the sky?"}], "ideal": "The blue", "completion": "blue!"},
    ]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out_file = tmp_path / "out.jsonl"
    code, out, err = run_main("eval", str(path), "-m", "evals_match,evals_includes,evals_fuzzy_match,evals_f1",
                              "--map", "answer=completion", "--db", db_url, "--no-progress", "-o", str(out_file))
    assert code == 0, out + err
    got = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert [r["question"] for r in got] == ["Capital of France?", "2+2?", "Color of the sky?"]
    assert [r["evals_match"] for r in got] == [1.0, 0.0, 0.0]
    assert [r["evals_includes"] for r in got] == [1.0, 0.0, 0.0]
    assert [r["evals_fuzzy_match"] for r in got] == [1.0, 1.0, 1.0]


def test_output_items_of_a_run_read_as_items(tmp_path, db_url):
    rows = [{"object": "eval.run.output_item", "id": f"outputitem_{i}", "datasource_item_id": i,
             "datasource_item": r["item"], "results": [], "status": "pass",
             "sample": {"model": "gpt-4o", "input": [{"role": "user", "content": r["item"]["question"]}],
                        "output": [{"role": "assistant", "content": r["sample"]["output_text"]}]}}
            for i, r in enumerate(ITEMS)]
    data, defn = _write(tmp_path, {"testing_criteria": [_check("exact", "eq")]}, rows)
    code, out, err = run_main("eval", str(data), "--openai-eval", str(defn), "--db", db_url, "--no-progress")
    assert code == 0, out + err
    got = {r["id"]: r["exact"] for r in _export_rows(db_url, tmp_path)}
    assert got == {f"outputitem_{i}": v for i, v in enumerate([1.0, 0.0, 0.0, 0.0, 0.0])}


def test_providers_send_a_request_s_own_sampling_parameters():
    from pydantic import BaseModel

    from ragmeter.llm.config import config_from_options
    from ragmeter.llm.providers import AnthropicClient, OpenAIClient

    class V(BaseModel):
        result: float

    sampling = {"temperature": 0.3, "top_p": 0.5, "seed": 9, "reasoning_effort": "low"}
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    oa = OpenAIClient(config_from_options({"judge": "openai:m", "judge_base_url": "http://127.0.0.1:1/v1"}))
    body = oa.build("sys", msgs, V, 50, sampling)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert (body["temperature"], body["top_p"], body["seed"], body["reasoning_effort"]) == (0.3, 0.5, 9, "low")
    assert "seed" not in oa.build("sys", msgs, V, 50) and oa.build("sys", msgs, V, 50)["temperature"] == 0.0
    oa.send_temperature = False  # an endpoint that refused temperature never gets one
    assert "temperature" not in oa.build("sys", msgs, V, 50, sampling)
    an = AnthropicClient(config_from_options({"judge": "anthropic:m"}))
    body = an.build("sys", msgs, V, 50, sampling)
    assert (body["temperature"], body["top_p"]) == (0.3, 0.5) and "seed" not in body


def test_judge_keys_of_plain_requests_are_unchanged_and_own_messages_count():
    from pydantic import BaseModel

    from ragmeter.llm import JudgeRequest, JudgeService
    from ragmeter.llm.config import config_from_options

    class V(BaseModel):
        ok: bool

    svc = JudgeService(config_from_options({"judge": "openai:m", "judge_base_url": "http://127.0.0.1:1/v1"}))
    plain = JudgeRequest(metric="x", sample_id="1", system="s", user="u", schema=V, template_version="1")
    own = JudgeRequest(metric="x", sample_id="1", system="s", user="u", schema=V, template_version="1",
                       messages=({"role": "user", "content": "u"},), sampling=(("seed", 1),))
    other = JudgeRequest(metric="x", sample_id="1", system="s", user="u", schema=V, template_version="1",
                         messages=({"role": "user", "content": "u"},), sampling=(("seed", 2),))
    assert len({svc.key(plain), svc.key(own), svc.key(other)}) == 3
    import hashlib

    from ragmeter.core.redact import endpoint_id
    from ragmeter.llm.structured import schema_json

    payload = json.dumps(["openai", endpoint_id(svc.cfg.base_url), "m", "s", "u", schema_json(V), svc.cfg.temperature,
                          svc.cfg.max_tokens, "1"], ensure_ascii=False, separators=(",", ":"))
    assert svc.key(plain) == hashlib.sha256(payload.encode("utf-8")).hexdigest()
    svc.close()
