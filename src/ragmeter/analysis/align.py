"""``ragmeter align``: a judge metric tuned to human labels, and judged on labels it was not tuned on.

1. The labelled items (the files ``ragmeter meta-eval`` reads) are split into a tuning part and a
   held-out part, stratified by label (each label value, or each quartile of the labels when they
   take more than ten values, is split in the same proportion), with a recorded seed.
2. The judge scores every item with the metric's template (one stored run, tag ``align``).
3. Few-shot examples are picked from the judge's disagreements with people on the tuning part: an
   item where the judge's value and the human label fall on different sides of the middle of the
   metric's range. The disagreements closest to that decision boundary (smallest
   ``|judge value - middle|``: where an example is most likely to move a verdict) come first,
   ties in the split's seeded order, alternating between items people scored above and below the
   middle so both sides are shown; ``--shots`` of them.
4. With ``--rewrite-rubric`` the judge model rewrites the metric's instructions given those
   disagreements (the reply format of the metric's own template is kept after them).
5. The tuned template is stored as a new version of ``--name`` (:mod:`ragmeter.llm.templates`) and
   the held-out part is judged again with it.
6. Agreement with people before and after, on the held-out part only, with the statistics of
   ``ragmeter meta-eval`` (:func:`ragmeter.analysis.meta_eval.evaluation.analyse`); the change of each
   statistic has a paired percentile bootstrap interval over held-out items (the same resamples for
   before and after). The decision reads Kendall's tau-b (meta-eval's default ordering), or the
   agreement rate (share of items on the same side of the middle as people) when tau-b is undefined
   before or after (a constant side). The version becomes the name's default only when the interval
   of that change lies above 0; otherwise the command says the tuning did not help and the default
   stays what it was (the metric's own template for a new name).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from pydantic import BaseModel

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.schema import Sample

TAG = "align"
DEFAULT_SHOTS = 8
DEFAULT_SEED = 20261128
STATISTICS = ("kendall", "spearman", "pearson", "agreement_rate")
#: the rubric rewrite request's expected reply size (estimates only)
_REWRITE_OUT = 800
REWRITE_SYSTEM = (
    "You improve the instructions an LLM judge follows, so that its scores agree with people. The RUBRIC "
    "block holds the current instructions. Each DISAGREEMENT block holds data the judge scored, the judge's "
    "score and the score people gave. Rewrite the instructions so that a judge following them would score "
    "these cases the way people did, without naming the cases. Keep the task and the meaning of the scale; "
    "do not describe a reply format (it is given separately). Reply with a JSON object "
    '{"rubric": "<the new instructions>"}.'
)


class RubricRewrite(BaseModel):
    rubric: str


@dataclass
class Alignment:
    """What ``ragmeter align`` did (``--json``: :meth:`to_dict`)."""

    metric: str
    name: str
    labels: str
    judge: str
    n_items: int
    seed: int
    holdout: float
    tuning: list[str]
    held_out: list[str]
    shots: int
    n_disagreements: int
    examples: list[dict[str, Any]]
    rewritten: bool
    version: int | None
    default: int
    helped: bool
    statistic: str | None
    before: dict[str, Any]
    after: dict[str, Any]
    changes: dict[str, dict[str, Any]]
    runs: dict[str, str] = field(default_factory=dict)
    label_scale: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _scaled(human: np.ndarray, bounds: tuple[float, float]) -> tuple[np.ndarray, str | None]:
    """The labels on the metric's range: as they are when inside it, else mapped linearly from
    their own lowest and highest value."""
    low, high = bounds
    if np.all((human >= low) & (human <= high)):
        return human, None
    lo, hi = float(np.min(human)), float(np.max(human))
    if hi == lo:
        raise DatasetError("every human label has the same value: there is nothing to align to")
    return low + (human - lo) / (hi - lo) * (high - low), f"labels {lo:g}-{hi:g} mapped to {low:g}-{high:g}"


def split_items(human: np.ndarray, holdout: float, seed: int) -> tuple[list[int], list[int]]:
    """Tuning and held-out positions, stratified by label (each value, or each quartile of the
    labels when they take more than ten values), shuffled with ``seed``."""
    rng = np.random.default_rng(seed)
    values = np.unique(human)
    if values.size > 10:
        edges = np.quantile(human, [0.25, 0.5, 0.75])
        strata = np.searchsorted(edges, human, side="right")
    else:
        strata = np.searchsorted(values, human)
    tuning: list[int] = []
    held: list[int] = []
    for s in np.unique(strata):
        members = rng.permutation(np.flatnonzero(strata == s)).tolist()
        if len(members) == 1:
            (held if rng.random() < holdout else tuning).extend(members)
            continue
        k = min(max(int(round(holdout * len(members))), 1), len(members) - 1)
        held += members[:k]
        tuning += members[k:]
    order = {int(i): r for r, i in enumerate(rng.permutation(len(human)))}
    return sorted(tuning, key=order.__getitem__), sorted(held, key=order.__getitem__)


def pick_examples(values: Sequence[float | None], human: Sequence[float], positions: Sequence[int],
                  shots: int, middle: float) -> tuple[list[int], int]:
    """The few-shot examples among ``positions`` (the tuning part, in its seeded order): the
    disagreements, closest to the decision boundary first, alternating between people's sides.
    Returns the chosen positions and how many disagreements there were."""
    wrong = [i for i in positions if values[i] is not None and (values[i] >= middle) != (human[i] >= middle)]
    rank = {i: r for r, i in enumerate(positions)}
    key = lambda i: (abs(float(values[i]) - middle), rank[i])  # noqa: E731
    high = sorted((i for i in wrong if human[i] >= middle), key=key)
    low = sorted((i for i in wrong if human[i] < middle), key=key)
    first, second = (high, low) if high and (not low or key(high[0]) <= key(low[0])) else (low, high)
    chosen: list[int] = []
    while len(chosen) < shots and (first or second):
        for side in (first, second):
            if side and len(chosen) < shots:
                chosen.append(side.pop(0))
    return chosen, len(wrong)


def _metric(metric: str) -> tuple[Any, Any]:
    """The request and JudgedMetric of a metric ``align`` can tune."""
    from ragmeter.metrics.judge._common import JudgedMetric
    from ragmeter.metrics.registry import resolve

    if "@" in metric:
        raise ConfigError(f"align tunes a metric by its name ({metric.split('@')[0]}); --name names the result")
    req = resolve(metric)
    if not isinstance(req.spec.fn, JudgedMetric) or req.spec.param != "template":
        raise ConfigError(f"{metric} cannot be aligned: align tunes a judge metric that makes one request per "
                          "sample with a prompt template (faithfulness, answer_relevancy, context_recall ...)")
    return req, req.spec.fn


def _reply_format(text: str) -> str:
    at = text.find("Reply with")
    return text[at:] if at >= 0 else ""


def _changes(before: np.ndarray, after: np.ndarray, human: np.ndarray, counts: np.ndarray, middle: float,
             level: float, points: Mapping[str, tuple[float | None, float | None]]) -> dict[str, dict[str, Any]]:
    """Each statistic's change (after - before) with its paired percentile bootstrap interval."""
    from ragmeter.analysis.meta_eval.statistics import boot_correlations, interval

    agree_b = ((before >= middle) == (human >= middle)).astype(float)
    agree_a = ((after >= middle) == (human >= middle)).astype(float)
    boots: dict[str, np.ndarray | None] = {"agreement_rate": None}
    if counts.shape[0]:
        w = counts.astype(float)
        bb, ba = boot_correlations(before, human, counts), boot_correlations(after, human, counts)
        boots = {k: ba[k] - bb[k] for k in ("kendall", "spearman", "pearson")}
        boots["agreement_rate"] = (w * agree_a).sum(axis=1) / w.sum(axis=1) - (w * agree_b).sum(axis=1) / w.sum(axis=1)
    out: dict[str, dict[str, Any]] = {}
    for name in STATISTICS:
        b, a = points[name] if name != "agreement_rate" else (float(agree_b.mean()), float(agree_a.mean()))
        change = None if a is None or b is None else a - b
        low, high = (None, None)
        boot = boots.get(name)
        if change is not None and boot is not None:
            low, high = interval(boot, level)
        out[name] = {"before": b, "after": a, "change": change, "ci_low": low, "ci_high": high}
    return out


