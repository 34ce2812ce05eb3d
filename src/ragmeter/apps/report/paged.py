"""The dashboard's views of a run, fast on large runs: aggregates built once, samples read by page.

A run's aggregates (per-metric means, CIs, histograms, the dataset summary, composites, hints) and
its sample orders (worst first, dataset order, worst first per metric) are computed once per run
*version* and kept in the store's ``kv`` table (namespace ``run_view``, key = the run id), and in
a small in-process cache. The version changes when the run's status, finish time or number of
stored scores changes, so a run still going is recomputed as its scores arrive and a finished run
never again. A page of samples then reads only that page's rows of ``run_samples`` and ``scores``.

Builds are serialised by one lock, so many concurrent first requests cost one build's memory.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragmeter.apps.report import data
from ragmeter.apps.report.arena import arena_view
from ragmeter.apps.report.meta_eval import meta_eval_view
from ragmeter.apps.report.metric_views import is_live, metric_views, run_header
from ragmeter.apps.report.panel import panel_view
from ragmeter.apps.report.samples import quality as sample_quality
from ragmeter.apps.report.samples import sample_detail, sample_row
from ragmeter.apps.report.sections import grids_for, jsonable, reliability_for
from ragmeter.core.errors import StoreError
from ragmeter.core.schema import FIELD_PRESENT, Sample
from ragmeter.store import Store
from ragmeter.store.models import Run

NAMESPACE = "run_view"
COMPARE_NAMESPACE = "compare_view"
#: bump when the cached record's layout or figures change: older records are then rebuilt
#: (2: all-equal paired differences of turns compared per conversation get the interval of
#: docs/statistics.md, not a zero-width one).
VIEW_FORMAT = 2
#: the most sample rows one page (HTML or JSON) may ask for.
MAX_PAGE = 1000
_MEMORY_SLOTS = 8

#: one build at a time: concurrent first requests wait for it instead of each loading the run.
BUILD_LOCK = threading.Lock()
_cache: OrderedDict[tuple[str, str, str], CachedRun] = OrderedDict()
_search_cache: OrderedDict[tuple[str, str, str, str], np.ndarray] = OrderedDict()
_cache_lock = threading.Lock()
_compared: dict[tuple[str, ...], dict[str, Any]] = {}
#: requests loading a run's view now, and whether one has been given its view: the warm-up
#: (:func:`warm`) starts no build while a request waits, so a request never queues behind the
#: build of a run it did not ask for
_asking = 0
_asking_cond = threading.Condition()
_answered = threading.Event()


@dataclass
class CachedRun:
    """A run's cached view (everything but the sample rows) and its sample orders (arrays of
    ``run_samples`` primary keys)."""

    run: Run
    version: str
    view: dict[str, Any]
    orders: dict[str, np.ndarray]
    positions: np.ndarray  # positions in dataset order, aligned with orders["position"]


class _Ref:
    """Stands in for a :class:`Sample` where only its id is read (aggregation)."""

    __slots__ = ("id",)

    def __init__(self, sid: str) -> None:
        self.id = sid


def _has(key: str) -> Any:
    return lambda raw: raw.get(key) is not None


#: FIELD_PRESENT read off a sample's stored dict (dumped with ``exclude_none``).
_RAW_PRESENT: dict[str, Any] = {
    "question": _has("question"), "answer": _has("answer"), "contexts": _has("contexts"),
    "relevant": _has("relevant"), "label": _has("label"), "trace": _has("trace"),
    "reference": lambda raw: bool(raw.get("references")),
    "negative_reference": lambda raw: bool(raw.get("negative_references")),
    "context_texts": lambda raw: raw.get("contexts") is not None and all(
        isinstance(c, Mapping) and c.get("text") is not None for c in raw["contexts"]),
}


class _OneRun:
    """The store as composite scoring sees it while one run is built: its score table is the one
    already loaded (values and reasons; composites read no details), not read again per preset."""

    def __init__(self, store: Store, run: Run, table: Mapping[str, Any]) -> None:
        self._store, self._run, self._table = store, run, table

    def score_table(self, run_id: str) -> Mapping[str, Any]:
        return self._table if run_id == self._run.id else self._store.score_table(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


# ---- cache --------------------------------------------------------------------------------------
def cached_run(store: Store, ref: str) -> CachedRun:
    """The run named by ``ref`` (matched exactly, see :meth:`Store.find_run`) with its view,
    built now if the store holds none for its current version.

    Raises:
        StoreError: no such run.
    """
    with answering():
        return _cached_run(store, ref)


@contextmanager
def answering() -> Iterator[None]:
    """Hold back the warm-up (:func:`warm`) while a request is answered: a page's view, and the
    rest of the page after it (its rows, rendering), never share the CPU with the build of a run
    nobody asked for yet."""
    global _asking
    with _asking_cond:
        _asking += 1
    try:
        yield
    finally:
        with _asking_cond:
            _asking -= 1
            _asking_cond.notify_all()
        _answered.set()


def first_page_answered(timeout: float | None = None) -> bool:
    """Wait until a request has been given its run's view (:func:`answering` ended), at most
    ``timeout`` seconds; whether one has."""
    return _answered.wait(timeout)


def _cached_run(store: Store, ref: str) -> CachedRun:
    run = store.find_run(ref)
    version = f"{VIEW_FORMAT}|{store.run_version(run)}"
    key = (store.url, run.id, version)
    hit = _remember(key)
    if hit is not None:
        return hit
    with BUILD_LOCK:
        hit = _remember(key)
        if hit is not None:
            return hit
        rec = store.kv_get(NAMESPACE, run.id)
        if not (isinstance(rec, Mapping) and rec.get("version") == version):
            rec = _build(store, run, version)
            store.kv_put(NAMESPACE, run.id, rec)
        entry = _decode(run, rec)
        _remember(key, entry)
        return entry


def _remember(key: tuple[str, str, str], entry: CachedRun | None = None) -> CachedRun | None:
    with _cache_lock:
        if entry is None:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
            return hit
        # an older version of the same run is of no use any more
        for k in [k for k in _cache if k[:2] == key[:2]]:
            del _cache[k]
        _cache[key] = entry
        while len(_cache) > _MEMORY_SLOTS:
            _cache.popitem(last=False)
        return entry


def clear_memory_cache() -> None:
    """Forget the in-process copies (the store's records stay)."""
    with _cache_lock:
        _cache.clear()
        _search_cache.clear()
        _compared.clear()


def _pack(a: np.ndarray) -> dict[str, str]:
    dtype = "<i4" if a.size == 0 or int(a.max()) < 2**31 else "<i8"
    return {"dtype": dtype, "b64": base64.b64encode(a.astype(dtype).tobytes()).decode("ascii")}


def _unpack(rec: Mapping[str, str]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(rec["b64"]), dtype=rec["dtype"]).astype(np.int64)


def _decode(run: Run, rec: Mapping[str, Any]) -> CachedRun:
    orders = {k: _unpack(v) for k, v in rec["orders"].items()}
    return CachedRun(run=run, version=rec["version"], view=rec["view"], orders=orders,
                     positions=_unpack(rec["positions"]))


def _build(store: Store, run: Run, version: str) -> dict[str, Any]:
    """Aggregate a run from streamed rows (no whole-run objects kept) into the cached record."""
    if run.n_samples > data.LARGE_RUN:  # from the score columns, in bulk (data.LARGE_RUN: one setting)
        from ragmeter.apps.report import paged_columns

        return paged_columns.build(store, run, version, _OneRun, _pack)
    table = store.score_values(run.id)
    pks: list[int] = []
    positions: list[int] = []
    ids: list[str] = []
    fields = dict.fromkeys(FIELD_PRESENT, 0)
    n_ctx: list[int] = []
    n_rel: list[int] = []
    # samples are stored as dumped with exclude_none, so presence can be read off the raw dict
    # (much cheaper than validating 100k samples); a field this module does not know is decided by
    # validating the sample as the report does
    validate = any(f not in _RAW_PRESENT for f in FIELD_PRESENT)
    for pk, pos, sid, raw in store.iter_sample_rows(run.id):
        pks.append(pk)
        positions.append(pos)
        ids.append(sid)
        if validate:
            sample = Sample.model_validate(raw)
            for f, present in FIELD_PRESENT.items():
                fields[f] += bool(present(sample))
        else:
            for f in FIELD_PRESENT:
                fields[f] += _RAW_PRESENT[f](raw)
        if raw.get("contexts") is not None:
            n_ctx.append(len(raw["contexts"]))
        if raw.get("relevant") is not None:
            n_rel.append(len(raw["relevant"]))
    by_pos = np.argsort(np.asarray(positions, dtype=np.int64), kind="stable")
    pk_arr = np.asarray(pks, dtype=np.int64)[by_pos]
    pos_arr = np.asarray(positions, dtype=np.int64)[by_pos]
    ids = [ids[i] for i in by_pos]
    summary = store.run_summary(run)
    live = is_live(run, summary)
    metas = metric_views(run, summary, [_Ref(s) for s in ids], table, live)

    # worst first: the same key as the report's table (samples.sort_rows)
    banded = [m for m in metas if m["banded"]]
    quality = []
    for sid in ids:
        vals = {}
        for m in banded:
            sc = table.get(m["key"], {}).get(sid)
            vals[m["key"]] = sc.value if sc is not None else None
        quality.append(sample_quality(vals, banded))
    order = sorted(range(len(ids)), key=lambda i: (quality[i] is None,
                                                   quality[i] if quality[i] is not None else 0.0, i))
    orders = {"position": _pack(pk_arr), "worst": _pack(pk_arr[np.asarray(order, dtype=np.int64)])}
    for m in metas:
        col = table.get(m["key"], {})
        sign = 1.0 if m["higher_is_better"] else -1.0
        vals = [col[s].value if s in col else None for s in ids]
        o = sorted(range(len(ids)), key=lambda i: (vals[i] is None,
                                                   sign * vals[i] if vals[i] is not None else 0.0, i))
        orders["metric:" + m["key"]] = _pack(pk_arr[np.asarray(o, dtype=np.int64)])

    extra = run.extra or {}
    dataset = {
        "source": run.dataset_source, "fingerprint": run.dataset_fingerprint,
        "n_samples": run.n_samples, "n_stored": len(ids),
        "fields": {k: v for k, v in fields.items() if k != "context_texts"},
        "mean_contexts": float(np.mean(n_ctx)) if n_ctx else None,
        "mean_relevant": float(np.mean(n_rel)) if n_rel else None,
        "skipped_rows": extra.get("skipped_rows"),
    }
    from ragmeter.apps.report.paged_columns import run_view_fields

    view = run_view_fields(run, live, dataset, metas, len(ids), _OneRun(store, run, table))
    return {"version": version, "view": view, "orders": orders, "positions": _pack(pos_arr)}



# ---- views --------------------------------------------------------------------------------------
def warm(store: Store, n_runs: int = 3, wait_s: float = 0.0) -> list[str]:
    """Build (or load) the cached views of the ``n_runs`` newest runs; returns their ids. Errors
    are skipped: warming is only ever a head start for the first request. It begins after
    ``wait_s`` seconds or once a request has had its view, whichever comes first, and starts no
    build while a request is loading a view (that request is answered first)."""
    done: list[str] = []
    _answered.wait(wait_s)
    try:
        runs = store.list_runs(n_runs)
    except Exception:  # noqa: BLE001 - an unreadable store shows its error on the first request
        return done
    for run in runs:
        with _asking_cond:
            _asking_cond.wait_for(lambda: _asking == 0)
        try:
            _cached_run(store, run.id)
            done.append(run.id)
        except Exception:  # noqa: BLE001 - see above
            continue
    return done


def run_summary(store: Store, ref: str) -> tuple[CachedRun, dict[str, Any]]:
    """A run's report content without sample rows (what ``GET /api/runs/{run}`` returns)."""
    c = cached_run(store, ref)
    view = dict(c.view)
    view["grids"] = grids_for(store, c.run.id)  # grid records live apart from the run
    return c, view


def _order(c: CachedRun, sort: str, metric: str | None) -> np.ndarray:
    if sort == "position":
        return c.orders["position"]
    if metric:
        try:
            return c.orders["metric:" + metric]
        except KeyError:
            known = ", ".join(m["key"] for m in c.view["metrics"]) or "none"
            raise StoreError(f"run {c.run.id} has no metric {metric!r} (its metrics: {known})") from None
    return c.orders["worst"]


def _search(store: Store, c: CachedRun, q: str) -> np.ndarray:
    """Primary keys of the samples whose id, question, answer or reference contains ``q``
    (case-insensitive); streamed, and remembered per run version."""
    key = (store.url, c.run.id, c.version, q)
    with _cache_lock:
        hit = _search_cache.get(key)
    if hit is not None:
        return hit
    needle = q.lower()
    found = []
    for pk, _pos, sid, raw in store.iter_sample_rows(c.run.id):
        refs = raw.get("references") or []
        texts = (sid, raw.get("question"), raw.get("answer"), refs[0] if refs else None)
        if any(isinstance(t, str) and needle in t.lower() for t in texts):
            found.append(pk)
    arr = np.asarray(found, dtype=np.int64)
    with _cache_lock:
        _search_cache[key] = arr
        while len(_search_cache) > 32:
            _search_cache.popitem(last=False)
    return arr


def samples_page(store: Store, ref: str, *, offset: int = 0, limit: int = 100, sort: str = "worst",
                 metric: str | None = None, q: str | None = None) -> dict[str, Any]:
    """One page of a run's per-sample rows: ``sort`` is ``worst`` (lowest score first; with
    ``metric``, lowest on that metric in its direction) or ``position``; ``q`` keeps samples whose
    id, question, answer or reference contains it. Reads only the page's rows.

    Raises:
        StoreError: no such run, or no such metric in it.
        ValueError: ``limit`` above :data:`MAX_PAGE` or a negative ``offset``.
    """
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise ValueError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
    c = cached_run(store, ref)
    order = _order(c, sort, metric)
    if q:
        order = order[np.isin(order, _search(store, c, q))]
    page = [int(p) for p in order[offset:offset + limit]]
    items = _rows(store, c, page)
    return {"run_id": c.run.id, "total": int(order.size), "offset": offset, "limit": limit,
            "sort": sort, "metric": metric, "items": items}


def _rows(store: Store, c: CachedRun, pks: Sequence[int]) -> list[dict[str, Any]]:
    got = store.samples_by_pk(c.run.id, pks)
    table = store.sample_scores(c.run.id, [got[p][1].id for p in pks if p in got])
    metas = c.view["metrics"]
    return [sample_row(got[p][1], got[p][0], table, metas) for p in pks if p in got]


def run_page(store: Store, ref: str, *, offset: int = 0, limit: int = 500) -> dict[str, Any]:
    """A run's report content with one page of its worst-first sample rows (the run page)."""
    c, view = run_summary(store, ref)
    order = c.orders["worst"]
    view["samples"] = _rows(store, c, [int(p) for p in order[offset:offset + limit]])
    view["samples_offset"] = offset
    # judge reliability cards change with labels collected after the run: read them per request
    view["reliability"] = reliability_for(store, c.run.id)
    view["meta_eval"] = meta_eval_view(store, c.run)  # a meta-evaluation run's section
    view["arena"] = arena_view(c.run)  # an arena run's section
    view["panel"] = panel_view(c.run)  # a run judged by a panel of judges
    return view


def sample_view(store: Store, ref: str, sample_id: str) -> dict[str, Any]:
    """One sample with its contexts and every metric's verdict, and its neighbours' ids.

    Raises:
        StoreError: no such run, or the run has no sample with this id.
    """
    c = cached_run(store, ref)
    hit = store.sample_by_id(c.run.id, sample_id)
    if hit is None:
        raise StoreError(f"run {c.run.id} has no sample {sample_id[:200]!r}")
    _pk, pos, sample = hit
    i = int(np.searchsorted(c.positions, pos))
    order = c.orders["position"]
    near = {k: int(order[j]) for k, j in (("prev", i - 1), ("next", i + 1)) if 0 <= j < order.size}
    names = store.sample_ids_by_pk(c.run.id, list(near.values())) if near else {}
    table = store.sample_scores(c.run.id, [sample.id])
    detail = sample_detail(sample, table, c.view["metrics"])
    return {"run": run_header(c.run), "position": pos, "n_samples": int(order.size),
            "prev_id": names.get(near["prev"]) if "prev" in near else None,
            "next_id": names.get(near["next"]) if "next" in near else None, **detail}


def compare(store: Store, refs: Sequence[str], *, limit: int = 100) -> dict[str, Any]:
    """:func:`ragmeter.apps.report.data.compare_view` of runs matched exactly (never as a pattern),
    built once per set of run versions (with the :data:`MAX_PAGE` largest sample changes) and kept
    in the store's ``kv`` (namespace ``compare_view``) and in memory; ``limit`` rows of
    ``sample_changes`` are returned.

    Raises:
        StoreError: a run does not exist, or fewer than two distinct runs were given.
    """
    if not 0 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be 0..{MAX_PAGE}")
    runs: list[Run] = []
    for ref in refs:
        run = store.find_run(ref)
        if all(run.id != r.id for r in runs):
            runs.append(run)
    if len(runs) < 2:
        raise StoreError("comparing needs at least two distinct runs")
    ids = ",".join(r.id for r in runs)
    version = f"{VIEW_FORMAT}|" + ";".join(store.run_version(r) for r in runs)
    key = (store.url, ids, version)
    with BUILD_LOCK:
        view = _compared.get(key)
        if view is None:
            rec = store.kv_get(COMPARE_NAMESPACE, ids) if len(ids) <= 300 else None
            if isinstance(rec, Mapping) and rec.get("version") == version:
                view = rec["view"]
            else:
                view = jsonable(data.compare_view(store, [r.id for r in runs], max_samples=MAX_PAGE))
                if len(ids) <= 300:
                    store.kv_put(COMPARE_NAMESPACE, ids, {"version": version, "view": view})
            _compared.clear()  # one kept in memory: a comparison of large runs is large
            _compared[key] = view
    out = dict(view)
    out["sample_changes"] = list(view["sample_changes"][:limit])
    return out
