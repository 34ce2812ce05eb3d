"""The eval definition reader at its boundary: malformed definitions are refused with exit 2 and a
message naming the field's path, never a traceback (examples and hypothesis fuzzing)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_runner import run_main
from ragmeter.core.errors import ConfigError
from ragmeter.metrics.openai_evals.definition import parse_definition

GOOD = {
    "data_source_config": {"type": "custom", "item_schema": {"type": "object"}},
    "testing_criteria": [
        {"type": "string_check", "name": "s", "input": "{{sample.output_text}}", "reference": "{{item.a}}",
         "operation": "eq"},
        {"type": "text_similarity", "name": "t", "input": "{{sample.output_text}}", "reference": "{{item.a}}",
         "evaluation_metric": "rouge_l", "pass_threshold": 0.5},
        {"type": "score_model", "name": "m", "model": "x", "range": [0, 10],
         "sampling_params": {"temperature": 0, "seed": 1},
         "input": [{"role": "user", "content": "{{item.a}}"}]},
        {"type": "label_model", "name": "l", "model": "x", "labels": ["a", "b"], "passing_labels": ["a"],
         "input": [{"role": "system", "content": [{"type": "input_text", "text": "hi"}]}]},
        {"type": "python", "name": "p", "source": "def grade(s, i):\n    return 1.0\n"},
        {"type": "multi", "name": "mu", "calculate_output": "x + y", "graders": {
            "x": {"type": "string_check", "input": "a", "reference": "a", "operation": "eq"},
            "y": {"type": "text_similarity", "input": "a", "reference": "a", "evaluation_metric": "bleu"}}},
    ],
}


def test_the_good_definition_reads():
    d = parse_definition(GOOD, "eval.json")
    assert [g["name"] for g in d.graders] == ["s", "t", "m", "l", "p", "mu"]
    assert d.graders[2]["range"] == [0.0, 10.0]
    assert d.graders[5]["graders"]["x"]["name"] == "x"


def _mutated(path: list, value) -> dict:
    d = copy.deepcopy(GOOD)
    node = d
    for p in path[:-1]:
        node = node[p]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


_DELETE = object()
CASES = [
    ([], None, "(top level)"),
    (["testing_criteria"], [], "testing_criteria"),
    (["testing_criteria"], "x", "testing_criteria"),
    (["testing_criteria", 0], 3, "testing_criteria[0]"),
    (["testing_criteria", 0, "type"], "regex", "testing_criteria[0].type"),
    (["testing_criteria", 0, "operation"], "LIKE", "testing_criteria[0].operation"),
    (["testing_criteria", 0, "input"], 5, "testing_criteria[0].input"),
    (["testing_criteria", 0, "input"], "{{ outputs.x }}", "testing_criteria[0].input"),
    (["testing_criteria", 0, "reference"], "{{item..a}}", "testing_criteria[0].reference"),
    (["testing_criteria", 0, "name"], "", "testing_criteria[0].name"),
    (["testing_criteria", 0, "name"], _DELETE, "testing_criteria[0].name"),
    (["testing_criteria", 1, "evaluation_metric"], "rouge_6", "testing_criteria[1].evaluation_metric"),
    (["testing_criteria", 1, "pass_threshold"], _DELETE, "testing_criteria[1].pass_threshold"),
    (["testing_criteria", 1, "pass_threshold"], "0.5", "testing_criteria[1].pass_threshold"),
    (["testing_criteria", 1, "pass_threshold"], float("nan"), "testing_criteria[1].pass_threshold"),
    (["testing_criteria", 1, "name"], "s", "testing_criteria[1].name"),
    (["testing_criteria", 2, "range"], [1, 0], "testing_criteria[2].range"),
    (["testing_criteria", 2, "range"], [0], "testing_criteria[2].range"),
    (["testing_criteria", 2, "sampling_params"], {"temperature": "hot"}, "testing_criteria[2].sampling_params.temperature"),
    (["testing_criteria", 2, "sampling_params"], {"beam": 2}, "testing_criteria[2].sampling_params.beam"),
    (["testing_criteria", 2, "input"], [], "testing_criteria[2].input"),
    (["testing_criteria", 2, "input", 0, "role"], "bot", "testing_criteria[2].input[0].role"),
    (["testing_criteria", 2, "input", 0], "hello", "testing_criteria[2].input[0]"),
    (["testing_criteria", 2, "model"], _DELETE, "testing_criteria[2].model"),
    (["testing_criteria", 3, "passing_labels"], ["c"], "testing_criteria[3].passing_labels"),
    (["testing_criteria", 3, "labels"], [], "testing_criteria[3].labels"),
    (["testing_criteria", 3, "labels"], ["a", "a"], "testing_criteria[3].labels"),
    (["testing_criteria", 3, "input", 0, "content"], [{"type": "video"}], "testing_criteria[3].input[0].content[0].type"),
    (["testing_criteria", 4, "source"], "def grade(:", "testing_criteria[4].source"),
    (["testing_criteria", 4, "source"], "   ", "testing_criteria[4].source"),
    (["testing_criteria", 5, "calculate_output"], "x + z", "testing_criteria[5].calculate_output"),
    (["testing_criteria", 5, "calculate_output"], "__import__('os')", "testing_criteria[5].calculate_output"),
    (["testing_criteria", 5, "graders"], {}, "testing_criteria[5].graders"),
    (["testing_criteria", 5, "graders", "x", "type"], "multi", "testing_criteria[5].graders.x"),
    (["testing_criteria", 5, "graders", "y", "evaluation_metric"], "x", "testing_criteria[5].graders.y.evaluation_metric"),
    (["data_source_config"], [], "data_source_config"),
    (["data_source_config", "type"], "sql", "data_source_config.type"),
    (["data_source_config", "item_schema"], "object", "data_source_config.item_schema"),
]


@pytest.mark.parametrize(("path", "value", "where"), CASES)
def test_malformed_definition_names_the_field(path, value, where):
    raw = None if path == [] else _mutated(path, value)
    with pytest.raises(ConfigError) as exc:
        parse_definition(raw, "eval.json")
    assert str(exc.value).startswith(f"eval.json: {where}:"), str(exc.value)


@pytest.mark.parametrize(("path", "value", "where"), CASES[::4])
def test_cli_exits_2_naming_the_field(tmp_path, db_url, path, value, where):
    raw = None if path == [] else _mutated(path, value)
    e = tmp_path / "eval.json"
    e.write_text(json.dumps(raw))
    d = tmp_path / "items.jsonl"
    d.write_text(json.dumps({"item": {"a": "x"}, "sample": {"output_text": "x"}}) + "\n")
    code, out, err = run_main("eval", str(d), "--openai-eval", str(e), "--db", db_url, "--no-progress")
    assert code == 2 and where in err and "Traceback" not in err + out


@pytest.mark.parametrize("text", ["", "{", "[1, 2", "\x00\x01", '{"testing_criteria": [' * 5000])
def test_unreadable_files_exit_2(tmp_path, db_url, text):
    e = tmp_path / "eval.json"
    e.write_text(text)
    d = tmp_path / "items.jsonl"
    d.write_text("{}\n")
    code, out, err = run_main("eval", str(d), "--openai-eval", str(e), "--db", db_url, "--no-progress")
    assert code == 2 and "eval.json" in err and "Traceback" not in err + out


def test_missing_files_exit_2(tmp_path, db_url):
    code, _, err = run_main("eval", str(tmp_path / "x.jsonl"), "--openai-eval", str(tmp_path / "no.json"),
                            "--db", db_url)
    assert code == 2 and "not found" in err
    (tmp_path / "e.json").write_text(json.dumps(GOOD))
    code, _, err = run_main("eval", str(tmp_path / "x.jsonl"), "--openai-eval", str(tmp_path / "e.json"),
                            "--db", db_url, "--allow-python-graders")
    assert code == 2 and "not found" in err


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children,
                                                                                     max_size=5),
                    max_leaves=25)
KEYS = st.sampled_from(["type", "name", "input", "reference", "operation", "evaluation_metric", "pass_threshold",
                        "model", "labels", "passing_labels", "range", "sampling_params", "source", "graders",
                        "calculate_output", "role", "content", "text"])
VALUES = st.one_of(JSON, st.sampled_from(["string_check", "text_similarity", "score_model", "label_model", "python",
                                          "multi", "eq", "ilike", "bleu", "cosine", "user", "{{item.a}}", "{{x}}",
                                          "{{", "a+b", "input_text"]))
GRADER = st.dictionaries(KEYS, VALUES, max_size=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(JSON, st.fixed_dictionaries({"testing_criteria": st.lists(GRADER, max_size=3)},
                                             optional={"data_source_config": JSON, "name": VALUES})))
def test_fuzzed_definitions_are_read_or_refused_with_a_config_error(raw):
    try:
        d = parse_definition(raw, "fuzz.json")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.json: ")
        return
    assert d.graders


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GOOD["testing_criteria"]) - 1), KEYS, VALUES)
def test_fuzzed_fields_of_a_good_definition(i, key, value):
    raw = copy.deepcopy(GOOD)
    raw["testing_criteria"][i][key] = value
    try:
        parse_definition(raw, "f.json")
    except ConfigError as exc:
        assert f"testing_criteria[{i}]" in str(exc)
