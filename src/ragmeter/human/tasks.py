"""Annotation tasks: sample a run's items, give each rater a personal link, store the labels,
exchange them as CSV with offline raters, and turn them back into per-sample labels.

A rater's link carries a random token; the store keeps only its sha256, so a leaked database
does not leak the links. Each rater sees the items in an order shuffled with their own seed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import secrets
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select

from ragmeter.core.errors import ConfigError, DatasetError, StoreError
from ragmeter.core.schema import Sample
from ragmeter.store import Store
from ragmeter.store.models import AnnotationItem, AnnotationLabel, AnnotationRater, AnnotationTask, utcnow

RUBRICS = {
    "faithfulness": "Is every claim of the answer supported by the contexts shown? "
                    "1 = mostly invented or contradicts the contexts; 3 = some claims unsupported; "
                    "5 = every claim is supported by the contexts.",
    "relevance": "Does the answer address the question asked? 1 = off-topic; 3 = partly answers or "
                 "pads with unrelated text; 5 = answers exactly what was asked.",
    "correctness": "Is the answer correct (compare with the reference answer when shown)? "
                   "1 = wrong; 3 = partly correct or missing key facts; 5 = fully correct.",
    "overall": "Your overall judgement of the answer as a reply to the question. "
               "1 = useless or harmful; 3 = acceptable with flaws; 5 = excellent.",
}


@dataclass
class Scale:
    """A rating scale: ``ordinal`` (numbers lo..hi), ``binary`` (0 = no, 1 = yes) or
    ``categorical`` (named values, no order)."""

    name: str
    kind: str
    values: list[str]

    @property
    def numeric(self) -> bool:
        return self.kind in ("ordinal", "binary")

    def to_number(self, value: str) -> float | None:
        """The value as a number (ordinal/binary) or None (categorical)."""
        return float(value) if self.numeric else None

    def normalise(self, value: float) -> float:
        """A numeric value mapped to [0, 1] (lowest value 0, highest 1)."""
        lo, hi = float(self.values[0]), float(self.values[-1])
        return (value - lo) / (hi - lo)

    def check(self, value: Any) -> str:
        v = str(value).strip()
        if self.numeric:
            try:
                f = float(v)
            except ValueError:
                f = math.nan
            if not math.isnan(f) and f.is_integer():
                v = str(int(f))
        if v not in self.values:
            raise ValueError(f"{v!r} is not a value of scale {self.name!r} ({', '.join(self.values)})")
        return v


def parse_scales(spec: str | Sequence[str], default: str = "1-5") -> list[Scale]:
    """``faithfulness,relevance:1-3,grounded:binary,topic:billing|login|other`` -> scales.

    A bare name is ordinal on ``default``; ``lo-hi`` is an ordinal range of integers; ``binary`` is
    0/1; values separated by ``|`` are categorical.
    """
    parts = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if p.strip()]
    if not parts:
        raise ConfigError("give at least one scale, e.g. --scales faithfulness,overall")
    out: list[Scale] = []
    for p in parts:
        name, _, kind = p.partition(":")
        name, kind = name.strip(), (kind.strip() or default)
        if not name.replace("_", "").isalnum():
            raise ConfigError(f"scale name {name!r}: use letters, digits and _")
        if kind == "binary":
            out.append(Scale(name, "binary", ["0", "1"]))
        elif "|" in kind:
            vals = [v.strip() for v in kind.split("|") if v.strip()]
            if len(vals) < 2 or len(set(vals)) != len(vals):
                raise ConfigError(f"scale {name!r}: give two or more distinct categories")
            out.append(Scale(name, "categorical", vals))
        else:
            lo, _, hi = kind.partition("-")
            try:
                a, b = int(lo), int(hi)
            except ValueError:
                raise ConfigError(f"scale {name!r}: {kind!r} is not lo-hi, binary or a|b|c") from None
            if b <= a or b - a > 20:
                raise ConfigError(f"scale {name!r}: need lo < hi and at most 21 values")
            out.append(Scale(name, "ordinal", [str(i) for i in range(a, b + 1)]))
    if len({s.name for s in out}) != len(out):
        raise ConfigError("scale names repeat")
    return out


def default_rubric(scales: Sequence[Scale]) -> str:
    lines = []
    for s in scales:
        desc = RUBRICS.get(s.name, f"Rate {s.name}.")
        if s.kind == "binary":
            desc += " (0 = no, 1 = yes)"
        elif s.kind == "categorical":
            desc += f" ({' / '.join(s.values)})"
        lines.append(f"{s.name}: {desc}")
    return "\n".join(lines)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _stratified(samples: list[Sample], values: dict[str, float], n: int, strata: int,
                rng: np.random.Generator) -> list[tuple[Sample, str]]:
    """Equal-frequency bins of the metric; ``n`` spread over the bins in proportion to their size
    (largest remainders), samples without a value in their own bin."""
    have = [s for s in samples if s.id in values]
    edges = np.quantile([values[s.id] for s in have], np.linspace(0, 1, strata + 1)) if have else []
    bins: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.id not in values:
            bins["no value"].append(s)
            continue
        b = int(np.searchsorted(edges[1:-1], values[s.id], side="right"))
        bins[f"q{b + 1} [{edges[b]:.3g}, {edges[b + 1]:.3g}]"].append(s)
    total = len(samples)
    quota = {k: n * len(v) / total for k, v in bins.items()}
    take = {k: int(q) for k, q in quota.items()}
    for k in sorted(quota, key=lambda k: quota[k] - take[k], reverse=True)[: n - sum(take.values())]:
        take[k] += 1
    out: list[tuple[Sample, str]] = []
    for k, members in sorted(bins.items()):
        idx = rng.permutation(len(members))[: take[k]]
        out.extend((members[i], k) for i in sorted(idx))
    return out


def create_task(store: Store, run_ref: str, *, raters: Sequence[str], scales: Sequence[Scale],
                n: int | None = 50, rubric: str | None = None, stratify: str | None = None,
                strata: int = 4, seed: int = 0, name: str | None = None,
                show: Sequence[str] = ("question", "contexts", "answer", "reference")
                ) -> tuple[str, dict[str, str]]:
    """Create a task over ``n`` samples of a run (all when ``n`` is None or larger than the run).

    Args:
        store: the results store.
        run_ref: run id, prefix or name.
        raters: rater names (each gets a personal token).
        scales: from :func:`parse_scales`.
        n: how many samples.
        rubric: text shown to raters (default: a rubric per scale).
        stratify: a metric of the run: sample equally often from its ``strata`` quantile bins.
        strata: number of bins for ``stratify``.
        seed: seed of the sampling and of each rater's order.
        name: a name for the task.
        show: sample fields shown to raters (never metric values).

    Returns:
        ``(task_id, {rater: token})``; the tokens are shown only now (the store keeps hashes).
    """
    names = [r.strip() for r in raters if r.strip()]
    if not names:
        raise ConfigError("give at least one rater, e.g. --raters ana,bruno")
    if len(set(names)) != len(names):
        raise ConfigError("rater names repeat")
    run_id = store.resolve_run(run_ref)
    samples = store.run_samples(run_id)
    if not samples:
        raise StoreError(f"run {run_id} has no samples")
    rng = np.random.default_rng(seed)
    n_take = len(samples) if n is None or n >= len(samples) else n
    if n_take < 1:
        raise ConfigError("--n must be at least 1")
    if stratify:
        table = store.score_table(run_id)
        if stratify not in table:
            raise ConfigError(f"run {run_id} has no metric {stratify!r} to stratify by "
                              f"(metrics: {', '.join(sorted(table)) or 'none'})")
        values = {sid: sc.value for sid, sc in table[stratify].items() if sc.value is not None}
        chosen = _stratified(samples, values, n_take, strata, rng)
    else:
        idx = sorted(rng.permutation(len(samples))[:n_take])
        chosen = [(samples[i], None) for i in idx]
    task_id = uuid.uuid4().hex[:12]
    tokens = {r: secrets.token_urlsafe(24) for r in names}
    with store.session() as s, s.begin():
        s.add(AnnotationTask(id=task_id, name=name, run_id=run_id, version=1,
                             scales=[asdict(x) for x in scales],
                             rubric=rubric if rubric is not None else default_rubric(scales),
                             config={"n": n_take, "seed": seed, "stratify": stratify,
                                     "strata": strata if stratify else None, "show": list(show)}))
        s.flush()
        s.add_all(AnnotationItem(task_id=task_id, sample_id=x.id, position=i, stratum=st)
                  for i, (x, st) in enumerate(chosen))
        s.add_all(AnnotationRater(task_id=task_id, name=r, token_hash=hash_token(tokens[r]),
                                  order_seed=int(rng.integers(0, 2**31 - 1))) for r in names)
    return task_id, tokens


def rotate_tokens(store: Store, task_ref: str, raters: Sequence[str] | None = None) -> dict[str, str]:
    """New tokens (new links) for some or all raters of a task; old links stop working."""
    task = get_task(store, task_ref)
    out: dict[str, str] = {}
    with store.session() as s, s.begin():
        rows = s.scalars(select(AnnotationRater).where(AnnotationRater.task_id == task.id)).all()
        known = {r.name for r in rows}
        for name in raters or []:
            if name not in known:
                raise ConfigError(f"task {task.id} has no rater {name!r} ({', '.join(sorted(known))})")
        for r in rows:
            if raters and r.name not in raters:
                continue
            tok = secrets.token_urlsafe(24)
            r.token_hash = hash_token(tok)
            out[r.name] = tok
    return out


def add_rater(store: Store, task_ref: str, name: str) -> str:
    """Add a rater to a task; returns their token."""
    task = get_task(store, task_ref)
    tok = secrets.token_urlsafe(24)
    with store.session() as s, s.begin():
        if s.scalar(select(AnnotationRater).where(AnnotationRater.task_id == task.id,
                                                  AnnotationRater.name == name)):
            raise ConfigError(f"task {task.id} already has a rater {name!r}")
        s.add(AnnotationRater(task_id=task.id, name=name, token_hash=hash_token(tok),
                              order_seed=secrets.randbelow(2**31 - 1)))
    return tok


def update_rubric(store: Store, task_ref: str, rubric: str) -> int:
    """Replace a task's rubric; the task version goes up by one (labels given from now on carry
    the new version, so labels given under the old wording can be told apart). Returns the version."""
    task = get_task(store, task_ref)
    with store.session() as s, s.begin():
        row = s.get(AnnotationTask, task.id)
        assert row is not None
        if row.rubric == rubric:
            return row.version
        row.rubric = rubric
        row.version += 1
        return row.version


def get_task(store: Store, ref: str) -> AnnotationTask:
    """A task by id, unique id prefix or name (newest with that name)."""
    with store.session() as s:
        t = s.get(AnnotationTask, ref)
        if t is not None:
            return t
        rows = s.scalars(select(AnnotationTask).where(AnnotationTask.id.like(f"{ref}%"))).all()
        if len(rows) == 1:
            return rows[0]
        if len(rows) > 1:
            raise StoreError(f"task id prefix {ref!r} is ambiguous")
        named = s.scalars(select(AnnotationTask).where(AnnotationTask.name == ref)
                          .order_by(AnnotationTask.created_at.desc())).first()
        if named is not None:
            return named
    raise StoreError(f"no annotation task {ref!r} (see `ragmeter annotate list`)")


def list_tasks(store: Store, run_id: str | None = None) -> list[AnnotationTask]:
    with store.session() as s:
        q = select(AnnotationTask).order_by(AnnotationTask.created_at.desc())
        if run_id:
            q = q.where(AnnotationTask.run_id == run_id)
        return list(s.scalars(q).all())


def task_scales(task: AnnotationTask) -> list[Scale]:
    return [Scale(**x) for x in task.scales]


def task_items(store: Store, task_id: str) -> list[AnnotationItem]:
    with store.session() as s:
        return list(s.scalars(select(AnnotationItem).where(AnnotationItem.task_id == task_id)
                              .order_by(AnnotationItem.position)).all())


def task_raters(store: Store, task_id: str) -> list[AnnotationRater]:
    with store.session() as s:
        return list(s.scalars(select(AnnotationRater).where(AnnotationRater.task_id == task_id)
                              .order_by(AnnotationRater.pk)).all())


def rater_by_token(store: Store, token: str) -> tuple[AnnotationTask, AnnotationRater] | None:
    """The task and rater a token belongs to, or None."""
    if not token or len(token) > 200:
        return None
    with store.session() as s:
        r = s.scalar(select(AnnotationRater).where(AnnotationRater.token_hash == hash_token(token)))
        if r is None:
            return None
        t = s.get(AnnotationTask, r.task_id)
        return (t, r) if t is not None else None


def rater_order(store: Store, task_id: str, rater: AnnotationRater) -> list[str]:
    """The sample ids in this rater's own shuffled order."""
    ids = [it.sample_id for it in task_items(store, task_id)]
    perm = np.random.default_rng(rater.order_seed).permutation(len(ids))
    return [ids[i] for i in perm]


