"""Character-offset chunking of a corpus: fixed-size windows with overlap that end at a word
boundary, each chunk carrying ``source``, ``start`` and ``end`` so that
``text[start:end] == chunk_text`` and span-based retrieval metrics can match it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ragmeter.core.errors import ConfigError

CORPUS_SUFFIXES = (".md", ".txt", ".rst", ".markdown")


@dataclass(frozen=True)
class TextChunk:
    """A chunk of a document: ``text == document[start:end]``."""

    id: str
    text: str
    source: str
    start: int
    end: int

    def as_context(self, score: float | None = None) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "text": self.text, "source": self.source,
                                  "start": self.start, "end": self.end}
        if score is not None:
            out["score"] = round(float(score), 6)
        return out


def _check(chunk_size: int, overlap: int) -> None:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive integer (characters), got {chunk_size!r}")
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap < chunk_size:
        raise ConfigError(f"overlap must be an integer in [0, chunk_size), got {overlap!r} "
                          f"(chunk_size {chunk_size})")


def chunk_text(text: str, source: str, *, chunk_size: int = 400, overlap: int = 50) -> list[TextChunk]:
    """Split ``text`` into chunks of at most ``chunk_size`` characters overlapping by about
    ``overlap`` characters.

    A window ``[start, start + chunk_size)`` is cut back to the last paragraph break, sentence end
    or space inside its second half, so words are not split (a single word longer than the window
    is cut hard). Leading and trailing whitespace is trimmed from every chunk and its offsets
    follow, so ``text[c.start:c.end] == c.text`` always holds. The next window starts
    ``overlap`` characters before the previous end, moved forward to a word start, and always
    after the previous start, so chunking terminates. Whitespace-only text gives no chunk.

    Raises:
        ConfigError: ``chunk_size < 1`` or ``overlap`` outside ``[0, chunk_size)``.

    Example:
        >>> [c.text for c in chunk_text("one two three four", "d", chunk_size=9, overlap=0)]
        ['one two', 'three', 'four']
    """
    _check(chunk_size, overlap)
    n = len(text)
    chunks: list[TextChunk] = []
    start = 0
    while start < n:
        while start < n and text[start].isspace():
            start += 1
        if start >= n:
            break
        end = min(n, start + chunk_size)
        if end < n:
            end = _cut(text, start, end)
        s, e = start, end
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            chunks.append(TextChunk(f"{source}#{s}-{e}", text[s:e], source, s, e))
        if end >= n:
            break
        nxt = max(end - overlap, start + 1)
        # start the next chunk at a word boundary (forward, never past ``end``)
        while 0 < nxt < end and not text[nxt - 1].isspace():
            nxt += 1
        start = nxt
    return chunks


def _cut(text: str, start: int, end: int) -> int:
    """The best end for a window: a paragraph break, a sentence end, else a space, in the
    window's second half; ``end`` itself when none (an over-long word)."""
    half = start + (end - start) // 2
    para = text.rfind("\n\n", half, end)
    if para != -1:
        return para + 2 if para + 2 <= end else para
    best = -1
    for mark in (". ", "? ", "! ", ".\n", "\n"):
        i = text.rfind(mark, half, end)
        if i != -1:
            best = max(best, i + len(mark))
    if best != -1 and best <= end:
        return best
    sp = text.rfind(" ", half, end)
    if sp != -1:
        return sp + 1
    return end


def read_corpus(path: str | Path | None = None) -> list[tuple[str, str]]:
    """``[(source, text), ...]`` of a corpus folder (``.md``/``.txt``/``.rst`` files, recursively,
    sorted; ``source`` is the path relative to the folder with ``/`` separators) or a single file.
    ``None`` is the bundled example corpus.

    Raises:
        ConfigError: the path does not exist or holds no text file.
    """
    if path is None:
        from importlib import resources

        p = Path(str(resources.files("ragmeter") / "data" / "example" / "corpus"))
    else:
        p = Path(path)
    if not p.exists():
        raise ConfigError(f"corpus not found: {p}")
    if p.is_file():
        return [(p.name, p.read_text(encoding="utf-8"))]
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in CORPUS_SUFFIXES)
    if not files:
        raise ConfigError(f"corpus folder {p} holds no {'/'.join(CORPUS_SUFFIXES)} file")
    return [(f.relative_to(p).as_posix(), f.read_text(encoding="utf-8")) for f in files]


def chunk_corpus(docs: Iterable[tuple[str, str]], *, chunk_size: int = 400,
                 overlap: int = 50) -> list[TextChunk]:
    """Every document's chunks, in document order."""
    _check(chunk_size, overlap)
    return [c for source, text in docs for c in chunk_text(text, source, chunk_size=chunk_size,
                                                             overlap=overlap)]
