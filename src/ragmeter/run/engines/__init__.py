"""Execution engines: where the runner's metric batches are computed.

``local`` (the default) scores in this process; ``ray`` (:mod:`ragmeter.run.engines.ray_engine`,
``pip install 'ragmeter-eval[ray]'``) spreads blocks of samples over a Ray runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragmeter.run.engines.base import Engine

ENGINES = ("local", "ray")


def check_engine(engine: str) -> str:
    """``engine`` if it is one of :data:`ENGINES`.

    Raises:
        ConfigError: an unknown engine (exit status 2), before any work is done.
    """
    from ragmeter.core.errors import ConfigError

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}: use local or ray")
    return engine


def open_engine(engine: str, address: str | None = None, store_url: str | None = None) -> Engine:
    """The engine a run's config names, ready to score: ``local`` (a bad ``RAGMETER_START_METHOD``
    stops the run here, before any work) or ``ray`` (joins ``address``, or starts a local runtime;
    its workers read cached embeddings from ``store_url``).

    Raises:
        ConfigError: an unknown engine, a bad start method, Ray missing or unreachable.
    """
    check_engine(engine)
    if engine == "ray":
        from ragmeter.run.engines.ray_engine import RayEngine

        return RayEngine(address, store_url)
    from ragmeter.run.engines.forked import start_method
    from ragmeter.run.engines.local import LocalEngine

    start_method()
    return LocalEngine()
