"""The system under test of ``benchmarks/simulate.py``: a Python callable that answers in a set time.

The benchmark calls :func:`reply` in its own process, and a fresh ``ragmeter simulate`` process
calls it as ``--target python:_sim_target:reply`` (with this folder on ``PYTHONPATH``), so both
ways hold the same conversations. The reply takes ``RAGMETER_BENCH_TARGET_DELAY`` seconds
(default 0.2), read at each call.
"""

from __future__ import annotations

import os
import time

DELAY_ENV = "RAGMETER_BENCH_TARGET_DELAY"


def reply(messages: list[dict[str, str]]) -> str:
    """Wait the set delay, then echo the last message."""
    time.sleep(float(os.environ.get(DELAY_ENV, "0.2")))
    return f"Here is what I know about that: {messages[-1]['content']}"
