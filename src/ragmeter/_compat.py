"""The import paths of modules that moved keep working until :data:`REMOVED_IN`, with a warning:
``from ragmeter.schema import Sample`` gives ``ragmeter.core.schema``'s ``Sample`` and a
``FutureWarning`` saying to import ``ragmeter.core.schema`` instead.

A finder on ``sys.meta_path`` answers for each old dotted path (:data:`MOVED`; a moved package's
submodules follow it) with the module now at its new path: the same module object under both
names, so classes, functions and module state are shared. The first import of an old path in a
process warns, attributed to the importing line (``-W error::FutureWarning`` makes it an error).
The finder answers for nothing else, so imports of current paths never see it. Nothing in the
repository imports an old path (tests/test_architecture.py checks ``src/``,
tests/test_compat_paths.py the rest); docs/internals.md ("Moved modules") lists the table.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

#: the release that drops the old paths (the next minor release after 0.2.0; CHANGELOG.md)
REMOVED_IN = "0.3.0"

# -- moved: begin (old dotted path -> new dotted path)
MOVED: dict[str, str] = {
    "ragmeter.agent": "ragmeter.metrics.agent",
    "ragmeter.agent.config": "ragmeter.metrics.agent.config",
    "ragmeter.agent.formulas": "ragmeter.metrics.agent.formulas",
    "ragmeter.agent.lookup": "ragmeter.metrics.agent.lookup",
    "ragmeter.agent.matching": "ragmeter.metrics.agent.matching",
    "ragmeter.agent.stats": "ragmeter.metrics.agent.execution",
    "ragmeter.agreement": "ragmeter.stats.agreement",
    "ragmeter.analysis.meta_eval.run": "ragmeter.analysis.meta_eval.evaluation",
    "ragmeter.cli": "ragmeter.apps.cli",
    "ragmeter.config": "ragmeter.core.config",
    "ragmeter.context": "ragmeter.core.context",
    "ragmeter.correctness": "ragmeter.metrics.correctness",
    "ragmeter.correctness.calibration": "ragmeter.metrics.correctness.calibration",
    "ragmeter.correctness.methods": "ragmeter.metrics.correctness.methods",
    "ragmeter.correctness.metrics": "ragmeter.metrics.correctness.correct",
    "ragmeter.correctness.report": "ragmeter.analysis.correctness",
    "ragmeter.correctness.text": "ragmeter.core.text",
    "ragmeter.engines": "ragmeter.run.engines",
    "ragmeter.errors": "ragmeter.core.errors",
    "ragmeter.estimate": "ragmeter.run.estimate",
    "ragmeter.experiments": "ragmeter.analysis",
    "ragmeter.experiments.statistics": "ragmeter.stats.paired",
    "ragmeter.export": "ragmeter.apps.export.files",
    "ragmeter.files": "ragmeter.core.files",
    "ragmeter.language": "ragmeter.core.language",
    "ragmeter.meta_eval": "ragmeter.analysis.meta_eval",
    "ragmeter.metrics._lexical_bytes": "ragmeter.metrics.lexical.byte_tokens",
    "ragmeter.metrics._lexical_corpus": "ragmeter.metrics.lexical.corpus",
    "ragmeter.metrics._lexical_kernels": "ragmeter.metrics.lexical.string_kernels",
    "ragmeter.metrics._lexical_mt": "ragmeter.metrics.lexical.translation",
    "ragmeter.metrics._lexical_ngrams": "ragmeter.metrics.lexical.ngrams",
    "ragmeter.metrics._lexical_rouge": "ragmeter.metrics.lexical.rouge_metrics",
    "ragmeter.metrics.base": "ragmeter.metrics.registry",
    "ragmeter.metrics.composite": "ragmeter.analysis.composite",
    "ragmeter.metrics.consistency": "ragmeter.analysis.consistency",
    "ragmeter.metrics.judge.qrels": "ragmeter.analysis.qrels",
    "ragmeter.metrics.openai_evals.isolation": "ragmeter.sandbox.isolation",
    "ragmeter.metrics.openai_evals.items": "ragmeter.io.openai_evals.items",
    "ragmeter.metrics.openai_evals.registry_file": "ragmeter.io.openai_evals.registry_file",
    "ragmeter.metrics.openai_evals.run": "ragmeter.apps.openai_eval",
    "ragmeter.metrics.openai_evals.sandbox": "ragmeter.sandbox.python_grader",
    "ragmeter.metrics.retrieval.trec": "ragmeter.apps.trec",
    "ragmeter.metrics.retrieval.trec.readers": "ragmeter.io.trec",
    "ragmeter.openai_evals": "ragmeter.metrics.openai_evals",
    "ragmeter.openai_evals.registry": "ragmeter.metrics.openai_evals.basic",
    "ragmeter.pipeline.retrieval": "ragmeter.pipeline.retriever",
    "ragmeter.ppi": "ragmeter.stats.ppi",
    "ragmeter.provenance": "ragmeter.run.provenance",
    "ragmeter.pytest_plugin": "ragmeter.apps.pytest_plugin",
    "ragmeter.redact": "ragmeter.core.redact",
    "ragmeter.report": "ragmeter.apps.report",
    "ragmeter.retrieval": "ragmeter.apps.trec",
    "ragmeter.retrieval.engine": "ragmeter.metrics.retrieval.relevance",
    "ragmeter.retrieval.matching": "ragmeter.metrics.retrieval.matching",
    "ragmeter.retrieval.measures": "ragmeter.metrics.retrieval.measures",
    "ragmeter.retrieval.trec": "ragmeter.apps.trec",
    "ragmeter.retrieval.trec_blocks": "ragmeter.apps.trec.blocks",
    "ragmeter.retrieval.trec_io": "ragmeter.io.trec",
    "ragmeter.retrieval.trec_text": "ragmeter.apps.trec.text",
    "ragmeter.rows": "ragmeter.run.rows",
    "ragmeter.runner": "ragmeter.run.runner",
    "ragmeter.safejson": "ragmeter.core.safejson",
    "ragmeter.schema": "ragmeter.core.schema",
    "ragmeter.server": "ragmeter.apps.server",
    "ragmeter.simulate.run": "ragmeter.simulate.dialogue",
    "ragmeter.sinks": "ragmeter.apps.export",
    "ragmeter.thresholds": "ragmeter.core.thresholds",
}
# -- moved: end


def new_name(fullname: str) -> str | None:
    """The current dotted path of an old one (``None`` when ``fullname`` did not move)."""
    if fullname in MOVED:
        return MOVED[fullname]
    head = fullname
    while "." in head:
        head = head.rpartition(".")[0]
        if head in MOVED:
            return MOVED[head] + fullname[len(head):]
    return None


def deprecation_message(old: str, new: str) -> str:
    """What the first import of the old path ``old`` says."""
    return f"{old} is deprecated and will be removed in ragmeter {REMOVED_IN}; import {new} instead"


def _importer_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning issued by :meth:`_Alias.create_module` to the
    line that imports the old path. ``warnings`` itself steps over the import system's frozen
    frames (``importlib._bootstrap``); ``importlib.import_module`` is stepped over here too."""
    frame = sys._getframe(2)  # create_module's caller (the import system)
    level = 2
    while frame is not None:
        name = frame.f_code.co_filename
        if "importlib" in name and "_bootstrap" in name:
            frame = frame.f_back
            continue
        if frame.f_globals.get("__name__") != "importlib":
            return level
        level += 1
        frame = frame.f_back
    return level


