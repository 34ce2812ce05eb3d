"""What a metric may use while scoring: options and shared services (embeddings, judge, ...).

Services are created lazily by factories that their modules register, so a run that asks for no
semantic metric never imports torch. A service may implement ``flush()`` (run after every metric's
``prepare``: do collected work in one batch), ``stats()`` (figures merged into the run summary)
and ``close()``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ragmeter.core.errors import ConfigError

_FACTORIES: dict[str, Callable[[ScoringContext], Any]] = {}
_PROVIDERS: dict[str, str] = {}


def register_service(name: str, factory: Callable[[ScoringContext], Any]) -> None:
    """Register how to build service ``name`` for a context (called once per context)."""
    _FACTORIES[name] = factory


def declare_service(name: str, module: str) -> None:
    """Declare that importing ``module`` registers service ``name``: a context imports it on the
    first request for that service, so the metrics that use a service need not import it first (and
    a run without them never does). Declared by the metric stage, which may import the services;
    this module names none of them."""
    _PROVIDERS.setdefault(name, module)


class ScoringContext:
    """Per-run state handed to every metric.

    Attributes:
        options: run-wide options (``embedding_model``, ``judge`` ...), from the config/CLI.
        store: the results store (for persistent caches), or ``None``.
        run_id: the run being scored, or ``None``.
        progress: a callable ``progress(description, total) -> advance(n)`` for long work.
    """

    def __init__(self, options: dict[str, Any] | None = None, store: Any = None,
                 run_id: str | None = None,
                 progress: Callable[[str, int], Callable[[int], None]] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})
        self.store = store
        self.run_id = run_id
        self.progress = progress or (lambda desc, total: (lambda n: None))
        self._services: dict[str, Any] = {}

    def service(self, name: str) -> Any:
        """The service ``name`` (embeddings, judge ...), created on first use."""
        if name not in self._services:
            if name not in _FACTORIES and name in _PROVIDERS:
                import importlib

                importlib.import_module(_PROVIDERS[name])  # registers the factory on import
            if name not in _FACTORIES:
                raise ConfigError(f"no service named {name!r} is available")
            self._services[name] = _FACTORIES[name](self)
        return self._services[name]

    def has_service(self, name: str) -> bool:
        return name in self._services

    def flush(self, skip: Collection[str] = ()) -> None:
        """Run every service's collected work (``skip``: services left for later)."""
        for name, svc in list(self._services.items()):
            if name not in skip and hasattr(svc, "flush"):
                svc.flush()

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, svc in self._services.items():
            if hasattr(svc, "stats"):
                out[name] = svc.stats()
        return out

    def close(self) -> None:
        for svc in self._services.values():
            if hasattr(svc, "close"):
                svc.close()