def no_scale(task: AnnotationTask, scale: str) -> str:
    """The message for a scale the task does not have, listing the ones it has."""
    return (f"task {task.id} has no scale {scale!r} (scales: {', '.join(s.name for s in task_scales(task))}; "
            "--scale)")


def save_label(store: Store, task: AnnotationTask, rater: str, sample_id: str, scale: str, value: Any,
               source: str = "web") -> None:
    """Store (or replace) one label; the value is checked against the scale."""
    scales = {s.name: s for s in task_scales(task)}
    if scale not in scales:
        raise ValueError(no_scale(task, scale))
    v = scales[scale].check(value)
    with store.session() as s, s.begin():
        if s.scalar(select(AnnotationItem.pk).where(AnnotationItem.task_id == task.id,
                                                    AnnotationItem.sample_id == sample_id)) is None:
            raise ValueError(f"sample {sample_id!r} is not an item of task {task.id}")
        row = s.scalar(select(AnnotationLabel).where(
            AnnotationLabel.task_id == task.id, AnnotationLabel.sample_id == sample_id,
            AnnotationLabel.rater == rater, AnnotationLabel.scale == scale))
        if row is None:
            s.add(AnnotationLabel(task_id=task.id, sample_id=sample_id, rater=rater, scale=scale,
                                  value=v, value_num=scales[scale].to_number(v),
                                  task_version=task.version, source=source))
        else:
            row.value, row.value_num = v, scales[scale].to_number(v)
            row.task_version, row.source, row.created_at = task.version, source, utcnow()


