"""``ragmeter arena``: stored runs -> pair samples -> pairwise verdicts through the runner -> the
arena record (:mod:`ragmeter.analysis.arena`) kept in the run it scored (tag ``arena``).

The items are the sample ids every run has; each pair of systems (in the order the runs are
given) gets one pair sample per item, ``ITEM::A vs B``, with A's answer as its answer and B's in
``metadata["arena"]``. The pairwise metric (``pairwise`` or ``deepeval:arena_g_eval``) asks the
judge in both orders, through the judge service of ``ragmeter eval`` (cache, budget, cost, precise
no-value reasons).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.analysis.arena import (
    EXTRA_KEY,
    N_BOOTSTRAP,
    SEED,
    TAG,
    PairOutcomes,
    analyse,
)
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Sample

#: the metrics an arena can use (registered in ``ragmeter.metrics.judge.pairwise``)
PAIRWISE_METRICS = ("pairwise", "deepeval:arena_g_eval")
_ALIASES = {"pairwise_preference": "pairwise", "arena_g_eval": "deepeval:arena_g_eval",
            "ArenaGEval": "deepeval:arena_g_eval", "deepeval.metrics.ArenaGEval": "deepeval:arena_g_eval"}


@dataclass
class ArenaInput:
    """The systems, their runs, the shared items and the pair samples to judge."""

    systems: list[str]
    run_ids: list[str]
    items: list[str]
    dropped: dict[str, int]
    samples: list[Sample]
    pairs: list[tuple[str, str]]
    question_mismatch: int


def metric_name(name: str | None) -> str:
    """The arena metric for ``--metric`` (default ``pairwise``).

    Raises:
        ConfigError: not a pairwise metric (naming the ones there are).
    """
    if name is None:
        return "pairwise"
    key = _ALIASES.get(name, name)
    if key not in PAIRWISE_METRICS:
        raise ConfigError(f"{name!r} is not a pairwise metric: an arena judges with one of "
                          f"{', '.join(PAIRWISE_METRICS)} (`ragmeter metrics --family judge` describes them)")
    return key


def _labels(runs: Sequence[Any]) -> list[str]:
    names = [r.name or r.id[:12] for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{n} ({r.id[:8]})" for n, r in zip(names, runs, strict=True)]


def arena_input(store: Any, refs: Sequence[str]) -> ArenaInput:
    """The pair samples of the runs ``refs`` (ids, prefixes, names, ``latest``).

    Raises:
        ConfigError: fewer than two runs, a run given twice, or no sample id every run has.
        StoreError: no such run.
    """
    if len(refs) < 2:
        raise ConfigError("an arena needs two runs or more: ragmeter arena RUN_A RUN_B [RUN_C ...]")
    runs = [store.get_run(r) for r in refs]
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"a run is given twice ({', '.join(refs)}): each system once")
    systems = _labels(runs)
    samples = [{s.id: s for s in store.run_samples(r.id)} for r in runs]
    items = [sid for sid in samples[0] if all(sid in m for m in samples[1:])]
    dropped = {label: len(m) - len(items) for label, m in zip(systems, samples, strict=True)}
    if not items:
        raise ConfigError(f"the runs share no sample id ({', '.join(f'{s}: {len(m)} samples' for s, m in zip(systems, samples, strict=True))}): "
                          "an arena compares the answers of the same items")
    mismatch = sum(1 for sid in items if len({m[sid].question for m in samples}) > 1)
    pairs = [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))]
    out: list[Sample] = []
    for i, j in pairs:
        for sid in items:
            sa, sb = samples[i][sid], samples[j][sid]
            meta = {"item": sid, "a": systems[i], "b": systems[j]}
            if sb.answer is not None:
                meta["answer_b"] = sb.answer
            out.append(Sample(id=f"{sid}::{systems[i]} vs {systems[j]}", question=sa.question, answer=sa.answer,
                              references=sa.references, metadata={"arena": meta}))
    return ArenaInput(systems, ids, items, dropped, out, [(systems[i], systems[j]) for i, j in pairs], mismatch)


def arena_options(options: dict[str, Any] | None, criteria: str | None) -> dict[str, Any]:
    """The run's options with the criteria (``arena_criteria``: a run option, not a metric
    parameter, so the metric's key stays its name)."""
    return {**(options or {}), **({"arena_criteria": criteria} if criteria is not None else {})}