def plan(samples: Sequence[Sample], held: Sequence[int], tuning: Sequence[int], req: Any, jm: Any, *,
         options: Mapping[str, Any], store: Any, shots: int, rewrite: bool) -> dict[str, Any]:
    """``--dry-run``: the calls and the estimated tokens and cost, nothing sent. The tuned calls'
    input is an upper estimate: each carries the ``shots`` longest tuning items as examples."""
    from ragmeter.io.readers import Dataset
    from ragmeter.llm.config import config_from_options
    from ragmeter.llm.prices import PriceTable
    from ragmeter.llm.service import estimate_tokens
    from ragmeter.run.estimate import estimate_run_cost
    from ragmeter.run.eval_config import EvalConfig

    before = estimate_run_cost(Dataset(list(samples), source="labels"),
                               config=EvalConfig(metrics=(req.key,), db=store, options=dict(options)))
    cfg = config_from_options(dict(options))
    price = PriceTable.load(cfg.prices_file).get(cfg.provider, cfg.model, cfg.base_url)
    reqs = [r for r in jm.requests([samples[i] for i in tuning + list(held)], req.params)
            if not isinstance(r, Sample) and hasattr(r, "user")]
    users = {r.sample_id: estimate_tokens(r.user) for r in reqs}
    longest = sorted((users.get(samples[i].id, 0) for i in tuning), reverse=True)[:shots]
    extra = sum(longest)
    after_in = after_out = 0
    cost: float | None = 0.0
    calls = []
    for r in reqs:
        if r.sample_id in {samples[i].id for i in held}:
            tin = estimate_tokens(r.system) + users[r.sample_id] + extra
            calls.append((tin, r.expected_output_tokens))
    if rewrite:
        calls.append((estimate_tokens(REWRITE_SYSTEM) + extra * 2, _REWRITE_OUT))
    for tin, tout in calls:
        after_in += tin
        after_out += tout
        cost = None if price is None or cost is None else cost + price.cost(tin, tout)
    total = None if cost is None or before.get("est_cost_usd") is None else before["est_cost_usd"] + cost
    return {"dry_run": True, "requests_sent": 0, "judge": cfg.label, "metric": req.key,
            "n_items": len(samples), "tuning": len(tuning), "held_out": len(held),
            "calls": {"before": int(before.get("planned_calls") or 0), "cached_before": int(before.get("cached") or 0),
                      "rewrite": int(rewrite), "after": len(held)},
            "planned_calls": int(before.get("planned_calls") or 0) + len(calls),
            "est_input_tokens": int(before.get("est_input_tokens") or 0) + after_in,
            "est_output_tokens": int(before.get("est_output_tokens") or 0) + after_out,
            "est_cost_usd": None if total is None else round(total, 6),
            "note": "the calls after tuning are estimated with the longest tuning items as examples (an upper "
                    "estimate); the before calls already in the judge cache cost nothing"}


