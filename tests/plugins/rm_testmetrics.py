"""Test-only metrics, loaded through $RAGMETER_PLUGINS (the user-facing plugin mechanism)."""

from __future__ import annotations

import os
import time

from ragmeter.core.schema import Score
from ragmeter.metrics.registry import _REGISTRY, MetricSpec, register_metric


def _len_ratio(samples, ctx):
    out = []
    for s in samples:
        ref = s.references[0]
        m = max(len(s.answer), len(ref))
        out.append(Score(min(len(s.answer), len(ref)) / m if m else 1.0))
    return out


def _slow(samples, ctx, delay=0.0):
    time.sleep(float(os.environ.get("RM_TEST_DELAY", delay)))
    return [Score((sum(map(ord, s.answer)) % 97) / 96) for s in samples]


def _flaky(samples, ctx):
    return [Score.missing("refused: odd id") if s.id.endswith(("1", "3", "5", "7", "9"))
            else Score(0.5) for s in samples]


if "t_len_ratio" not in _REGISTRY:
    register_metric(MetricSpec(name="t_len_ratio", family="test", fn=_len_ratio,
                               requires=("answer", "reference"), description="length ratio"))
    register_metric(MetricSpec(name="t_slow", family="test", fn=_slow, requires=("answer",),
                               batch_size=5, defaults={"delay": 0.0}, description="slow checksum"))
    register_metric(MetricSpec(name="t_flaky", family="test", fn=_flaky, requires=("answer",),
                               description="no value for odd ids"))
