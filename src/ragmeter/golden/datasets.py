"""Datasets in the store: versions with content hashes and tags, review states, diffs, exports,
and a CSV round trip for reviewers who prefer a spreadsheet.

A dataset is referred to as ``NAME`` (its newest version), ``NAME@3`` (version 3) or
``NAME@TAG``. Versions are immutable once final; review works on a *draft* version copied from
the newest final one on the first review action, so ``ragmeter dataset diff NAME@1 NAME`` shows
exactly what review changed. Rejected samples stay in the draft (marked) and leave every export
and evaluation.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.io.stored import DatasetVersion, _version, resolve, samples_of

REVIEW_STATES = ("pending", "accepted", "edited", "rejected")
EDITABLE = ("question", "references", "negative_references", "relevant", "metadata")
_NAME = re.compile(r"^[\w.-]{1,200}$")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def content_hash(samples: Iterable[Mapping[str, Any]]) -> str:
    h = hashlib.sha256()
    for s in samples:
        h.update(json.dumps(s, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def _check_name(name: str) -> None:
    if not _NAME.match(name or ""):
        raise ConfigError(f"dataset name must be letters, digits, '.', '_' or '-', got {name!r}")


def save_dataset(store: Any, name: str, samples: Sequence[Mapping[str, Any]], *, info: dict[str, Any] | None = None,
                 tag: str | None = None) -> DatasetVersion:
    """Store ``samples`` as the next final version of ``name``.

    Raises:
        DatasetError: no samples (an empty file: nothing is stored), or a sample that is not valid.
    """
    from sqlalchemy import func, select

    from ragmeter.core.schema import Sample
    from ragmeter.store.models import DatasetRow, DatasetSampleRow

    _check_name(name)
    if not samples:
        raise DatasetError(f"dataset {name}: no samples to store (the input is empty); nothing stored")
    clean = []
    seen: set[str] = set()
    for i, s in enumerate(samples):
        try:
            d = Sample.model_validate(s).model_dump(mode="json", exclude_none=True)
        except Exception as exc:  # noqa: BLE001 - pydantic's message names the field
            raise DatasetError(f"dataset {name}: sample {i + 1}: {exc}") from None
        if d["id"] in seen:
            raise DatasetError(f"dataset {name}: sample id {d['id']!r} appears twice")
        seen.add(d["id"])
        clean.append(d)
    with store.session() as s, s.begin():
        last = s.scalar(select(func.max(DatasetRow.version)).where(DatasetRow.name == name)) or 0
        row = DatasetRow(name=name, version=last + 1, tag=tag, status="final",
                         content_hash=content_hash(clean), info=info or {})
        s.add(row)
        s.flush()
        s.execute(DatasetSampleRow.__table__.insert(),
                  [{"dataset_pk": row.pk, "sample_id": d["id"], "position": i, "review": "pending",
                    "data": d} for i, d in enumerate(clean)])
        return _version(row, len(clean))


def tag_version(store: Any, ref: str, tag: str) -> DatasetVersion:
    from ragmeter.store.models import DatasetRow

    if tag.isdigit():
        raise ConfigError("a tag cannot be a number (numbers are versions)")
    v = resolve(store, ref)
    with store.session() as s, s.begin():
        s.get(DatasetRow, v.pk).tag = tag
    return resolve(store, f"{v.name}@{v.version}")


# ---- review ------------------------------------------------------------------------------------
def draft(store: Any, name: str) -> DatasetVersion:
    """The draft version of ``name`` that review writes to: the newest version if it is a draft,
    else a copy of the newest final version (new version number, review states kept)."""
    from sqlalchemy import select

    from ragmeter.store.models import DatasetRow, DatasetSampleRow

    latest = resolve(store, name)
    if latest.status == "draft":
        return latest
    with store.session() as s, s.begin():
        row = DatasetRow(name=name, version=latest.version + 1, status="draft", tag=None,
                         content_hash=latest.content_hash, parent_version=latest.version,
                         info={**latest.info, "reviewed_from": latest.version})
        s.add(row)
        s.flush()
        src = s.scalars(select(DatasetSampleRow).where(DatasetSampleRow.dataset_pk == latest.pk)).all()
        s.execute(DatasetSampleRow.__table__.insert(),
                  [{"dataset_pk": row.pk, "sample_id": r.sample_id, "position": r.position,
                    "review": r.review, "data": r.data, "reviewed_at": r.reviewed_at} for r in src])
        return _version(row, len(src))


def review(store: Any, name: str, sample_id: str, action: str, changes: Mapping[str, Any] | None = None,
           ) -> dict[str, Any]:
    """Accept, edit or reject one sample in the draft of ``name``; returns the sample row.

    ``edit`` takes ``changes`` of the editable fields (question, references, negative_references,
    relevant, metadata); spans in ``relevant`` are checked against the corpus text when the
    dataset records its corpus (``text`` must equal ``document[start:end]``).
    """
    from sqlalchemy import select

    from ragmeter.core.schema import Sample
    from ragmeter.store.models import DatasetSampleRow

    if action not in ("accept", "edit", "reject", "reset"):
        raise ConfigError(f"review action must be accept, edit, reject or reset, got {action!r}")
    v = draft(store, name)
    with store.session() as s, s.begin():
        row = s.scalars(select(DatasetSampleRow).where(DatasetSampleRow.dataset_pk == v.pk,
                                                       DatasetSampleRow.sample_id == sample_id)).first()
        if row is None:
            raise ConfigError(f"dataset {name} has no sample {sample_id!r}")
        if action == "edit":
            if changes is not None and not isinstance(changes, Mapping):
                raise DatasetError(f"sample {sample_id}: changes must be an object of new field values")
            unknown = set(changes or {}) - set(EDITABLE)
            if unknown:
                raise ConfigError(f"cannot edit {sorted(unknown)}; editable: {', '.join(EDITABLE)}")
            data = {**row.data, **dict(changes or {})}
            if "relevant" in (changes or {}):
                spans = changes["relevant"]  # type: ignore[index]
                if not isinstance(spans, list):
                    raise DatasetError(f"sample {sample_id}: field 'relevant' must be a list of spans")
                data["relevant"] = [_checked_span(store, v, sp, f"relevant[{i}]") for i, sp in enumerate(spans)]
            try:
                data = Sample.model_validate(data).model_dump(mode="json", exclude_none=True)
            except Exception as exc:  # noqa: BLE001 - pydantic names the field
                raise DatasetError(f"sample {sample_id}: {exc}") from None
            row.data = data
        row.review = {"accept": "accepted", "edit": "edited", "reject": "rejected", "reset": "pending"}[action]
        row.reviewed_at = _now()
        return {"sample_id": row.sample_id, "review": row.review, "data": row.data, "version": v.version}


def _checked_span(store: Any, v: DatasetVersion, span: Any, where: str = "relevant") -> dict[str, Any]:
    if not isinstance(span, Mapping):
        raise DatasetError(f"field '{where}' must be a span object (source, start, end, text)")
    corpus = v.info.get("corpus")
    sp = dict(span)
    for key in ("start", "end"):
        x = sp.get(key)
        if x is not None and (isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 2**53):
            raise DatasetError(f"field '{where}.{key}' must be a character offset (a whole number >= 0)")
    if sp.get("source") is not None and not isinstance(sp["source"], str):
        raise DatasetError(f"field '{where}.source' must be a document path (text)")
    if corpus and sp.get("source") is not None and sp.get("start") is not None and sp.get("end") is not None:
        text = document_text(store, corpus, sp["source"])
        s, e = sp["start"], sp["end"]
        if not 0 <= s < e <= len(text):
            raise DatasetError(f"span {s}-{e} is outside {sp['source']} ({len(text)} characters)")
        sp["text"] = text[s:e]
    return sp


def document_text(store: Any, corpus: str, source: str) -> str:
    from ragmeter.golden.corpus import corpus_documents

    for d in corpus_documents(store, corpus):
        if d.path == source:
            return d.text
    raise DatasetError(f"corpus {corpus} has no document {source!r}")


def finalise(store: Any, name: str, tag: str | None = None) -> DatasetVersion:
    """Make the draft of ``name`` a final version (hash recomputed, optional tag)."""
    from ragmeter.store.models import DatasetRow

    v = resolve(store, name)
    if v.status != "draft":
        raise ConfigError(f"{name} has no draft to finalise (newest is {v.ref}, final)")
    samples = samples_of(store, v.ref)
    with store.session() as s, s.begin():
        row = s.get(DatasetRow, v.pk)
        row.status, row.content_hash = "final", content_hash(samples)
        if tag:
            row.tag = tag
    return resolve(store, f"{name}@{v.version}")


# ---- diff, export -------------------------------------------------------------------------------
def diff(store: Any, a: str, b: str) -> dict[str, Any]:
    """Samples added, removed (incl. rejected in review) and changed (fields, review state)
    from version ``a`` to version ``b``."""
    va, vb = resolve(store, a), resolve(store, b)
    sa = {d["id"]: d for d in samples_of(store, va.ref, include_rejected=True)}
    sb = {d["id"]: d for d in samples_of(store, vb.ref, include_rejected=True)}
    live_a = {k for k, d in sa.items() if d["_review"] != "rejected"}
    live_b = {k for k, d in sb.items() if d["_review"] != "rejected"}
    changed = []
    for k in sorted(live_a & live_b):
        da, db = dict(sa[k]), dict(sb[k])
        ra, rb = da.pop("_review"), db.pop("_review")
        fields = sorted(f for f in set(da) | set(db) if da.get(f) != db.get(f))
        if fields or ra != rb:
            changed.append({"id": k, "fields": fields, "review": [ra, rb] if ra != rb else None,
                            "before": {f: da.get(f) for f in fields}, "after": {f: db.get(f) for f in fields}})
    removed = sorted(live_a - live_b)
    return {"a": va.ref, "b": vb.ref, "added": sorted(live_b - live_a), "removed": removed,
            "rejected": [k for k in removed if k in sb and sb[k]["_review"] == "rejected"],
            "changed": changed}


def export_jsonl(store: Any, ref: str, path: str | Path) -> int:
    samples = samples_of(store, ref)
    with open(path, "w", encoding="utf-8") as f:
        for d in samples:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    return len(samples)


REVIEW_COLUMNS = ("id", "review", "question", "references", "negative_references", "relevant", "type")


def review_csv(store: Any, name: str) -> str:
    """The newest version of ``name`` as a review sheet: one row per sample; list fields as JSON."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(REVIEW_COLUMNS)
    v = resolve(store, name)
    for d in samples_of(store, v.ref, include_rejected=True):
        w.writerow([d["id"], d["_review"], d.get("question", ""), json.dumps(d.get("references", []), ensure_ascii=False),
                    json.dumps(d.get("negative_references", []), ensure_ascii=False),
                    json.dumps(d.get("relevant", []), ensure_ascii=False), d.get("metadata", {}).get("type", "")])
    return buf.getvalue()


