"""The texts the lexical metrics compare: answers and references checked once at the public edge
(plain functions), and a run's samples as the metrics see them (:func:`sample_texts`: Unicode NFC
unless the run option ``unicode_normalize`` is false)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample

References = str | Sequence[str]


def _as_refs(reference: Any, where: str = "reference") -> list[str]:
    if isinstance(reference, str):
        return [reference]
    if isinstance(reference, Sequence) and not isinstance(reference, bytes):
        refs = list(reference)
        if not refs:
            raise MetricError(f"{where}: at least one reference is needed, got an empty list")
        for j, r in enumerate(refs):
            if not isinstance(r, str):
                raise MetricError(f"{where}[{j}] must be a string, got {type(r).__name__}")
        return refs
    raise MetricError(f"{where} must be a string or a list of strings, got {type(reference).__name__}")


def _as_answer(answer: Any, where: str = "answer") -> str:
    if not isinstance(answer, str):
        raise MetricError(f"{where} must be a string, got {type(answer).__name__}")
    return answer


def _as_columns(answers: Sequence[Any], references: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    if isinstance(answers, str) or isinstance(references, str):
        raise MetricError("answers and references must be lists (one entry per pair), not strings")
    if len(answers) != len(references):
        raise MetricError(f"answers and references differ in length: {len(answers)} != {len(references)}")
    return ([_as_answer(a, f"answers[{i}]") for i, a in enumerate(answers)],
            [_as_refs(r, f"references[{i}]") for i, r in enumerate(references)])


def sample_texts(samples: Sequence[Sample], ctx: ScoringContext | None) -> tuple[list[str], list[list[str]]]:
    """Answers and references of ``samples`` as the lexical metrics see them: Unicode NFC-normalised
    ("café" typed with a combining accent equals the precomposed "café"), unless the run option
    ``unicode_normalize`` is false. A missing answer is the empty string."""
    answers = [s.answer or "" for s in samples]
    refs = [list(s.references) for s in samples]
    if ctx is not None and ctx.options.get("unicode_normalize") is False:
        return answers, refs
    import unicodedata

    # most text is already NFC: one check over the texts not seen yet (the run's other metrics see
    # the same text objects: a set look-up each), per-text work only otherwise
    known = _NFC_TEXTS
    todo = [t for t in (*answers, *(r for rs in refs for r in rs)) if t not in known]
    if not todo or unicodedata.is_normalized("NFC", "\n".join(todo)):
        if len(known) + len(todo) > _NFC_TEXTS_MAX:
            known.clear()
        known.update(dict.fromkeys(todo))
        return answers, refs

    def nfc(t: str) -> str:
        return t if t.isascii() else unicodedata.normalize("NFC", t)

    return [nfc(a) for a in answers], [[nfc(r) for r in rs] for rs in refs]


#: texts found to be NFC already (bounded, emptied when full; shared by the threads of a process, which only add
#: texts that are NFC, so a text in it is NFC whatever another thread does meanwhile)
_NFC_TEXTS: dict[str, None] = {}
_NFC_TEXTS_MAX = 1 << 16  # a 30,000-pair run's texts; at most some tens of MB held

