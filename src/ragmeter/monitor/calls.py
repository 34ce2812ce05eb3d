"""Logged production calls: validation of one call, privacy options, and the store reads/writes.

A call is what one RAG request did in production: ``query``, ``answer``, ``contexts`` (texts or
``{"id", "text"}`` mappings), ``latency_ms``, ``cost_usd``, ``error`` (text or None), ``feedback``
(thumbs up = 1, down = 0, or a 0-1 rating), token counts, ``model`` and free ``metadata``
(route, app version ... used to group aggregates).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ragmeter.core.errors import DatasetError

#: the fields a call may carry; anything else goes into ``metadata``.
CALL_FIELDS = ("call_id", "timestamp", "query", "answer", "contexts", "latency_ms", "cost_usd",
               "error", "feedback", "input_tokens", "output_tokens", "model", "metadata")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
# international or national numbers: optional +, 8-15 digits with spaces, dots, dashes, brackets
_PHONE = re.compile(r"(?<![\w.])\+?\d[\d\s().-]{6,}\d(?![\w.])")
#: the key-value namespace of the agent traces kept beside their calls (:mod:`ragmeter.monitor.agents`)
KV_AGENT_TRACES = "monitor_agent_traces"
#: a ``call_id`` longer than this is refused (never cut: two long ids must not become one)
MAX_CALL_ID = 1024
MAX_MODEL_CHARS = 200
MAX_TOKENS = 2**53
#: larger values are mistakes (30 years; a billion dollars), and sums of them stay finite
MAX_LATENCY_MS = 1e12
MAX_COST_USD = 1e9
#: timestamps are kept between these (UTC): earlier or later is a sender's mistake
MIN_TS = datetime(1970, 1, 1)
MAX_TS = datetime(9999, 12, 31, 23, 59, 59)
_FEEDBACK_WORDS = {"up": 1.0, "thumbs_up": 1.0, "positive": 1.0, "good": 1.0, "true": 1.0,
                   "down": 0.0, "thumbs_down": 0.0, "negative": 0.0, "bad": 0.0, "false": 0.0}


@dataclass(frozen=True)
class Privacy:
    """What to do with logged text before it is stored.

    Args:
        max_text_chars: keep at most this many characters of query, answer and each context
            (``None``: keep all). Cut text ends with ``…``.
        redact_pii: replace e-mail addresses with ``[email]`` and phone numbers with ``[phone]``.
        store_text: ``False`` stores no query, answer or context text at all (latency, cost,
            errors and feedback only).
    """

    max_text_chars: int | None = None
    redact_pii: bool = False
    store_text: bool = True

    def clean(self, text: str | None) -> str | None:
        if text is None or not self.store_text:
            return None
        if self.redact_pii:
            text = _PHONE.sub("[phone]", _EMAIL.sub("[email]", text))
        if self.max_text_chars is not None and len(text) > self.max_text_chars:
            text = text[: self.max_text_chars] + "…"
        return text


def redact_pii(text: str) -> str:
    """``text`` with e-mail addresses and phone numbers replaced (``[email]``, ``[phone]``)."""
    return Privacy(redact_pii=True).clean(text) or ""


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _number(v: Any, field: str, where: str, *, integer: bool = False,
            maximum: float | None = None) -> float | int | None:
    if _missing(v) or v == "":
        return None
    if isinstance(v, bool):
        raise DatasetError(f"{where}: field '{field}' must be a number, got {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise DatasetError(f"{where}: field '{field}' must be a finite number >= 0, got {_shown(v)}") from None
    if not math.isfinite(x) or x < 0:
        raise DatasetError(f"{where}: field '{field}' must be a finite number >= 0, got {_shown(v)}")
    if maximum is not None and x > maximum:
        raise DatasetError(f"{where}: field '{field}' must be at most {maximum:g}, got {_shown(v)}")
    if integer:
        if x > MAX_TOKENS or x != int(x):
            raise DatasetError(f"{where}: field '{field}' must be a whole number up to 2**53, got {_shown(v)}")
        return int(x)
    return x


def _shown(v: Any) -> str:
    """``repr(v)`` cut to 60 characters (a value may be a 4,000-digit number or a long text)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 200:
        return f"a number with about {int(v.bit_length() * 0.30103)} digits"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _timestamp(v: Any, where: str) -> datetime:
    """A UTC timestamp (naive, as stored) from ISO 8601 text, epoch seconds or a datetime, between
    1970-01-01 and 9999-12-31."""
    if _missing(v) or v == "":
        return datetime.now(UTC).replace(tzinfo=None)
    span = "between 1970-01-01 and 9999-12-31"
    try:
        if isinstance(v, datetime):
            dt = v
        elif isinstance(v, int | float) and not isinstance(v, bool):
            if not math.isfinite(float(v)) or not 0 <= float(v) <= 253402300799:
                raise DatasetError(f"{where}: field 'timestamp' must be epoch seconds {span}, got {_shown(v)}")
            dt = datetime.fromtimestamp(float(v), UTC)
        elif isinstance(v, str):
            try:
                dt = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
            except ValueError:
                raise DatasetError(f"{where}: field 'timestamp' must be ISO 8601 "
                                   f"(e.g. 2026-11-23T14:05:00Z), got {_shown(v)}") from None
        else:
            raise DatasetError(f"{where}: field 'timestamp' must be ISO 8601 text, got {_shown(v)}")
        if dt.tzinfo is not None:
            dt = dt.astimezone(UTC)
    except (OverflowError, OSError, ValueError) as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(f"{where}: field 'timestamp' must be {span}, got {_shown(v)}") from None
    dt = dt.replace(tzinfo=None)
    if not MIN_TS <= dt <= MAX_TS:
        raise DatasetError(f"{where}: field 'timestamp' must be {span}, got {_shown(v)}")
    return dt


