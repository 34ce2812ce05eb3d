"""Sentence-level BLEU and chrF with sacrebleu's exact semantics, computed for a whole batch.

The integer statistics (n-gram matches, totals, lengths) are counted here, for a whole column and
faster than sacrebleu's per-sentence objects (chrF packs each character n-gram into one integer and
matches them with numpy); the BLEU score is then computed by sacrebleu's own
``BLEU.compute_bleu`` from those statistics, and the chrF F-score by a transcription of
``CHRF._compute_f_score`` (same operations in the same order, so the floats are identical; the
tests compare both with sacrebleu). Several references follow sacrebleu: BLEU clips n-gram counts by
their maximum over the references and uses the closest reference length; chrF keeps the statistics
of the reference with the best F-score.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, ScoreColumn
from ragmeter.metrics.lexical.texts import References, _as_answer, _as_columns, _as_refs, sample_texts

# --- sacrebleu's 13a tokenizer -----------------------------------------------------------------
# sacrebleu.tokenizers.tokenizer_re.TokenizerRegexp applies four substitutions. The first one pads
# every character of a class with spaces; its matches are single characters, so a translation table
# does the same in C without re's per-match template expansion. The space sacrebleu also pads is left
# out: the final whitespace collapse undoes that padding and no later expression can tell one space
# from three. The three other expressions are sacrebleu's.
_PAD_13A = {c: f" {chr(c)} " for lo, hi in ((0x7B, 0x7E), (0x5B, 0x60), (0x21, 0x26), (0x28, 0x2B),
                                             (0x3A, 0x40), (0x2F, 0x2F)) for c in range(lo, hi + 1)}
_RE_13A = (
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
)


def tokenize_13a(line: str) -> str:
    """sacrebleu's ``13a`` tokenizer (mteval-v13a), output identical to ``Tokenizer13a()(line)``."""
    return " ".join(_split_13a(_prepare_13a(line)))


def _prepare_13a(line: str) -> str:
    # Tokenizer13a's replacements before its regular expressions
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                .replace("&gt;", ">"))
    return line


def _split_13a(line: str) -> list[str]:
    line = f" {line} ".translate(_PAD_13A)
    for regex, repl in _RE_13A:
        line = regex.sub(repl, line)
    return line.split()


def _bleu_tokenizer(name: str) -> Callable[[str], str]:
    if name == "13a":
        return tokenize_13a
    from sacrebleu.metrics.bleu import BLEU

    if name not in BLEU.TOKENIZERS:
        raise MetricError(f"unknown BLEU tokenizer {name!r}; valid: {sorted(BLEU.TOKENIZERS)}")
    return BLEU(tokenize=name).tokenizer  # type: ignore[no-any-return]


# --- shared n-gram helpers ---------------------------------------------------------------------

def _matches(hyp: Counter, ref: Counter) -> int:
    """sum over n-grams of min(count in hyp, count in ref): the clipped match count."""
    common = hyp.keys() & ref.keys()
    return sum(map(min, map(hyp.__getitem__, common), map(ref.__getitem__, common)))


