"""openai/evals registry files of the basic templates through ``--openai-eval``: YAML as the
openai/evals repository writes them (evals/registry/evals/test-basic.yaml), the same in JSON,
``samples_jsonl`` found next to the file or in the registry's data folder, the values of the
template's metrics run directly, errors naming file, line and field (exit 2, nothing stored), and
JsonMatch's semantics (the cases of openai/evals' json_match_test.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_runner import run_main
from ragmeter.metrics.openai_evals.basic import json_match
from ragmeter.store import Store

# evals/registry/evals/test-basic.yaml of openai/evals, plus a JsonMatch eval (same shape) and the
# Includes eval with its ignore_case argument
REGISTRY_YAML = """\
test-match:
  id: test-match.s1.simple-v0
  description: Example eval that checks sampled text matches the expected output.
  disclaimer: This is an example disclaimer.
  metrics: [accuracy]
test-match.s1.simple-v0:
  class: evals.elsuite.basic.match:Match
  args:
    samples_jsonl: test_match/samples.jsonl

test-fuzzy-match:
  id: test-fuzzy-match.s1.simple-v0
  description: Example eval that uses fuzzy matching to score completions.
  metrics: [f1_score]
test-fuzzy-match.s1.simple-v0:
  class: evals.elsuite.basic.fuzzy_match:FuzzyMatch
  args:
    samples_jsonl: test_fuzzy_match/samples.jsonl

test-includes:
  id: test-includes.s1.simple-v0
  description: Example eval that checks sampled text includes the expected output.
  metrics: [accuracy]
test-includes.s1.simple-v0:
  class: evals.elsuite.basic.includes:Includes
  args:
    samples_jsonl: test_fuzzy_match/samples.jsonl
    ignore_case: true

test-json:
  id: test-json.dev.v0
  metrics: [accuracy]
test-json.dev.v0:
  class: evals.elsuite.basic.json_match:JsonMatch
  args:
    samples_jsonl: test_json/samples.jsonl
    max_tokens: 512
