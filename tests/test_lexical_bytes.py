"""The byte-level tokenisers of columns of texts (ragmeter.metrics.lexical.byte_tokens, on UTF-8) against
the reference tokenisers, token by token: rouge-score's, sacrebleu's 13a and the SQuAD evaluation
script's answer normalisation, on ASCII and on any Unicode text (accents, combining marks, the
whitespace beyond ASCII, CJK, emoji, curly quotes around articles); and the column ids of columns
where some texts take the kernels' Python path."""

from __future__ import annotations

import random
import re
import string
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from ragmeter.metrics.lexical import byte_tokens as B
from ragmeter.metrics.lexical.translation import _prepare_13a, _split_13a
from references import require_reference

rouge_tokenize = require_reference("rouge_score.tokenize")
pytestmark = pytest.mark.contract


def squad_normalize(s: str) -> str:
    """The official SQuAD v1.1 evaluation script's normalize_answer."""
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


T13A = Tokenizer13a()
ALPHABET = (string.ascii_letters + string.digits * 3 + string.punctuation + " \t\x0b\x0c\r\x1c\x1f\x01\x7f"
            + ".,-.,-" + "éü中\u00a0")
# beyond ASCII: the whitespace str.split() sees, combining marks, letters whose lower case is ASCII
# or longer (KELVIN SIGN, DOTTED CAPITAL I), curly quotes and dashes, CJK, emoji, non-ASCII digits
UNICODE = ("\u00a0\u2009\u3000\x85\u2028\u200b\u0301\u0307\u0308İKﬀẞÅ’“”«»—–°€£ção中文東京😀🙂ﬁ²½٣"
           + "the a an the ")
TEXT = st.text(alphabet=ALPHABET, max_size=60) | st.sampled_from(
    ["The cat, the hat.", "3.5 and 1,000 -- 2-3 pm...", "A an THE a.b", "&quot;x&amp;y&lt;z&gt;", "<skipped> a-\nb",
     "", " ", "...", "e.g., i.e.,", "(3.)", "x-1 1-x 1--2", "Don't stop-believing!", "“the” ’a’ —an— the\u0301 ánthe",
     "café\u00a0the\u2009a 東京the a😀 3–5 R$ 49 25°C", "Zoë’s the-end &amp; İstanbul K"])
UNICODE_TEXT = TEXT | st.text(max_size=60) | st.text(alphabet=ALPHABET + UNICODE, max_size=60)


def _decode(ids: np.ndarray, lens: np.ndarray, words: list[str]) -> list[list[str]]:
    out, k = [], 0
    for n in lens.tolist():
        out.append([words[i] for i in ids[k:k + n].tolist()])
        k += n
    return out


def _check(fast, covered, reference, texts: list[str]) -> None:
    ok = covered(texts)
    sub = [t for t, o in zip(texts, ok.tolist(), strict=True) if o]
    if not sub:
        return
    tok = fast(sub)
    assert _decode(tok.ids, tok.lens, tok.words) == [reference(t) for t in sub]


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60) | st.text(alphabet=ALPHABET + "İKﬀẞÅ’“”—–°€ção", max_size=60))
def test_rouge_words_of_any_text_are_rouge_scores(text: str) -> None:
    """Any Unicode text takes the byte path with rouge-score's words (characters whose lower case is
    ASCII, such as KELVIN SIGN, included: the column is lower-cased before its bytes are read)."""
    assert B.covered_rouge([text]).all()
    _check(B.rouge_words, B.covered_rouge, lambda t: rouge_tokenize.tokenize(t, None), [text])


@settings(max_examples=400, deadline=None)
@given(st.lists(UNICODE_TEXT, min_size=1, max_size=12))
def test_rouge_words_equal_rouge_score(texts: list[str]) -> None:
    _check(B.rouge_words, B.covered_rouge, lambda t: rouge_tokenize.tokenize(t, None), texts)


@settings(max_examples=400, deadline=None)
@given(st.lists(UNICODE_TEXT, min_size=1, max_size=12))
def test_squad_words_equal_the_squad_script(texts: list[str]) -> None:
    _check(B.squad_words, B.covered_squad, lambda t: squad_normalize(t).split(), texts)


@settings(max_examples=400, deadline=None)
@given(st.lists(UNICODE_TEXT, min_size=1, max_size=12))
def test_13a_tokens_equal_sacrebleu(texts: list[str]) -> None:
    lines = [_prepare_13a(t.rstrip()) for t in texts]
    _check(B.tokens_13a, B.covered_13a, lambda t: T13A(t).split(), lines)