def labels(store: Store, task_id: str, rater: str | None = None) -> list[AnnotationLabel]:
    with store.session() as s:
        q = select(AnnotationLabel).where(AnnotationLabel.task_id == task_id)
        if rater is not None:
            q = q.where(AnnotationLabel.rater == rater)
        return list(s.scalars(q.order_by(AnnotationLabel.pk)).all())


def task_status(store: Store, task_ref: str) -> dict[str, Any]:
    """Progress per rater: items with every scale labelled, out of the task's items."""
    task = get_task(store, task_ref)
    items = task_items(store, task.id)
    n_scales = len(task.scales)
    per: dict[str, Counter] = defaultdict(Counter)
    for lab in labels(store, task.id):
        per[lab.rater][lab.sample_id] += 1
    raters = [r.name for r in task_raters(store, task.id)]
    return {"task": task.id, "name": task.name, "run_id": task.run_id, "version": task.version,
            "items": len(items), "scales": [s["name"] for s in task.scales],
            "raters": {r: {"done": sum(1 for c in per[r].values() if c >= n_scales),
                           "labels": sum(per[r].values())} for r in raters}}


# ---- CSV for offline raters --------------------------------------------------------------------
CSV_FIELDS = ("item", "rater", "scale", "label", "question", "answer")


def export_csv(store: Store, task_ref: str, rater: str | None = None, *, blank: bool = True) -> str:
    """A CSV (long: item,rater,scale,label,question,answer) for offline raters.

    With ``blank`` (default) the label column is empty, one row per item x scale for ``rater``
    (or every rater): a sheet to fill in. Without, the stored labels (for analysis).
    """
    task = get_task(store, task_ref)
    samples = {s.id: s for s in store.run_samples(task.run_id)}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    if blank:
        raters = [r for r in task_raters(store, task.id) if rater is None or r.name == rater]
        if rater is not None and not raters:
            raise ConfigError(f"task {task.id} has no rater {rater!r}")
        for r in raters:
            for sid in rater_order(store, task.id, r):
                smp = samples.get(sid)
                for sc in task.scales:
                    w.writerow([sid, r.name, sc["name"], "", smp.question if smp else "",
                                smp.answer if smp else ""])
    else:
        for lab in labels(store, task.id, rater):
            smp = samples.get(lab.sample_id)
            w.writerow([lab.sample_id, lab.rater, lab.scale, lab.value, smp.question if smp else "",
                        smp.answer if smp else ""])
    return buf.getvalue()