def align(data: Any, metric: str, *, options: Mapping[str, Any], db: Any = None, holdout: float = 0.5,
          seed: int = DEFAULT_SEED, shots: int = DEFAULT_SHOTS, rewrite: bool = False, name: str | None = None,
          dry_run: bool = False, label: str | Sequence[str] | None = None, rater: str | None = None,
          mapping: Any = None, fmt: str | None = None, n_bootstrap: int = 1000, level: float = 0.95,
          progress: bool = False) -> Alignment | dict[str, Any]:
    """Tune ``metric``'s judge to the labels of ``data`` and measure it on held-out labels (see the
    module's docstring). Returns the :class:`Alignment` (a dict of calls and cost with ``dry_run``).

    Raises:
        ConfigError: a metric that cannot be tuned, bad settings, a name tuned for another metric.
        DatasetError: too few labelled items to split, or labels that are all the same.
    """
    from ragmeter.analysis.meta_eval.evaluation import analyse
    from ragmeter.analysis.meta_eval.reader import read_labels
    from ragmeter.analysis.meta_eval.statistics import Resamples
    from ragmeter.llm.templates import TemplateBook, parse_ref
    from ragmeter.store import Store, open_store

    if not 0 < holdout < 1:
        raise ConfigError(f"--holdout is the held-out share of the items, between 0 and 1; got {holdout:g}")
    if shots < 1:
        raise ConfigError(f"--shots must be at least 1, got {shots}")
    req, jm = _metric(metric)
    name = name or f"{req.spec.name}-aligned"
    if ":" in name:
        raise ConfigError(f"--name {name!r}: a name without ':VERSION' (versions are numbered by align)")
    parse_ref(name)
    labels = read_labels(data, label=label, rater=rater, mapping=mapping, fmt=fmt)
    rated = np.flatnonzero(np.isfinite(labels.human))
    if rated.size < len(labels.items):  # an item no rater labelled cannot be tuned or measured on
        labels = replace(labels, items=[labels.items[i] for i in rated], ratings=labels.ratings[rated],
                         samples=[labels.samples[i] for i in rated],
                         lines=[labels.lines[i] for i in rated] if labels.lines else [])
    bounds = (float(req.spec.range[0]), float(req.spec.range[1]))
    middle = (bounds[0] + bounds[1]) / 2
    human, scale_note = _scaled(labels.human, bounds)
    tuning, held = split_items(human, holdout, seed)
    if len(held) < 3 or len(tuning) < 2:
        raise DatasetError(f"{len(labels.items)} labelled items split into {len(tuning)} to tune on and {len(held)} "
                           "held out: align needs at least 2 and 3 (more items, or another --holdout)",
                           file=labels.source)
    samples = labels.samples
    store = db if isinstance(db, Store) else open_store(db)
    opts = dict(options)
    if dry_run:
        return plan(samples, held, tuning, req, jm, options={**opts, "judge_dry_run": True}, store=store,
                    shots=shots, rewrite=rewrite)
    book = TemplateBook(store)
    previous = book.record(name)
    if previous is not None and previous.get("metric") != req.spec.name:
        raise ConfigError(f"judge template {name!r} was tuned for {previous.get('metric')}: choose another --name")
    before_run = _judge(samples, req.key, store, opts, f"align {name}: {req.spec.name} before tuning", progress)
    before_vals = [before_run[1].get(s.id) for s in samples]
    chosen, n_wrong = pick_examples(before_vals, list(human), tuning, shots, middle)
    examples = []
    for i in chosen:
        blocks = jm.blocks(samples[i], {k: v for k, v in req.params.items() if k != "template"})
        if isinstance(blocks, list):
            examples.append({"id": samples[i].id, "blocks": [list(b) for b in blocks], "human": float(human[i]),
                             "judge": before_vals[i]})
    from ragmeter.metrics.judge._common import load_template

    base = jm.template if not isinstance(jm.template, str) else load_template(jm.template)
    rubric, note = None, None
    if rewrite and examples:
        rubric, note = _rewrite(base.text, examples, opts, store, before_run[0], req.spec.name)
    held_ids = [samples[i].id for i in held]
    common = {"metric": req.spec.name, "base_version": base.version, "judge": _judge_label(opts),
              "labels": labels.source, "seed": seed, "holdout": holdout, "shots": shots, "range": list(bounds),
              "split": {"tuning": [samples[i].id for i in tuning], "held_out": held_ids}}
    default = int((previous or {}).get("default", 0))
    if not examples and rubric is None:
        note = (note + "; " if note else "") + ("the judge agrees with people on every tuning item: nothing to "
                                               "tune, no version stored")
        version = None
        after_vals = [before_vals[i] for i in held]
        runs = {"before": before_run[0]}
    else:
        version = book.add(name, req.spec.name, {**common, "rubric": rubric, "examples": examples})
        after_run = _judge([samples[i] for i in held], {"name": req.spec.name, "params": {"template": f"{name}:{version}"}},
                           store, opts, f"align {name}: {req.spec.name}@{name}:{version} on the held-out part", progress)
        after_vals = [after_run[1].get(sid) for sid in held_ids]
        runs = {"before": before_run[0], "after": after_run[0]}
    sub = replace(labels, items=[labels.items[i] for i in held], ratings=labels.ratings[held],
                  samples=[samples[i] for i in held], lines=[labels.lines[i] for i in held] if labels.lines else [])
    per_sample = {"before": {sid: before_vals[i] for sid, i in zip(held_ids, held, strict=True)},
                  "after": dict(zip(held_ids, after_vals, strict=True))}
    record = analyse(sub, per_sample, {}, n_bootstrap=n_bootstrap, level=level, seed=seed)
    b, a = record.metrics["before"], record.metrics["after"]
    hb = np.array([np.nan if v is None else v for v in per_sample["before"].values()], dtype=float)
    ha = np.array([np.nan if v is None else v for v in per_sample["after"].values()], dtype=float)
    keep = np.isfinite(hb) & np.isfinite(ha)
    counts = Resamples.draw(len(held), n_bootstrap, seed=seed, level=level).counts[:, keep]
    hh = human[held][keep]
    points = {s: (_value(b, s), _value(a, s)) for s in ("kendall", "spearman", "pearson")}
    changes = _changes(hb[keep], ha[keep], hh, counts, middle, level, points) if keep.any() else {
        s: {"before": None, "after": None, "change": None, "ci_low": None, "ci_high": None} for s in STATISTICS}
    stat = "kendall" if changes["kendall"]["change"] is not None else "agreement_rate"
    c = changes[stat]
    helped = version is not None and c["ci_low"] is not None and c["ci_low"] > 0
    if version is not None:
        book.update(name, version, default=helped, helped=helped, statistic=stat, change=c,
                    before=b.to_dict(), after=a.to_dict(), runs=runs)
        default = version if helped else default
    for run_id in runs.values():
        store.tag_run(run_id, add=[TAG])
    return Alignment(metric=req.spec.name, name=name, labels=labels.source, judge=_judge_label(opts),
                     n_items=len(labels.items), seed=seed, holdout=holdout, tuning=[samples[i].id for i in tuning],
                     held_out=held_ids, shots=shots, n_disagreements=n_wrong, examples=examples,
                     rewritten=rubric is not None, version=version, default=default, helped=helped, statistic=stat,
                     before=b.to_dict(), after=a.to_dict(), changes=changes, runs=runs, label_scale=scale_note, note=note)


