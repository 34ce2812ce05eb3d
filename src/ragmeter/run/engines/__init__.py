"""Execution engines: where the runner's metric batches are computed.

``local`` (the default) scores in this process; ``ray`` (:mod:`ragmeter.run.engines.ray_engine`,
``pip install 'ragmeter-eval[ray]'``) spreads blocks of samples over a Ray runtime.
"""

from __future__ import annotations

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