class _Packer:
    """Exact integer keys for all character n-grams (n = 1..order) of code-point sequences.

    The characters of one sample (its answer and references) are renumbered 0..V-1; an n-gram becomes
    its ids in ``bits`` bits each, shifted left by ``tag_bits``, or-ed with n. Distinct n-grams of
    any orders get distinct keys, so counting and matching them is sorting integers.
    ``Packer.fit`` returns None when the keys would not fit in 64 bits (very large alphabets).
    """

    def __init__(self, bits: int, order: int) -> None:
        self.order = order
        self.shift = np.uint64(bits)
        self.tag_bits = order.bit_length()
        self.tag_shift = np.uint64(self.tag_bits)
        self.tag_mask = np.uint64((1 << self.tag_bits) - 1)

    @classmethod
    def fit(cls, symbols: np.ndarray, order: int) -> tuple[_Packer, np.ndarray] | None:
        alphabet, ids = np.unique(symbols, return_inverse=True)
        bits = max(1, (len(alphabet) - 1).bit_length())
        if bits * order + order.bit_length() > 64:
            return None
        return cls(bits, order), ids.astype(np.uint64).ravel()

    def counts(self, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct n-gram keys of ``seq`` and their counts."""
        parts, g = [], seq
        for n in range(1, self.order + 1):
            if n > 1:
                g = (g[:-1] << self.shift) | seq[n - 1:]
            if g.size == 0:
                break
            parts.append((g << self.tag_shift) | np.uint64(n))
        if not parts:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(parts), return_counts=True)

    def matches(self, hyp: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray]) -> list[int]:
        """Per order 1..order: sum over n-grams of min(count in hyp, count in ref)."""
        common, ih, ir = np.intersect1d(hyp[0], ref[0], assume_unique=True, return_indices=True)
        per_order = np.bincount((common & self.tag_mask).astype(np.int64),
                                weights=np.minimum(hyp[1][ih], ref[1][ir]), minlength=self.order + 1)
        return [int(x) for x in per_order[1:]]


# --- BLEU --------------------------------------------------------------------------------------

def _closest_ref_len(hyp_len: int, ref_lens: list[int]) -> int:
    # sacrebleu BLEU._get_closest_ref_len: smallest difference, then the shorter reference
    best_diff, best_len = -1, -1
    for ref_len in ref_lens:
        diff = abs(hyp_len - ref_len)
        if best_diff == -1 or diff < best_diff:
            best_diff, best_len = diff, ref_len
        elif diff == best_diff and ref_len < best_len:
            best_len = ref_len
    return best_len


#: sacrebleu's ``BLEU.SMOOTH_DEFAULTS`` and the tokenizers this module uses most, known without
#: importing sacrebleu (0.07 s); a test keeps them equal to sacrebleu's
SMOOTH_DEFAULTS: dict[str, float | None] = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}
COMMON_TOKENIZERS = frozenset({"13a", "none", "intl", "char", "zh"})


def check_bleu_params(max_ngram_order: int, smooth_method: str, tokenize: str) -> None:
    if not isinstance(max_ngram_order, int) or max_ngram_order < 1:
        raise MetricError(f"max_ngram_order must be a positive integer, got {max_ngram_order!r}")
    if smooth_method in SMOOTH_DEFAULTS and tokenize in COMMON_TOKENIZERS:
        return
    from sacrebleu.metrics.bleu import BLEU

    if smooth_method not in BLEU.SMOOTH_DEFAULTS:
        raise MetricError(f"unknown smooth_method {smooth_method!r}; valid: {sorted(BLEU.SMOOTH_DEFAULTS)}")
    if tokenize not in BLEU.TOKENIZERS:
        raise MetricError(f"unknown BLEU tokenizer {tokenize!r}; valid: {sorted(BLEU.TOKENIZERS)}")


def tokenize_13a_many(lines: Sequence[str]) -> list[list[str]]:
    """:func:`tokenize_13a` of many lines, split into tokens; the regular expressions run once over
    the whole column. Each line is padded with a space on both sides as sacrebleu pads it and the
    lines are joined with newlines, which none of the expressions can match next to (a newline
    always sits between two pad spaces), so every line is tokenized exactly as on its own."""
    return split_13a_many([_prepare_13a(line) for line in lines])


def split_13a_many(prepared: Sequence[str]) -> list[list[str]]:
    """:func:`tokenize_13a_many` of lines already prepared (``_prepare_13a``: no newline inside)."""
    if not prepared:
        return []
    return [part.split() for part in joined_13a(prepared).split("\n")]


def joined_13a(prepared: Sequence[str]) -> str:
    """The 13a tokens of lines already prepared, as one string: tokens separated by spaces, lines
    by newlines (what :func:`split_13a_many` splits)."""
    text = " " + " \n ".join(prepared) + " "
    for code, padded in _PAD_13A.items():  # str.translate to multi-character strings is slow on long text
        ch = chr(code)
        if ch in text:
            text = text.replace(ch, padded)
    if "." in text or "," in text:
        text = _LONE_PERIOD.sub(" . ", text)  # literal replacements: no per-match template expansion
        text = _LONE_COMMA.sub(" , ", text)
        text = _MARK_RUN.sub(_mark_run, text)
    if "-" in text:
        text = _DIGIT_DASH.sub(" - ", text)
    return text


# The three expressions after the padding, restated so the regular-expression engine searches for a
# literal character instead of trying a match at every position (several times faster on a long
# text); the tokens are identical (the tests compare with sacrebleu on punctuation-heavy text).
# Expressions 2 and 3 (``([^0-9])([\.,])`` -> ``\1 \2 ``, then ``([\.,])([^0-9])`` -> `` \1 \2``)
# only ever insert spaces around periods and commas. A lone mark (no mark next to it) ends up padded
# unless it sits between two digits (``3.5``, ``1,000``): ``_LONE_PERIOD``, ``_LONE_COMMA``. A run of marks is
# rare; each gets the two original expressions applied to it with its two neighbours as context
# (neither neighbour is a mark, so no match reaches further and the neighbours stay in place).
# Expression 4 (``([0-9])(-)`` -> ``\1 \2 ``) pads every hyphen right after a digit.
_LONE_PERIOD = re.compile(r"\.(?:(?<![0-9.,]\.)(?![.,])|(?<![.,]\.)(?![0-9.,]))")
_LONE_COMMA = re.compile(r",(?:(?<![0-9.,],)(?![.,])|(?<![.,],)(?![0-9.,]))")
_MARK_RUN = re.compile(r"[.,]{2,}")
_DIGIT_DASH = re.compile(r"(?<=[0-9])-")


def _mark_run(m: re.Match[str]) -> str:
    a, b, text = m.start(), m.end(), m.string
    local = text[a - 1:b + 1]  # the joined text is padded, so both neighbours exist
    for regex, repl in _RE_13A[:2]:
        local = regex.sub(repl, local)
    return local[1:-1]


def _bleu_token_ids(texts: Sequence[str], tokenize: str, lowercase: bool) -> tuple[np.ndarray, np.ndarray]:
    """Dense token ids of ``texts`` (one after the other) and tokens per text, as BLEU tokenizes
    them; the 13a tokenizer runs on bytes for the plain-ASCII lines (:mod:`.byte_tokens`)."""
    from ragmeter.metrics.lexical import byte_tokens as B

    if tokenize == "13a":
        lines = [_prepare_13a((t.lower() if lowercase else t).rstrip()) for t in texts]
        return B.column_ids(lines, B.tokens_13a, B.covered_13a, joined_13a)
    toks = _bleu_tokens(texts, tokenize, lowercase)
    vocab: dict[str, int] = {}
    flat = [w for t in toks for w in t]
    ids = np.fromiter(map(vocab.setdefault, flat, range(len(flat))), dtype=np.int64, count=len(flat))
    lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
    return B._dense(ids, lens)


def _bleu_tokens(texts: Sequence[str], tokenize: str, lowercase: bool) -> list[list[str]]:
    # BLEU._preprocess_segment: optional lower-casing, strip the right end, tokenize
    prepared = [(t.lower() if lowercase else t).rstrip() for t in texts]
    if tokenize == "13a":
        return tokenize_13a_many(prepared)
    tok = _bleu_tokenizer(tokenize)
    return [tok(t).split() for t in prepared]


_BLEU_MEMO: dict[tuple[Any, ...], dict[tuple[str, tuple[str, ...]], tuple[int, ...]]] = {}
_BLEU_MEMO_MAX = 1 << 18


def bleu_stats(answers: Sequence[str], references: Sequence[Sequence[str]], *, max_ngram_order: int = 4,
               lowercase: bool = False, tokenize: str = "13a") -> dict[str, np.ndarray]:
    """sacrebleu's sufficient statistics of each (answer, references) pair.

    Remembered per pair (bounded), so a run's corpus BLEU reuses what its sentence BLEU counted.

    Returns:
        ``correct`` and ``total`` (``n x max_ngram_order``: clipped n-gram matches and hypothesis
        n-grams), ``hyp_len`` and ``ref_len`` (the closest reference length, the shorter on ties),
        as ``BLEU._extract_corpus_statistics`` counts them.
    """
    order = max_ngram_order
    memo = _BLEU_MEMO.setdefault((order, lowercase, tokenize), {})
    keys = [(a, tuple(rs)) for a, rs in zip(answers, references, strict=True)]
    # looked up once into a local list: another thread (a second run) may clear the shared memo meanwhile
    found = list(map(memo.get, keys))
    if None in found:
        todo = list(dict.fromkeys(k for k, v in zip(keys, found, strict=True) if v is None))
        new = dict(zip(todo, _count_bleu([k[0] for k in todo], [k[1] for k in todo], order, lowercase,
                                         tokenize), strict=True))
        if len(memo) + len(todo) > _BLEU_MEMO_MAX:
            memo.clear()
        memo.update(new)
        found = [v if v is not None else new[k] for k, v in zip(keys, found, strict=True)]
    rows = np.array(found, dtype=np.int64).reshape(len(keys), 2 * order + 2)
    return {"correct": rows[:, :order], "total": rows[:, order:2 * order], "hyp_len": rows[:, -2],
            "ref_len": rows[:, -1]}


def export_memo() -> dict[tuple[Any, ...], dict[tuple[str, tuple[str, ...]], tuple[int, ...]]]:
    """The remembered BLEU statistics (a worker process hands them back with its scores)."""
    return {cfg: dict(rows) for cfg, rows in _BLEU_MEMO.items() if rows}


def merge_memo(memo: dict[tuple[Any, ...], dict[tuple[str, tuple[str, ...]], tuple[int, ...]]]) -> None:
    """Remember BLEU statistics counted elsewhere (see :func:`export_memo`)."""
    for cfg, rows in memo.items():
        mine = _BLEU_MEMO.setdefault(cfg, {})
        if len(mine) + len(rows) > _BLEU_MEMO_MAX:
            mine.clear()
        mine.update(rows)


def _count_bleu(answers: Sequence[str], references: Sequence[Sequence[str]], order: int, lowercase: bool,
                tokenize: str) -> list[tuple[int, ...]]:
    from ragmeter.metrics.lexical.byte_tokens import gather_index
    from ragmeter.metrics.lexical.ngrams import NgramColumns, clipped_matches

    n = len(answers)
    uniq = list(dict.fromkeys([*answers, *(r for rs in references for r in rs)]))
    ids, lens = _bleu_token_ids(uniq, tokenize, lowercase)
    index = {t: i for i, t in enumerate(uniq)}
    single = all(len(rs) == 1 for rs in references)
    if single:  # the usual column, one reference a pair: segments [hyp 0, ref 0, hyp 1, ref 1 ...]
        hyp_text = np.fromiter(map(index.__getitem__, answers), dtype=np.int64, count=n)
        ref_text = np.fromiter((index[rs[0]] for rs in references), dtype=np.int64, count=n)
        seg = np.empty(2 * n, dtype=np.int64)
        seg[0::2], seg[1::2] = hyp_text, ref_text
        hyp_segment = np.arange(0, 2 * n, 2, dtype=np.int64)
        refp = np.full(2 * n, -1, dtype=np.int64)
        refp[1::2] = np.arange(n, dtype=np.int64)
    else:  # segments [hyp 0, refs of 0 ..., hyp 1, refs of 1 ...] as indices into the unique texts
        seg_text: list[int] = []
        hyp_segment = np.empty(n, dtype=np.int64)
        ref_pair: list[int] = []
        for p, (a, rs) in enumerate(zip(answers, references, strict=True)):
            hyp_segment[p] = len(seg_text)
            seg_text.append(index[a])
            ref_pair.append(-1)
            seg_text.extend(index[r] for r in rs)
            ref_pair.extend([p] * len(rs))
        seg = np.asarray(seg_text, dtype=np.int64)
        refp = np.asarray(ref_pair, dtype=np.int64)
    starts = np.zeros(len(uniq), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    seg_lens = lens[seg]
    grams = NgramColumns.from_ids(ids[gather_index(starts[seg], seg_lens)], seg_lens, order)
    out = np.zeros((n, 2 * order + 2), dtype=np.int64)
    for k in range(1, order + 1):
        out[:, k - 1] = clipped_matches(grams, hyp_segment, refp, k)
    hyp_len = grams.lens[hyp_segment]
    out[:, order:2 * order] = np.maximum(hyp_len[:, None] - np.arange(order)[None, :], 0)
    out[:, -2] = hyp_len
    if single:  # the closest reference length of one reference is its length
        out[:, -1] = lens[ref_text]
    else:
        text_len = lens.tolist()
        out[:, -1] = np.fromiter((_closest_ref_len(h, [text_len[index[r]] for r in rs])
                                  for h, rs in zip(hyp_len.tolist(), references, strict=True)),
                                 dtype=np.int64, count=n)
    return list(map(tuple, out.tolist()))


def bleu_from_stats(correct: Sequence[int], total: Sequence[int], sys_len: int, ref_len: int,
                    smooth_method: str, smooth_value: float | None, effective_order: bool,
                    max_ngram_order: int) -> float:
    """``sacrebleu.BLEU.compute_bleu(...).score`` without building a result object: the same float
    operations in the same order, so the value is identical (the tests compare the two)."""
    if smooth_value is None:
        smooth_value = SMOOTH_DEFAULTS[smooth_method]
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    if not any(correct):
        return 0.0
    correct, total = list(correct), list(total)
    precisions = [0.0] * max_ngram_order
    smooth_mteval = 1.
    eff_order = max_ngram_order
    for n in range(1, max_ngram_order + 1):
        if smooth_method == "add-k" and n > 1:
            correct[n - 1] += smooth_value
            total[n - 1] += smooth_value
        if total[n - 1] == 0:
            break
        if effective_order:
            eff_order = n
        if correct[n - 1] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n - 1] = 100. / (smooth_mteval * total[n - 1])
            elif smooth_method == "floor":
                precisions[n - 1] = 100. * smooth_value / total[n - 1]
        else:
            precisions[n - 1] = 100. * correct[n - 1] / total[n - 1]
    return bp * math.exp(sum([(-9999999999 if p == 0 else math.log(p)) for p in precisions[:eff_order]])
                         / eff_order)


def bleu_batch(answers: Sequence[str], references: Sequence[Sequence[str]], *,
               max_ngram_order: int = 4, smooth_method: str = "exp", smooth_value: float | None = None,
               lowercase: bool = False, tokenize: str = "13a", effective_order: bool = True) -> np.ndarray:
    """Sentence BLEU of each answer against its references, on sacrebleu's 0-100 scale.

    Equal to ``sacrebleu.BLEU(max_ngram_order=..., smooth_method=..., smooth_value=...,
    lowercase=..., tokenize=..., effective_order=...).sentence_score(answer, refs).score``.
    """
    check_bleu_params(max_ngram_order, smooth_method, tokenize)
    st = bleu_stats(answers, references, max_ngram_order=max_ngram_order, lowercase=lowercase,
                    tokenize=tokenize)
    rows = zip(st["correct"].tolist(), st["total"].tolist(), st["hyp_len"].tolist(), st["ref_len"].tolist(),
               strict=True)
    if smooth_method == "exp" and effective_order:  # sentence BLEU's defaults
        return np.fromiter((_bleu_exp_effective(c, t, h, r) for c, t, h, r in rows), dtype=np.float64,
                           count=len(answers))
    return np.fromiter((bleu_from_stats(c, t, h, r, smooth_method, smooth_value, effective_order,
                                        max_ngram_order) for c, t, h, r in rows),
                       dtype=np.float64, count=len(answers))


def _bleu_exp_effective(correct: list[int], total: list[int], sys_len: int, ref_len: int) -> float:
    """:func:`bleu_from_stats` with ``exp`` smoothing and effective order (sentence BLEU's defaults):
    the same float operations in the same order, without the other methods' branches."""
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    if not any(correct):
        return 0.0
    precisions = [0.0] * len(total)
    smooth_mteval = 1.
    eff_order = len(total)
    for n, (c, t) in enumerate(zip(correct, total, strict=True)):
        if t == 0:
            break
        eff_order = n + 1
        if c == 0:
            smooth_mteval *= 2
            precisions[n] = 100. / (smooth_mteval * t)
        else:
            precisions[n] = 100. * c / t
    return bp * math.exp(sum([(-9999999999 if p == 0 else math.log(p)) for p in precisions[:eff_order]])
                         / eff_order)


# --- chrF --------------------------------------------------------------------------------------

_CHRF_PUNCTS = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _chrf_words(sent: str) -> list[str]:
    # sacrebleu CHRF._remove_punctuation: split one leading or trailing punctuation mark off words
    out: list[str] = []
    for w in sent.split():
        if len(w) == 1:
            out.append(w)
        elif w[-1] in _CHRF_PUNCTS:
            out += [w[:-1], w[-1]]
        elif w[0] in _CHRF_PUNCTS:
            out += [w[0], w[1:]]
        else:
            out.append(w)
    return out


def _char_line(text: str, whitespace: bool) -> str:
    return text if whitespace else "".join(text.split())


def _counter_char_stats(hyp: str, refs: list[str], order: int) -> list[list[int]]:
    """[n_hyp, n_ref, n_match] per character order and reference, with Counters of substrings
    (sacrebleu's way; used when the alphabet is too large to pack n-grams into 64 bits)."""
    def grams(line: str) -> list[Counter]:
        return [Counter([line[i:i + n] for i in range(len(line) - n + 1)]) for n in range(1, order + 1)]

    hyp_grams = grams(hyp)
    out = []
    for ref in refs:
        stats: list[int] = []
        for h, r in zip(hyp_grams, grams(ref), strict=True):
            stats += [sum(h.values()) if r else 0, sum(r.values()), _matches(h, r)]
        out.append(stats)
    return out


def _char_stats(hyp: str, refs: list[str], order: int) -> list[list[int]]:
    """[n_hyp, n_ref, n_match] for character orders 1..order, per reference (n-grams packed into
    integers by :class:`_Packer`; Counters of substrings for alphabets too large to pack)."""
    if order == 0:
        return [[] for _ in refs]
    texts = [hyp, *refs]
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    fitted = _Packer.fit(np.frombuffer(joined, dtype=np.uint32), order)
    if fitted is None:
        return _counter_char_stats(hyp, refs, order)
    packer, ids = fitted
    ends = np.cumsum([len(t) for t in texts])
    hyp_counts = packer.counts(ids[:ends[0]])
    out = []
    for j, ref in enumerate(refs):
        matched = packer.matches(hyp_counts, packer.counts(ids[ends[j]:ends[j + 1]]))
        stats: list[int] = []
        for n in range(1, order + 1):
            n_ref = max(len(ref) - n + 1, 0)
            # sacrebleu CHRF._get_match_statistics: no hyp count without a reference n-gram
            stats += [max(len(hyp) - n + 1, 0) if n_ref else 0, n_ref, matched[n - 1]]
        out.append(stats)
    return out


def _word_grams(text: str, word_order: int) -> list[Counter]:
    words = _chrf_words(text)
    return [Counter([" ".join(words[i:i + n]) for i in range(len(words) - n + 1)])
            for n in range(1, word_order + 1)]


def chrf_f_score(stats: Sequence[int], order: int, beta: float, eps_smoothing: bool) -> float:
    """chrF on the 0-100 scale from ``[hyp, ref, match]`` counts per order (sacrebleu's
    ``CHRF._compute_f_score``, transcribed operation by operation)."""
    eps = 1e-16
    score = 0.0
    effective_order = 0
    factor = beta ** 2
    avg_prec, avg_rec = 0.0, 0.0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i: 3 * i + 3]
        prec = n_match / n_hyp if n_hyp > 0 else eps
        rec = n_match / n_ref if n_ref > 0 else eps
        denom = factor * prec + rec
        score += ((1 + factor) * prec * rec / denom) if denom > 0 else eps
        if n_hyp > 0 and n_ref > 0:
            avg_prec += prec
            avg_rec += rec
            effective_order += 1
    if eps_smoothing:
        return 100 * score / order
    if effective_order == 0:
        avg_prec = avg_rec = 0.0
    else:
        avg_prec /= effective_order
        avg_rec /= effective_order
    if avg_prec + avg_rec:
        score = (1 + factor) * avg_prec * avg_rec
        score /= ((factor * avg_prec) + avg_rec)
        return 100 * score
    return 0.0


def check_chrf_params(char_order: int, word_order: int, beta: Any) -> None:
    if not isinstance(char_order, int) or char_order < 0:
        raise MetricError(f"char_order must be a non-negative integer, got {char_order!r}")
    if not isinstance(word_order, int) or word_order < 0:
        raise MetricError(f"word_order must be a non-negative integer, got {word_order!r}")
    if char_order + word_order == 0:
        raise MetricError("char_order + word_order must be at least 1")
    if not isinstance(beta, int | float) or beta <= 0:
        raise MetricError(f"beta must be positive, got {beta!r}")


def chrf_batch(answers: Sequence[str], references: Sequence[Sequence[str]], *, char_order: int = 6,
               word_order: int = 0, beta: float = 2, lowercase: bool = False, whitespace: bool = False,
               eps_smoothing: bool = False) -> np.ndarray:
    """Sentence chrF (chrF++ with ``word_order=2``) of each answer against its references, on
    sacrebleu's 0-100 scale: equal to ``sacrebleu.CHRF(...).sentence_score(answer, refs).score``."""
    check_chrf_params(char_order, word_order, beta)
    order = char_order + word_order
    words: dict[str, list[Counter]] = {}

    def prep(text: str) -> str:
        return text.lower() if lowercase else text

    def word_grams(text: str) -> list[Counter]:
        got = words.get(text)
        if got is None:
            got = words[text] = _word_grams(text, word_order)
        return got

    out = np.empty(len(answers), dtype=np.float64)
    for k, (answer, refs) in enumerate(zip(answers, references, strict=True)):
        hyp = prep(answer)
        ref_texts = [prep(r) for r in refs]
        per_ref = _char_stats(_char_line(hyp, whitespace), [_char_line(r, whitespace) for r in ref_texts],
                              char_order)
        best: list[int] = []
        best_f = -1.0
        for ref, stats in zip(ref_texts, per_ref, strict=True):
            if word_order:
                for h, r in zip(word_grams(hyp), word_grams(ref), strict=True):
                    stats += [sum(h.values()) if r else 0, sum(r.values()), _matches(h, r)]
            f = chrf_f_score(stats, order, beta, eps_smoothing)
            if f > best_f:  # sacrebleu keeps the first reference with the best F-score
                best_f, best = f, stats
        out[k] = chrf_f_score(best, order, beta, eps_smoothing)
    return out


# ---- the public functions (0-1 scale) and the batch metrics ------------------------------------

_BLEU_DEFAULTS: dict[str, Any] = {"max_ngram_order": 4, "smooth_method": "exp", "smooth_value": None,
                                  "lowercase": False, "tokenize": "13a", "effective_order": True}
# rag-experiment-accelerator (plain_metrics.bleu): HF evaluate's BLEU with max_order=2 and no smoothing
_BLEU2_DEFAULTS: dict[str, Any] = {**_BLEU_DEFAULTS, "max_ngram_order": 2, "smooth_method": "none",
                                   "effective_order": False}
_CHRF_DEFAULTS: dict[str, Any] = {"char_order": 6, "word_order": 0, "beta": 2, "lowercase": False,
                                  "whitespace": False, "eps_smoothing": False}


def _unit(values: np.ndarray) -> np.ndarray:
    # sacrebleu's 0-100 scale to 0-1; BLEU of a perfect match is 100.00000000000004 in floating point
    return np.clip(values / 100.0, 0.0, 1.0)


def bleu_scores(answers: Sequence[str], references: Sequence[References], **params: Any) -> np.ndarray:
    """Sentence BLEU of a column of (answer, references) pairs, on a 0-1 scale.

    Equal to ``sacrebleu.sentence_bleu(answer, references).score / 100`` (defaults: 4-grams,
    ``exp`` smoothing, ``13a`` tokenizer, effective order), with sacrebleu's native handling of
    several references. Parameters: ``max_ngram_order``, ``smooth_method`` (none, floor, add-k,
    exp), ``smooth_value``, ``lowercase``, ``tokenize``, ``effective_order``.
    """
    opts = _merge("bleu", _BLEU_DEFAULTS, params)
    a, r = _as_columns(answers, references)
    return _unit(bleu_batch(a, r, **opts))


def chrf_scores(answers: Sequence[str], references: Sequence[References], **params: Any) -> np.ndarray:
    """Sentence chrF of a column of (answer, references) pairs, on a 0-1 scale.

    Equal to ``sacrebleu.sentence_chrf(answer, references).score / 100`` (defaults: character
    6-grams, beta 2, whitespace ignored); ``word_order=2`` gives chrF++. With several references
    the one with the best F-score counts (sacrebleu).
    """
    opts = _merge("chrf", _CHRF_DEFAULTS, params)
    a, r = _as_columns(answers, references)
    return _unit(chrf_batch(a, r, **opts))


def _merge(name: str, defaults: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    unknown = set(params) - set(defaults)
    if unknown:
        raise MetricError(f"{name} has no parameter(s) {sorted(unknown)}; valid: {sorted(defaults)}")
    return {**defaults, **params}


def bleu(answer: str, reference: References, **params: Any) -> float:
    """Sentence BLEU on a 0-1 scale (sacrebleu).

    ``BP * exp(mean_n log p_n)``, ``p_n`` the clipped n-gram precision for n = 1..4 (``exp``
    smoothing of zero counts, effective order), ``BP = exp(1 - r/c)`` when the answer (``c``
    tokens) is shorter than the closest reference (``r`` tokens), else 1; ``13a`` tokenization.
    Equal to ``sacrebleu.sentence_bleu(answer, refs).score / 100``. Range [0, 1]; 0 for an empty
    answer or reference. Parameters as :func:`bleu_scores`.

    Example:
        >>> round(bleu("the cat sat on the mat", "the cat sat on a mat"), 4)
        0.5373
    """
    return float(bleu_scores([_as_answer(answer)], [_as_refs(reference)], **params)[0])


def bleu2(answer: str, reference: References, **params: Any) -> float:
    """BLEU up to bigrams without smoothing: rag-experiment-accelerator's ``bleu`` on a 0-1 scale.

    rag-experiment-accelerator computes BLEU with Hugging Face ``evaluate``'s ``bleu`` and ``max_order=2`` (no
    smoothing, 13a tokens). This is sacrebleu's BLEU with ``max_ngram_order=2``,
    ``smooth_method="none"`` and ``effective_order=False``, which gives the same value for one
    reference (with several, sacrebleu's brevity penalty uses the closest reference length where
    ``evaluate`` uses the shortest). 0 when no bigram matches. Range [0, 1].

    Example:
        >>> round(bleu2("the cat sat on the mat", "the cat sat on a mat"), 4)
        0.7071
    """
    return float(bleu_scores([_as_answer(answer)], [_as_refs(reference)], **{**_BLEU2_DEFAULTS, **params})[0])


def chrf(answer: str, reference: References, **params: Any) -> float:
    """Sentence chrF on a 0-1 scale (sacrebleu).

    The F-beta score (beta = 2: recall weighs more) of character n-gram precision and recall,
    averaged over n = 1..6 (whitespace ignored); ``word_order=2`` adds word uni- and bigrams
    (chrF++). Equal to ``sacrebleu.sentence_chrf(answer, refs).score / 100``. Range [0, 1].

    Example:
        >>> round(chrf("the cat sat on the mat", "the cat sat on a mat"), 4)
        0.7208
    """
    return float(chrf_scores([_as_answer(answer)], [_as_refs(reference)], **params)[0])


def _mt_batch_fn(name: str, batch: Callable[..., np.ndarray]) -> Callable[..., ScoreColumn]:
    def fn(samples: Sequence[Sample], ctx: ScoringContext | None = None, **params: Any) -> ScoreColumn:
        return ScoreColumn(_unit(batch(*sample_texts(samples, ctx), **params)))

    fn.__name__ = f"{name}_batch"
    return fn


def _mt_check(checker: Callable[..., None], names: Sequence[str]) -> Callable[..., str | None]:
    def check(ctx: ScoringContext | None = None, **params: Any) -> str | None:
        try:
            checker(*(params[n] for n in names))
        except MetricError as exc:
            return str(exc)
        return None

    return check