def apply_review_csv(store: Any, name: str, path: str | Path) -> dict[str, int]:
    """Apply a filled-in review sheet: the ``review`` column and any edited field. Every row is
    checked before any is applied, so a bad row changes nothing. Returns counts per action.

    The ``review`` column takes one of :data:`REVIEW_STATES`: ``accepted`` (keep the sample),
    ``rejected`` (leave it out of the final version), ``edited`` (keep it; the edited cells are
    applied, as they are for ``accepted``) or ``pending`` (not reviewed yet), in any letter case.

    Raises:
        DatasetError: naming the file, line and field of the first bad row.
    """
    from ragmeter.core.files import csv_rows, read_text

    counts = {"accepted": 0, "edited": 0, "rejected": 0, "pending": 0, "unchanged": 0}
    current = {d["id"]: d for d in samples_of(store, name, include_rejected=True)}
    rows = csv_rows(read_text(path, "review sheet"), path)
    header = next(rows, [])
    missing = [c for c in ("id", "review") if c not in header]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing}; expected {', '.join(REVIEW_COLUMNS)}")
    planned: list[tuple[str, str, dict[str, Any]]] = []
    for line, cells in enumerate(rows, start=2):
        if not any(c.strip() for c in cells):
            continue
        row = {h: (cells[i] if i < len(cells) else None) for i, h in enumerate(header)}
        sid = row["id"]
        if sid not in current:
            raise DatasetError(f"{path}:{line}: field 'id': no sample {sid!r} in {name}")
        before = current[sid]
        changes: dict[str, Any] = {}
        if row.get("question") is not None and row["question"] != before.get("question", ""):
            changes["question"] = row["question"]
        for fld in ("references", "negative_references", "relevant"):
            if row.get(fld) in (None, ""):
                continue
            try:
                value = json.loads(row[fld])
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit number, deep nesting
                raise DatasetError(f"{path}:{line}: field '{fld}': not a JSON list "
                                   f"({getattr(exc, 'msg', None) or type(exc).__name__})") from None
            if not isinstance(value, list):
                raise DatasetError(f"{path}:{line}: field '{fld}': not a JSON list (got {type(value).__name__})")
            if value != before.get(fld, []):
                changes[fld] = value
        state = (row.get("review") or "").strip().lower()
        if state not in REVIEW_STATES:
            raise DatasetError(f"{path}:{line}: field 'review': {state!r} is not one of {', '.join(REVIEW_STATES)}")
        planned.append((sid, state, changes))
    for sid, state, changes in planned:
        if changes and state != "rejected":
            review(store, name, sid, "edit", changes)
            counts["edited"] += 1
        elif state != current[sid]["_review"]:
            action = {"accepted": "accept", "rejected": "reject", "pending": "reset", "edited": "accept"}[state]
            review(store, name, sid, action)
            counts[state if state != "edited" else "accepted"] += 1
        else:
            counts["unchanged"] += 1
    return counts


