"""Tokenisation of a whole column of texts at once, on UTF-8 bytes, for the lexical kernels.

rouge-score's tokenizer, SQuAD's answer normalisation and sacrebleu's ``13a`` tokenizer are rules
whose character classes are ASCII (``[a-z0-9]``, ``string.punctuation``, 13a's padded symbols,
``[0-9]``): which characters separate tokens, which are deleted, which stand alone as a token; any
other character is kept inside its token. In UTF-8 an ASCII character is one byte below 0x80 and
every byte of a longer character is 0x80 or above, so the rules are rules about single bytes on the
UTF-8 text too, and a token boundary never falls inside a character. Here the texts of a column are
joined into one byte buffer (after the steps that are not ASCII: Unicode lower-casing, the
whitespace ``str.split`` sees beyond ASCII, such as NO-BREAK SPACE, turned into spaces), each byte
is classified through 256-entry tables, token starts come from the classes of a byte and its
neighbours (numpy, vectorised), the token bytes are compacted into one Arrow string array and
interned by Arrow's hash-based ``dictionary_encode``: the result is one integer id per token and the
short list of distinct words, with no Python object per token. SQuAD's article expression
(``\b(a|an|the)\b``, where ``\b`` is Unicode's) is then applied to each distinct word.

A text that cannot be encoded (a lone surrogate), or a column holding the one case the rules do
not cover (runs of ``.``/``,`` for 13a), takes the kernels' own Python path for those texts; the
tests compare both paths with rouge-score, sacrebleu and the SQuAD script token by token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

# sacrebleu 13a: the characters padded with spaces by its first expression
_PAD13A = np.zeros(256, dtype=bool)
for _lo, _hi in ((0x7B, 0x7E), (0x5B, 0x60), (0x21, 0x26), (0x28, 0x2B), (0x3A, 0x40), (0x2F, 0x2F)):
    _PAD13A[_lo:_hi + 1] = True
_DASH = ord("-")
_MARK_OR_DASH = np.zeros(256, dtype=bool)  # the bytes 13a's later expressions look around
_MARK_OR_DASH[[ord("."), ord(","), _DASH]] = True
_PIECE = 1 << 19  # bytes of text tokenised at once
# the characters beyond ASCII that str.split() separates on (str.isspace; the tests check the list)
UNICODE_SPACES = "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
                 "\u2028\u2029\u202f\u205f\u3000"
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)  # the SQuAD script's


def _as_is(joined: str) -> str:
    return joined


def _unicode_spaces(buf: np.ndarray) -> np.ndarray:
    """``buf`` (UTF-8 ending with a newline) with the whitespace beyond ASCII (:data:`UNICODE_SPACES`)
    turned into as many ASCII spaces as it has bytes: every rule here treats any whitespace as a
    space (it separates tokens, is neither a digit, a mark nor a word character), and the texts keep
    their byte offsets. Their UTF-8 forms start with 0xC2, 0xE1, 0xE2 or 0xE3 and the buffer's last
    byte is a newline, so the two bytes after a lead byte exist."""
    lead = np.flatnonzero((buf == 0xC2) | ((buf - np.uint8(0xE1)) <= np.uint8(2)))
    if not lead.size:
        return buf
    b0, b1, b2 = buf[lead], buf[lead + 1], buf[lead + 2]
    two = (b0 == 0xC2) & ((b1 == 0x85) | (b1 == 0xA0))
    three = (((b0 == 0xE1) & (b1 == 0x9A) & (b2 == 0x80))
             | ((b0 == 0xE2) & (b1 == 0x80) & (((b2 - np.uint8(0x80)) <= np.uint8(0x0A)) | (b2 == 0xA8)
                                               | (b2 == 0xA9) | (b2 == 0xAF)))
             | ((b0 == 0xE2) & (b1 == 0x81) & (b2 == 0x9F))
             | ((b0 == 0xE3) & (b1 == 0x80) & (b2 == 0x80)))
    if not (two.any() or three.any()):
        return buf
    buf = buf.copy()
    for at, width in ((lead[two], 2), (lead[three], 3)):
        for k in range(width):
            buf[at + k] = 32
    return buf


class Tokens:
    """Token ids of a column of texts: ``ids`` (int64, every text's tokens one after the other),
    ``lens`` (tokens per text) and ``words`` (the text of each id, for the fast texts' ids)."""

    __slots__ = ("ids", "lens", "words")

    def __init__(self, ids: np.ndarray, lens: np.ndarray, words: list[str]) -> None:
        self.ids, self.lens, self.words = ids, lens, words


def _encode(texts: Sequence[str], prep: Callable[[str], str]) -> tuple[np.ndarray, np.ndarray] | None:
    """The texts joined by newlines (a newline inside a text is a space: whitespace to every rule
    here) after ``prep``, as UTF-8 bytes with the whitespace beyond ASCII as spaces, and the byte
    offset where each text starts; None when a text cannot be encoded (a lone surrogate)."""
    joined = prep("\n".join(texts) + "\n")
    for _ in range(2):
        try:
            data = joined.encode("utf-8")
        except UnicodeEncodeError:
            return None
        buf = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(buf == 10)  # 0x0A is a newline and nothing else in UTF-8
        if len(ends) == len(texts):
            break
        joined = prep("\n".join([t.replace("\n", " ") for t in texts]) + "\n")
    starts = np.zeros(len(texts), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    return (buf if joined.isascii() else _unicode_spaces(buf)), starts


def _join(texts: Sequence[str], prep: Callable[[str], str]) -> tuple[np.ndarray, np.ndarray]:
    got = _encode(texts, prep)
    if got is None:
        raise ValueError("a text holds a lone surrogate (not encodable as UTF-8): the covered_* check leaves it out")
    return got


def _intern(data: np.ndarray, token_start: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Ids of the tokens of ``data`` (compacted token bytes; ``token_start`` flags each token's first
    byte) by Arrow's hash dictionary, and the distinct words."""
    import pyarrow as pa

    first = np.flatnonzero(token_start)
    offsets = np.empty(len(first) + 1, dtype=np.int64)
    offsets[:-1] = first
    offsets[-1] = len(data)
    arr = pa.LargeStringArray.from_buffers(len(first), pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))
    enc = arr.dictionary_encode()
    idx = enc.indices  # int32 without nulls; read from its buffer (to_numpy would import pandas)
    ids = np.frombuffer(idx.buffers()[1], dtype=np.int32, count=len(idx), offset=idx.offset * 4)
    return ids.astype(np.int64), enc.dictionary.to_pylist()


def _ws_mask(buf: np.ndarray) -> np.ndarray:
    """ASCII whitespace as ``str.split()`` sees it: 0x09-0x0D and 0x1C-0x20 (comparisons on
    wrapped-around bytes: a table look-up per byte costs several times more)."""
    ws = (buf - np.uint8(9)) <= np.uint8(4)
    ws |= (buf - np.uint8(28)) <= np.uint8(4)
    return ws


def _alnum_mask(buf: np.ndarray) -> np.ndarray:
    """ASCII letters and digits (``b | 0x20`` folds the upper-case letters onto the lower-case)."""
    m = (buf - np.uint8(48)) <= np.uint8(9)
    m |= ((buf | np.uint8(32)) - np.uint8(97)) <= np.uint8(25)
    return m


def _punct_mask(buf: np.ndarray) -> np.ndarray:
    """``string.punctuation``: the printable ASCII bytes 0x21-0x7E that are not letters or digits."""
    m = (buf - np.uint8(33)) <= np.uint8(93)
    m &= ~_alnum_mask(buf)
    return m


def _split(buf: np.ndarray, text_starts: np.ndarray, keep: np.ndarray, start: np.ndarray) -> Tokens:
    """Tokens from per-byte flags: ``keep`` (the byte belongs to a token) and ``start`` (a kept
    byte begins a token; ``start`` implies ``keep``). ``text_starts`` are strictly increasing
    (every text ends with its newline)."""
    ids, words = _intern(buf[keep], start[keep])
    first = np.flatnonzero(start)
    before = np.searchsorted(first, text_starts)  # tokens before each text
    lens = np.empty(len(text_starts), dtype=np.int64)
    lens[:-1] = before[1:] - before[:-1]
    if len(lens):
        lens[-1] = len(first) - before[-1]
    return Tokens(ids, lens, words)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fast(texts: Sequence[str], bad: Callable[[np.ndarray], np.ndarray], prep: Callable[[str], str]) -> np.ndarray:
    """Which texts the byte rules cover: encodable as UTF-8, and none of their bytes at the
    positions ``bad`` finds."""
    ok = np.ones(len(texts), dtype=bool)
    if not len(texts):
        return ok
    got = _encode(texts, prep)
    idx = np.arange(len(texts))
    if got is None:  # a lone surrogate somewhere: find the texts that hold one
        ok = np.fromiter(map(_encodable, texts), dtype=bool, count=len(texts))
        idx = np.flatnonzero(ok)
        if not len(idx):
            return ok
        got = _join([texts[i] for i in idx.tolist()], prep)
    buf, starts = got
    hit = bad(buf)
    if hit.size:
        owner = np.searchsorted(starts, hit, side="right") - 1
        ok[idx[np.unique(owner)]] = False
    return ok


def rouge_words(texts: Sequence[str]) -> Tokens:
    """rouge-score's tokens of texts (lower-case, runs outside ``[a-z0-9]`` separate), before
    stemming: ids into ``words``."""
    return _rouge_buf(*_join(texts, str.lower))


def _rouge_buf(buf: np.ndarray, text_starts: np.ndarray) -> Tokens:
    # the column was lower-cased as text: its token bytes are lower-case already
    keep = _alnum_mask(buf)
    start = np.empty(len(buf), dtype=bool)
    start[0] = True
    np.logical_not(keep[:-1], out=start[1:])
    start &= keep
    return _split(buf, text_starts, keep, start)


def squad_words(texts: Sequence[str]) -> Tokens:
    """SQuAD ``normalize_answer(text).split()`` of texts: lower case, ASCII punctuation deleted,
    whitespace separates, the articles a/an/the removed where the script's expression finds them."""
    return _squad_buf(*_join(texts, str.lower))


def _squad_buf(buf: np.ndarray, text_starts: np.ndarray) -> Tokens:
    # punctuation deleted first (it joins what it separated), then whitespace separates; every
    # text still ends with its newline, so the texts' starts are found again after the deletion.
    # The column was lower-cased as text.
    sub = buf[~_punct_mask(buf)]
    ends = np.flatnonzero(sub == 10)
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    ws = _ws_mask(sub)
    keep = ~ws
    start = np.empty(len(sub), dtype=bool)
    start[0] = True
    start[1:] = ws[:-1]
    start &= keep
    tok = _split(sub, starts, keep, start)
    return _remove_articles(tok.ids, tok.lens, tok.words)


def _remove_articles(ids: np.ndarray, lens: np.ndarray, words: list[str]) -> Tokens:
    """SQuAD's ``re.sub(r"\\b(a|an|the)\\b", " ", text).split()`` on the whitespace-separated words
    (``ids`` into ``words``, ``lens`` per text), applied to each distinct word: a match never spans
    whitespace, and a word's ends see whitespace or the text's ends, non-word characters to ``\\b``
    as the word's own edges are. A word of word characters only (``str.isalnum``: what ``\\w`` is,
    less ``_``, which is punctuation and gone) goes when it is an article; another (with a symbol,
    a curly quote, a combining mark, a control character) may split around an article inside it."""
    words = list(words)
    count = np.ones(len(words), dtype=np.int64)
    first = np.arange(len(words), dtype=np.int64)  # where a word's replacement starts in ``flat``
    flat = list(range(len(words)))  # a word's replacement, as ids into ``words`` (itself by default)
    word = np.fromiter(map(str.isalnum, words), dtype=bool, count=len(words))
    for k in np.flatnonzero(~word).tolist():
        parts = _ARTICLES.sub(" ", words[k]).split()
        if parts != [words[k]]:
            first[k], count[k] = len(flat), len(parts)
            flat.extend(range(len(words), len(words) + len(parts)))
            words.extend(parts)  # a part may equal another word: ids are matched by their text
    for article in ("a", "an", "the"):
        if article in words[:len(word)]:
            count[words.index(article)] = 0
    per = count[ids]
    table = np.array(flat, dtype=np.int64)
    if (per == 1).all():
        return Tokens(table[first[ids]], lens, words)
    owner = np.repeat(np.arange(len(lens)), lens)
    lens = np.bincount(owner, weights=per, minlength=len(lens)).astype(np.int64)
    return Tokens(table[gather_index(first[ids], per)], lens, words)


def tokens_13a(texts: Sequence[str]) -> Tokens:
    """sacrebleu's ``13a`` tokens of prepared lines (``<skipped>``, ``-\\n``, entities and newlines
    already replaced, optionally lower-cased) without runs of ``.``/``,``: each pad character is a
    token, a ``.`` or ``,`` is one unless it sits between two digits, a ``-`` right after a digit is
    one; whitespace separates."""
    return _13a_buf(*_join(texts, _as_is))


def _13a_buf(buf: np.ndarray, text_starts: np.ndarray) -> Tokens:
    ws = _ws_mask(buf)
    # the punctuation bytes are few: which of them is a token of its own is decided on them alone
    # (pad characters always; a period, comma or hyphen by its neighbours: the buffer ends with a
    # newline, so ``m + 1`` exists, and at ``m == 0``, ``m - 1`` reads that final newline: no digit)
    p = np.flatnonzero(_punct_mask(buf))
    c = buf[p]
    alone = _PAD13A[c]
    md = np.flatnonzero(_MARK_OR_DASH[c])
    if md.size:
        m = p[md]
        prev_digit = (buf[m - 1] - np.uint8(48)) <= np.uint8(9)
        next_digit = (buf[m + 1] - np.uint8(48)) <= np.uint8(9)
        alone[md] = np.where(c[md] == _DASH, prev_digit, ~(prev_digit & next_digit))
    iso = np.zeros(len(buf), dtype=bool)
    iso[p[alone]] = True
    keep = ~ws
    start = np.empty(len(buf), dtype=bool)  # a token starts after whitespace or a lone byte, or is one
    start[0] = True
    np.logical_or(ws[:-1], iso[:-1], out=start[1:])
    start |= iso
    start &= keep
    return _split(buf, text_starts, keep, start)


def column_ids(texts: Sequence[str], fast_fn: Callable[[Sequence[str]], Tokens],
               covered: Callable[[Sequence[str]], np.ndarray],
               slow_fn: Callable[[Sequence[str]], list[list[str]] | str],
               word_id: Callable[[str], int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of every text and tokens per text: the byte rules (``fast_fn``) for the texts they
    cover (``covered``), ``slow_fn`` (texts -> their tokens, the Python tokeniser of a column; or
    the texts' tokens as one string, whitespace between tokens, a newline between texts) for the
    others; ids are dense (0..V-1) and shared by both paths.

    ``word_id`` maps a word to a final id (rouge-score's stems), ``-1`` dropping it; by default a
    word is its own id."""
    n = len(texts)
    vocab: dict[str, int] = {}

    def word_ids(words: list[str]) -> np.ndarray:
        return np.array([word_id(w) if word_id else vocab.setdefault(w, len(vocab)) for w in words],
                        dtype=np.int64)

    def in_pieces(starts: np.ndarray, tokenize: Callable[[int, int], Tokens]) -> tuple[np.ndarray, np.ndarray]:
        # texts i..j-1 at a time, about half a megabyte of text (``starts``: byte offsets of the
        # texts joined): the per-byte temporaries stay small
        ids_parts, lens_parts, i = [], [], 0
        while i < len(starts):
            j = max(int(np.searchsorted(starts, starts[i] + _PIECE, side="left")), i + 1)
            tok = tokenize(i, j)
            ids_parts.append(word_ids(tok.words)[tok.ids] if tok.words else tok.ids)
            lens_parts.append(tok.lens)
            i = j
        if not ids_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(ids_parts), np.concatenate(lens_parts)

    def fast_column(sub: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        starts = np.zeros(len(sub), dtype=np.int64)
        np.cumsum(np.fromiter(map(len, sub), dtype=np.int64, count=len(sub))[:-1] + 1, out=starts[1:])
        return in_pieces(starts, lambda i, j: fast_fn(sub[i:j]))

    form = _BUFFER_FORMS.get(fast_fn)
    whole = _encode(texts, form[2]) if form is not None and n else None
    if whole is not None and not form[1](whole[0]).size:
        # the usual column: every text encodable, none of the rare cases: one join, then pieces of
        # the buffer itself
        buf, starts = whole

        def piece(i: int, j: int) -> Tokens:
            a, b = int(starts[i]), (int(starts[j]) if j < n else len(buf))
            return form[0](buf[a:b], starts[i:j] - a)

        return _dense(*in_pieces(starts, piece))
    ok = covered(texts) if n else np.zeros(0, dtype=bool)
    fast_idx = np.flatnonzero(ok)
    if len(fast_idx) == n:
        return _dense(*fast_column(texts))
    parts_ids: list[np.ndarray] = []
    lens = np.zeros(n, dtype=np.int64)
    if len(fast_idx):
        fast_ids, fast_lens = fast_column([texts[i] for i in fast_idx.tolist()])
        lens[fast_idx] = fast_lens
        fast_starts = np.zeros(len(fast_lens), dtype=np.int64)
        np.cumsum(fast_lens[:-1], out=fast_starts[1:])
    slow_idx = np.flatnonzero(~ok)
    slow_out = slow_fn([texts[i] for i in slow_idx.tolist()]) if len(slow_idx) else []
    if isinstance(slow_out, str):
        slow_flat, slow_lens = _joined_ids(slow_out, len(slow_idx), word_ids)
    else:
        slow_flat = _intern_words([w for words in slow_out for w in words], word_ids)
        slow_lens = np.fromiter(map(len, slow_out), dtype=np.int64, count=len(slow_out))
    lens[slow_idx] = slow_lens
    # every text's ids in text order: fast texts from their block, slow ones from theirs
    src_start = np.zeros(n, dtype=np.int64)
    if len(fast_idx):
        src_start[fast_idx] = fast_starts
        parts_ids.append(fast_ids)
    offset = sum(len(p) for p in parts_ids)
    slow_starts = np.zeros(len(slow_idx), dtype=np.int64)
    if len(slow_idx):
        np.cumsum(slow_lens[:-1], out=slow_starts[1:])
    src_start[slow_idx] = slow_starts + offset
    parts_ids.append(slow_flat)
    pool = np.concatenate(parts_ids) if parts_ids else np.zeros(0, dtype=np.int64)
    return _dense(pool[gather_index(src_start, lens)], lens)


def _joined_ids(joined: str, n: int, word_ids: Callable[[list[str]], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``word_ids`` of the whitespace-separated words of ``n`` texts joined by newlines (one after the
    other) and words per text: one ``split()`` of the whole text, a NUL token marking where a text
    ends, interned by Arrow's hash dictionary (one id look-up per distinct word)."""
    if "\x00" in joined or not _encodable(joined):  # a NUL inside a text, or a lone surrogate (no Arrow)
        parts = [p.split() for p in joined.split("\n")]
        return (_intern_words([w for p in parts for w in p], word_ids),
                np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))
    import pyarrow as pa

    enc = pa.array(joined.replace("\n", " \x00 ").split(), type=pa.large_string()).dictionary_encode()
    idx = enc.indices
    pos = np.frombuffer(idx.buffers()[1], dtype=np.int32, count=len(idx), offset=idx.offset * 4)
    words = enc.dictionary.to_pylist()
    mapped = np.full(len(words), -1, dtype=np.int64)
    sep = words.index("\x00") if "\x00" in words else -1
    others = [i for i in range(len(words)) if i != sep]
    if others:
        mapped[others] = word_ids([words[i] for i in others])
    is_sep = pos == sep
    bounds = np.concatenate(([-1], np.flatnonzero(is_sep), [len(pos)]))
    if len(bounds) != n + 1:
        raise AssertionError(f"{len(bounds) - 1} texts in a column of {n}")
    return mapped[pos[~is_sep]], np.diff(bounds) - 1


def _intern_words(words: list[str], word_ids: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``word_ids(words)`` computed on the distinct words only."""
    if not words:
        return np.zeros(0, dtype=np.int64)
    import pyarrow as pa

    try:
        enc = pa.array(words, type=pa.large_string()).dictionary_encode()
    except UnicodeEncodeError:  # a lone surrogate: a Python dictionary of the distinct words
        distinct: dict[str, int] = {}
        pos = np.fromiter(map(distinct.setdefault, words, range(len(words))), dtype=np.int64, count=len(words))
        first = np.array(list(distinct.values()), dtype=np.int64)
        rank = np.zeros(len(words), dtype=np.int64)
        rank[first] = np.arange(len(first))
        return word_ids(list(distinct))[rank[pos]]
    idx = enc.indices
    pos = np.frombuffer(idx.buffers()[1], dtype=np.int32, count=len(idx), offset=idx.offset * 4)
    return word_ids(enc.dictionary.to_pylist())[pos]


def _no_bad(buf: np.ndarray) -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


def _bad_13a(buf: np.ndarray) -> np.ndarray:
    """Where a run of ``.``/``,`` continues (sacrebleu's expressions treat runs specially)."""
    m = np.flatnonzero((buf == 46) | (buf == 44))
    return m[1:][m[1:] - m[:-1] == 1]


#: tokenizer -> (the same on a buffer, the positions of the bytes that send a column to the per-text
#: path, the step on the joined text before it is encoded)
_BUFFER_FORMS: dict[Callable[..., Tokens], tuple[Callable[[np.ndarray, np.ndarray], Tokens],
                                                 Callable[[np.ndarray], np.ndarray], Callable[[str], str]]] = {}


def gather_index(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + lens[i] - 1`` of every ``i``, one after the other."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    out_starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=out_starts[1:])
    return np.repeat(starts - out_starts, lens) + np.arange(total, dtype=np.int64)


def _dense(ids: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``-1`` ids (dropped words) removed; the rest renumbered 0..V-1 (same id, same word)."""
    if ids.size and ids.min() < 0:
        gone = ids < 0
        owner = np.repeat(np.arange(len(lens)), lens)
        lens = lens - np.bincount(owner[gone], minlength=len(lens))
        ids = ids[~gone]
    if ids.size:
        present = np.zeros(int(ids.max()) + 1, dtype=bool)
        present[ids] = True
        ids = (np.cumsum(present) - 1)[ids]
    return ids.astype(np.int64, copy=False), lens


def covered_rouge(texts: Sequence[str]) -> np.ndarray:
    """Texts encodable as UTF-8 (all but those holding a lone surrogate)."""
    return _fast(texts, _no_bad, str.lower)


def covered_squad(texts: Sequence[str]) -> np.ndarray:
    """Texts encodable as UTF-8 (all but those holding a lone surrogate)."""
    return _fast(texts, _no_bad, str.lower)


def covered_13a(texts: Sequence[str]) -> np.ndarray:
    """Lines encodable as UTF-8 without a run of ``.``/``,`` (sacrebleu's expressions treat runs
    specially)."""
    return _fast(texts, _bad_13a, _as_is)


_BUFFER_FORMS.update({rouge_words: (_rouge_buf, _no_bad, str.lower), squad_words: (_squad_buf, _no_bad, str.lower),
                      tokens_13a: (_13a_buf, _bad_13a, _as_is)})