def test_unicode_whitespace_list_is_pythons() -> None:
    """The characters beyond ASCII that the byte rules turn into spaces are exactly those
    ``str.split()`` separates on."""
    assert set(B.UNICODE_SPACES) == {chr(c) for c in range(0x80, sys.maxunicode + 1) if chr(c).isspace()}


def test_every_unicode_space_and_its_neighbours_in_utf8() -> None:
    """Each whitespace character beyond ASCII separates words as in the references; characters whose
    UTF-8 starts as theirs does (ZERO WIDTH SPACE, HYPHEN, curly quotes, NARROW NO-BREAK SPACE's
    neighbours) stay inside their word."""
    near = "\u200b\u2010\u2019\u201c\u2027\u202a\u2060\u205e\u1681\u3001\xa1\x84"
    texts = [f"a{c}b the{c}cat 1{c}.5 3,{c}x{c}" for c in B.UNICODE_SPACES + near]
    texts.append("".join(B.UNICODE_SPACES + near) + " end")
    _check(B.rouge_words, B.covered_rouge, lambda t: rouge_tokenize.tokenize(t, None), texts)
    _check(B.squad_words, B.covered_squad, lambda t: squad_normalize(t).split(), texts)
    lines = [_prepare_13a(t.rstrip()) for t in texts]
    _check(B.tokens_13a, B.covered_13a, lambda t: T13A(t).split(), lines)


def test_byte_masks_are_the_character_classes() -> None:
    """The comparisons that classify bytes give exactly the classes they stand for."""
    every = np.arange(256, dtype=np.uint8)
    assert [chr(b) for b in every[B._ws_mask(every)].tolist()] == [c for c in map(chr, range(128)) if c.isspace()]
    assert set(every[B._alnum_mask(every)].tolist()) == set((string.ascii_letters + string.digits).encode())
    assert set(every[B._punct_mask(every)].tolist()) == set(string.punctuation.encode())