"""

_SYS = {"role": "system", "content": "Complete the phrase as concisely as possible."}
SAMPLES = {
    "test_match/samples.jsonl": [
        {"input": [_SYS, {"role": "user", "content": "Once upon a "}], "ideal": "time", "completion": "time there was"},
        {"input": [_SYS, {"role": "user", "content": "The first US president was "}], "ideal": "George Washington",
         "completion": "Abraham Lincoln"},
        {"input": [_SYS, {"role": "user", "content": "OpenAI was founded in 20"}], "ideal": "15", "completion": "15"},
        {"input": "Plain prompt: the sky is", "ideal": ["blue", "Blue"], "completion": " blue"}],
    "test_fuzzy_match/samples.jsonl": [
        {"input": [{"role": "user", "content": "What's the capital of France?"}], "ideal": ["Paris", "Paris, France"],
         "completion": "The capital is PARIS."},
        {"input": [{"role": "user", "content": "What's 2+2?"}], "ideal": ["4", "four"], "completion": "5"},
        {"input": [{"role": "user", "content": "Largest planet?"}], "ideal": "Jupiter", "completion": "It is Jupiter"}],
    "test_json/samples.jsonl": [
        {"input": "q1", "ideal": "{\"key\": \"value\"}", "completion": "{\n \"key\":\"value\"\n}\n"},
        {"input": "q2", "ideal": ["{\"key\": 100.1}", "{\"key\": 100}"], "completion": "{\"key\": 100}"},
        {"input": "q3", "ideal": "{\"key\": [1, 2, 3]}", "completion": "{\"key\": [1, 3, 2]}"},
        {"input": "q4", "ideal": "{\"key\": \"value\"}", "completion": "{\"key\": \"value}"}],
}
EXPECTED = {"test-match": {"evals_match": [1.0, 0.0, 1.0, 0.0]},
            "test-includes": {"evals_includes(ignore_case=True)": [1.0, 0.0, 1.0]},
            "test-fuzzy-match": {"evals_fuzzy_match": [1.0, 0.0, 1.0], "evals_f1": [0.5, 0.0, 0.5]},
            "test-json": {"evals_json_match": [1.0, 1.0, 0.0, 0.0]}}


def _registry(root: Path) -> Path:
    """The openai/evals layout: REGISTRY/evals/test-basic.yaml, REGISTRY/data/<samples_jsonl>."""
    (root / "evals").mkdir(parents=True)
    for rel, rows in SAMPLES.items():
        p = root / "data" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = root / "evals" / "test-basic.yaml"
    path.write_text(REGISTRY_YAML, encoding="utf-8")
    return path


def _values(db_url: str, run_id: str) -> dict[str, list[float | None]]:
    store = Store(db_url)
    table = store.score_table(run_id)
    ids = [s.id for s in store.run_samples(run_id)]
    return {m: [by[i].value for i in ids] for m, by in table.items()}


def _run(db_url: str, *args: str) -> tuple[int, str, str, str | None]:
    code, out, err = run_main("eval", *args, "--db", db_url, "--no-progress", "--json")
    return code, out, err, (json.loads(out)["run_id"] if code in (0, 1, 3) else None)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_registry_yaml_equals_the_template_metrics_and_the_json_form(tmp_path, db_url, monkeypatch, name):
    reg = _registry(tmp_path / "registry")
    monkeypatch.chdir(tmp_path)  # samples_jsonl is found in the registry's data folder, not from here
    code, out, err, run = _run(db_url, "--openai-eval", f"{reg}#{name}", "--map", "answer=completion")
    assert code == 0, out + err
    got = _values(db_url, run)
    assert got == EXPECTED[name]
    # the same registry written as JSON gives the same values
    twin = reg.with_suffix(".json")
    twin.write_text(json.dumps(yaml.safe_load(REGISTRY_YAML)), encoding="utf-8")
    code, out, err, run_json = _run(db_url, "--openai-eval", f"{twin}#{name}", "--map", "answer=completion")
    assert code == 0 and _values(db_url, run_json) == got, out + err
    # and the template's metrics run on the samples file directly (a config for a parameter)
    spec = yaml.safe_load(REGISTRY_YAML)
    spec = spec[spec[name]["id"]]
    samples = reg.parent.parent / "data" / spec["args"]["samples_jsonl"]
    params = {"ignore_case": True} if spec["args"].get("ignore_case") else {}
    metric = list(EXPECTED[name])[0].split("(")[0]
    cfg = tmp_path / "direct.json"
    cfg.write_text(json.dumps({"metrics": [{"name": metric, "params": params}]}))
    code, out, err, direct = _run(db_url, str(samples), "--config", str(cfg), "--map", "answer=completion")
    assert code == 0 and _values(db_url, direct) == {k: v for k, v in got.items() if k.startswith(metric)}, out + err
    show = json.loads(run_main("show", run, "--json", "--db", db_url)[1])
    assert show["config"]["options"]["openai_eval"]["registry_id"] == spec_id(name)


def spec_id(name: str) -> str:
    return yaml.safe_load(REGISTRY_YAML)[name]["id"]


def test_fuzzy_match_scores_accuracy_and_f1(tmp_path, db_url):
    reg = _registry(tmp_path / "registry")
    code, out, err, run = _run(db_url, "--openai-eval", f"{reg}#test-fuzzy-match.s1.simple-v0",
                               "--map", "answer=completion")
    assert code == 0, out + err
    got = _values(db_url, run)
    assert set(got) == {"evals_fuzzy_match", "evals_f1"}
    assert got["evals_f1"][1] == 0.0 and 0 < got["evals_f1"][0] < 1


def test_samples_next_to_the_file_and_data_given(tmp_path, db_url, monkeypatch):
    """``samples_jsonl`` relative to the YAML file; DATA, when given, is scored instead."""
    here = tmp_path / "mine"
    (here / "s").mkdir(parents=True)
    (here / "s" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SAMPLES["test_match/samples.jsonl"]))
    (here / "match.yml").write_text("my-eval:\n  id: my-eval.dev.v0\n  metrics: [accuracy]\nmy-eval.dev.v0:\n"
                                    "  class: evals.elsuite.basic.match:Match\n  args:\n    samples_jsonl: s/rows.jsonl\n")
    monkeypatch.chdir(tmp_path)
    code, out, err, run = _run(db_url, "--openai-eval", str(here / "match.yml"), "--map", "answer=completion")
    assert code == 0 and _values(db_url, run) == {"evals_match": [1.0, 0.0, 1.0, 0.0]}, out + err
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"input": "x", "ideal": "yes", "completion": "yes sir"}) + "\n")
    code, out, err, run = _run(db_url, str(other), "--openai-eval", str(here / "match.yml"), "--map", "answer=completion",
                               "--threshold", "evals_match>=1")
    assert code == 0 and _values(db_url, run) == {"evals_match": [1.0]}, out + err
    # one eval in the file: no #NAME needed; several: the error lists them
    code, out, err, _ = _run(db_url, "--openai-eval", str(_registry(tmp_path / "r2")))
    assert code == 2 and "holds 4 evals (test-match, test-fuzzy-match, test-includes, test-json)" in err


BAD = [
    ("a:\n  id: a.dev.v0\n a.dev.v0: [\n", "line 3: not YAML"),
    ("a:\n  id: a.dev.v0\na.dev.v0:\n  class: evals.elsuite.modelgraded.classify:ModelBasedClassify\n"
     "  args:\n    samples_jsonl: x.jsonl\n", "line 4, field 'a.dev.v0.class'"),
    ("a:\n  id: a.dev.v0\na.dev.v0:\n  class: evals.elsuite.basic.match:Match\n  args:\n    samples_jsonl: gone.jsonl\n",
     "line 6, field 'a.dev.v0.args.samples_jsonl': 'gone.jsonl' not found"),
    ("a:\n  id: a.dev.v1\na.dev.v0:\n  class: evals.elsuite.basic.match:Match\n  args:\n    samples_jsonl: x.jsonl\n",
     "line 2, field 'a.id': 'a.dev.v1' is not defined in this file"),
    ("a:\n  id: a.dev.v0\na.dev.v0:\n  class: evals.elsuite.basic.includes:Includes\n  args:\n    samples_jsonl: x.jsonl\n"
     "    ignore_case: maybe\n", "line 7, field 'a.dev.v0.args.ignore_case': expected true or false"),
    ("a:\n  id: a.dev.v0\na.dev.v0:\n  class: evals.elsuite.basic.match:Match\n", "line 3, field 'a.dev.v0.args'"),
    ("a:\n  id: [1]\n", "line 2, field 'a.id'"),
]


@pytest.mark.parametrize(("text", "where"), BAD)
def test_bad_registry_files_name_file_line_and_field(tmp_path, db_url, text, where):
    path = tmp_path / "reg.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = run_main("eval", "--openai-eval", str(path), "--db", db_url, "--no-progress")
    assert code == 2, out + err
    assert f"{path}, {where}" in err and "Traceback" not in err
    assert not Path(db_url.removeprefix("sqlite:///")).exists()  # nothing stored


def test_a_definition_in_yaml_equals_its_json(tmp_path, db_url):
    definition = {"testing_criteria": [{"type": "string_check", "name": "exact", "input": "{{sample.output_text}}",
                                        "reference": "{{item.answer}}", "operation": "eq"}]}
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"item": {"answer": a}, "sample": {"output_text": o}}) + "\n"
                             for a, o in (("Paris", "Paris"), ("Rome", "rome"))))
    (tmp_path / "eval.json").write_text(json.dumps(definition))
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump(definition))
    runs = [_run(db_url, str(items), "--openai-eval", str(tmp_path / f"eval.{s}"))[3] for s in ("json", "yaml")]
    assert _values(db_url, runs[0]) == _values(db_url, runs[1]) == {"exact": [1.0, 0.0]}


def test_suite_with_a_registry_eval(tmp_path, db_url):
    reg = _registry(tmp_path / "registry")
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"dataset": str(reg.parent.parent / "data" / "test_match" / "samples.jsonl"),
                                     "openai_eval": f"{reg}#test-match", "map": {"answer": "completion"},
                                     "thresholds": {"evals_match": 1}}))
    code, out, err = run_main("test", str(suite), "--db", db_url)
    assert code == 1 and "evals_match" in out and "2/4 passed" in out, out + err  # a per-sample threshold


@pytest.mark.parametrize(("completion", "ideal", "expected"), [
    ('{ "key": "value" }', '{ "key": "value" }', 1.0),
    ('{\n   "key":"value"\n   }\n', '{ "key": "value" }', 1.0),
    ('{ "key2": "foo", "key1": "bar" }', '{ "key1": "bar", "key2": "foo" }', 1.0),
    ('{ "key": "value" }', '{ "key": "notvalue" }', 0.0),
    ('{ "key": 100 }', '{ "key": 100 }', 1.0),
    ('{ "key": 100 }', '{ "key": 100.1 }', 0.0),
    ('{ "key": 100 }', ['{ "key": 100.1 }', '{ "key": 100 }'], 1.0),
    ('{ "key": 100 }', ['{ "key": 100.1 }', '{ "key": 99.9 }'], 0.0),
    ('{ "key": "value" }', '{ "anotherkey": "value" }', 0.0),
    ('{ "key": "value" }', '{ "key": "value", "anotherkey": "value" }', 0.0),
    ('{ "key": "value", "anotherkey": "value" }', '{ "key": "value" }', 0.0),
    ('{ "key": [1.0,2.0,3.0] }', '{ "key": [1, 2, 3] }', 1.0),
    ('{ "key": [1, 2, 3] }', '{ "key": [1, 2, 3, 3] }', 0.0),
    ('{ "key": [1, 2, 3] }', '{ "key": [1, 3, 2] }', 0.0),
    ('{ "key": [] }', '{ "key": [1] }', 0.0),
    ('{ "key": "value }', '{ "key": "value" }', 0.0),
    ('{ "key": null }', '{ "key": null }', 0.0),  # a missing value is never correct
])
def test_json_match_is_openai_evals_json_match(completion, ideal, expected):
    """The cases of openai/evals evals/elsuite/basic/json_match_test.py."""
    assert json_match(completion, ideal if isinstance(ideal, list) else [ideal]) == expected


def test_json_match_ideal_that_is_not_json_is_no_value(tmp_path, db_url):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"answer": "{}", "reference": "not json"}) + "\n"
                    + json.dumps({"answer": "{}", "reference": "{}"}) + "\n")
    code, out, err, run = _run(db_url, str(path), "-m", "evals_json_match")
    table = Store(db_url).score_table(run)["evals_json_match"]
    assert table["row-1"].value is None and "ideal answer 0 is not JSON" in table["row-1"].reason
    assert table["row-2"].value == 1.0
