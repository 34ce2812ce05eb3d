"""The registry's name hints (metrics.registry._NAME_HOME): each hinted module registers the names
hinted to it, and resolving a judge metric imports its family without the others."""

import subprocess
import sys

from ragmeter.metrics import registry


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_each_hinted_module_registers_its_names():
    code = ("import importlib, sys\n"
            "from ragmeter.metrics import registry as r\n"
            "bad = []\n"
            "for name, mod in r._NAME_HOME.items():\n"
            "    importlib.import_module(mod)\n"
            "    known = set(r._REGISTRY) | set(r._ALIASES)\n"
            "    if name not in known and not any(k.startswith(name + ':') for k in known):\n"
            "        bad.append((name, mod))\n"
            "print(bad)")
    assert _fresh(code) == "[]"


def test_a_judge_metric_resolves_without_the_other_families():
    code = ("import sys\n"
            "from ragmeter.metrics.registry import resolve_all\n"
            "reqs = resolve_all(['faithfulness', 'context_recall', 'answer_relevancy'])\n"
            "print(sorted(r.spec.family for r in reqs), 'ragmeter.metrics.lexical' in sys.modules,\n"
            "      'ragmeter.metrics.claims' in sys.modules, 'ragmeter.metrics.judge.ragas_more' in sys.modules)\n"
            "reqs = resolve_all(['ragas:faithfulness', 'token_f1'])\n"
            "print(sorted(r.spec.family for r in reqs), 'ragmeter.metrics.judge.ragas_more' in sys.modules)")
    assert _fresh(code).splitlines() == ["['judge', 'judge', 'judge'] False False False", "['judge', 'lexical'] True"]


def test_the_judge_package_gives_its_names_and_modules_on_first_use():
    code = ("import ragmeter.metrics.judge as j\n"
            "print(callable(j.fence_blocks), bool(j.PRESETS), j.geval.__name__)\n"
            "try:\n"
            "    j.no_such_thing\n"
            "except AttributeError as exc:\n"
            "    print('AttributeError', exc)")
    assert _fresh(code).splitlines() == [
        "True True ragmeter.metrics.judge.geval",
        "AttributeError module 'ragmeter.metrics.judge' has no attribute 'no_such_thing'"]


def test_a_hint_never_changes_what_a_name_resolves_to():
    for name in ("faithfulness", "token_f1", "ndcg@10", "ragas:context_recall"):
        assert registry.resolve(name).spec.name == registry.get_spec(name.split("@")[0]).name
