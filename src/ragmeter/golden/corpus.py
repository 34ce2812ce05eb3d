"""A corpus in the store: documents read from txt, md, html and pdf files, with stable ids,
content hashes and versions, and chunkers that keep character offsets into each document.

Offsets always refer to the document's stored text. For ``.txt`` and ``.md`` that text is the
file read as UTF-8 (universal newlines), so ``file_text[start:end] == chunk.text``. For HTML the
text is the visible text (script and style dropped, block elements separated by newlines); for
PDF it is pypdf's extracted text, pages separated by a form feed. Offsets then point into that
extracted text, which the dataset export carries with the spans' ``source``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.pipeline.chunking import TextChunk, chunk_text

FORMATS = {".txt": "txt", ".text": "txt", ".md": "md", ".markdown": "md", ".rst": "txt",
           ".html": "html", ".htm": "html", ".pdf": "pdf"}
CHUNKERS = ("fixed", "sentence", "paragraph", "markdown")


@dataclass(frozen=True)
class Document:
    path: str
    text: str
    format: str
    version: int = 1
    content_hash: str = ""
    doc_id: str = ""


# ---- reading files ----------------------------------------------------------------------------
class _TextExtractor(HTMLParser):
    _BLOCK = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table",
              "section", "article", "header", "footer", "pre", "blockquote", "hr", "dt", "dd"}
    _SKIP = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)

    def text(self) -> str:
        raw = "".join(self.parts)
        lines = [re.sub(r"[ \t\r\f\v]+", " ", ln).strip() for ln in raw.split("\n")]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def html_to_text(html: str) -> str:
    """The visible text of an HTML page, block elements on their own lines."""
    p = _TextExtractor()
    p.feed(html)
    p.close()
    return p.text()


def read_document(path: Path) -> tuple[str, str]:
    """``(text, format)`` of one file. Raises :class:`DatasetError` naming the file."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DatasetError(f"{path}: unsupported file type {path.suffix or '(none)'} "
                           f"(supported: {', '.join(sorted(set(FORMATS)))})")
    if fmt == "pdf":
        try:
            from pypdf import PdfReader
            from pypdf.errors import PdfReadError
        except ImportError:
            raise ConfigError("reading PDF needs pypdf: pip install 'ragmeter-eval[golden]'") from None
        try:
            reader = PdfReader(str(path))
            return "\f".join((page.extract_text() or "") for page in reader.pages), fmt
        except (PdfReadError, ValueError, OSError) as exc:
            raise DatasetError(f"{path}: not a readable PDF ({exc})") from None
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                           "convert it, e.g. iconv -f latin1 -t utf-8") from None
    return (html_to_text(raw), fmt) if fmt == "html" else (raw, fmt)


def find_files(paths: Sequence[str | Path]) -> list[tuple[Path, str]]:
    """``[(file, source), ...]``: each file with its ``source`` name, the path relative to the
    folder it was found in (``/`` separators), or the file name for a file given directly."""
    out: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if not p.exists():
            raise DatasetError(f"{p}: no such file or folder")
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in FORMATS)
            if not files:
                raise DatasetError(f"{p}: no {', '.join(sorted(set(FORMATS)))} file in this folder")
            out.extend((f, f.relative_to(p).as_posix()) for f in files)
        else:
            out.append((p, p.name))
    return out


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---- the store ----------------------------------------------------------------------------------
def add_documents(store: Any, corpus: str, paths: Sequence[str | Path]) -> dict[str, list[str]]:
    """Read files into corpus ``corpus``. A new path is version 1; a path whose content changed
    gets a new version (the old one stays, no longer current); unchanged files are skipped.
    Returns ``{"added": [...], "updated": [...], "unchanged": [...]}`` (source names)."""
    from sqlalchemy import select, update

    from ragmeter.store.models import CorpusDocumentRow as Row

    if not corpus or not re.fullmatch(r"[\w.-]{1,200}", corpus):
        raise ConfigError(f"corpus name must be letters, digits, '.', '_' or '-', got {corpus!r}")
    found = find_files(paths)
    report: dict[str, list[str]] = {"added": [], "updated": [], "unchanged": []}
    docs = [(source, *read_document(f)) for f, source in found]
    with store.session() as s, s.begin():
        for source, text, fmt in docs:
            h = _hash(text)
            cur = s.scalars(select(Row).where(Row.corpus == corpus, Row.path == source, Row.current)).first()
            if cur is not None and cur.content_hash == h:
                report["unchanged"].append(source)
                continue
            version = 1 if cur is None else cur.version + 1
            if cur is not None:
                s.execute(update(Row).where(Row.pk == cur.pk).values(current=False))
            s.add(Row(corpus=corpus, path=source, version=version, current=True,
                      doc_id=_hash(f"{corpus}\0{source}")[:16], content_hash=h, format=fmt, text=text))
            report["updated" if cur is not None else "added"].append(source)
    return report