@pytest.mark.parametrize("text", ["prose-en", "prose-pt"])
def test_benchmark_prose_tokens_equal_the_references(text: str, tmp_path) -> None:
    """The RAG-like prose of benchmarks/end_to_end.py (curly quotes, dashes, accents, currency and
    degree signs, URLs) takes the byte rules as a whole column, with the references' tokens."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from end_to_end import write_pairs

    write_pairs(tmp_path / "p.jsonl", 600, text=text)
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = [r[k] for r in rows for k in ("answer", "reference")]
    assert B.covered_rouge(texts).all() and B.covered_squad(texts).all()
    _check(B.rouge_words, B.covered_rouge, lambda t: rouge_tokenize.tokenize(t, None), texts)
    _check(B.squad_words, B.covered_squad, lambda t: squad_normalize(t).split(), texts)
    lines = [_prepare_13a(t.rstrip()) for t in texts]
    assert B.covered_13a(lines).all()
    _check(B.tokens_13a, B.covered_13a, lambda t: T13A(t).split(), lines)


def test_long_random_columns_and_coverage() -> None:
    rnd = random.Random(5)
    texts = ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 80))) for _ in range(3000)]
    _check(B.rouge_words, B.covered_rouge, lambda t: rouge_tokenize.tokenize(t, None), texts)
    _check(B.squad_words, B.covered_squad, lambda t: squad_normalize(t).split(), texts)
    lines = [_prepare_13a(t.rstrip()) for t in texts]
    _check(B.tokens_13a, B.covered_13a, lambda t: T13A(t).split(), lines)
    # the cases the byte rules leave to Python: a lone surrogate (no UTF-8), runs of marks for 13a
    assert B.covered_squad(["a\x01b", "ok", "é", "x\ud800"]).tolist() == [True, True, True, False]
    assert B.covered_rouge(["\udfff", "ü"]).tolist() == [False, True]
    assert B.covered_13a(["a..b", "a.b", "a,.b", "ü", "\ud800."]).tolist() == [False, True, False, True, False]


@pytest.mark.parametrize("texts", [["plain ascii text.", "Ünïcode text, 中文", "", "the a an", "x\x01y"],
                                   ["só não-ASCII"], [], ["", ""], ["a\ud800 the", "“the” cat", "x...y", "ok"]])
def test_column_ids_mix_both_paths_in_one_id_space(texts: list[str]) -> None:
    ids, lens = B.column_ids(texts, B.squad_words, B.covered_squad, lambda ts: [squad_normalize(t).split() for t in ts])
    assert lens.tolist() == [len(squad_normalize(t).split()) for t in texts]
    words: dict[int, str] = {}
    k = 0
    for t, n in zip(texts, lens.tolist(), strict=True):
        for i, w in zip(ids[k:k + n].tolist(), squad_normalize(t).split(), strict=True):
            assert words.setdefault(i, w) == w  # one id, one word, whichever path made it
        k += n
    assert len(set(words.values())) == len(words)
    if ids.size:
        assert ids.min() == 0 and ids.max() == len(words) - 1  # dense
    prepared = [_prepare_13a(t.rstrip()) for t in texts]
    ids13, lens13 = B.column_ids(prepared, B.tokens_13a, B.covered_13a, lambda ts: [_split_13a(t) for t in ts])
    assert lens13.tolist() == [len(T13A(t).split()) for t in prepared]


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT | st.text(alphabet="ab the\x00\n\u00a0é—’.,", max_size=20), max_size=10))
def test_the_joined_python_path_gives_the_squad_scripts_and_sacrebleus_words(texts: list[str]) -> None:
    """The kernels' Python path hands its words over as one string (a newline between texts, a NUL
    token marking each end; a text holding a NUL takes the per-text split): the words are the
    SQuAD script's and sacrebleu's, text by text, a text without words included."""
    from ragmeter.metrics.lexical.string_kernels import normalized_joined
    from ragmeter.metrics.lexical.translation import joined_13a

    def decode(ids, lens):
        return [ids[k - n:k].tolist() for k, n in zip(np.cumsum(lens).tolist(), lens.tolist(), strict=True)]

    squad = [squad_normalize(t.replace("\n", " ")).split() for t in texts]
    ids, lens = B.column_ids(texts, B.squad_words, lambda ts: np.zeros(len(ts), dtype=bool), normalized_joined)
    want, _ = B.column_ids(texts, B.squad_words, lambda ts: np.zeros(len(ts), dtype=bool),
                           lambda ts: [squad_normalize(t.replace("\n", " ")).split() for t in ts])
    assert lens.tolist() == [len(w) for w in squad] and decode(ids, lens) == decode(want, lens)
    prepared = [_prepare_13a(t.rstrip()) for t in texts]
    ids13, lens13 = B.column_ids(prepared, B.tokens_13a, lambda ts: np.zeros(len(ts), dtype=bool), joined_13a)
    want13, _ = B.column_ids(prepared, B.tokens_13a, lambda ts: np.zeros(len(ts), dtype=bool),
                             lambda ts: [T13A(t).split() for t in ts])
    assert lens13.tolist() == [len(T13A(t).split()) for t in prepared]
    assert decode(ids13, lens13) == decode(want13, lens13)


def test_a_lexical_run_loads_neither_pandas_nor_scipy(tmp_path) -> None:
    """Arrow's to_numpy imports pandas (0.15 s), the statistics once needed scipy.special: a run of the
    lexical metrics needs neither."""
    import json
    import subprocess
    import sys

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": "q", "answer": f"The answer is {i}.", "reference": "The answer is 1."})
                            + "\n" for i in range(30)))
    code = ("import sys, ragmeter\n"
            f"ragmeter.evaluate({str(data)!r}, ['rouge1_fmeasure', 'rougeL_fmeasure', 'bleu', 'token_f1', "
            f"'exact_match'], db={'sqlite:///' + str(tmp_path / 'r.db')!r})\n"
            "print(sorted(m for m in ('pandas', 'scipy.special', 'alembic', 'sacrebleu') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_bleu_constants_equal_sacrebleus() -> None:
    from sacrebleu.metrics.bleu import BLEU

    from ragmeter.metrics.lexical.translation import COMMON_TOKENIZERS, SMOOTH_DEFAULTS

    assert SMOOTH_DEFAULTS == BLEU.SMOOTH_DEFAULTS
    assert COMMON_TOKENIZERS <= set(BLEU.TOKENIZERS)


@pytest.mark.parametrize("name", ["rouge", "squad", "13a"])
def test_whole_column_buffer_path_equals_the_per_text_path(name: str, monkeypatch) -> None:
    """A plain column goes through one joined buffer cut in pieces; its ids must name the same tokens
    as the per-text path (pieces made tiny so they cut the column many times)."""
    rnd = random.Random(11)
    alphabet = string.ascii_letters + string.digits * 2 + " .,-'!?()\t" + "é’“—\u00a0中😀\u0301"
    texts = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 50))) for _ in range(400)]
    fast, covered, slow = {
        "rouge": (B.rouge_words, B.covered_rouge, lambda t: rouge_tokenize.tokenize(t, None)),
        "squad": (B.squad_words, B.covered_squad, lambda t: squad_normalize(t).split()),
        "13a": (B.tokens_13a, B.covered_13a, lambda t: T13A(t).split()),
    }[name]
    if name == "13a":
        texts = [t.replace("..", ". ").replace(",,", ", ").replace(".,", ". ").replace(",.", ", ") for t in texts]
    monkeypatch.setattr(B, "_PIECE", 64)
    many = lambda ts: [slow(t) for t in ts]  # noqa: E731
    ids_a, lens_a = B.column_ids(texts, fast, covered, many)
    ids_b, lens_b = B.column_ids(texts, lambda ts: fast(ts), covered, many)  # not a buffer form
    assert lens_a.tolist() == lens_b.tolist() == [len(slow(t)) for t in texts]
    pairs = set(zip(ids_a.tolist(), ids_b.tolist(), strict=True))
    assert len(pairs) == len(set(ids_a.tolist())) == len(set(ids_b.tolist()))
    words = [w for t in texts for w in slow(t)]
    by_id: dict[int, str] = {}
    for i, w in zip(ids_a.tolist(), words, strict=True):
        assert by_id.setdefault(i, w) == w


def test_mixed_columns_score_as_the_references() -> None:
    """A column where some texts take the byte rules and others the Python tokenisers (curly quotes,
    accents, control characters, runs of periods) scores exactly as rouge-score, sacrebleu and the
    SQuAD script on every pair."""
    from rouge_score import rouge_scorer
    from sacrebleu.metrics import BLEU

    from ragmeter.metrics.lexical.rouge_metrics import rouge_pairs
    from ragmeter.metrics.lexical.string_kernels import exact_match_kernel, token_f1_kernel
    from ragmeter.metrics.lexical.translation import _BLEU_MEMO, bleu_batch

    rnd = random.Random(3)
    words = ["the", "refund", "policy", "is", "30", "days", "3.5", "café", "“quoted”", "it’s", "a\x01b", "...",
             "Paris", "running", "e.g.,", "1,000", "x-1", "&amp;"]
    a = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 14))) for _ in range(600)]
    b = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 14))) for _ in range(600)]
    _BLEU_MEMO.clear()
    bleu = BLEU(effective_order=True)
    want = [bleu.sentence_score(x, [y]).score for x, y in zip(a, b, strict=True)]
    assert bleu_batch(a, [[x] for x in b]).tolist() == want
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    got = rouge_pairs(a, b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        ref = scorer.score(y, x)
        assert got[i, [2, 5, 8]].tolist() == [ref["rouge1"].fmeasure, ref["rouge2"].fmeasure, ref["rougeL"].fmeasure]
    em = exact_match_kernel(a, b).tolist()
    assert em == [float(squad_normalize(x) == squad_normalize(y)) for x, y in zip(a, b, strict=True)]

    def squad_f1(p: str, g: str) -> float:  # the SQuAD script's f1_score
        from collections import Counter

        pt, gt = squad_normalize(p).split(), squad_normalize(g).split()
        if not pt or not gt:
            return float(pt == gt)
        same = sum((Counter(pt) & Counter(gt)).values())
        if same == 0:
            return 0.0
        pr, rc = 1.0 * same / len(pt), 1.0 * same / len(gt)
        return (2 * pr * rc) / (pr + rc)

    assert token_f1_kernel(a, b).tolist() == [squad_f1(x, y) for x, y in zip(a, b, strict=True)]


def test_sample_texts_normalises_each_call_whatever_it_saw_before() -> None:
    """The lexical metrics see NFC text: a decomposed accent is composed in every call, also after
    the composed text (equal once normalised, another string) went through and was remembered."""
    import unicodedata

    from ragmeter.core.schema import Sample
    from ragmeter.metrics.lexical.texts import sample_texts

    composed, decomposed = "caf\u00e9 the", "cafe\u0301 the"
    for _ in range(2):
        for batch in ([composed], [decomposed], [composed, decomposed]):
            samples = [Sample(id=str(i), answer=t, references=[t, "x"]) for i, t in enumerate(batch)]
            answers, refs = sample_texts(samples, None)
            assert answers == [composed] * len(batch)
            assert refs == [[composed, "x"]] * len(batch)
            assert all(unicodedata.is_normalized("NFC", t) for t in answers)
