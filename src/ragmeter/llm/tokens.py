"""Prompt token estimates: tiktoken's ``o200k_base`` count when its encoding is at hand, else a
script-aware estimate; what the dry run, the budget and the token calibration count with."""

from __future__ import annotations

from typing import Any

_TIKTOKEN: Any = None


def _tiktoken_encoding() -> Any:
    """tiktoken's ``o200k_base`` when tiktoken is installed *and* its BPE file is already cached
    (tiktoken downloads it on first use; offline that fails and the estimate below is used)."""
    global _TIKTOKEN
    if _TIKTOKEN is None:
        try:
            import tiktoken

            _TIKTOKEN = tiktoken.get_encoding("o200k_base")
        except Exception:  # not installed, or its encoding file cannot be fetched offline
            _TIKTOKEN = False
    return _TIKTOKEN or None


#: kv namespace of the estimated-vs-real prompt token totals per ``provider:model``.
TOKEN_CALIBRATION = "token_calibration"


def estimate_tokens(text: str) -> int:
    """A provider-independent token estimate (at least 1).

    With tiktoken installed and its encoding cached: the ``o200k_base`` count. Otherwise a
    script-aware estimate: one token per CJK ideograph, kana or hangul syllable (BPE vocabularies
    give these about one token each; the old characters/4 rule undercounted Chinese and Japanese
    3-4x), one per two characters of other non-Latin letters (Greek, Cyrillic, Arabic ...), and one
    per four characters of the rest (English-like text)."""
    enc = _tiktoken_encoding()
    if enc is not None:
        return max(1, len(enc.encode(text, disallowed_special=())))
    return script_estimate(text)


def script_estimate(text: str) -> int:
    """The script-aware estimate of :func:`estimate_tokens` (at least 1), whether tiktoken is at hand
    or not: what the token calibration measures and scales."""
    if text.isascii():
        return max(1, (len(text) + 3) // 4)
    wide = other = rest = 0
    for ch in text:
        o = ord(ch)
        if 0x2E80 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF or 0xFF00 <= o <= 0xFFEF:
            wide += 1
        elif o >= 0x0370 and ch.isalpha():
            other += 1
        else:
            rest += 1
    return max(1, wide + (other + 1) // 2 + (rest + 3) // 4)
