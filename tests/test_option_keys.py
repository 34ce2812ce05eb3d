"""Run option keys (``--option KEY=VALUE``, a config file's ``options:``): a misspelt key is an
error naming the known one, and every option key read in src/ragmeter is known."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragmeter.core.errors import ConfigError
from ragmeter.run.option_keys import check_option_keys, known_option_keys

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ragmeter"

#: a literal key read from a mapping named like the run options
_READ = re.compile(r"\b(?:options|opts)\b[^\n]{0,25}?(?:\.get\(|\[|\.pop\(|\.setdefault\()\s*\"(\w+)\"")
#: a constant naming a run option (``PANEL_OPTION = "panel"``, ``FROM_GRADERS = "..."``)
_CONST = re.compile(r"^(?:\w*OPTION|FROM_GRADERS)\s*=\s*\"(\w+)\"", re.M)
#: reads above that are not run options: (file, key) -> what the mapping is
_NOT_RUN_OPTIONS = {
    ("golden/__init__.py", "dry_run"): "the judge options of `ragmeter golden`, sent as judge_dry_run",
    ("apps/cli/testsuite.py", "gate"): "a test suite's gate settings",
    ("apps/cli/core.py", "data"): "an OpenAI eval's arguments",
    ("apps/cli/core.py", "mapping"): "an OpenAI eval's arguments",
    ("run/runner.py", "source"): "a config file's source",
    ("run/runner.py", "judge_panel"): "the run's extra fields",
    ("run/eval_config.py", "metrics"): "EvalConfig.replace's field names",
    ("embed/onnx.py", "CPUExecutionProvider"): "onnxruntime's session options",
}


def _read_keys() -> set[tuple[str, str]]:
    found = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(SRC).as_posix()
        found |= {(rel, k) for k in _READ.findall(text) if k != "options"}  # (a config's or run's options mapping)
        found |= {(rel, k) for k in _CONST.findall(text)}
    return found


def test_every_option_key_read_in_the_source_is_known():
    found = _read_keys()
    assert {k for _, k in found} >= {"judge", "panel", "language", "agent_preset", "quality_model"}, found
    unknown = sorted((f, k) for f, k in found if (f, k) not in _NOT_RUN_OPTIONS and k not in known_option_keys())
    assert not unknown, f"option keys read but not declared (run/option_keys.py or MetricSpec.options): {unknown}"


def test_metric_specific_options_come_from_the_registry():
    from ragmeter.metrics.judge.geval import OPTION
    from ragmeter.metrics.registry import _REGISTRY, MetricSpec, all_metrics, register_metric

    all_metrics()  # the families loaded before one is added
    known = known_option_keys()
    assert set(OPTION.values()) <= known and {"arena_criteria", "pattern", "expected_schema", "dag",
                                               "domain", "advice_types"} <= known
    spec = register_metric(MetricSpec(name="test_option_keys_metric", family="custom", fn=lambda s, c: [],
                                      options=("my_plugin_option",)))
    try:
        assert "my_plugin_option" in known_option_keys()
        with pytest.raises(ConfigError, match="'my_plugin_opton': did you mean 'my_plugin_option'"):
            check_option_keys({"my_plugin_opton": 1}, "run options")
    finally:
        _REGISTRY.pop(spec.name, None)


@pytest.mark.parametrize("key,near", [("patern", "pattern"), ("langauge", "language"),
                                      ("embeding_model", "embedding_model"), ("g_eval_critera", "g_eval_criteria")])
def test_a_key_close_to_a_known_one_is_refused(key, near):
    with pytest.raises(ConfigError, match=f"run options: unknown key '{key}': did you mean '{near}'"):
        check_option_keys({key: "x"}, "run options")


def test_known_keys_and_far_keys_pass():
    check_option_keys({"pattern": "x", "judge_model": "m", "embedding_model": "e", "dag": {}}, "run options")
    check_option_keys({"my_team_flag": 1}, "run options")  # a plugin's own option is passed on


def test_eval_with_a_misspelt_option_exits_2_and_stores_nothing(tmp_path):
    from cli_runner import run_main
    from ragmeter.store import Store

    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a b", "reference": "a c"}\n', encoding="utf-8")
    db = str(tmp_path / "r.db")
    code, _, err = run_main("eval", str(data), "-m", "deepeval:pattern_match", "--option", "patern=a.*", "--db", db)
    assert code == 2 and "unknown key 'patern': did you mean 'pattern'?" in err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("metrics: [token_f1]\noptions: {langauge: en}\n", encoding="utf-8")
    code, _, err = run_main("eval", str(data), "--config", str(cfg), "--db", db)
    assert code == 2 and "c.yaml: options: unknown key 'langauge': did you mean 'language'?" in err
    assert not Store(db).list_runs()
    code, _, err = run_main("eval", str(data), "-m", "deepeval:pattern_match", "--option", "pattern=a.*", "--db", db)
    assert code == 0, err