#: ``(id(package), name)``: the import system is about to set ``package.name`` to an old path's
#: module, where the package holds something else under that name (see :class:`_KeepsNames`)
_KEEP: set[tuple[int, str]] = set()


class _KeepsNames(ModuleType):
    """A package whose old path is an alias: once an old child path is imported, the import system
    sets the child's module as an attribute of the (shared) package. Where the package already
    holds another object under that name (``ragmeter.metrics.agent.lookup`` is a function; the old
    ``ragmeter.agent.lookup`` is a module), that one attribute is kept."""

    def __setattr__(self, name: str, value: Any) -> None:
        key = (id(self), name)
        if key in _KEEP and isinstance(value, ModuleType):
            _KEEP.discard(key)
            return
        super().__setattr__(name, value)


def _keep_parent_attribute(fullname: str, module: ModuleType) -> None:
    parent_name, _, child = fullname.rpartition(".")
    parent = sys.modules.get(parent_name)
    if parent is None or child not in vars(parent) or vars(parent)[child] is module:
        return
    if isinstance(vars(parent)[child], ModuleType):
        return
    if type(parent) is ModuleType:
        parent.__class__ = _KeepsNames
    if isinstance(parent, _KeepsNames):
        _KEEP.add((id(parent), child))


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (imported once, under its own name)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        warnings.warn(deprecation_message(spec.name, self.target), FutureWarning, stacklevel=_importer_stacklevel())
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the old name's spec on the module: give it back its own
        old = module.__spec__.name if module.__spec__ is not None else None
        module.__spec__ = self._spec
        if old:
            _keep_parent_attribute(old, module)

    def get_code(self, fullname: str) -> Any:
        """The target's code object (``python -m OLD.PATH`` runs it through runpy)."""
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target)  # type: ignore[union-attr]

    def is_package(self, fullname: str) -> bool:
        spec = importlib.util.find_spec(self.target)
        return spec is not None and spec.submodule_search_locations is not None


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("ragmeter."):
            return None
        new = new_name(fullname)
        if new is None:
            return None
        loader = _Alias(new)
        return importlib.util.spec_from_loader(fullname, loader, is_package=loader.is_package(fullname))


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once): an old path must not be found by the path
    finder inside a moved package's new folder, which would load a second copy of the module."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
