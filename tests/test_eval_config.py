"""One validated :class:`EvalConfig` instead of a long keyword list written out again and again.

``ragmeter.evaluate(data, metrics, **options)`` builds one EvalConfig (or takes one as ``config=``);
inside ``src/`` no parameter list longer than 8 names is written out twice, and no call passes the
same more-than-8 keyword arguments in two places (the config object travels instead).
"""

from __future__ import annotations

import ast
import dataclasses
import gc
from collections import defaultdict
from pathlib import Path

import pytest

import ragmeter
from ragmeter import ConfigError
from ragmeter.run.eval_config import EvalConfig

SRC = Path(__file__).resolve().parents[1] / "src"
LIMIT = 8


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in {"self", "cls"}:
        names = names[1:]
    return tuple(names)


def _forwards(k: ast.keyword) -> bool:
    v = k.value
    if isinstance(v, ast.BoolOp | ast.IfExp):  # ``mapping=mapping or None``
        v = v.values[0] if isinstance(v, ast.BoolOp) else v.body
    return (isinstance(v, ast.Name) and v.id == k.arg) or (isinstance(v, ast.Attribute) and v.attr == k.arg)


def long_lists(root: Path) -> tuple[dict[tuple[str, ...], list[str]], dict[tuple[str, ...], list[str]]]:
    """Function definitions by parameter list, and calls by (callee, keyword names), of more than
    :data:`LIMIT` names, each with where it is."""
    defs: dict[tuple[str, ...], list[str]] = defaultdict(list)
    calls: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(root)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = _params(node)
                if len(names) > LIMIT:
                    defs[names].append(f"{where}:{node.lineno} {node.name}")
            elif isinstance(node, ast.Call):
                # a list passed through: each keyword's value is the variable of that name (or an
                # attribute of it: ``config.name``), as ``f(a=a, b=b, ...)`` forwards a signature
                kws = tuple(sorted(k.arg for k in node.keywords if k.arg is not None and _forwards(k)))
                if len(kws) > LIMIT:
                    f = node.func
                    callee = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "?")
                    calls[(callee, *kws)].append(f"{where}:{node.lineno}")
    return defs, calls


def test_no_long_parameter_list_is_written_twice_in_src():
    defs, calls = long_lists(SRC)
    twice = {names: at for names, at in defs.items() if len(at) > 1}
    assert not twice, "parameter lists of more than 8 names written out more than once: " + "; ".join(
        f"({', '.join(n)}) at {', '.join(at)}" for n, at in twice.items())
    passed = {k: at for k, at in calls.items() if len(at) > 1}
    assert not passed, "the same more-than-8 keyword arguments passed in several calls: " + "; ".join(
        f"{k[0]}({', '.join(k[1:])}) at {', '.join(at)}" for k, at in passed.items())


def test_the_checker_finds_a_list_written_twice(tmp_path):
    """The check above can fail: two functions sharing a nine-name list, two calls forwarding it."""
    names = ", ".join(f"p{i}" for i in range(9))
    kws = ", ".join(f"p{i}=p{i}" for i in range(9))
    (tmp_path / "a.py").write_text(f"def f({names}):\n    return g({kws})\n")
    (tmp_path / "b.py").write_text(f"def h(*, {names}):\n    return g({kws})\n")
    defs, calls = long_lists(tmp_path)
    assert [len(at) for at in defs.values()] == [2]
    assert [len(at) for at in calls.values()] == [2]


def test_evaluate_builds_one_config_from_its_options(monkeypatch):
    from ragmeter.run import runner

    seen = []
    monkeypatch.setattr(runner, "run", lambda data, config: seen.append(config) or "result")
    assert ragmeter.evaluate("example", ["token_f1"], db="sqlite:///:memory:", max_missing=0.2,
                             thresholds={"token_f1": 0.3}) == "result"
    (cfg,) = seen
    assert isinstance(cfg, EvalConfig)
    assert cfg.metrics == ("token_f1",) and cfg.max_missing == 0.2 and cfg.db == "sqlite:///:memory:"
    assert cfg.thresholds == {"token_f1": 0.3} and cfg.engine == "local" and cfg.on_error == "raise"
    # a ready config is taken as it is; metrics and options given beside it are added / override
    base = EvalConfig(metrics=("exact_match",), name="base", db="sqlite:///:memory:")
    ragmeter.evaluate("example", config=base)
    ragmeter.evaluate("example", ["token_f1"], config=base, name="other")
    assert seen[1] is base
    assert seen[2].metrics == ("exact_match", "token_f1") and seen[2].name == "other" and base.name == "base"
    # a config file path or mapping still works as before
    ragmeter.evaluate("example", config={"metrics": ["mrr"]})
    assert seen[3].file == {"metrics": ["mrr"]}


def test_evaluate_with_a_config_object_gives_the_values_of_the_options():
    cfg = EvalConfig(metrics=("token_f1", "rouge1_fmeasure"), db="sqlite:///:memory:")
    a = ragmeter.evaluate("example", config=cfg)
    b = ragmeter.evaluate("example", ["token_f1", "rouge1_fmeasure"], db="sqlite:///:memory:")
    assert a.summary == b.summary
    assert a.summary["token_f1"]["n"] == 145


@pytest.mark.parametrize(("options", "field"), [
    ({"max_missing": 1.5}, "max_missing"),
    ({"max_missing": True}, "max_missing"),
    ({"on_error": "ignore"}, "on_error"),
    ({"engine": "dask"}, "engine"),
    ({"options": ["judge"]}, "options"),
    ({"progress": "yes"}, "progress"),
    ({"resume": 12}, "resume"),
    ({"name": ["x"]}, "name"),
    ({"max_mising": 0.2}, "max_mising"),
])
def test_a_bad_option_is_a_config_error_naming_the_field(options, field):
    with pytest.raises(ConfigError, match=field):
        ragmeter.evaluate("example", ["token_f1"], db="sqlite:///:memory:", **options)


def test_the_config_is_frozen_and_replace_validates_again():
    cfg = EvalConfig(metrics=["token_f1"])
    assert cfg.metrics == ("token_f1",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.name = "x"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="engine"):
        cfg.replace(engine="spark")


def test_the_library_leaves_the_collector_as_it_found_it():
    """``evaluate()`` neither switches the garbage collector off nor on: that is the ``ragmeter``
    command's policy (ragmeter/cli/runtime.py)."""
    assert gc.isenabled()
    ragmeter.evaluate("example", ["token_f1"], db="sqlite:///:memory:")
    assert gc.isenabled()
    gc.disable()
    try:
        ragmeter.evaluate("example", ["token_f1"], db="sqlite:///:memory:")
        assert not gc.isenabled()
    finally:
        gc.enable()