def _feedback(v: Any, where: str) -> float | None:
    if _missing(v) or v == "":
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, str) and v.strip().lower() in _FEEDBACK_WORDS:
        return _FEEDBACK_WORDS[v.strip().lower()]
    why = (f"{where}: field 'feedback' must be up/down, true/false or a number in [0, 1], "
           f"got {_shown(v)}")
    try:
        x = _number(v, "feedback", where)
    except DatasetError:
        raise DatasetError(why) from None
    if x is None or x > 1:
        raise DatasetError(why)
    return float(x)


def _contexts(v: Any, where: str, privacy: Privacy) -> list[Any] | None:
    if _missing(v):
        return None
    if isinstance(v, str | Mapping):
        v = [v]
    if not isinstance(v, Sequence):
        raise DatasetError(f"{where}: field 'contexts' must be a list of texts or "
                           f"{{'id', 'text'}} objects, got {type(v).__name__}")
    out: list[Any] = []
    for i, c in enumerate(v):
        if isinstance(c, str):
            out.append(privacy.clean(_text(c, f"contexts[{i}]", where)))
        elif isinstance(c, Mapping):
            text = c.get("text", c.get("content", c.get("page_content")))
            item = {"id": _text(c.get("id"), f"contexts[{i}].id", where),
                    "text": privacy.clean(_text(text, f"contexts[{i}].text", where))}
            out.append({k: x for k, x in item.items() if x is not None})
        else:
            raise DatasetError(f"{where}: contexts[{i}] must be a text or an object, got {_shown(c)}")
    return out


def _text(v: Any, field: str, where: str, *, max_chars: int | None = None) -> str | None:
    if _missing(v):
        return None
    if isinstance(v, int | float) and not isinstance(v, bool):
        try:
            v = str(v)
        except ValueError:  # an integer over Python's 4,300-digit conversion limit
            raise DatasetError(f"{where}: field '{field}' must be text, got {_shown(v)}") from None
    if not isinstance(v, str):
        raise DatasetError(f"{where}: field '{field}' must be text, got {type(v).__name__}")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DatasetError(f"{where}: field '{field}' holds a lone surrogate "
                               f"(\\u{ord(v[exc.start]):04x} at character {exc.start})") from None
    if "\x00" in v:
        raise DatasetError(f"{where}: field '{field}' holds a NUL character, which cannot be stored")
    if max_chars is not None and len(v) > max_chars:
        raise DatasetError(f"{where}: field '{field}' is longer than {max_chars} characters ({len(v)})")
    return v


def _call_id(v: Any, where: str) -> str | None:
    """The call's id, kept whole: text or an integer, 1 to :data:`MAX_CALL_ID` characters."""
    if _missing(v) or v == "":
        return None
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise DatasetError(f"{where}: field 'call_id' must be text or an integer, got {_shown(v)}")
    return _text(v, "call_id", where, max_chars=MAX_CALL_ID)


