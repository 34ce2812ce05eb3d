"""Language settings for every text-processing step (lexical metrics, correctness methods, BM25).

A language is an ISO 639-1 code (``"en"``, ``"pt"``, ``"el"`` ...). It comes from, in order: the
sample's ``language`` field (``metadata["language"]``), the run option ``language`` (``--language``
on ``ragmeter eval`` and ``ragmeter correctness``, or ``options: {language: pt}`` in a config), else
English. English keeps the reference libraries' exact behaviour (rouge-score's ``[a-z0-9]``
tokenizer and Porter stemmer, sacrebleu's 13a tokenizer); any other language uses:

- :func:`words`: NFC-normalised, case-folded runs of letters and digits of *any* script, with each
  CJK ideograph, kana or hangul syllable a token of its own (no spaces between words there);
- the Snowball stemmer of the language (package ``snowballstemmer``; no stemming when it has none);
- the stopword list bm25s ships for it (none when it ships none);
- the negation and "I don't know" cues of :data:`CUES` (English and Portuguese, Spanish, French,
  German, Italian); a language without cues falls back to English cues.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

DEFAULT = "en"

#: ISO 639-1 code -> Snowball algorithm name (``snowballstemmer.algorithms()``)
SNOWBALL = {"ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "nl": "dutch", "en": "english",
            "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi", "hu": "hungarian",
            "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian", "ne": "nepali",
            "no": "norwegian", "nb": "norwegian", "fa": "persian", "pl": "polish", "pt": "portuguese",
            "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish",
            "ta": "tamil", "tr": "turkish", "eu": "basque", "hy": "armenian", "et": "estonian"}
#: ISO 639-1 code -> the name of bm25s's stopword list
BM25S_STOPWORDS = {"en": "en", "pt": "pt", "es": "es", "fr": "fr", "de": "de", "it": "it", "nl": "nl",
                   "da": "da", "no": "no", "nb": "no", "sv": "sv", "ru": "ru", "tr": "tr", "zh": "zh",
                   "ko": "ko"}
_BM25S_CONST = {"en": "STOPWORDS_EN", "pt": "STOPWORDS_PORTUGUESE", "es": "STOPWORDS_SPANISH",
                "fr": "STOPWORDS_FRENCH", "de": "STOPWORDS_GERMAN", "it": "STOPWORDS_ITALIAN",
                "nl": "STOPWORDS_DUTCH", "da": "STOPWORDS_DANISH", "no": "STOPWORDS_NORWEGIAN",
                "sv": "STOPWORDS_SWEDISH", "ru": "STOPWORDS_RUSSIAN", "tr": "STOPWORDS_TURKISH",
                "zh": "STOPWORDS_CHINESE", "ko": "STOPWORDS_KOREAN"}


@dataclass(frozen=True)
class Cues:
    """Negation and abstention cues of a language (folded: lower case, accents removed).

    Attributes:
        strong_negations: words that negate a statement ("not", "não", "nunca").
        weak_negations: words that negate a noun ("no charge", "sem custo").
        yes / no: the words a yes/no answer opens with.
        abstain: a regular expression (on folded text) of "I don't know" answers.
    """

    strong_negations: frozenset[str]
    weak_negations: frozenset[str]
    yes: frozenset[str]
    no: frozenset[str]
    abstain: str


CUES: dict[str, Cues] = {
    "pt": Cues(frozenset("nao nunca nem jamais nenhum nenhuma ninguem nada tampouco".split()),
               frozenset({"sem"}), frozenset({"sim"}), frozenset({"nao"}),
               r"\b(nao\s+(sei|tenho\s+certeza|consigo\s+(responder|encontrar|dizer)|foi\s+possivel|"
               r"(e|esta)\s+(mencionad[oa]|especificad[oa]|indicad[oa]|claro)|ha\s+informac(ao|oes)|"
               r"(diz|menciona|refere|indica|especifica))|desconhecido|sem\s+informac(ao|oes)|"
               r"nao\s+sabemos|nao\s+se\s+sabe)\b"),
    "es": Cues(frozenset("no nunca ni jamas ninguno ninguna nadie nada tampoco".split()),
               frozenset({"sin"}), frozenset({"si"}), frozenset({"no"}),
               r"\b(no\s+(lo\s+)?(se|estoy\s+seguro|puedo\s+(responder|decir))|no\s+(se\s+)?menciona|"
               r"no\s+hay\s+informacion|desconocido)\b"),
    "fr": Cues(frozenset("ne pas jamais aucun aucune personne rien ni".split()),
               frozenset({"sans"}), frozenset({"oui"}), frozenset({"non"}),
               r"\b(je\s+ne\s+sais\s+pas|je\s+ne\s+suis\s+pas\s+sur|(n'?est\s+)?pas\s+mentionne|"
               r"aucune\s+information|inconnu)\b"),
    "de": Cues(frozenset("nicht nie niemals kein keine keinen keiner niemand nichts weder".split()),
               frozenset({"ohne"}), frozenset({"ja"}), frozenset({"nein"}),
               r"\b(ich\s+weiss\s+(es\s+)?nicht|(ist\s+)?nicht\s+(erwahnt|angegeben|bekannt)|"
               r"keine\s+information(en)?|unbekannt)\b"),
    "it": Cues(frozenset("non mai ne nessuno nessuna niente nulla".split()),
               frozenset({"senza"}), frozenset({"si"}), frozenset({"no"}),
               r"\b(non\s+(lo\s+)?so|non\s+(e\s+)?(menzionato|indicato|specificato)|"
               r"nessuna\s+informazione|sconosciuto)\b"),
}

_CJK = (r"\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
        r"\uf900-\ufaff\uff66-\uff9f")
#: one CJK character, or a run of other letters/digits (any script); combining marks stay attached
_WORD = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])(?:(?![{_CJK}])[^\W_]|[\u0300-\u036f])*")


def normalize_code(language: str | None) -> str:
    """``"pt-BR"`` / ``"Portuguese"`` / ``"PT"`` -> ``"pt"``; ``None`` or ``""`` -> English."""
    if not language:
        return DEFAULT
    code = str(language).strip().lower().replace("_", "-").split("-")[0]
    names = {v: k for k, v in SNOWBALL.items()} | {"chinese": "zh", "japanese": "ja", "korean": "ko"}
    return names.get(code, code)


def of(sample: Any = None, options: Mapping[str, Any] | None = None) -> str:
    """The language of one sample: its ``language`` field, else the run option, else English."""
    meta = getattr(sample, "metadata", None) or {}
    lang = meta.get("language") if isinstance(meta, Mapping) else None
    if not lang and options:
        lang = options.get("language")
    return normalize_code(lang)


def of_many(samples: Sequence[Any], options: Mapping[str, Any] | None = None) -> list[str]:
    """:func:`of` of every sample (one normalisation of the run option, then per-sample fields)."""
    default = normalize_code(options.get("language") if options else None)
    out = []
    for s in samples:
        meta = getattr(s, "metadata", None)
        own = meta.get("language") if meta and isinstance(meta, Mapping) else None
        out.append(normalize_code(own) if own else default)
    return out


def is_english(language: str | None) -> bool:
    return normalize_code(language) == "en"


def nfc(text: str) -> str:
    """Unicode NFC form ("café" typed as e + combining accent equals the precomposed one)."""
    return unicodedata.normalize("NFC", text)


def words(text: str) -> list[str]:
    """Unicode-aware tokens: NFC, case-folded, letter/digit runs of any script, each CJK character
    on its own. ``words("Το ίδιο κείμενο")`` -> ``['το', 'ίδιο', 'κείμενο']``."""
    return _WORD.findall(nfc(text).casefold())


def fold(word: str) -> str:
    """Case-folded, accents removed (``"Não"`` -> ``"nao"``)."""
    w = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in w if not unicodedata.combining(ch))


@lru_cache(maxsize=1)
def porter_stemmer() -> Any:
    """nltk's ``PorterStemmer()`` (the stemmer rouge-score uses), loaded without importing the
    ``nltk`` package itself: ``import nltk`` runs its ``__init__``, which pulls in scipy and
    scikit-learn (1.4 s here) for a stemmer that needs none of them. The package and its
    ``nltk.stem`` subpackage are stood in for while ``nltk.stem.porter`` and its few plain-Python
    dependencies load from nltk's own files, then removed again, so a later ``import nltk``
    behaves as always. Falls back to the ordinary import when that does not work."""
    import importlib
    import importlib.util
    import sys
    import types

    if "nltk" not in sys.modules:
        added: list[str] = []
        try:
            spec = importlib.util.find_spec("nltk")
            if spec is None or not spec.submodule_search_locations:
                raise ImportError("nltk")
            root = list(spec.submodule_search_locations)[0]
            for name, path in (("nltk", root), ("nltk.stem", f"{root}/stem")):
                pkg = types.ModuleType(name)
                pkg.__path__ = [path]
                sys.modules[name] = pkg
                added.append(name)
            before = set(sys.modules)
            try:
                return importlib.import_module("nltk.stem.porter").PorterStemmer()
            finally:
                added.extend(m for m in set(sys.modules) - before if m.startswith("nltk"))
        except Exception:  # noqa: BLE001 - any surprise: the ordinary import below
            pass
        finally:
            for name in added:
                sys.modules.pop(name, None)
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=64)
def stemmer(language: str) -> Any:
    """The Snowball stemmer of ``language`` (``snowballstemmer``), or ``None`` when there is none
    or the package is not installed."""
    name = SNOWBALL.get(normalize_code(language))
    if name is None:
        return None
    try:
        import snowballstemmer
    except ImportError:
        return None
    return snowballstemmer.stemmer(name)


def stem(word: str, language: str) -> str:
    """Snowball stem of one word (the word itself when the language has no stemmer)."""
    st = stemmer(language)
    return st.stemWord(word) if st is not None else word


@lru_cache(maxsize=64)
def stopwords(language: str) -> frozenset[str]:
    """bm25s's stopword list for ``language`` (empty when bm25s ships none or is not installed)."""
    const = _BM25S_CONST.get(normalize_code(language))
    if const is None:
        return frozenset()
    try:
        import bm25s.stopwords as sw
    except ImportError:
        return frozenset()
    return frozenset(getattr(sw, const, ()))


def cues(language: str | None) -> Cues | None:
    """The negation/abstention cues of ``language``; ``None`` for English (the built-in English
    cues of :mod:`ragmeter.core.text` apply) and for languages without a list."""
    return CUES.get(normalize_code(language))