def import_csv(store: Store, task_ref: str, path: str | Path, rater: str | None = None) -> int:
    """Read labels from a CSV with columns item,rater,scale,label (rater may come from ``rater``: the
    rater of rows whose rater cell is empty or absent; a row naming another rater is an error);
    rows with an empty label are skipped. All rows are checked before any is stored.

    Returns:
        the number of labels stored.

    Raises:
        DatasetError: naming the file and line of the first bad row: an unknown rater, item, scale
            or value, a row with more fields than the header, a rater other than ``rater``, or a
            second label for the same item, rater and scale (with the line of the first).
    """
    task = get_task(store, task_ref)
    from ragmeter.core.files import csv_rows, read_text

    p = Path(path)
    table = csv_rows(read_text(p, "labels CSV"), p)
    header = next(table, [])
    fields = {f.strip().lower(): f for f in header}
    need = ["item", "scale", "label"] + ([] if rater else ["rater"])
    miss = [f for f in need if f not in fields]
    if miss:
        raise DatasetError(f"missing column(s) {', '.join(miss)} (expected {','.join(CSV_FIELDS[:4])})",
                           file=str(p), line=1)
    scales = {s.name: s for s in task_scales(task)}
    items = {it.sample_id for it in task_items(store, task.id)}
    known = {r.name for r in task_raters(store, task.id)}
    rows: list[tuple[str, str, str, str]] = []
    first: dict[tuple[str, str, str], int] = {}
    for line, cells in enumerate(table, start=2):
        if len(cells) > len(header):
            raise DatasetError(f"{len(cells)} fields but the header has {len(header)} (a comma inside an "
                               "unquoted value, such as a decimal comma?)", file=str(p), line=line)
        row = dict(zip(header, cells, strict=False))
        value = (row.get(fields["label"]) or "").strip()
        if not value:
            continue
        named = (row.get(fields["rater"]) or "").strip() if "rater" in fields else ""
        if rater and named and named != rater:
            raise DatasetError(f"the row's rater is {named!r} but --rater is {rater!r}: a sheet holds one "
                               "rater's labels (leave --rater out to use the file's rater column)",
                               file=str(p), line=line, field="rater")
        who = rater or named
        sid = (row.get(fields["item"]) or "").strip()
        scale = (row.get(fields["scale"]) or "").strip()
        if who not in known:
            raise DatasetError(f"rater {who!r} is not a rater of task {task.id} "
                               f"({', '.join(sorted(known))}; add with `ragmeter annotate add-rater`)",
                               file=str(p), line=line, field="rater")
        if sid not in items:
            raise DatasetError(f"{sid!r} is not an item of task {task.id}", file=str(p), line=line,
                               field="item")
        if scale not in scales:
            raise DatasetError(f"no scale {scale!r} (scales: {', '.join(scales)})", file=str(p),
                               line=line, field="scale")
        try:
            value = scales[scale].check(value)
        except ValueError as exc:
            raise DatasetError(str(exc), file=str(p), line=line, field="label") from None
        seen = first.setdefault((sid, who, scale), line)
        if seen != line:
            raise DatasetError(f"a second label of rater {who!r} for item {sid!r} on scale {scale!r} (the first "
                               f"is on line {seen}); keep one", file=str(p), line=line, field="label")
        rows.append((sid, who, scale, value))
    for sid, who, scale, value in rows:
        save_label(store, task, who, sid, scale, value, source="csv")
    return len(rows)


