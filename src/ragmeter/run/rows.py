"""Per-sample result rows with their inputs: what ``export``, ``--out``, ``to_pandas()`` and the
JUnit/Markdown outputs of ``ragmeter test`` all read, so they show the same columns and verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.records import SAMPLE_COLUMNS, sample_columns, sample_record
from ragmeter.core.schema import Sample, Score
from ragmeter.core.thresholds import from_record, passes

if TYPE_CHECKING:
    from ragmeter.store.records import RunSummary

#: every input column a row may have (:data:`ragmeter.core.records.SAMPLE_COLUMNS`: the sample's fields
#: under the names the readers read, so a row reads back as its sample)
INPUT_COLUMNS = list(SAMPLE_COLUMNS)
PASS_SUFFIX = "__pass"


def first_reference(row: Mapping[str, Any]) -> str | None:
    """A result row's first reference answer (``references[0]``), or ``None``."""
    refs = row.get("references")
    return refs[0] if isinstance(refs, list) and refs else None


#: what counts, per item list of stored ``details`` written before metrics stored their own summary
_LEGACY_COUNTS: dict[str, tuple[set[str], str]] = {
    "claims": ({"supported"}, "claims supported"),
    "statements": ({"yes", "idk"}, "statements supported"),  # idk counts as relevant
    "verdicts": ({"yes"}, "verdicts supported"),
}


def verdict_summary(details: Mapping[str, Any] | None, metric: str | None = None) -> str | None:
    """One line from a score's ``details``: the summary the metric built from the same verdicts
    as its score ("3 of 4 claims supported by the contexts", where 3/4 is the score of a
    count-based metric), else the judge's reason, else -- for scores stored before metrics wrote
    summaries -- counts of the verdicts read by the metric's rule (``metric``: the key, which
    tells ``bias`` from ``toxicity`` and ``hallucination`` from ``faithfulness``)."""
    if not details:
        return None
    for key in ("summary", "reason", "reasoning", "explanation", "note"):
        if isinstance(details.get(key), str) and details[key]:
            return details[key]
    name = (metric or "").split("(")[0].split("@")[0]
    items = details.get("opinions")
    if isinstance(items, list) and items:
        flag = "toxic" if name.endswith("toxicity") else "biased"
        k = sum(1 for x in items if isinstance(x, Mapping) and x.get(flag) is True)
        if name.startswith("deepeval:"):
            return f"{len(items) - k} of {len(items)} opinions not {flag}"
        return f"{k} of {len(items)} opinions {flag}"
    for key, (passing, label) in _LEGACY_COUNTS.items():
        items = details.get(key)
        if isinstance(items, list) and items:
            k = sum(1 for x in items if isinstance(x, Mapping) and str(x.get("verdict", "")).lower() in passing)
            if key == "claims" and name == "hallucination":
                return f"{len(items) - k} of {len(items)} claims contradicted or not found"
            return f"{k} of {len(items)} {label}"
    return None


def result_rows(samples: Sequence[Sample], scores: Mapping[str, Sequence[Score | None]],
                higher: Mapping[str, bool], thresholds_record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One dict per sample: its inputs (:func:`ragmeter.core.records.sample_record`: ``id``,
    ``question``, ``answer``, ``references``, ``contexts``, and ``negative_references``,
    ``relevant``, ``label``, ``metadata``, ``trace`` when a sample has them), one value per metric
    (``None`` = no value), ``METRIC__pass`` for thresholded metrics (``True``/``False``/``None`` from
    :func:`ragmeter.core.thresholds.passes`), ``no_value_reasons`` and ``judge``
    (``{metric: verdict summary}``)."""
    thr, _ = from_record(thresholds_record)
    records = [sample_record(s.model_dump(mode="json", exclude_defaults=True)) for s in samples]
    inputs = sample_columns(records)
    rows = []
    for i, rec in enumerate(records):
        row: dict[str, Any] = {c: rec[c] for c in inputs}
        reasons: dict[str, str] = {}
        judge: dict[str, str] = {}
        for key, col in scores.items():
            sc = col[i]
            value = sc.value if sc is not None else None
            row[key] = value
            if value is None:
                reasons[key] = (sc.reason if sc is not None else None) or "not scored"
            if key in thr:
                row[key + PASS_SUFFIX] = passes(value, thr[key], higher.get(key, True))
            if sc is not None and (summary := verdict_summary(sc.details, key)):
                judge[key] = summary
        row["no_value_reasons"] = reasons
        row["judge"] = judge
        rows.append(row)
    return rows


def select_columns(rows: list[dict[str, Any]], columns: Sequence[str] | None) -> list[dict[str, Any]]:
    """Keep ``columns`` (in that order); ``None`` keeps all. Unknown names raise ``ConfigError``."""
    if not columns:
        return rows
    known = list(rows[0]) if rows else []
    unknown = [c for c in columns if rows and c not in known]
    if unknown:
        raise ConfigError(f"unknown column(s) {', '.join(unknown)}; available: {', '.join(known)}")
    return [{c: r.get(c) for c in columns} for r in rows]


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}"


def summary_html(summary: RunSummary, title: str = "") -> str:
    """The run summary as an HTML table (mean with its 95% bootstrap interval, n, no value, and the
    pass rate with its Wilson interval for thresholded metrics): what Jupyter shows for a result."""
    from html import escape

    head = ("<tr><th>metric</th><th>mean</th><th>95% CI</th><th>n</th><th>no value</th>"
            "<th>threshold</th><th>pass rate</th><th>pass-rate 95% CI</th><th>status</th></tr>")
    body = []
    for key, m in summary.items():
        p = m.check or {}
        status = "" if not p else ("pass" if p.get("ok") else "FAIL")
        ci = f"[{_fmt(m.ci_low)}, {_fmt(m.ci_high)}]" if m.ci_low is not None else "–"
        pci = f"[{_fmt(p.get('rate_low'))}, {_fmt(p.get('rate_high'))}]" if p.get("rate_low") is not None else ""
        body.append(f"<tr><td>{escape(key)}</td><td>{_fmt(m.mean)}</td><td>{ci}</td>"
                    f"<td>{m.n}</td><td>{m.n_missing}</td>"
                    f"<td>{escape(p.get('threshold', ''))}</td>"
                    f"<td>{_fmt(p.get('rate')) if p else ''}</td><td>{pci}</td><td>{status}</td></tr>")
    caption = f"<caption>{escape(title)}</caption>" if title else ""
    return (f'<table class="ragmeter-summary">{caption}<thead>{head}</thead>'
            f"<tbody>{''.join(body)}</tbody></table>")
