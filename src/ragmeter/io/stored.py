"""Datasets kept in the store, as the load stage reads them: ``dataset:NAME``, ``NAME@VERSION``
or ``NAME@TAG`` resolved to a version, its samples (rejected ones left out), and ``where`` filters
on sample metadata (``--where type=multi_hop``). :mod:`ragmeter.golden.datasets` writes and reviews
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragmeter.core.errors import ConfigError


@dataclass
class DatasetVersion:
    name: str
    version: int
    pk: int
    tag: str | None
    status: str
    content_hash: str
    info: dict[str, Any]
    created_at: datetime
    n_samples: int = 0

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


def _version(row: Any, n: int = 0) -> DatasetVersion:
    return DatasetVersion(row.name, row.version, row.pk, row.tag, row.status, row.content_hash,
                          dict(row.info or {}), row.created_at, n)


def resolve(store: Any, ref: str) -> DatasetVersion:
    """``NAME``, ``NAME@VERSION`` or ``NAME@TAG`` -> the version (newest for a bare name)."""
    from sqlalchemy import func, select

    from ragmeter.store.models import DatasetRow, DatasetSampleRow

    name, _, which = ref.partition("@")
    with store.session() as s:
        q = select(DatasetRow).where(DatasetRow.name == name)
        if not which:
            row = s.scalars(q.order_by(DatasetRow.version.desc()).limit(1)).first()
        elif which.isascii() and which.isdigit():  # '²'.isdigit() is True, int('²') fails
            row = s.scalars(q.where(DatasetRow.version == int(which))).first() if len(which) <= 18 else None
        else:
            row = s.scalars(q.where(DatasetRow.tag == which).order_by(DatasetRow.version.desc()).limit(1)).first()
        if row is None:
            names = sorted(set(s.scalars(select(DatasetRow.name)).all()))
            raise ConfigError(f"no dataset {ref!r} in the store"
                              + (f" (datasets: {', '.join(names)})" if names else " (none yet)"))
        n = s.scalar(select(func.count()).select_from(DatasetSampleRow)
                     .where(DatasetSampleRow.dataset_pk == row.pk, DatasetSampleRow.review != "rejected"))
        return _version(row, int(n or 0))


def list_datasets(store: Any) -> list[DatasetVersion]:
    from sqlalchemy import func, select

    from ragmeter.store.models import DatasetRow, DatasetSampleRow

    with store.session() as s:
        counts = dict(s.execute(select(DatasetSampleRow.dataset_pk, func.count())
                                .where(DatasetSampleRow.review != "rejected")
                                .group_by(DatasetSampleRow.dataset_pk)).all())
        rows = s.scalars(select(DatasetRow).order_by(DatasetRow.name, DatasetRow.version)).all()
        return [_version(r, int(counts.get(r.pk, 0))) for r in rows]


def samples_of(store: Any, ref: str, *, include_rejected: bool = False) -> list[dict[str, Any]]:
    """The samples of a dataset version (dicts of Sample fields) with their review state under
    ``metadata.review`` only when asked for rows with rejected ones."""
    from sqlalchemy import select

    from ragmeter.store.models import DatasetSampleRow

    v = resolve(store, ref)
    with store.session() as s:
        q = select(DatasetSampleRow).where(DatasetSampleRow.dataset_pk == v.pk).order_by(DatasetSampleRow.position)
        rows = s.scalars(q).all()
    out = []
    for r in rows:
        if r.review == "rejected" and not include_rejected:
            continue
        d = dict(r.data)
        if include_rejected:
            d = {**d, "_review": r.review}
        out.append(d)
    return out


def load_samples(store: Any, ref: str, where: Mapping[str, str] | None = None) -> list[Any]:
    """Samples of a dataset as :class:`ragmeter.core.schema.Sample` objects (rejected ones left out)."""
    from ragmeter.core.schema import Sample

    return [Sample.model_validate(d) for d in samples_of(store, ref)]


def as_dataset(store: Any, ref: str) -> Any:
    """A stored dataset version as an :class:`ragmeter.io.Dataset` (source ``dataset:NAME@V``)."""
    from ragmeter.io.readers import Dataset

    v = resolve(store, ref)
    return Dataset(load_samples(store, v.ref), source=f"dataset:{v.ref}")


def parse_where(items: Sequence[str] | None) -> dict[str, str]:
    """``["type=multi_hop", "difficulty=hard"]`` -> ``{"type": "multi_hop", ...}``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--where expects field=value (e.g. type=multi_hop), got {item!r}")
        out[key.strip()] = value.strip()
    return out


def matches(sample: Any, where: Mapping[str, str]) -> bool:
    """Does a sample's metadata (or a top-level field) equal every ``where`` value?"""
    meta = getattr(sample, "metadata", None) or {}
    for key, want in where.items():
        got = meta.get(key, getattr(sample, key, None))
        if got is None or str(got) != want:
            return False
    return True


def select_where(dataset: Any, where: Mapping[str, str]) -> Any:
    """The samples of ``dataset`` whose metadata match ``where`` (a new Dataset; the source
    names the filter). Raises :class:`ConfigError` when none matches, listing the values seen."""
    from ragmeter.io.readers import Dataset

    kept = [s for s in dataset.samples if matches(s, where)]
    if not kept:
        seen = {k: sorted({str((s.metadata or {}).get(k)) for s in dataset.samples
                           if (s.metadata or {}).get(k) is not None})[:10] for k in where}
        raise ConfigError("no sample matches " + ", ".join(f"{k}={v}" for k, v in where.items())
                          + "; values present: " + "; ".join(f"{k}: {', '.join(v) or 'none'}" for k, v in seen.items()))
    tag = ",".join(f"{k}={v}" for k, v in where.items())
    return Dataset(kept, source=f"{dataset.source} where {tag}", skipped=list(dataset.skipped))