def normalise_call(call: Mapping[str, Any], *, where: str = "call", privacy: Privacy | None = None,
                   source: str = "api") -> dict[str, Any]:
    """Check one logged call and turn it into a ``monitor_calls`` row.

    Unknown keys are kept under ``metadata``. Raises :class:`DatasetError` naming ``where`` and
    the field on a wrong type.
    """
    if not isinstance(call, Mapping):
        raise DatasetError(f"{where}: a call must be a JSON object, got {type(call).__name__}")
    privacy = privacy or Privacy()
    meta = call.get("metadata")
    if _missing(meta):
        meta = {}
    if not isinstance(meta, Mapping):
        raise DatasetError(f"{where}: field 'metadata' must be an object, got {type(meta).__name__}")
    meta = dict(meta)
    for k, v in call.items():
        if k not in CALL_FIELDS and k not in {"ts", "latency", "cost"}:
            meta[k] = v
    error = call.get("error")
    if isinstance(error, Mapping):
        error = error.get("message") or error.get("type") or error
    if error is True:
        error = "error"
    elif error is False or _missing(error) or error == "":
        error = None
    elif not isinstance(error, str | int | float):
        try:
            error = str(error)
        except ValueError:  # holds an integer over Python's 4,300-digit conversion limit
            raise DatasetError(f"{where}: field 'error' must be text or an object") from None
    return {
        "call_id": _call_id(call.get("call_id"), where),
        "ts": _timestamp(call.get("timestamp", call.get("ts")), where),
        "query": privacy.clean(_text(call.get("query"), "query", where)),
        "answer": privacy.clean(_text(call.get("answer"), "answer", where)),
        "contexts": _contexts(call.get("contexts"), where, privacy),
        "latency_ms": _number(call.get("latency_ms", call.get("latency")), "latency_ms", where,
                              maximum=MAX_LATENCY_MS),
        "cost_usd": _number(call.get("cost_usd", call.get("cost")), "cost_usd", where, maximum=MAX_COST_USD),
        "error": _text(error, "error", where),
        "feedback": _feedback(call.get("feedback"), where),
        "input_tokens": _number(call.get("input_tokens"), "input_tokens", where, integer=True),
        "output_tokens": _number(call.get("output_tokens"), "output_tokens", where, integer=True),
        "model": _text(call.get("model"), "model", where, max_chars=MAX_MODEL_CHARS),
        "source": source,
        "meta": meta or None,
    }


def insert_calls(store: Any, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert normalised rows in one transaction. A row whose ``call_id`` is already stored is
    skipped (``INSERT ... ON CONFLICT DO NOTHING`` on SQLite and PostgreSQL), so a client that
    re-sends a batch after a timeout creates no duplicates. Returns the number of rows given."""
    if not rows:
        return 0
    with store.session() as s, s.begin():
        insert_call_rows(s, rows)
    return len(rows)


def insert_call_rows(session: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """:func:`insert_calls` inside the caller's transaction (``session``)."""
    from ragmeter.store.models import CallRow

    rows = [dict(r) for r in rows]
    if not rows:
        return
    table = CallRow.__table__
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        dialect_insert = None
    if dialect_insert is not None:
        session.execute(dialect_insert(table).on_conflict_do_nothing(index_elements=["call_id"]), rows)
        return
    from sqlalchemy import select

    ids = [r["call_id"] for r in rows if r.get("call_id")]
    seen = set(session.scalars(select(CallRow.call_id).where(CallRow.call_id.in_(ids)))) if ids else set()
    session.execute(table.insert(), [r for r in rows if not r.get("call_id") or r["call_id"] not in seen])


def count_calls(store: Any, since: datetime | None = None, until: datetime | None = None) -> int:
    from sqlalchemy import func, select

    from ragmeter.store.models import CallRow

    q = select(func.count()).select_from(CallRow)
    if since is not None:
        q = q.where(CallRow.ts >= since)
    if until is not None:
        q = q.where(CallRow.ts < until)
    with store.session() as s:
        return int(s.scalar(q) or 0)


def read_calls(store: Any, since: datetime | None, until: datetime | None,
               columns: Iterable[str] = ("ts", "latency_ms", "cost_usd", "error", "feedback",
                                         "input_tokens", "output_tokens", "model", "meta"),
               ) -> dict[str, list[Any]]:
    """The chosen columns of the calls in ``[since, until)``, column by column (no ORM objects)."""
    from sqlalchemy import select

    from ragmeter.store.models import CallRow

    cols = list(columns)
    q = select(*(getattr(CallRow, c) for c in cols)).order_by(CallRow.ts)
    if since is not None:
        q = q.where(CallRow.ts >= since)
    if until is not None:
        q = q.where(CallRow.ts < until)
    out: dict[str, list[Any]] = {c: [] for c in cols}
    with store.session() as s:
        for row in s.execute(q):
            for c, v in zip(cols, row, strict=True):
                out[c].append(v)
    return out


def prune_calls(store: Any, older_than: timedelta) -> int:
    """Delete calls logged before ``now - older_than`` (and OpenTelemetry spans received before
    then whose trace never got its root span, and the agent traces stored before then); returns
    how many calls were deleted."""
    from sqlalchemy import delete, select

    from ragmeter.store.models import CallRow, KeyValueRow, OtelSpanRow

    cutoff = datetime.now(UTC).replace(tzinfo=None) - older_than
    with store.session() as s, s.begin():
        res = s.execute(delete(CallRow).where(CallRow.ts < cutoff))
        s.execute(delete(OtelSpanRow).where(OtelSpanRow.received_at < cutoff))
        # the agent traces kept beside the calls deleted (monitor/agents.py)
        kept = select(CallRow.call_id).where(CallRow.call_id.is_not(None))
        s.execute(delete(KeyValueRow).where(KeyValueRow.namespace == KV_AGENT_TRACES, KeyValueRow.key.not_in(kept)))
        return int(res.rowcount or 0)