def corpus_documents(store: Any, corpus: str) -> list[Document]:
    """The current version of every document of ``corpus``, ordered by path."""
    from sqlalchemy import select

    from ragmeter.store.models import CorpusDocumentRow as Row

    with store.session() as s:
        rows = s.scalars(select(Row).where(Row.corpus == corpus, Row.current).order_by(Row.path)).all()
    if not rows:
        known = list_corpora(store)
        raise ConfigError(f"no corpus {corpus!r} in the store"
                          + (f" (corpora: {', '.join(known)})" if known else "")
                          + "; add one with `ragmeter corpus add DIR --name NAME`")
    return [Document(r.path, r.text, r.format, r.version, r.content_hash, r.doc_id) for r in rows]


def list_corpora(store: Any) -> list[str]:
    from sqlalchemy import select

    from ragmeter.store.models import CorpusDocumentRow as Row

    with store.session() as s:
        return sorted(s.scalars(select(Row.corpus).distinct()).all())


# ---- chunkers ---------------------------------------------------------------------------------
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"')\]]*\s+")
_HEADING = re.compile(r"^#{1,6}\s", re.M)


def _spans(text: str, source: str, bounds: Iterable[tuple[int, int]]) -> list[TextChunk]:
    out = []
    for s, e in bounds:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append(TextChunk(f"{source}#{s}-{e}", text[s:e], source, s, e))
    return out


def _pack(text: str, source: str, pieces: list[tuple[int, int]], max_chars: int) -> list[TextChunk]:
    """Consecutive pieces joined while they fit in ``max_chars`` (a longer piece stays whole)."""
    bounds: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for s, e in pieces:
        if cur is None:
            cur = (s, e)
        elif e - cur[0] <= max_chars:
            cur = (cur[0], e)
        else:
            bounds.append(cur)
            cur = (s, e)
    if cur is not None:
        bounds.append(cur)
    return _spans(text, source, bounds)


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        bounds.append((start, m.end()))
        start = m.end()
    if start < len(text):
        bounds.append((start, len(text)))
    return bounds


def paragraph_bounds(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for m in re.finditer(r"\n[ \t]*\n+", text):
        bounds.append((start, m.start()))
        start = m.end()
    bounds.append((start, len(text)))
    return bounds


def heading_bounds(text: str) -> list[tuple[int, int]]:
    starts = [m.start() for m in _HEADING.finditer(text)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    return [(s, e) for s, e in zip(starts, [*starts[1:], len(text)], strict=True)]


def chunk_document(doc: Document, *, method: str = "paragraph", size: int = 800,
                   overlap: int = 100) -> list[TextChunk]:
    """Chunks of one document, each with ``text == doc.text[start:end]``.

    Args:
        method: ``fixed`` (windows of ``size`` characters overlapping by ``overlap``, cut at word
            boundaries), ``sentence`` (sentences packed up to ``size``), ``paragraph`` (blank-line
            separated paragraphs packed up to ``size``) or ``markdown`` (sections under headings,
            long sections split by paragraph).
    """
    if method not in CHUNKERS:
        raise ConfigError(f"chunker must be one of {', '.join(CHUNKERS)}, got {method!r}")
    if size < 20:
        raise ConfigError(f"chunk size must be at least 20 characters, got {size}")
    if method == "fixed":
        return chunk_text(doc.text, doc.path, chunk_size=size, overlap=overlap)
    if method == "sentence":
        return _pack(doc.text, doc.path, sentence_bounds(doc.text), size)
    if method == "paragraph":
        return _pack(doc.text, doc.path, paragraph_bounds(doc.text), size)
    chunks: list[TextChunk] = []
    for s, e in heading_bounds(doc.text):
        if e - s <= size:
            chunks.extend(_spans(doc.text, doc.path, [(s, e)]))
        else:
            pieces = [(s + a, s + b) for a, b in paragraph_bounds(doc.text[s:e])]
            chunks.extend(_pack(doc.text, doc.path, pieces, size))
    return chunks
