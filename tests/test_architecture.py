"""The import graph of ``src/ragmeter`` has no cycles and respects the layer table of docs/internals.md.

Every ``import`` counts, also the ones inside functions (a lazy import is still a dependency), and so
does every string naming a ragmeter module (``importlib.import_module("ragmeter.x")``,
``__import__``, ``sys.modules["ragmeter.x"]``, a table of module names a loader walks): a string
import is an import the reader does not see, so the checker sees it instead.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "ragmeter"
DOC = Path(__file__).resolve().parents[1] / "docs" / "internals.md"

#: the stages of the data path (load -> plan -> score -> aggregate -> store -> present) and the
#: shared ground under them: the only names a row of the layer table may have
STAGES = ("core", "stats", "store", "load", "services", "score", "generate", "run", "aggregate", "monitor",
          "api", "present")
#: the modules allowed directly under src/ragmeter beside __init__, __main__ and _version
TOP_LEVEL_MODULES_MAX = 4
#: answers old import paths with the modules at their new ones: its table names modules as data
COMPAT = "ragmeter._compat"
_MODULE_STRING = re.compile(r"ragmeter(?:\.[A-Za-z_]\w*)+")


def layer_table(text: str) -> list[tuple[str, set[str]]]:
    """``[(stage, {units})]`` of the first table under "## Layers", lowest first; a unit is a
    top-level module or package of ``ragmeter`` (``ragmeter`` itself for its ``__init__``)."""
    section = text.split("## Layers", 1)[1]
    rows: list[tuple[str, set[str]]] = []
    seen_table = False
    for line in section.splitlines():
        if not line.startswith("|"):
            if seen_table:
                break
            continue
        seen_table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "stage" or not cells[0].strip("-: "):
            continue
        rows.append((cells[0], set(re.findall(r"`([\w.]+)`", cells[1]))))
    return rows


#: Lowest first. A unit may import units of its own layer or of layers before it, never after.
LAYERS: list[tuple[str, set[str]]] = layer_table(DOC.read_text(encoding="utf-8"))
LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def references(path: Path, mod: str) -> list[tuple[str, str]]:
    """``[(dotted name, how)]`` that module ``mod`` (file ``path``) refers to: ``import`` for import
    statements, ``string`` for a string constant that is a ``ragmeter.`` dotted path."""
    package = mod if _is_package(path) else mod.rsplit(".", 1)[0]
    out: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, "import") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            # `from pkg import submodule` depends on the submodule
            out += [(f"{base_name}.{a.name}", "import") for a in node.names] + [(base_name, "import")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            out.append((node.value, "string"))
    return [(t, how) for t, how in out if t == "ragmeter" or t.startswith("ragmeter.")]


def module_graph(root: Path = PKG, strings: bool = True) -> dict[str, set[str]]:
    """``{module: {ragmeter modules it imports}}`` from the source (nothing is imported). A string
    counts when it names a module exactly (``"ragmeter.metrics.registry"``); an import statement
    counts for the module it names or, for a name inside a module, that module. ``strings=False``:
    import statements only."""
    files = {_module_name(p): p for p in root.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            if "." not in name:
                return None
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for t, how in references(path, mod):
            if how == "string" and (not strings or mod == COMPAT or t not in files):
                continue
            r = resolve(t)
            if r and r != mod:
                graph[mod].add(r)
    return graph


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ragmeter"


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for a, targets in graph.items():
        for b in targets:
            if unit(a) != unit(b):
                out[unit(a)].add(unit(b))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    nodes = set(graph) | {b for bs in graph.values() for b in bs}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph()


def test_every_top_level_unit_has_a_layer(graph):
    missing = sorted({unit(m) for m in graph} - set(LAYER_OF))
    assert not missing, f"add these to LAYERS (and docs/internals.md): {missing}"


def test_no_cycle_between_top_level_subpackages(graph):
    assert cycles(unit_graph(graph)) == []


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a unit from a later layer, as ``a -> b (stage may not import stage)``."""
    return sorted(f"{a} -> {b} ({LAYERS[LAYER_OF[unit(a)]][0]} may not import {LAYERS[LAYER_OF[unit(b)]][0]})"
                  for a, targets in graph.items() for b in targets
                  if unit(a) != unit(b) and LAYER_OF[unit(b)] > LAYER_OF[unit(a)])


def test_layer_order(graph):
    assert violations(graph) == []


def test_every_row_of_the_layer_table_is_a_stage():
    names = [stage for stage, _ in LAYERS]
    assert names and all(n in STAGES for n in names), f"rows must be stages of the data path {STAGES}: {names}"
    assert len(names) == len(set(names))
    assert all(units for _, units in LAYERS)


