"""A small, real RAG pipeline with no LLM, to run grid searches on and to imitate.

``rag(question, **params) -> {"answer": str, "contexts": [chunk dicts]}``: chunk a corpus
(character offsets, ``chunk_size``/``overlap``), retrieve ``top_k`` chunks with BM25, embeddings or
both (``retriever``), and answer with the retrieved sentence that best covers the question
(``answerer``). Contexts carry ``id``, ``text``, ``source``, ``start``, ``end`` and ``score``, so
retrieval metrics can match them to ground-truth spans.

Any callable with that signature is a pipeline; :func:`load_pipeline` resolves
``"package.module:function"`` or ``"path/to/file.py:function"``. A pipeline may also offer
``fn.batch(questions, **params) -> [results]``, which grid search prefers (the bundled one embeds
all questions at once that way).

>>> from ragmeter.pipeline import rag
>>> out = rag("What is the capital of France?", retriever="bm25", top_k=2)  # doctest: +SKIP
>>> out["answer"]                                                             # doctest: +SKIP
'Paris is the capital of France and the seat of its government.'
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.pipeline.answer import ANSWERERS, answer_batch, idf_table
from ragmeter.pipeline.chunking import TextChunk, chunk_corpus, chunk_text, read_corpus
from ragmeter.pipeline.retriever import RETRIEVERS, analyse, make_retriever, top_k

__all__ = ["ANSWERERS", "DEFAULTS", "RETRIEVERS", "TextChunk", "chunk_corpus", "chunk_text",
           "load_pipeline", "rag", "read_corpus"]

#: the bundled pipeline's parameters and their defaults
DEFAULTS: dict[str, Any] = {"corpus": None, "chunk_size": 400, "overlap": 50, "retriever": "bm25",
                            "top_k": 3, "answerer": "overlap", "answer_sentences": 1,
                            "embedding_model": None, "language": "en"}

_INDEX_LOCK = threading.Lock()
_INDEXES: dict[tuple[Any, ...], _Index] = {}


class _Index:
    """Chunks, retriever and idf table of one (corpus, chunking, retriever) configuration."""

    def __init__(self, corpus: str | None, chunk_size: int, overlap: int, retriever: str,
                 model: str | None, language: str = "en") -> None:
        self.chunks = chunk_corpus(read_corpus(corpus), chunk_size=chunk_size, overlap=overlap)
        self.retriever = make_retriever(retriever, self.chunks, model=model, language=language)
        self.idf = idf_table([analyse(c.text, language) for c in self.chunks])
        self.model = model


def _corpus_signature(corpus: str | None) -> str:
    if corpus is None:
        return "<bundled example>"
    p = Path(corpus).resolve()
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    h = hashlib.sha256(str(p).encode())
    for f in files:
        st = f.stat()
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _index(p: dict[str, Any]) -> _Index:
    key = (_corpus_signature(p["corpus"]), p["chunk_size"], p["overlap"], p["retriever"], p["embedding_model"],
           p["language"])
    with _INDEX_LOCK:
        idx = _INDEXES.get(key)
        if idx is None:
            idx = _Index(p["corpus"], p["chunk_size"], p["overlap"], p["retriever"], p["embedding_model"],
                         p["language"])
            _INDEXES[key] = idx
        return idx


def _params(params: dict[str, Any]) -> dict[str, Any]:
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"the bundled pipeline has no parameter(s) {sorted(unknown)}; "
                          f"valid: {', '.join(DEFAULTS)}")
    p = {**DEFAULTS, **params}
    k = p["top_k"]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"top_k must be a positive integer, got {k!r}")
    if p["retriever"] not in RETRIEVERS:
        raise ConfigError(f"unknown retriever {p['retriever']!r}; choose one of {', '.join(RETRIEVERS)}")
    if p["answerer"] not in ANSWERERS:
        raise ConfigError(f"unknown answerer {p['answerer']!r}; choose one of {', '.join(ANSWERERS)}")
    n = p["answer_sentences"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"answer_sentences must be a positive integer, got {n!r}")
    if p["corpus"] is not None:
        p["corpus"] = str(p["corpus"])
    from ragmeter.core.language import normalize_code

    p["language"] = normalize_code(p["language"])
    return p


def rag_batch(questions: Sequence[str], **params: Any) -> list[dict[str, Any]]:
    """:func:`rag` for many questions at once (one retrieval matrix, one embedding call)."""
    p = _params(params)
    questions = [str(q) for q in questions]
    if not questions:
        return []
    idx = _index(p)
    order, scores = top_k(idx.retriever.scores(questions), p["top_k"])
    contexts = [[idx.chunks[j].as_context(s) for j, s in zip(row, srow, strict=True)]
                for row, srow in zip(order.tolist(), scores.tolist(), strict=True)]
    encode = None
    if p["answerer"] == "embedding":
        from ragmeter.embed import get_encoder

        enc = get_encoder(p["embedding_model"])
        encode = enc.encode
    answers = answer_batch(questions, [[str(c["text"]) for c in ctx] for ctx in contexts],
                           method=p["answerer"], n_sentences=p["answer_sentences"], idf=idx.idf,
                           encode=encode, language=p["language"])
    return [{"answer": a, "contexts": c} for a, c in zip(answers, contexts, strict=True)]


def rag(question: str, **params: Any) -> dict[str, Any]:
    """Answer ``question`` from the corpus: chunk, retrieve ``top_k`` chunks, extract a sentence.

    Args:
        question: the question.
        corpus: a folder of ``.md``/``.txt`` files or one file (default: the bundled example's
            handbook corpus).
        chunk_size: characters per chunk (default 400); overlap: characters shared by
            neighbouring chunks (default 50).
        retriever: ``bm25`` (default), ``embedding`` (all-MiniLM-L6-v2 unless
            ``embedding_model``) or ``hybrid`` (reciprocal rank fusion of both).
        top_k: chunks returned (default 3).
        answerer: ``overlap`` (idf-weighted question-term coverage, default) or ``embedding``
            (cosine of question and sentence); answer_sentences: how many sentences (default 1).
        language: ``en`` (default: English stopwords, Porter stems) or another ISO code: bm25s's
            stopword list for it and its Snowball stemmer, in BM25 and the overlap answerer.

    Returns:
        ``{"answer": str, "contexts": [{"id", "text", "source", "start", "end", "score"}, ...]}``
        with contexts best first. The answer is ``""`` when no retrieved sentence qualifies.

    Raises:
        ConfigError: an unknown parameter or an invalid value.
    """
    return rag_batch([question], **params)[0]


rag.batch = rag_batch  # type: ignore[attr-defined]


def load_pipeline(target: str | Callable[..., Any]) -> Callable[..., Any]:
    """Resolve ``"package.module:function"`` or ``"path/to/file.py:function"`` to the callable.

    The current directory is importable, so a ``my_rag.py`` next to the config works as
    ``my_rag:answer``.

    Raises:
        ConfigError: malformed target, module not importable, no such attribute, not callable.
    """
    if callable(target):
        return target
    if not isinstance(target, str) or ":" not in target:
        raise ConfigError(f"pipeline must be 'module:function' (e.g. ragmeter.pipeline:rag), got {target!r}")
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise ConfigError(f"pipeline must be 'module:function', got {target!r}")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name)
            if not path.is_file():
                raise ConfigError(f"pipeline file not found: {path}")
            spec = importlib.util.spec_from_file_location(f"_ragmeter_pipeline_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(mod_name)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import failure of user code
        raise ConfigError(f"cannot import pipeline module {mod_name!r}: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, attr, None)
    if fn is None:
        raise ConfigError(f"pipeline module {mod_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise ConfigError(f"pipeline {target!r} is not callable")
    return fn


def accepts(fn: Callable[..., Any], params: dict[str, Any]) -> None:
    """Fail early when ``fn`` cannot take ``params`` as keyword arguments."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return
    names = {n for n, p in sig.parameters.items()
             if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    unknown = set(params) - names
    if unknown:
        raise ConfigError(f"pipeline {getattr(fn, '__name__', fn)!r} takes no parameter(s) {sorted(unknown)}")
