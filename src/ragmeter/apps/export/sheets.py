"""Google Sheets sink: append a stored run to the agent-evaluation guide's Google Sheets layout.

Five worksheets, created when absent, header row written once, rows appended (append mode):

==================== ======================= ============================================================
worksheet            one row per             columns
==================== ======================= ============================================================
``deepeval_metrics`` sample with a value     the DeepEval metrics + the weighted ``overall_score``
``openevals_metrics`` sample with a value    the OpenEvals/AgentEvals agent metrics + ``overall_score``
``agent_metrics``    sample with a value     every agent-family metric, with its breakdown (details)
``unified_metrics``  run                     accuracy / agent-efficiency / overall quality, every mean
``llm_judge_results`` sample x judged metric score and the judge's reasoning (or why no value)
==================== ======================= ============================================================

Credentials: a Google service-account JSON file whose path is in ``RAGMETER_SHEETS_CREDENTIALS``
or ``GOOGLE_APPLICATION_CREDENTIALS``; the file is read by google-auth and never stored or logged.
Requests are batched (one metadata read, one ``batchUpdate`` for missing worksheets, one
``values:batchGet`` for the headers, one ``append`` per worksheet and block of rows), within the
Sheets API's per-minute write quota; a 429 or 5xx answer is retried with backoff, honouring
``Retry-After``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.redact import redact
from ragmeter.store import Store

CREDENTIALS_ENV = ("RAGMETER_SHEETS_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS")
# where the Sheets v4 API lives; tests point it at a local fake
API_URL_ENV = "RAGMETER_SHEETS_API_URL"
GOOGLE_API = "https://sheets.googleapis.com"
SCOPES = ("https://www.googleapis.com/auth/spreadsheets",)
ROWS_PER_REQUEST = 2000
MAX_RETRIES = 6

DEEPEVAL = ("answer_relevancy", "faithfulness", "hallucination", "contextual_relevancy", "bias", "toxicity")
OPENEVALS = ("intent_correctness", "plan_quality", "tool_choice_correctness", "tool_completeness",
             "trajectory_match", "final_answer_quality")
AGENT = (*OPENEVALS, "trajectory_judge")
BASE = ("timestamp", "run_id", "run_name", "sample_id")
HEADERS: dict[str, list[str]] = {
    "deepeval_metrics": [*BASE, *DEEPEVAL, "overall_score"],
    "openevals_metrics": [*BASE, *OPENEVALS, "overall_score"],
    "agent_metrics": [*BASE, *AGENT, "breakdown"],
    "unified_metrics": ["timestamp", "run_id", "run_name", "dataset", "n_samples", "accuracy_score",
                        "agent_efficiency_score", "overall_quality_score", "metric_means"],
    "llm_judge_results": [*BASE, "metric", "score", "reasoning"],
}
WORKSHEETS = tuple(HEADERS)


def _base_name(key: str) -> str:
    return key.split("(", 1)[0].split("@", 1)[0]


def _by_base(keys: Sequence[str]) -> dict[str, str]:
    """``{base metric name: run key}`` (the first key of each base name)."""
    out: dict[str, str] = {}
    for k in keys:
        out.setdefault(_base_name(k), k)
    return out


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return round(v, 10)
    return v


def sheet_rows(store: Store, run_id: str, *, now: datetime | None = None) -> dict[str, list[list[Any]]]:
    """The rows a run adds to each of the five worksheets (without headers).

    Args:
        store: the results store.
        run_id: id (or prefix, name, ``latest``) of a stored run.
        now: the timestamp written in every row (default: the current UTC time).

    Returns:
        ``{worksheet: [row, ...]}`` in the column order of :data:`HEADERS`; an empty cell is no value.
    """
    from ragmeter.analysis.composite import composite_scores
    from ragmeter.metrics.registry import all_metrics

    rid = store.resolve_run(run_id)
    run = store.get_run(rid)
    ts = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    keys = [m["key"] for m in run.metrics]
    base = _by_base(keys)
    table = store.score_table(rid)
    ids = [s.id for s in store.run_samples(rid)]
    llm_names = {s.name for s in all_metrics() if s.needs_llm}
    name = run.name or ""

    def composite(preset: str) -> dict[str, Any]:
        res = composite_scores(store, rid, preset, per_sample=True)
        return res or {}

    def value(key: str | None, sid: str) -> Any:
        sc = table.get(key, {}).get(sid) if key else None
        return sc.value if sc is not None else None

    out: dict[str, list[list[Any]]] = {w: [] for w in WORKSHEETS}
    for sheet, names in (("deepeval_metrics", DEEPEVAL), ("openevals_metrics", OPENEVALS)):
        present = [base.get(n) for n in names]
        if not any(present):
            continue
        per = composite("deepeval" if sheet == "deepeval_metrics" else "openevals").get("per_sample") or {}
        for sid in ids:
            vals = [value(k, sid) for k in present]
            if all(v is None for v in vals):
                continue
            overall = (per.get(sid) or {}).get("value")
            out[sheet].append([ts, rid, name, sid, *(_cell(v) for v in vals), _cell(overall)])
    agent_keys = [base.get(n) for n in AGENT]
    if any(agent_keys):
        for sid in ids:
            vals = [value(k, sid) for k in agent_keys]
            if all(v is None for v in vals):
                continue
            breakdown = {}
            for n, k in zip(AGENT, agent_keys, strict=True):
                sc = table.get(k, {}).get(sid) if k else None
                if sc is not None and (sc.details or sc.reason):
                    breakdown[n] = sc.details if sc.details else {"reason": sc.reason}
            out["agent_metrics"].append([ts, rid, name, sid, *(_cell(v) for v in vals),
                                         redact(json.dumps(breakdown, default=str, sort_keys=True))])
    for k in keys:
        if _base_name(k) not in llm_names:
            continue
        for sid in ids:
            sc = table.get(k, {}).get(sid)
            if sc is None:
                continue
            reasoning = sc.reason or ""
            if sc.value is not None and sc.details:
                reasoning = json.dumps(sc.details, default=str, sort_keys=True)
            out["llm_judge_results"].append([ts, rid, name, sid, k, _cell(sc.value), redact(reasoning)[:45000]])
    means = {k: m.mean for k, m in store.run_summary(run).items()}
    accuracy = composite("accuracy").get("mean")
    agent_eff = composite("openevals").get("mean")
    unified = composite("unified").get("mean")
    out["unified_metrics"].append([ts, rid, name, redact(run.dataset_source or ""), run.n_samples,
                                   _cell(accuracy), _cell(agent_eff), _cell(unified),
                                   json.dumps(means, sort_keys=True)])
    return out


def _base_url() -> str:
    return (os.environ.get(API_URL_ENV) or GOOGLE_API).rstrip("/")


def _credentials_path() -> str:
    for env in CREDENTIALS_ENV:
        path = os.environ.get(env)
        if path:
            if not os.path.isfile(path):
                raise ConfigError(f"{env} names no readable file; set it to the path of a Google "
                                  "service-account JSON key file")
            return path
    raise ConfigError("no Google credentials: set RAGMETER_SHEETS_CREDENTIALS (or "
                      "GOOGLE_APPLICATION_CREDENTIALS) to the path of a service-account JSON key file, "
                      "and share the spreadsheet with that service account's e-mail")


def _http_client_class(sleep: Callable[[float], None]) -> type:
    """gspread's HTTP client, sending to :func:`_base_url` and retrying 429/5xx answers."""
    from gspread.exceptions import APIError
    from gspread.http_client import HTTPClient

    base = _base_url()

    class RetryingClient(HTTPClient):  # type: ignore[misc]
        def request(self, method: str, endpoint: str, *args: Any, **kwargs: Any) -> Any:
            if endpoint.startswith(GOOGLE_API) and base != GOOGLE_API:
                endpoint = base + endpoint[len(GOOGLE_API):]
            delay = 1.0
            for attempt in range(MAX_RETRIES + 1):
                try:
                    return super().request(method, endpoint, *args, **kwargs)
                except APIError as exc:
                    status = exc.response.status_code
                    if (status != 429 and status < 500) or attempt == MAX_RETRIES:
                        raise
                    retry_after = exc.response.headers.get("Retry-After")
                    try:
                        wait = float(retry_after) if retry_after is not None else delay
                    except ValueError:
                        wait = delay
                    sleep(min(wait, 64.0))
                    delay *= 2
            raise AssertionError("unreachable")

    return RetryingClient


