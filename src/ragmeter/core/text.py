"""Text normalisation for the correctness methods: keyword containment and the "key facts" of a
reference (content words, numbers, named entities) that :func:`semantic_guarded` checks.

Pure Python (plus nltk's Porter stemmer, which needs no data download), so it is cheap to import.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

#: English function words: never a key fact. Negations are kept apart (see NEGATIONS).
STOPWORDS = frozenset("""
a about above across after afterwards again against all almost along already also although always
am among an and another any anyhow anyone anything anyway anywhere are around as at be became
because become becomes been before beforehand being below beside besides between both but by can
could did do does doing done down during each either else elsewhere enough etc even ever every
everyone everything everywhere few for from further had has have having he hence her here hers
herself him himself his how however i if in indeed into is it its itself just least less made
many may me meanwhile might mine more moreover most mostly much must my myself namely neither
nevertheless next now of off often on once one only onto or other others otherwise our ours
ourselves out over own per perhaps please quite rather really same several she should since so
some somehow someone something sometime sometimes somewhere still such than that the their theirs
them themselves then thence there thereafter thereby therefore therein thereupon these they this
those though through throughout thus to together too toward towards under until up upon us used
using very via was we well were what whatever when whence whenever where whereas whereby wherein
whether which while whither who whoever whole whom whose why will with within would yet you your
yours yourself yourselves yes ok okay answer question based according context provided given
""".split())

#: Discourse openers that are capitalised at a sentence start without naming anything.
DISCOURSE = frozenset("""
yes no sure certainly definitely actually basically generally usually typically currently today
note notably also however therefore thus so well overall answer in short finally first second
third then
""".split())

#: Clausal negations: they reverse a statement ("Paris is not the capital"). After apostrophes
#: are removed ("don't" -> "dont").
STRONG_NEGATIONS = frozenset("""
not never none nobody nothing nowhere neither nor cannot cant dont doesnt didnt isnt arent
wasnt werent wont wouldnt shouldnt couldnt hasnt havent hadnt mustnt neednt
""".split())
#: Weak negation cues: "no charge", "no sailings", "without a car" negate a noun, not a statement.
WEAK_NEGATIONS = frozenset({"no", "without"})
NEGATIONS = STRONG_NEGATIONS | WEAK_NEGATIONS

_ABSTAIN = re.compile(
    r"\b(i\s+(do\s*not|don'?t|cannot|can'?t|could\s*not|couldn'?t|am\s+unable\s+to|was\s+unable\s+to)\s+"
    r"(know|say|tell|answer|find|help|determine|see)|"
    r"i\s+am\s+not\s+sure|i'm\s+not\s+sure|not\s+sure|no\s+idea|unknown|"
    r"(does|do|did)\s*(not|n't)\s+(say|mention|specify|state|contain)|"
    r"(there\s+is\s+)?no\s+(information|answer|data)|cannot\s+be\s+(determined|answered)|"
    r"(is\s+)?not\s+(mentioned|stated|provided|specified|available)|unable\s+to\s+(answer|find|determine))\b",
    re.IGNORECASE)

_UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
          "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
          "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORDS = set(_UNITS) | set(_TENS) | set(_SCALES)

#: nouns after which "a"/"an" means the number one ("an hour" = "1 hour")
_UNIT_NOUNS = frozenset("""
second minute hour day week fortnight month year decade century metre meter kilometre kilometer
mile kilo kilogram gram litre liter euro dollar pound percent
""".split())

_TOKEN = re.compile(r"\d{1,2}:\d{2}\b|\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)*", re.UNICODE)
#: a sentence ends at . ! ? ; : followed by a space or the end ("14.50" and "06:00" are not split)
_SENTENCE_END = re.compile(r"[.!?;:]+(?=\s|$)\s*|\n+")


@dataclass(frozen=True)
class _Profile:
    stopwords: frozenset[str]
    strong: frozenset[str]
    weak: frozenset[str]
    yes: frozenset[str]
    no: frozenset[str]
    abstain: re.Pattern[str] | None


@lru_cache(maxsize=32)
def _profile(language: str) -> _Profile:
    """Stopwords and cues of a language: English built in; others from :mod:`ragmeter.core.language`
    (bm25s stopwords, the language's negation and abstention cues; English cues when it has none)."""
    import ragmeter.core.language as lang

    code = lang.normalize_code(language)
    if code == "en":
        return _Profile(STOPWORDS, STRONG_NEGATIONS, WEAK_NEGATIONS, frozenset({"yes"}), frozenset({"no"}), None)
    cues = lang.cues(code)
    stop = frozenset(lang.fold(w) for w in lang.stopwords(code))
    if cues is None:
        return _Profile(stop | STOPWORDS, STRONG_NEGATIONS, WEAK_NEGATIONS, frozenset({"yes"}),
                        frozenset({"no"}), None)
    neg = cues.strong_negations | cues.weak_negations
    return _Profile(stop - neg, cues.strong_negations, cues.weak_negations, cues.yes, cues.no,
                    re.compile(cues.abstain, re.IGNORECASE))


def fold(text: str) -> str:
    """NFKC, case-folded, accents removed, curly quotes straightened."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    text = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _number(tok: str) -> str | None:
    """``"1,000"`` -> ``"1000"``, ``"3.50"`` -> ``"3.5"``, ``"05"`` -> ``"5"``; ``None`` if not a number."""
    if not tok[0].isdigit():
        return None
    if re.fullmatch(r"\d{1,2}:\d{2}", tok):  # a time of day: "06:00" -> "6:00"
        h, m = tok.split(":")
        return f"{int(h)}:{m}"
    t = tok
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", t):
        t = t.replace(",", "")
    t = t.replace(",", ".") if t.count(",") == 1 and "." not in t else t.replace(",", "")
    try:
        v = float(t)
    except ValueError:
        return t
    return str(int(v)) if v.is_integer() else repr(v)


def _plain(tok: str) -> str:
    tok = tok[:-2] if tok.endswith("'s") else tok
    return tok.replace("'", "")


def tokens(text: str) -> list[str]:
    """Normalised word/number tokens: folded, possessive ``'s`` dropped, apostrophes removed,
    numbers canonical (``"1,000"`` -> ``"1000"``). Number words stay words here."""
    out = []
    for tok in _TOKEN.findall(fold(text)):
        num = _number(tok)
        out.append(num if num is not None else _plain(tok))
    return [t for t in out if t]


def normalize(text: str) -> str:
    """``tokens`` joined by single spaces: what keyword containment compares."""
    return " ".join(tokens(text))


def contains_phrase(haystack: str, needle: str) -> bool:
    """Whether ``needle``'s token sequence occurs contiguously in ``haystack``'s (case-insensitive,
    whitespace and punctuation normalised, whole tokens only: ``"paris"`` is not in ``"parisian"``).
    An empty needle is never contained."""
    n = normalize(needle)
    if not n:
        return False
    return f" {n} " in f" {normalize(haystack)} "


def is_abstention(text: str, language: str = "en") -> bool:
    """Whether an answer declines to answer ("I don't know", "not mentioned in the context" ...;
    Portuguese "não sei", "não é mencionado" ... with ``language="pt"``)."""
    t = text.strip()
    if not t:
        return True
    prof = _profile(language)
    if prof.abstain is not None and prof.abstain.search(fold(t)):
        return True
    return bool(_ABSTAIN.search(t.replace("\u2019", "'")))


def _porter():  # type: ignore[no-untyped-def]
    import ragmeter.core.language as lang

    return lang.porter_stemmer()  # nltk's, pure Python, no data download


@lru_cache(maxsize=65536)
def stem(word: str, language: str = "en") -> str:
    """Porter stem of a folded word (``"capital"`` -> ``"capit"``); the language's Snowball stemmer
    for other languages."""
    if language != "en":
        import ragmeter.core.language as lang

        return lang.stem(word, language)
    return _porter().stem(word)


@dataclass(frozen=True)
class Fact:
    """A key fact of a text.

    Attributes:
        kind: ``number``, ``entity`` (a name: one capitalised token or a run of them, e.g.
            "MV Aurora Lind", "Terminal B") or ``word`` (another content word).
        key: what is matched: the canonical number, or the stem(s) joined by spaces.
        surface: the text it came from.
        parts: stems of a name's words (acronyms such as "MV" left out); ``(key,)`` otherwise.
        ids: single-letter identifiers of a name ("B" in "Terminal B"): all must be present.
    """

    kind: str
    key: str
    surface: str
    parts: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()


def _words_to_numbers(words: list[str]) -> list[tuple[str, str, int]]:
    """Fold runs of number words into one number: ``twenty five`` -> ``25``.

    Returns ``(key, surface, width)`` per output item (``width`` = input tokens consumed). A lone
    "one" stays a word ("one of them" is rarely the number 1)."""
    out: list[tuple[str, str, int]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in _NUMBER_WORDS:
            total, current, j = 0, 0, i
            while j < len(words) and (words[j] in _NUMBER_WORDS or (
                    words[j] == "and" and j > i and j + 1 < len(words) and words[j + 1] in _NUMBER_WORDS)):
                x = words[j]
                if x in _UNITS:
                    current += _UNITS[x]
                elif x in _TENS:
                    current += _TENS[x]
                elif x in _SCALES:
                    if _SCALES[x] == 100:
                        current = max(current, 1) * 100
                    else:
                        total += max(current, 1) * _SCALES[x]
                        current = 0
                j += 1
            if words[i:j] == ["one"]:
                out.append(("one", "one", 1))
            else:
                out.append((str(total + current), " ".join(words[i:j]), j - i))
            i = j
        else:
            out.append((w, w, 1))
            i += 1
    return out


def key_facts(text: str, *, exclude: Iterable[str] = (), language: str = "en") -> list[Fact]:
    """The key facts of ``text``: numbers, names and the remaining content words.

    - numbers: digits (``"1,000"`` = ``"1000"``, ``"14.50"`` = ``"14.5"``, ``"06:00"`` = ``"6:00"``)
      or number words (``"twenty-five"`` = ``"25"``);
    - names: capitalised words that are not function or discourse words, acronyms, and runs of
      them ("MV Aurora Lind", "Terminal B"). A capitalised first word of a sentence counts only
      when it is not an ``-ly`` adverb and is not written in lower case elsewhere in the text;
    - words: the other content words, by Porter stem.

    Args:
        text: usually a reference answer.
        exclude: keys to leave out (e.g. :func:`fact_keys` of the question: what the question
            already says is no evidence that the answer is right).

    Returns:
        Unique facts in order of first appearance.

    Example:
        >>> [f.key for f in key_facts("Paris is France's capital city")]
        ['pari', 'franc', 'capit', 'citi']
    """
    excluded = set(exclude)
    prof = _profile(language)
    raw = unicodedata.normalize("NFKC", text).replace("\u2019", "'")
    lower_words = {fold(m.group()) for m in _TOKEN.finditer(raw) if m.group()[:1].islower()}
    facts: list[Fact] = []
    seen: set[str] = set()

    def add(f: Fact) -> None:
        # a name is left out when the question already says all of its words ("Berlin Wall")
        said = f.key in excluded or (f.kind == "entity" and all(p in excluded for p in (*f.parts, *f.ids)))
        if f.key and f.key not in seen and not said:
            seen.add(f.key)
            facts.append(f)

    for sentence in _SENTENCE_END.split(raw):
        matches = list(_TOKEN.finditer(sentence))
        toks = [m.group() for m in matches]
        lowered = [_number(t) or _plain(fold(t)) for t in toks]
        merged = _words_to_numbers(lowered)
        pos = 0
        run: list[tuple[str, str, bool]] = []  # (stem, surface, is_id) of the current name
        run_end = -1
        for key, _surface, width in merged:
            orig = toks[pos:pos + width]
            start, end = matches[pos].start(), matches[pos + width - 1].end()
            first = pos == 0
            pos += width
            o = orig[0]
            is_id = (len(o) == 1 and o.isupper() and bool(run) and not run[-1][2]
                     and sentence[run_end:start].strip() == "")
            entity = is_id or _is_name(o, key, first, lower_words, prof)
            adjacent = bool(run) and sentence[run_end:start].strip() == ""
            if run and not (entity and adjacent):
                _flush_name(run, add)
                run = []
            if entity:
                run.append((key if is_id else stem(key, language), o, is_id))
                run_end = end
                continue
            if key[:1].isdigit():
                add(Fact("number", key, " ".join(orig), (key,)))
            elif key not in prof.stopwords and key not in prof.strong | prof.weak and len(key) >= 2:
                st = stem(key, language)
                add(Fact("word", st, o, (st,)))
        if run:
            _flush_name(run, add)
    return facts


def _is_name(orig: str, key: str, first: bool, lower_words: set[str], prof: _Profile | None = None) -> bool:
    prof = prof or _profile("en")
    if (key[:1].isdigit() or len(key) < 2 or key in prof.stopwords or key in prof.strong | prof.weak
            or key in DISCOURSE or key in prof.yes | prof.no):
        return False
    if len(orig) >= 2 and orig.isupper():
        return True  # an acronym
    if not orig[:1].isupper():
        return False
    if first and (key.endswith("ly") or key in lower_words):
        return False  # "Monthly on the 25th", "Full-time employees ..."
    return True


def _flush_name(run: list[tuple[str, str, bool]], add: Callable[[Fact], None]) -> None:
    surface = " ".join(o for _, o, _ in run)
    parts = tuple(k for k, o, i in run if not i and not (len(o) >= 2 and o.isupper() and len(run) > 1))
    ids = tuple(k for k, _, i in run if i)
    if not parts:
        parts = tuple(k for k, _, i in run if not i)
    add(Fact("entity", " ".join(k for k, _, _ in run), surface, parts, ids))


def fact_keys(text: str, language: str = "en") -> set[str]:
    """Every matchable key of ``text``: canonical numbers (number words folded too), stems of the
    words, the folded words themselves, and single capital letters (identifiers such as "B")."""
    toks = tokens(text)
    keys = set(toks)
    for prev, nxt in zip(toks, toks[1:], strict=False):
        if prev in ("a", "an") and nxt in _UNIT_NOUNS:
            keys.add("1")  # "an hour" says "1 hour"
    for key, _surface, _w in _words_to_numbers(toks):
        keys.add(key)
        if not key[:1].isdigit():
            keys.add(stem(key, language))
    return keys


def has_negation(text: str, language: str = "en") -> bool:
    """Whether ``text`` contains a negation word (strong or weak: not, never, don't, no, without ...;
    the language's cues otherwise, e.g. não, nunca, sem)."""
    prof = _profile(language)
    return any(t in prof.strong or t in prof.weak for t in tokens(text))


def has_strong_negation(text: str, language: str = "en") -> bool:
    """Whether ``text`` contains a clausal negation (not, never, don't, cannot, nothing ...; não,
    nunca, nem, jamais ... in Portuguese)."""
    prof = _profile(language)
    return any(t in prof.strong for t in tokens(text))


def negation_mismatch(answer: str, reference: str, language: str = "en") -> bool:
    """One side negates a statement and the other has no negation at all, or one opens with "yes"
    and the other with "no". Weak cues ("no charge") count as negation for the other side but do
    not trigger a mismatch themselves, so "Two bags at no charge" matches "Two bags of 23 kg"."""
    a_strong, r_strong = has_strong_negation(answer, language), has_strong_negation(reference, language)
    a_any, r_any = has_negation(answer, language), has_negation(reference, language)
    if (a_strong and not r_any) or (r_strong and not a_any):
        return True
    return {yes_no(answer, language), yes_no(reference, language)} == {"yes", "no"}


def yes_no(text: str, language: str = "en") -> str | None:
    """``"yes"`` or ``"no"`` when ``text`` opens with it (or the language's yes/no word: sim/não),
    after case and punctuation, else ``None``."""
    prof = _profile(language)
    first = (tokens(text)[:1] or [""])[0]
    return "yes" if first in prof.yes else "no" if first in prof.no else None


def fact_present(fact: Fact, answer_keys: set[str], *, fuzzy: float = 88.0) -> bool:
    """Whether ``fact`` appears among ``answer_keys`` (:func:`fact_keys` of the answer).

    Numbers must match exactly (as canonical numbers). Words match by stem, or, for keys of five
    characters or more, by a rapidfuzz ratio >= ``fuzzy`` (a typo such as "Pariss" still counts;
    "Lyon" is not "London"). A name is present when all its single-letter identifiers are and at
    least half of its other words are ("Aurora Lind" names "MV Aurora Lind"; "Terminal A" does
    not name "Terminal B")."""
    if fact.kind == "number":
        return fact.key in answer_keys
    if fact.kind == "entity":
        if any(i not in answer_keys for i in fact.ids):
            return False
        parts = fact.parts or (fact.key,)
        found = sum(_word_present(p, answer_keys, fuzzy) for p in parts)
        return found * 2 >= len(parts)
    return _word_present(fact.key, answer_keys, fuzzy)


def _word_present(key: str, answer_keys: set[str], fuzzy: float) -> bool:
    if key in answer_keys:
        return True
    if len(key) < 5 or fuzzy >= 100:
        return False
    from rapidfuzz import fuzz

    return any(len(k) >= 4 and not k[:1].isdigit() and fuzz.ratio(key, k) >= fuzzy for k in answer_keys)
