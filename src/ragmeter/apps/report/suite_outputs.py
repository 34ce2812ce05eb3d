"""What ``ragmeter test`` writes for a continuous-integration job besides its exit code: a JUnit XML
file (one testcase per sample x metric) and a Markdown summary for the job's page (GitHub Actions
``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmeter.core.counts import count
from ragmeter.run.rows import PASS_SUFFIX, first_reference

if TYPE_CHECKING:
    from ragmeter.store.records import RunSummary


def _num(v: Any) -> str:
    return "no value" if v is None else f"{v:.4f}"


def junit_xml(suite_name: str, rows: Sequence[Mapping[str, Any]], summary: RunSummary,
              gate_rows: Sequence[Any] = ()) -> ET.ElementTree:
    """Build the JUnit tree: a testsuite per metric with one testcase per sample. A thresholded
    value below its threshold is a ``failure`` (message: value, threshold, judge verdict); a
    missing value is an ``error`` carrying the reason; a regression-gate row is one more testcase."""
    root = ET.Element("testsuites", name=suite_name)
    for key, summ in summary.items():
        thr = (summ.check or {}).get("threshold")
        ts = ET.SubElement(root, "testsuite", name=f"{suite_name}.{key}")
        n_fail = n_err = 0
        for row in rows:
            tc = ET.SubElement(ts, "testcase", name=str(row["id"]), classname=f"{suite_name}.{key}")
            value = row.get(key)
            verdict = row.get(key + PASS_SUFFIX)
            judge = (row.get("judge") or {}).get(key)
            detail = "\n".join(x for x in (
                f"question: {row.get('question')}", f"answer: {row.get('answer')}",
                f"reference: {first_reference(row)}", f"judge: {judge}" if judge else "") if x)
            if value is None:
                n_err += 1
                reason = (row.get("no_value_reasons") or {}).get(key, "no value")
                el = ET.SubElement(tc, "error", message=f"{key}: no value ({reason})", type="NoValue")
                el.text = detail
            elif verdict is False:
                n_fail += 1
                msg = f"{key} = {_num(value)} fails threshold {thr}" + (f"; judge: {judge}" if judge else "")
                el = ET.SubElement(tc, "failure", message=msg, type="ThresholdFailed")
                el.text = detail
            else:
                ET.SubElement(tc, "system-out").text = f"{key} = {_num(value)}" + (f" ({thr})" if thr else "")
        ts.set("tests", str(len(rows)))
        ts.set("failures", str(n_fail))
        ts.set("errors", str(n_err))
    if gate_rows:
        ts = ET.SubElement(root, "testsuite", name=f"{suite_name}.regression_gate")
        n_fail = 0
        for g in gate_rows:
            tc = ET.SubElement(ts, "testcase", name=g.metric, classname=f"{suite_name}.regression_gate")
            if g.regressed:
                n_fail += 1
                ET.SubElement(tc, "failure", type="Regression",
                              message=f"{g.metric}: {_num(g.baseline)} -> {_num(g.current)} "
                                      f"(drop {_num(g.drop)}, p={_num(g.pvalue)})")
        ts.set("tests", str(len(gate_rows)))
        ts.set("failures", str(n_fail))
        ts.set("errors", "0")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, *args: Any, **kwargs: Any) -> Path:
    """Write :func:`junit_xml` to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_xml(*args, **kwargs).write(path, encoding="utf-8", xml_declaration=True)
    return path


def markdown(suite_name: str, run_id: str, rows: Sequence[Mapping[str, Any]],
             summary: RunSummary, rule_text: str, gate_rows: Sequence[Any] = (),
             max_failures: int = 20) -> str:
    """A Markdown summary: one line per metric (mean and 95% CI, pass rate and Wilson CI, status),
    the regression gate, then the first failing samples with the judge's verdict summary."""
    out = [f"## ragmeter test: {suite_name}", "",
           f"Run `{run_id}`, {count(len(rows), 'sample')}. Run rule: {rule_text}.", "",
           "| metric | mean [95% CI] | no value | threshold | pass rate [95% CI] | status |",
           "|---|---|---|---|---|---|"]
    for key, s in summary.items():
        p = s.check or {}
        mean = _num(s.mean) + (f" [{_num(s.ci_low)}, {_num(s.ci_high)}]" if s.ci_low is not None else "")
        rate = (f"{p['passed']}/{p['n']} = {_num(p.get('rate'))} [{_num(p.get('rate_low'))}, "
                f"{_num(p.get('rate_high'))}]") if p else ""
        status = "" if not p else ("✅ pass" if p.get("ok") else "❌ fail")
        out.append(f"| {key} | {mean} | {s.n_missing} | {p.get('threshold', '')} | {rate} | {status} |")
    if gate_rows:
        out += ["", "### Regression gate", "", "| metric | baseline | current | drop | p | status |",
                "|---|---|---|---|---|---|"]
        out += [f"| {g.metric} | {_num(g.baseline)} | {_num(g.current)} | {_num(g.drop)} | {_num(g.pvalue)} | "
                f"{'❌ regressed' if g.regressed else '✅ ok'} |" for g in gate_rows]
    fails = [(r, k) for k in summary for r in rows if r.get(k + PASS_SUFFIX) is False]
    if fails:
        out += ["", f"### Failing samples ({len(fails)})", "", "| sample | metric | value | judge | question |",
                "|---|---|---|---|---|"]
        for r, k in fails[:max_failures]:
            q = str(r.get("question") or "").replace("|", "\\|")[:80]
            judge = str((r.get("judge") or {}).get(k) or "").replace("|", "\\|").replace("\n", " ")[:160]
            out.append(f"| {r['id']} | {k} | {_num(r.get(k))} | {judge} | {q} |")
        if len(fails) > max_failures:
            out.append(f"\n… and {len(fails) - max_failures} more (see the JUnit file or `ragmeter export`).")
    return "\n".join(out) + "\n"