def _a1(title: str) -> str:
    return "'" + title.replace("'", "''") + "'"


def export_sheets(store: Store, run_id: str, spreadsheet: str, *,
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, int]:
    """Append a run to a Google spreadsheet in the five-worksheet layout (see the module doc).

    Args:
        store: the results store.
        run_id: id (or prefix, name, ``latest``) of a stored run.
        spreadsheet: the spreadsheet's id (the part of its URL after ``/d/``).
        sleep: how to wait before a retry (tests pass a recorder).

    Returns:
        ``{worksheet: rows appended}``.

    Raises:
        ConfigError: gspread missing, no credentials, the spreadsheet cannot be opened, or a
            worksheet's existing header differs from the layout.
    """
    try:
        import gspread
        from google.oauth2.service_account import Credentials
    except ImportError as exc:
        raise ConfigError("the Google Sheets sink needs gspread: pip install 'ragmeter-eval[sheets]'") from exc
    rows = sheet_rows(store, run_id)
    path = _credentials_path()
    try:
        creds = Credentials.from_service_account_file(path, scopes=list(SCOPES))
    except (ValueError, KeyError, OSError) as exc:
        raise ConfigError(f"cannot read the service-account key file: {type(exc).__name__}") from None
    client = gspread.Client(auth=creds, http_client=_http_client_class(sleep))
    try:
        book = client.open_by_key(spreadsheet)
        existing = {ws.title for ws in book.worksheets()}
        missing = [w for w in WORKSHEETS if w not in existing]
        if missing:
            book.batch_update({"requests": [
                {"addSheet": {"properties": {"title": w, "gridProperties": {
                    "rowCount": 1000, "columnCount": len(HEADERS[w])}}}} for w in missing]})
        got = book.values_batch_get([f"{_a1(w)}!1:1" for w in WORKSHEETS])
        counts: dict[str, int] = {}
        for w, vr in zip(WORKSHEETS, got.get("valueRanges", []), strict=False):
            header = [str(c) for c in (vr.get("values") or [[]])[0]]
            body = rows[w]
            if not header:
                body = [HEADERS[w], *body]
            elif header != HEADERS[w]:
                raise ConfigError(f"worksheet {w!r} has a different header row ({', '.join(header[:6])} ...); "
                                  f"expected {', '.join(HEADERS[w])}. Rename that worksheet or use another spreadsheet")
            for start in range(0, len(body), ROWS_PER_REQUEST):
                book.values_append(f"{_a1(w)}!A1", {"valueInputOption": "RAW", "insertDataOption": "INSERT_ROWS"},
                                   {"values": body[start:start + ROWS_PER_REQUEST]})
            counts[w] = len(rows[w])
        return counts
    except gspread.exceptions.SpreadsheetNotFound:
        raise ConfigError(f"spreadsheet {spreadsheet!r} not found, or not shared with the service account") from None
    except gspread.exceptions.APIError as exc:
        raise ConfigError(f"Google Sheets API error {exc.response.status_code}: "
                          f"{redact(exc.response.text[:300])}") from None
