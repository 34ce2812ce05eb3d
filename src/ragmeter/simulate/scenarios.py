"""Scenario files of ``ragmeter simulate``: YAML (or JSON) with a list under ``scenarios:``.

Each scenario has ``persona``, ``goal`` and ``expected_outcome`` (texts), and optionally ``id``,
``max_turns`` (user turns, 1-100), ``stop`` (a phrase: the conversation ends when the system's
reply contains it, ignoring case) and ``chatbot_role`` (the system prompt sent to the target,
stored as the conversation's role)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmeter.core.errors import DatasetError

FIELDS = ("id", "persona", "goal", "expected_outcome", "max_turns", "stop", "chatbot_role")
REQUIRED = ("persona", "goal", "expected_outcome")
MAX_TURNS = 100
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class Scenario:
    id: str
    persona: str
    goal: str
    expected_outcome: str
    max_turns: int | None = None
    stop: str | None = None
    chatbot_role: str | None = None


def read_scenarios(path: str | Path) -> list[Scenario]:
    """The scenarios of a file.

    Raises:
        DatasetError: naming the file and the field (``scenarios[2].goal``) of the first problem.
    """
    import yaml

    from ragmeter.core.files import read_text

    text = read_text(path, "scenarios file")
    file = str(path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DatasetError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", file=file,
                           line=mark.line + 1 if mark is not None else None) from None
    except RecursionError:
        raise DatasetError("not valid YAML: nested too deeply", file=file) from None
    return parse_scenarios(doc, file)


def parse_scenarios(doc: Any, file: str = "<scenarios>") -> list[Scenario]:
    if not isinstance(doc, dict) or "scenarios" not in doc:
        raise DatasetError("expected a mapping with a list under 'scenarios:'", file=file, field="scenarios")
    unknown = sorted(str(k) for k in doc if k != "scenarios")
    if unknown:
        raise DatasetError(f"unknown key(s) {unknown}; the file holds 'scenarios:'", file=file, field=unknown[0])
    items = doc["scenarios"]
    if not isinstance(items, list) or not items:
        raise DatasetError("expected a non-empty list of scenarios", file=file, field="scenarios")
    out: list[Scenario] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"scenarios[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(f"expected a mapping with {', '.join(REQUIRED)}, got {type(item).__name__}",
                               file=file, field=where)
        bad = sorted(str(k) for k in item if k not in FIELDS)
        if bad:
            raise DatasetError(f"unknown key {bad[0]!r}; valid: {', '.join(FIELDS)}", file=file, field=f"{where}.{bad[0]}")
        for k in REQUIRED:
            v = item.get(k)
            if not isinstance(v, str) or not v.strip():
                raise DatasetError("required: a non-empty text" if v is None else
                                   f"expected a non-empty text, got {type(v).__name__ if not isinstance(v, str) else 'an empty text'}",
                                   file=file, field=f"{where}.{k}")
        for k in ("stop", "chatbot_role"):
            v = item.get(k)
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise DatasetError("expected a non-empty text", file=file, field=f"{where}.{k}")
        mt = item.get("max_turns")
        if mt is not None and (not isinstance(mt, int) or isinstance(mt, bool) or not 1 <= mt <= MAX_TURNS):
            raise DatasetError(f"expected a whole number from 1 to {MAX_TURNS}, got {mt!r}", file=file,
                               field=f"{where}.max_turns")
        sid = item.get("id", f"scenario-{i + 1}")
        if isinstance(sid, int) and not isinstance(sid, bool):
            sid = str(sid)
        if not isinstance(sid, str) or not _ID.match(sid):
            raise DatasetError("expected letters, digits, '.', '_' or '-' (at most 100)", file=file, field=f"{where}.id")
        if sid in seen:
            raise DatasetError(f"id {sid!r} appears twice", file=file, field=f"{where}.id")
        seen.add(sid)
        out.append(Scenario(id=sid, persona=item["persona"], goal=item["goal"],
                            expected_outcome=item["expected_outcome"], max_turns=mt, stop=item.get("stop"),
                            chatbot_role=item.get("chatbot_role")))
    return out


#: the persona of scenarios built from a dataset's samples when none is given
DEFAULT_PERSONA = "A user of the system who wants a correct, complete answer to their question."


def scenarios_from_samples(samples: list[dict[str, Any]], persona: str | None = None,
                           source: str = "dataset") -> list[Scenario]:
    """One scenario per sample of a golden dataset: its question is the goal, its (first)
    reference the expected outcome.

    Raises:
        DatasetError: a sample without a question, or no sample at all.
    """
    out: list[Scenario] = []
    seen: set[str] = set()
    for i, s in enumerate(samples):
        q = s.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DatasetError("a sample without a question cannot be a simulated user's goal",
                               file=source, field=f"samples[{i}].question")
        refs = s.get("references") or []
        sid = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(s.get("id") or f"sample-{i + 1}"))[:100].strip("-") or f"sample-{i + 1}"
        while sid in seen:
            sid = f"{sid}-{i + 1}"
        seen.add(sid)
        out.append(Scenario(id=sid, persona=persona or DEFAULT_PERSONA, goal=q,
                            expected_outcome=refs[0] if refs and isinstance(refs[0], str) else
                            "A correct answer to the question."))
    if not out:
        raise DatasetError("the dataset has no samples", file=source)
    return out
