"""Which model family a model name belongs to (a judge's, or the model that wrote an answer):
the figure a judge panel's self-preference check compares."""

from __future__ import annotations

import re

#: (family, pattern matched at the start of the model's own name, lower-cased, without a
#: ``provider:`` prefix or an ``org/`` path); the first match wins
FAMILY_RULES: tuple[tuple[str, str], ...] = (
    ("openai", r"(gpt|chatgpt|o\d|text-davinci|davinci|babbage|codex)"),
    ("anthropic", r"claude"),
    ("google", r"(gemini|gemma|palm|bison|learnlm)"),
    ("meta", r"(llama|meta-llama|codellama)"),
    ("mistral", r"(mistral|mixtral|codestral|ministral|magistral|pixtral|devstral|open-mistral)"),
    ("alibaba", r"(qwen|qwq)"),
    ("deepseek", r"deepseek"),
    ("xai", r"grok"),
    ("cohere", r"(command|c4ai|aya)"),
    ("microsoft", r"phi"),
)
_COMPILED = tuple((family, re.compile(pattern)) for family, pattern in FAMILY_RULES)


def model_name(text: str) -> str:
    """The model's own name: lower-cased, without a ``provider:`` prefix (``openai:gpt-4o``) or an
    ``org/`` path (``meta-llama/Llama-3.1-8B``: ``llama-3.1-8b``).

    >>> model_name("ollama:Llama3.1:8b")
    'llama3.1:8b'
    """
    name = text.strip().lower()
    head, sep, rest = name.partition(":")
    if sep and "/" not in head and rest and not head[:1].isdigit() and not re.fullmatch(r"\d+[a-z]?", rest):
        name = rest  # provider:model (a tag such as llama3.1:8b stays)
    return name.rsplit("/", 1)[-1]


def model_family(text: str | None) -> str | None:
    """The family of a model name (:data:`FAMILY_RULES`): ``gpt-*``, ``o1``/``o3``/``o4-mini`` ->
    ``openai``; ``claude-*`` -> ``anthropic``; ``gemini-*``/``gemma`` -> ``google``; ``llama*`` ->
    ``meta``; ``mistral``/``mixtral``/``codestral`` -> ``mistral``; ``qwen`` -> ``alibaba``;
    ``deepseek``; ``grok`` -> ``xai``; ``command`` -> ``cohere``; ``phi`` -> ``microsoft``. A name no
    rule knows is its own family (the name itself); ``None`` for an empty name.

    >>> model_family("openai:gpt-4o-mini"), model_family("claude-3-5-haiku"), model_family("my-judge")
    ('openai', 'anthropic', 'my-judge')
    """
    if text is None or not str(text).strip():
        return None
    name = model_name(str(text))
    for family, pattern in _COMPILED:
        if pattern.match(name):
            return family
    return name
