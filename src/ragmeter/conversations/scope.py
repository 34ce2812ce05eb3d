"""Which samples of a run a metric scores when the run holds conversations, and the run's
intervals clustered by conversation.

A conversation run has two kinds of samples (:func:`ragmeter.conversations.model.to_samples`): one
per conversation and one per assistant turn. Metrics whose scope is ``conversation``
(:attr:`ragmeter.metrics.registry.MetricSpec.scope`) score the conversation samples (one value per
conversation); every other metric scores the turn samples (one value per assistant turn). A sample
of the other kind is not scored at all: it is neither a value nor a missing value of that metric. A
sample that is neither (a plain question/answer sample, or any sample of a run without
conversations) lacks the conversation a conversation metric needs: no value, reason "missing field:
conversation". Runs without conversations are otherwise untouched.

The values of one conversation's turns are not independent (the same assistant, the same user,
the same history), so the interval of a per-turn metric's run mean is cluster-robust: the mean is
the mean of all turn values, its variance the CR1 sandwich estimate over conversations
(``G/(G-1) * sum_g (sum_{i in g} (y_i - mean))^2 / N^2``, Liang & Zeger 1986; Cameron & Miller
2015), the interval ``mean +- t(G-1) * se``, clipped to the metric's range
(:mod:`ragmeter.stats.clustered`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.conversations.model import CONVERSATION_ID, CONVERSATION_KEY, TURN_KEY
from ragmeter.core.counts import count
from ragmeter.core.schema import Sample

#: the scope (:attr:`ragmeter.metrics.registry.MetricSpec.scope`) of metrics that score whole conversations
CONVERSATION_SCOPE = "conversation"


def _kind(s: Sample) -> str | None:
    meta = s.metadata
    if CONVERSATION_ID not in meta:
        return None
    if isinstance(meta.get(CONVERSATION_KEY), dict):
        return "conversation"
    return "turn" if TURN_KEY in meta else None


def has_conversations(samples: Sequence[Sample]) -> bool:
    """Whether ``samples`` hold a conversation (a run of conversations; for a stored run,
    :func:`ragmeter.conversations.view.run_has_conversations`)."""
    return any(_kind(s) == "conversation" for s in samples)


def describe(samples: Sequence[Sample]) -> str:
    """``"N samples"``, or for a conversation run ``"C conversations, T assistant turns"``."""
    if getattr(samples, "plain_rows", False):  # a streamed run's samples (run/stream.py): not read back
        return count(len(samples), "sample")
    kinds = [_kind(s) for s in samples]
    n_conv = kinds.count("conversation")
    if not n_conv:
        return count(len(samples), "sample")
    return f"{count(n_conv, 'conversation')}, {count(len(samples) - n_conv, 'assistant turn')}"


def for_scope(scope: str, samples: list[Sample]) -> list[Sample]:
    """The samples a metric of ``scope`` scores (all of them when the run has no conversations)."""
    if scope == CONVERSATION_SCOPE:  # a sample that is no conversation (and no turn of one) lacks the field
        return [s for s in samples if _kind(s) != "turn"]
    if not has_conversations(samples):
        return samples
    return [s for s in samples if _kind(s) != "conversation"]


def restrict(columns: Mapping[str, tuple[Any, list[str | None]]], scopes: Mapping[str, str],
             samples: Sequence[Sample]) -> dict[str, tuple[Any, list[str | None]]]:
    """``{key: (values, reasons)}`` keeping, per metric, only the samples it applies to
    (``scopes``: each metric's scope)."""
    if not has_conversations(samples):
        return dict(columns)
    kinds = [_kind(s) for s in samples]
    conv = np.array([k == "conversation" for k in kinds], dtype=bool)
    not_turn = np.array([k != "turn" for k in kinds], dtype=bool)
    out = {}
    for key, (values, reasons) in columns.items():
        mask = not_turn if scopes.get(key) == CONVERSATION_SCOPE else ~conv
        idx = np.flatnonzero(mask)
        out[key] = (np.asarray(values, dtype=np.float64)[idx], [reasons[i] for i in idx.tolist()])
    return out


def cluster_ci(values: np.ndarray, clusters: Sequence[str], *, level: float = 0.95,
               bounds: tuple[float, float] | None = None) -> dict[str, Any] | None:
    """Cluster-robust (CR1) interval of the mean of ``values`` (NaN = no value), as summary fields,
    or ``None`` with fewer than two clusters (:func:`ragmeter.stats.clustered.cluster_interval`;
    ``ci_method`` is ``cluster_robust``, or ``constant`` / ``clopper_pearson`` over the ``n_clusters``
    conversations when every conversation's mean is the same)."""
    from ragmeter.stats.clustered import cluster_interval

    ci = cluster_interval(values, clusters, level=level, bounds=bounds)
    if ci is None:
        return None
    x = np.asarray(values, dtype=np.float64)
    g = len({c for c, v in zip(clusters, x.tolist(), strict=True) if v == v})
    return {"ci_low": ci[0], "ci_high": ci[1], "ci_method": ci[2], "n_clusters": g}


def cluster_intervals(summary: Mapping[str, Any], columns: Mapping[str, tuple[Any, list[str | None]]],
                      scopes: Mapping[str, str], ranges: Mapping[str, tuple[float, float]],
                      samples: Sequence[Sample]) -> dict[str, dict[str, Any]]:
    """The cluster-robust interval (clusters: conversations) of every per-turn metric of a
    conversation run that has values in ``summary``, as ``{key: summary fields}`` to replace its
    interval with; conversation metrics keep theirs (one value per cluster). ``{}`` for a run
    without conversations."""
    if not has_conversations(samples):
        return {}
    turn_pos = [i for i, s in enumerate(samples) if _kind(s) != "conversation"]
    clusters = [str(samples[i].metadata.get(CONVERSATION_ID, samples[i].id)) for i in turn_pos]
    out = {}
    for key, (values, _reasons) in columns.items():
        if scopes.get(key) == CONVERSATION_SCOPE or key not in summary or not summary[key].n:
            continue
        vals = np.asarray(values, dtype=np.float64)[turn_pos]
        ci = cluster_ci(vals, clusters, bounds=ranges.get(key))
        if ci is not None:
            out[key] = ci
    return out