def outcomes(inp: ArenaInput, scores: Sequence[Any]) -> list[PairOutcomes]:
    """Each pair's per-item outcomes from the pair samples' scores (in :attr:`ArenaInput.samples` order)."""
    n = len(inp.items)
    out = []
    for k, (a, b) in enumerate(inp.pairs):
        part = scores[k * n:(k + 1) * n]
        oc, pos, why = [], [], []
        for s in part:
            d = s.details or {}
            if s.value is None:
                oc.append(None)
                pos.append(None)
                why.append(s.reason)
            else:
                oc.append(d.get("outcome") or {1.0: "a", 0.0: "b"}.get(s.value, "tie"))
                pos.append(d.get("position"))
                why.append(None)
        out.append(PairOutcomes(a, b, oc, pos, why))
    return out


def run_arena(db: Any, refs: Sequence[str], *, metric: str | None = None, criteria: str | None = None,
              options: dict[str, Any] | None = None, name: str | None = None, n_bootstrap: int = N_BOOTSTRAP,
              level: float = 0.95, seed: int = SEED, progress: bool = False,
              skip_unavailable: bool = False) -> dict[str, Any]:
    """Judge every shared item of the runs ``refs`` pair by pair in both orders, store the run
    (tag ``arena``) with the record of :func:`ragmeter.analysis.arena.analyse` in
    ``Run.extra["arena"]``, and return that record with ``run_id``, ``status`` and ``incomplete``.

    Args:
        db: the store, or its URL / SQLite path (``None``: ``$RAGMETER_DB`` or the default).
        refs: the runs (ids, prefixes, names, ``latest``), one per system.
        metric: ``pairwise`` (default) or ``deepeval:arena_g_eval``.
        criteria: what makes an answer better (default: the metric's).
        options: run options, as ``ragmeter eval``'s (``judge``, ``judge_base_url``, ``judge_max_cost`` ...).
        name: the run's name.
        n_bootstrap, level, seed: the Bradley-Terry bootstrap and the intervals' level.
        progress: progress bars on stderr.
        skip_unavailable: a metric that cannot run gets no value instead of stopping the run.

    Raises:
        ConfigError: fewer than two runs, a run twice, no shared sample id, a metric that is not pairwise.
        StoreError: no such run.
        JudgeError: the judge did not answer its pre-flight request.
    """
    from ragmeter.io.readers import Dataset
    from ragmeter.run.runner import evaluate
    from ragmeter.store import Store, open_store

    store = db if isinstance(db, Store) else open_store(db, must_exist=True)

    key = metric_name(metric)
    inp = arena_input(store, refs)
    result = evaluate(Dataset(inp.samples, source=f"arena {' vs '.join(inp.systems)}"), [key],
                      db=store, options=arena_options(options, criteria), name=name or f"arena {' vs '.join(inp.systems)}",
                      progress=progress, skip_unavailable=skip_unavailable)
    column = next(iter(result.scores.values()))
    pairs = outcomes(inp, list(column))
    record = analyse(inp.systems, pairs, n_bootstrap=n_bootstrap, level=level, seed=seed)
    from ragmeter.metrics.judge.pairwise import DEFAULT_CRITERIA

    record.update(metric=key, criteria=criteria or DEFAULT_CRITERIA, systems=[{"label": s, "run_id": r}
                                                         for s, r in zip(inp.systems, inp.run_ids, strict=True)],
                  n_items=len(inp.items), dropped=inp.dropped, question_mismatch=inp.question_mismatch,
                  judge=result.extra.get("judge"))
    run = store.get_run(result.run_id)
    store.update_run(result.run_id, extra={**(run.extra or {}), EXTRA_KEY: record})
    store.tag_run(result.run_id, add=[TAG])
    return {**record, "run_id": result.run_id, "status": result.status, "incomplete": list(result.incomplete)}