# ---- labels back into evaluation -----------------------------------------------------------------
def labels_as_ratings(store: Store, task_ref: str, scale: str):  # noqa: ANN201 - Ratings
    """One scale's labels as :class:`ragmeter.stats.agreement.Ratings` (raters x items)."""
    from ragmeter.stats.agreement import Ratings

    task = get_task(store, task_ref)
    sc = {s.name: s for s in task_scales(task)}.get(scale)
    if sc is None:
        raise ConfigError(no_scale(task, scale))
    rows = [(lab.sample_id, lab.rater, lab.value) for lab in labels(store, task.id) if lab.scale == scale]
    if not rows:
        raise ConfigError(f"task {task.id} has no labels on {scale!r} yet")
    return Ratings.from_long(rows, order=None if sc.numeric else sc.values)


def human_labels(store: Store, task_ref: str, scale: str, how: str = "mean", normalise: bool = True
                 ) -> dict[str, float]:
    """One value per labelled item, combining the raters.

    ``mean``: the mean of the raters' values (ordinal and binary scales). ``majority``: the most
    frequent value; a tie goes to the lower value (the cautious reading), and an item whose raters
    tie is still labelled. ``median``: the median (lower median on ties). With ``normalise`` the
    result is mapped to [0, 1] (lowest scale value 0, highest 1), the range of ``Sample.label``.
    """
    task = get_task(store, task_ref)
    sc = {s.name: s for s in task_scales(task)}.get(scale)
    if sc is None:
        raise ConfigError(no_scale(task, scale))
    if not sc.numeric:
        raise ConfigError(f"scale {scale!r} is categorical: its labels have no number to use")
    if how not in ("mean", "majority", "median"):
        raise ConfigError(f"how must be mean, majority or median, not {how!r}")
    per: dict[str, list[float]] = defaultdict(list)
    for lab in labels(store, task.id):
        if lab.scale == scale and lab.value_num is not None:
            per[lab.sample_id].append(lab.value_num)
    out: dict[str, float] = {}
    for sid, vals in per.items():
        if how == "mean":
            v = float(np.mean(vals))
        elif how == "median":
            v = float(sorted(vals)[(len(vals) - 1) // 2])
        else:
            counts = Counter(vals)
            top = max(counts.values())
            v = min(x for x, c in counts.items() if c == top)
        out[sid] = sc.normalise(v) if normalise else v
    return out


def labelled_samples(store: Store, task_ref: str, scale: str, how: str = "majority",
                     threshold: float | None = None) -> list[Sample]:
    """The task's samples with ``label`` set from the human labels (normalised to [0, 1]; with
    ``threshold``, 1.0 when the normalised value is >= threshold else 0.0), ready for the
    correctness methods' calibration and accuracy reports."""
    task = get_task(store, task_ref)
    vals = human_labels(store, task.id, scale, how)
    out = []
    for smp in store.run_samples(task.run_id):
        if smp.id in vals:
            v = vals[smp.id]
            if threshold is not None:
                v = 1.0 if v >= threshold else 0.0
            out.append(smp.model_copy(update={"label": v}))
    return out