def _value(m: Any, name: str) -> float | None:
    s = m.stat(name)
    return None if s is None or s.value is None or not math.isfinite(s.value) else float(s.value)


def _judge_label(options: Mapping[str, Any]) -> str:
    from ragmeter.llm.config import config_from_options

    return config_from_options(dict(options)).label


def _judge(samples: Sequence[Sample], entry: Any, store: Any, options: Mapping[str, Any], name: str,
           progress: bool) -> tuple[str, dict[str, float | None]]:
    """Score ``samples`` with one metric entry in a stored run; ``(run id, {sample id: value})``."""
    from ragmeter.io.readers import Dataset
    from ragmeter.run.eval_config import EvalConfig
    from ragmeter.run.runner import run

    result = run(Dataset(list(samples), source="labels"),
                 EvalConfig(metrics=(entry,), db=store, options=dict(options), name=name, progress=progress))
    key = next(iter(result.scores))
    return result.run_id, dict(zip((s.id for s in result.samples), result.scores.column(key).value_list(), strict=True))


def _rewrite(text: str, examples: Sequence[Mapping[str, Any]], options: Mapping[str, Any], store: Any,
             run_id: str, metric: str) -> tuple[str | None, str | None]:
    """The judge model's rewrite of the instructions, followed by the template's reply format
    (``None`` and why when the judge gave none)."""
    from ragmeter.core.context import ScoringContext
    from ragmeter.llm.request import JudgeRequest
    from ragmeter.metrics.judge._common import fence_blocks

    blocks = [("RUBRIC", text)]
    for i, ex in enumerate(examples, 1):
        data = "\n".join(f"{label}: {body}" for label, body in ex["blocks"])
        blocks.append((f"DISAGREEMENT {i}", f"{data}\nJUDGE SCORE: {ex['judge']:g}\nHUMAN SCORE: {ex['human']:g}"))
    ctx = ScoringContext(dict(options), store=store, run_id=run_id)
    try:
        res = ctx.service("judge").submit([JudgeRequest(metric=f"align:{metric}", sample_id=None, system=REWRITE_SYSTEM,
                                                        user=fence_blocks(blocks), schema=RubricRewrite,
                                                        template_version="align-rewrite-1",
                                                        expected_output_tokens=_REWRITE_OUT)])[0]
    finally:
        ctx.close()
    if not res.ok or not str(res.value.rubric).strip():
        return None, f"the judge did not rewrite the rubric ({res.missing().reason}); the metric's own instructions kept"
    rubric = str(res.value.rubric).strip().replace("$", "$$")
    tail = _reply_format(text)
    return rubric + ("\n\n" + tail if tail else ""), None
