"""The import graph of ``src/ragmeter`` has no cycles and respects the layer order in docs/internals.md.

Every ``import`` counts, also the ones inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "ragmeter"

#: Lowest first. A unit may import units of its own layer or of layers before it, never after.
#: The data flows load -> plan -> score -> aggregate -> store -> present; the import order differs
#: where a later stage is a service of an earlier one (scoring caches judge verdicts and embeddings
#: in the store, so the store sits low). docs/internals.md explains each layer.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"_version", "core", "stats"}),
    ("store", {"store"}),
    ("load", {"io"}),
    ("services", {"retrieval", "embed", "llm"}),
    ("agent", {"agent"}),
    ("score", {"metrics"}),
    ("correctness", {"correctness"}),
    ("openai_evals", {"openai_evals"}),
    ("human", {"human"}),
    ("pipeline", {"pipeline"}),
    ("golden", {"golden"}),
    ("plan", {"run"}),
    ("aggregate", {"analysis", "experiments", "export", "meta_eval"}),
    ("monitor", {"monitor"}),
    ("api", {"ragmeter", "_compat"}),
    ("present", {"report", "server", "cli", "testing", "sinks", "pytest_plugin"}),
]
LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def module_graph(root: Path = PKG) -> dict[str, set[str]]:
    """``{module: {ragmeter modules it imports}}`` from the source (nothing is imported)."""
    files = {_module_name(p): p for p in root.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            if "." not in name:
                return None
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if _is_package(path) else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base_name = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                # `from pkg import submodule` depends on the submodule
                targets = [f"{base_name}.{a.name}" for a in node.names] + [base_name]
            for t in targets:
                if t == "ragmeter" or t.startswith("ragmeter."):
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


def test_layer_order(graph):
    wrong = sorted(f"{a} -> {b} ({LAYERS[LAYER_OF[unit(a)]][0]} may not import {LAYERS[LAYER_OF[unit(b)]][0]})"
                   for a, targets in graph.items() for b in targets
                   if unit(a) != unit(b) and LAYER_OF[unit(b)] > LAYER_OF[unit(a)])
    assert wrong == []


def test_no_cycle_between_modules(graph):
    # a submodule importing its own package's __init__ (which re-exports it) is not a design cycle
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
