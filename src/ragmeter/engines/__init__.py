"""Execution engines: where the runner's metric batches are computed.

``local`` (the default) scores in this process; ``ray`` (:mod:`ragmeter.engines.ray_engine`,
``pip install 'ragmeter-eval[ray]'``) spreads blocks of samples over a Ray runtime.
"""

from __future__ import annotations

ENGINES = ("local", "ray")