def test_at_most_four_modules_at_the_top_of_the_package():
    top = sorted(p.name for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__", "_version"))
    assert len(top) <= TOP_LEVEL_MODULES_MAX, top


def test_nothing_inside_the_package_imports_an_old_path():
    from ragmeter._compat import new_name

    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    old = sorted(f"{mod}: {t}" for mod, path in files.items() if mod != COMPAT
                 for t, _ in references(path, mod) if new_name(t) is not None and t not in files)
    assert old == []


def test_no_cycle_between_modules():
    # a submodule importing its own package's __init__ (which re-exports it) is not a design cycle;
    # nor is a loader that names, as strings, the modules it loads on demand and that import it
    # (the registry and the metric families): those strings still count for the layer order
    graph = module_graph(strings=False)
    own = {a: {b for b in targets if not a.startswith(b + ".")} for a, targets in graph.items()}
    assert cycles(own) == []


def test_no_source_file_is_over_800_lines():
    long = {str(p.relative_to(SRC)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert long == {}


def test_the_checker_finds_a_cycle_and_a_layer_violation(tmp_path):
    pkg = tmp_path / "ragmeter"
    (pkg / "io").mkdir(parents=True)
    (pkg / "metrics").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "io" / "__init__.py").write_text("")
    (pkg / "metrics" / "__init__.py").write_text("")
    (pkg / "io" / "readers.py").write_text("def f():\n    from ragmeter.metrics.agent import parse\n")
    (pkg / "metrics" / "agent.py").write_text("from ..io import readers\n")
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        g = module_graph(pkg)
    finally:
        SRC = saved
    assert g["ragmeter.io.readers"] == {"ragmeter.metrics.agent"}
    assert g["ragmeter.metrics.agent"] == {"ragmeter.io.readers", "ragmeter.io"}
    assert cycles(unit_graph(g)) == [["io", "metrics"]]
    assert LAYER_OF["metrics"] > LAYER_OF["io"]


def test_the_checker_finds_string_imports_and_sys_modules_lookups(tmp_path):
    """A planted module of the load stage reaches three later stages without an import statement:
    the checker reports each one."""
    pkg = tmp_path / "ragmeter"
    for sub in ("io", "metrics", "run", "apps", "apps/cli"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "metrics" / "registry.py").write_text("")
    (pkg / "run" / "runner.py").write_text("")
    (pkg / "io" / "readers.py").write_text(
        "import importlib\nimport sys\n\n\n"
        "def cli():\n    return importlib.import_module('ragmeter.apps.cli')\n\n\n"
        "def registry():\n    return sys.modules.get('ragmeter.metrics.registry')\n\n\n"
        "def runner():\n    return __import__('ragmeter.run.runner')\n\n\n"
        "def prose():\n    return 'see ragmeter.run.runner for details'\n")
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        g = module_graph(pkg)
    finally:
        SRC = saved
    assert g["ragmeter.io.readers"] == {"ragmeter.apps.cli", "ragmeter.metrics.registry", "ragmeter.run.runner"}
    found = violations({"ragmeter.io.readers": g["ragmeter.io.readers"]})
    assert [v.split(" (")[0] for v in found] == [
        "ragmeter.io.readers -> ragmeter.apps.cli", "ragmeter.io.readers -> ragmeter.metrics.registry",
        "ragmeter.io.readers -> ragmeter.run.runner"]
    assert "load may not import present" in found[0]


# ---- metrics only score -------------------------------------------------------------------------
# DESIGN.md: "a metric never reads files, never prints, never starts a process and never touches the
# database; the runner gives it what it needs and stores what it returns". What a metric needs beyond
# its samples (encoders, the judge, the python-grader sandbox, where relevance labels are kept) it
# asks its scoring context for: ``ctx.service(name)``.

#: modules no module of ``ragmeter.metrics`` may import (statements anywhere in the file, and
#: ``importlib.import_module`` / ``__import__`` / module-path strings), with why
FORBIDDEN_IN_METRICS = {
    "ragmeter.store": "the store: a metric touches no database (its services keep what must be kept)",
    "ragmeter.io": "the file readers: the runner gives a metric its samples",
    "ragmeter.apps": "the apps: a metric presents nothing",
    "subprocess": "child processes: a metric starts none (the sandbox service does)",
    "multiprocessing": "child processes: a metric starts none",
    "rich": "the terminal: a metric prints nothing",
}
#: modules under a forbidden one that read no file: they turn values into records
ALLOWED_IN_METRICS = ("ragmeter.io.traces",)
#: builtins a metric may not call: file reads and writes, the terminal
FORBIDDEN_BUILTINS = {"open": "opens a file", "print": "prints", "input": "reads the terminal"}
#: ``os`` functions that start or signal processes or run a shell
FORBIDDEN_OS_CALLS = {"system", "popen", "fork", "forkpty", "kill", "killpg", "posix_spawn", "posix_spawnp",
                      "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
                      "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"}
#: a call that names a provider module as data (the context imports it, the metric does not)
DECLARATIONS = {"declare_service"}


def _forbidden(name: str) -> str | None:
    if any(name == a or name.startswith(a + ".") for a in ALLOWED_IN_METRICS):
        return None
    return next((f for f in FORBIDDEN_IN_METRICS if name == f or name.startswith(f + ".")), None)


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_call_name(func.value)}.{func.attr}"
    return ""


def metric_contract_violations(root: Path = PKG) -> list[str]:
    """Every import, call and module string of ``root/metrics`` that breaks "metrics only score", as
    ``path:line: what (why)``."""
    out: list[tuple[str, int, str]] = []
    base = root.parent
    for path in sorted((root / "metrics").rglob("*.py")):
        rel = path.relative_to(base)
        mod = ".".join(rel.with_suffix("").parts)
        package = mod.rsplit(".", 1)[0] if path.name != "__init__.py" else mod.removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # strings a call takes as data (a declaration) or that an import call reports already
        declared = {id(a) for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and _call_name(node.func).rsplit(".", 1)[-1] in (*DECLARATIONS, "import_module", "__import__")
                    for a in node.args}

        def bad(name: str, line: int, how: str, rel: Path = rel) -> None:
            f = _forbidden(name)
            if f is not None:
                out.append((str(rel), line, f"{how} {name} ({FORBIDDEN_IN_METRICS[f]})"))

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bad(a.name, node.lineno, "imports")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base_name = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                names = [base_name] if node.module else []
                names += [f"{base_name}.{a.name}" for a in node.names]
                for n in dict.fromkeys(names):
                    if _forbidden(n):
                        bad(n, node.lineno, "imports")
                        break
            elif isinstance(node, ast.Call):
                name = _call_name(node.func)
                if name in FORBIDDEN_BUILTINS:
                    out.append((str(rel), node.lineno, f"calls {name}() ({FORBIDDEN_BUILTINS[name]})"))
                elif name.startswith("os.") and name[3:] in FORBIDDEN_OS_CALLS:
                    out.append((str(rel), node.lineno, f"calls {name}() (starts or signals a process)"))
                elif name in ("importlib.import_module", "import_module", "__import__") and node.args \
                        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    bad(node.args[0].value, node.lineno, "imports")
            elif isinstance(node, ast.Attribute) and _call_name(node) in ("sys.stdout", "sys.stderr"):
                out.append((str(rel), node.lineno, f"writes {_call_name(node)} (prints)"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in declared \
                    and _MODULE_STRING.fullmatch(node.value):
                bad(node.value, node.lineno, "names the module")
    return [f"{path}:{line}: {what}" for path, line, what in sorted(set(out))]


def test_metrics_only_score():
    """No metric module reads files, prints, starts a process or touches the store."""
    assert metric_contract_violations() == []


def test_the_metrics_contract_finds_a_planted_violation(tmp_path):
    """A metric module of a planted package that imports the store (and one that does the other
    forbidden things) makes the contract fail; reading traces and declaring a service do not."""
    pkg = tmp_path / "ragmeter"
    (pkg / "metrics" / "family").mkdir(parents=True)
    for init in (pkg, pkg / "metrics", pkg / "metrics" / "family"):
        (init / "__init__.py").write_text("")
    (pkg / "metrics" / "family" / "stored.py").write_text("import ragmeter.store\n")
    assert metric_contract_violations(pkg) == [
        "ragmeter/metrics/family/stored.py:1: imports ragmeter.store (the store: a metric touches no "
        "database (its services keep what must be kept))"]

    (pkg / "metrics" / "family" / "busy.py").write_text(
        "import importlib\nimport os\nimport sys\n"
        "from ragmeter.core.context import declare_service\n"
        "from ragmeter.io.traces import parse_trace\n"
        "from ...io.readers import load\n"
        "from ragmeter import store\n\n"
        "declare_service('labels', 'ragmeter.store.relevance_labels')\n\n\n"
        "def score(samples, ctx):\n"
        "    import subprocess\n"
        "    from rich.console import Console\n"
        "    importlib.import_module('ragmeter.store.models')\n"
        "    text = open('qrels.txt').read()\n"
        "    print(text)\n"
        "    sys.stdout.write(text)\n"
        "    os.system('true')\n"
        "    return 'ragmeter.io.readers'\n")
    found = [v.split(" (")[0] for v in metric_contract_violations(pkg) if "busy.py" in v]
    assert found == [
        "ragmeter/metrics/family/busy.py:6: imports ragmeter.io.readers",
        "ragmeter/metrics/family/busy.py:7: imports ragmeter.store",
        "ragmeter/metrics/family/busy.py:13: imports subprocess",
        "ragmeter/metrics/family/busy.py:14: imports rich.console",
        "ragmeter/metrics/family/busy.py:15: imports ragmeter.store.models",
        "ragmeter/metrics/family/busy.py:16: calls open()",
        "ragmeter/metrics/family/busy.py:17: calls print()",
        "ragmeter/metrics/family/busy.py:18: writes sys.stdout",
        "ragmeter/metrics/family/busy.py:19: calls os.system()",
        "ragmeter/metrics/family/busy.py:20: names the module ragmeter.io.readers",
    ]
