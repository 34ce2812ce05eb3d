"""Judge configuration: which provider and model, where, with which key, and how fast/costly.

Read from run options (CLI flags, config file, ``evaluate(options=...)``). Keys are never stored:
the configuration holds only the *name* of the environment variable that carries the key.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragmeter.core.config import env_secret
from ragmeter.core.errors import ConfigError, JudgeError
from ragmeter.core.redact import SECRET_HELP, find_secrets, is_secret_name, redact_url


class JudgeConfigError(JudgeError, ConfigError):
    """The judge is misconfigured (unknown provider, missing SDK or key, rejected credentials).

    It is a :class:`ConfigError` too, so the runner stops the run instead of recording the same
    failure for every sample.
    """


#: how to configure a judge; every LLM metric's ``check`` returns this when none is configured.
HOW_TO_CONFIGURE = (
    "it needs an LLM judge and none is configured. Configure one with\n"
    "    --judge openai:gpt-4o-mini                  (key read from $OPENAI_API_KEY)\n"
    "    --judge anthropic:claude-3-5-haiku-latest   (key read from $ANTHROPIC_API_KEY)\n"
    "    --judge google:gemini-2.0-flash             (key read from $GOOGLE_API_KEY)\n"
    "    --judge openai:MODEL --judge-base-url http://127.0.0.1:11434/v1   (any OpenAI-compatible "
    "server: Ollama, vLLM, llama.cpp, LM Studio, Azure ...)\n"
    "  --judge-api-key-env NAME reads the key from another variable. In a config file: "
    "`judge: openai:gpt-4o-mini` (and `options: {judge_base_url: ...}`); in Python: "
    "evaluate(..., options={'judge': 'openai:gpt-4o-mini'}). See docs/judge.md."
)

#: provider -> (SDK module, pip extra, default key variable)
_PROVIDERS: dict[str, tuple[str, str, str | None]] = {
    "openai": ("openai", "openai", "OPENAI_API_KEY"),
    "azure": ("openai", "openai", "AZURE_OPENAI_API_KEY"),
    "anthropic": ("anthropic", "anthropic", "ANTHROPIC_API_KEY"),
    "google": ("google.genai", "google", "GOOGLE_API_KEY"),
}

#: shorthands for local OpenAI-compatible servers: provider name -> default base URL
LOCAL_SERVERS = {
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
}

_ALIASES = {"gemini": "google", "claude": "anthropic", "azure_openai": "azure",
            "openai_compatible": "openai", "llama.cpp": "llamacpp", "lm_studio": "lmstudio"}


@dataclass(frozen=True)
class JudgeConfig:
    """Everything the judge service needs, parsed from run options.

    Attributes:
        provider: ``openai`` (any OpenAI-compatible server), ``azure``, ``anthropic`` or ``google``.
        model: model name (Azure: the deployment name).
        label: what the user wrote (``ollama:llama3.1``), shown in summaries.
        base_url: endpoint for OpenAI-compatible servers / proxies (``None``: the provider's).
        api_key_env: name of the environment variable that holds the key.
        concurrency: requests in flight at once, at most: lowered while the provider answers 429
            (see :mod:`ragmeter.llm.limits`). 16 by default: measured with benchmarks/judge.py
            --sweep, 16 in flight ran a 50-sample, 3-metric judge workload in 0.55-0.6x the wall
            time of 8, at the same client CPU per call (ragas uses 16, DeepEval 20).
        rpm: requests per minute (``None``: no limit).
        timeout: seconds a whole request may take -- connecting, sending and the whole reply --
            before it is abandoned (and retried); one deadline on every transport.
        max_retries: retries on 429, 5xx, timeouts and connection errors.
        parse_retries: re-asks when a reply does not match the expected JSON.
        backoff_base / backoff_max: exponential backoff bounds in seconds.
        max_cost: stop judging once this many USD are spent (``None``: no budget).
        dry_run: plan and estimate, make no call.
        temperature: sampling temperature (0 by default).
        max_tokens: output token cap per request.
        prices_file: a user price table (JSON/YAML) extending or overriding genai-prices.
        api_version: Azure OpenAI API version.
        response_format: ``json_schema`` (native structured output, default), ``json_object`` or
            ``text`` for OpenAI-compatible servers that lack it (it also falls back by itself).
        http_client: the HTTP package of ragmeter's transport (:mod:`ragmeter.llm.transport`):
            ``auto`` (aiohttp when installed), ``aiohttp`` or ``httpx`` (httpx2 when installed);
            ``sdk`` sends OpenAI-compatible requests through the openai SDK's client instead (Azure
            OpenAI always goes through it).
        draw: a repeat number (``judge_draw``): a non-zero draw is part of the cache key, so
            repeated runs at temperature > 0 really ask again (judge self-consistency).
        max_reply_mb: the largest reply body read, in MB (``None``: 8, see
            :mod:`ragmeter.llm.replies`); a larger reply fails its call ("reply larger than 8 MB").
        batch: send the run's requests through the provider's batch API (:mod:`ragmeter.llm.batch`).
        batch_wait: wait for the batch (``False``: store the run as pending and return).
        batch_fallback: ``none`` (a request the batch did not answer has no value, with the
            provider's reason) or ``online`` (it is sent online).
        batch_poll: the longest wait between two polls of a batch, in seconds.
        joint: ask the metrics that read the same sample's contexts (faithfulness and context
            recall) in one request per sample (:mod:`ragmeter.llm.joint`); ``judge_joint=false``
            sends each metric its own request.
    """

    provider: str
    model: str
    label: str
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 16
    rpm: float | None = None
    timeout: float = 60.0
    max_retries: int = 5
    parse_retries: int = 2
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    max_cost: float | None = None
    dry_run: bool = False
    temperature: float = 0.0
    max_tokens: int = 2048
    prices_file: str | None = None
    api_version: str = "2024-10-21"
    response_format: str = "json_schema"
    http_client: str = "auto"
    draw: int = 0
    max_reply_mb: float | None = None
    batch: bool = False
    batch_wait: bool = True
    batch_fallback: str = "none"
    batch_poll: float = 60.0
    joint: bool = True

    @property
    def sdk_module(self) -> str:
        return _PROVIDERS[self.provider][0]

    @property
    def extra_name(self) -> str:
        return _PROVIDERS[self.provider][1]

    def api_key(self) -> str | None:
        """The key from the environment, or from the credentials file ``$RAGMETER_CREDENTIALS``
        names (``None`` if neither has it)."""
        return env_secret(self.api_key_env)

    def public(self) -> dict[str, Any]:
        """A description safe to store and print (no key, only the variable's name)."""
        return {"judge": self.label, "provider": self.provider, "model": self.model,
                "base_url": redact_url(self.base_url), "api_key_env": self.api_key_env,
                "concurrency": self.concurrency, "rpm": self.rpm, "temperature": self.temperature,
                "max_cost": self.max_cost, "dry_run": self.dry_run}


def parse_judge(value: str) -> tuple[str, str, str | None]:
    """``"provider:model"`` -> (provider, model, default base URL for local-server shorthands).

    >>> parse_judge("ollama:llama3.1:8b")
    ('openai', 'llama3.1:8b', 'http://127.0.0.1:11434/v1')
    """
    provider, sep, model = value.strip().partition(":")
    provider = provider.strip().lower()
    provider = _ALIASES.get(provider, provider)
    if not sep or not model.strip() or not provider:
        raise JudgeConfigError(f"judge {value!r}: give it as provider:model, e.g. openai:gpt-4o-mini, "
                               "anthropic:claude-3-5-haiku-latest, google:gemini-2.0-flash, "
                               "ollama:llama3.1")
    if provider in LOCAL_SERVERS:
        return "openai", model.strip(), LOCAL_SERVERS[provider]
    if provider not in _PROVIDERS:
        raise JudgeConfigError(f"judge {value!r}: unknown provider {provider!r}; use one of "
                               f"{', '.join(sorted([*_PROVIDERS, *LOCAL_SERVERS]))}")
    return provider, model.strip(), None


_OPTION_TYPES: dict[str, type] = {
    "concurrency": int, "rpm": float, "timeout": float, "max_retries": int, "parse_retries": int,
    "backoff_base": float, "backoff_max": float, "max_cost": float, "temperature": float,
    "max_tokens": int, "draw": int, "max_reply_mb": float, "batch_poll": float,
}


#: every judge setting: the run option ``judge_<name>``, or ``<name>`` inside a ``judge: {...}`` mapping
SETTINGS = ("base_url", "api_key_env", *_OPTION_TYPES, "dry_run", "prices", "api_version", "response_format",
            "http_client", "batch", "batch_wait", "batch_fallback", "joint")
#: keys a ``judge: {...}`` mapping takes besides the settings: which judge it is
_MAPPING_KEYS = ("model", "provider", "judge")


def check_judge_keys(options: Mapping[str, Any]) -> None:
    """Refuse judge settings ragmeter does not know, before anything is stored: a ``judge_*`` run
    option or a key of a ``judge: {...}`` mapping that is not a setting (``headers``: ragmeter
    sends no extra headers, and a value there is stored and shown with the run otherwise), and
    settings that hold a secret. The error names the keys and the accepted ones, never a value.

    Raises:
        JudgeConfigError: a secret, or an unknown key.
    """
    raw = options.get("judge")
    secrets = [k for k in options if k.startswith("judge") and is_secret_name(k)]
    secrets += list(find_secrets(raw, "judge")) + list(find_secrets(options.get("judge_base_url"),
                                                                    "judge_base_url"))
    unknown = [k for k in options if k.startswith("judge_") and k[len("judge_"):] not in SETTINGS]
    if isinstance(raw, dict):
        unknown += [f"judge.{k}" for k in raw if str(k) not in SETTINGS and str(k) not in _MAPPING_KEYS]
    said = []
    if unknown:
        import difflib

        names = [f"judge_{n}" for n in SETTINGS]
        hints = []
        for k in unknown:
            bare = k.removeprefix("judge.") if k.startswith("judge.") else k.removeprefix("judge_")
            near = difflib.get_close_matches(bare, SETTINGS, n=1, cutoff=0.75)
            hints.append(k + (f" (did you mean {'judge.' if k.startswith('judge.') else 'judge_'}{near[0]}?)"
                              if near else ""))
        said.append(f"unknown judge setting{'s' if len(unknown) > 1 else ''}: {', '.join(hints)}. The judge's "
                    f"settings are {', '.join(names)} (inside a `judge:` mapping: model, provider and the same "
                    "names without `judge_`); ragmeter sends no other headers or parameters (docs/judge.md)")
    if secrets:
        said.append(f"{', '.join(secrets)} holds a secret, which the judge never reads from options: {SECRET_HELP}")
    if said:
        raise JudgeConfigError(". ".join(said))


def _opt(options: dict[str, Any], judge: dict[str, Any], name: str) -> Any:
    # ``judge_<name>`` run option, or ``<name>`` inside a ``judge: {...}`` mapping
    if f"judge_{name}" in options and options[f"judge_{name}"] is not None:
        return options[f"judge_{name}"]
    return judge.get(name)


def _flag(value: Any) -> bool | None:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return None if value is None else bool(value)


def judge_configured(options: dict[str, Any]) -> bool:
    return bool(options.get("judge"))


def config_from_options(options: dict[str, Any]) -> JudgeConfig:
    """Build a :class:`JudgeConfig` from run options.

    ``judge`` is ``"provider:model"`` or a mapping ``{"model": "openai:gpt-4o-mini", "base_url": ...}``;
    the other settings are ``judge_base_url``, ``judge_api_key_env``, ``judge_concurrency``,
    ``judge_rpm``, ``judge_timeout``, ``judge_max_retries``, ``judge_parse_retries``,
    ``judge_backoff_base``, ``judge_backoff_max``, ``judge_max_cost``, ``judge_dry_run``,
    ``judge_temperature``, ``judge_max_tokens``, ``judge_max_reply_mb``, ``judge_draw``,
    ``judge_prices``, ``judge_api_version``, ``judge_response_format``, ``judge_http_client``
    (:data:`SETTINGS`; any other ``judge_*`` option or mapping key is refused).

    Raises:
        JudgeConfigError: no judge, a malformed spec, an unknown or invalid setting, a secret.
    """
    raw = options.get("judge")
    if not raw:
        raise JudgeConfigError(HOW_TO_CONFIGURE)
    judge: dict[str, Any] = {}
    check_judge_keys(options)
    if isinstance(raw, dict):
        judge = dict(raw)
        spec = judge.get("model") or judge.get("judge")
        if judge.get("provider") and spec and ":" not in str(spec):
            spec = f"{judge['provider']}:{spec}"
        if not spec:
            raise JudgeConfigError("judge mapping needs 'model': 'provider:model'")
        raw = str(spec)
    provider, model, local_url = parse_judge(str(raw))
    values: dict[str, Any] = {}
    for name, typ in _OPTION_TYPES.items():
        v = _opt(options, judge, name)
        if v is None or v == "":
            continue
        try:
            values[name] = typ(v)
        except (TypeError, ValueError):
            raise JudgeConfigError(f"judge option {name}={v!r} must be a {typ.__name__}") from None
    base_url = _opt(options, judge, "base_url") or local_url
    key_env = _opt(options, judge, "api_key_env") or _PROVIDERS[provider][2]
    dry, batch, wait, joint = (_flag(_opt(options, judge, n)) for n in ("dry_run", "batch", "batch_wait", "joint"))
    fallback = str(_opt(options, judge, "batch_fallback") or "none")
    if fallback not in {"none", "online"}:
        raise JudgeConfigError(f"judge_batch_fallback={fallback!r}: use none or online")
    fmt = str(_opt(options, judge, "response_format") or "json_schema")
    if fmt not in {"json_schema", "json_object", "text"}:
        raise JudgeConfigError(f"judge_response_format={fmt!r}: use json_schema, json_object or text")
    http = str(_opt(options, judge, "http_client") or "auto")
    if http not in {"auto", "aiohttp", "httpx", "sdk"}:
        raise JudgeConfigError(f"judge_http_client={http!r}: use auto, aiohttp, httpx or sdk")
    cfg = JudgeConfig(provider=provider, model=model, label=str(raw).strip(), base_url=base_url,
                      api_key_env=key_env, dry_run=bool(dry), http_client=http,
                      prices_file=_opt(options, judge, "prices"),
                      api_version=str(_opt(options, judge, "api_version") or "2024-10-21"),
                      response_format=fmt, batch=bool(batch), batch_wait=wait is not False,
                      batch_fallback=fallback, joint=joint is not False, **values)
    if cfg.concurrency < 1:
        raise JudgeConfigError(f"judge concurrency must be >= 1, got {cfg.concurrency}")
    if cfg.rpm is not None and cfg.rpm <= 0:
        raise JudgeConfigError(f"judge rpm must be > 0, got {cfg.rpm}")
    if cfg.max_cost is not None and cfg.max_cost < 0:
        raise JudgeConfigError(f"judge max_cost must be >= 0, got {cfg.max_cost}")
    if cfg.batch_poll <= 0:
        raise JudgeConfigError(f"judge batch_poll must be > 0 seconds, got {cfg.batch_poll}")
    if cfg.batch and cfg.provider not in {"openai", "anthropic"}:
        raise JudgeConfigError(f"--batch needs an OpenAI-compatible or Anthropic judge; {cfg.label} has no batch "
                               "endpoint ragmeter uses")
    if cfg.batch and cfg.max_cost is not None:
        raise JudgeConfigError("--max-cost stops online calls one at a time; a batch is sent and paid as a whole: "
                               "see its price with --dry-run and run without --max-cost")
    if cfg.timeout <= 0:
        raise JudgeConfigError(f"judge timeout must be > 0, got {cfg.timeout}")
    if cfg.max_reply_mb is not None and not 0 < cfg.max_reply_mb < float("inf"):
        raise JudgeConfigError(f"judge max_reply_mb must be a number of MB > 0, got {cfg.max_reply_mb}")
    if cfg.max_retries < 0 or cfg.parse_retries < 0:
        raise JudgeConfigError("judge max_retries and parse_retries must be >= 0")
    if cfg.provider == "azure" and not cfg.base_url:
        raise JudgeConfigError("an azure judge needs --judge-base-url https://RESOURCE.openai.azure.com "
                               "(the model is the deployment name)")
    return cfg


def problem(options: dict[str, Any]) -> str | None:
    """Why a judge cannot be used with these options, or ``None`` when it can.

    Checks that a judge is named, the spec parses, the provider's SDK is installed and the key
    variable is set (neither is needed for a dry run, which calls nothing; nor is a key for a local
    server), and that a budget has a price. Every command that uses a judge (``eval``, ``golden
    generate``, ``correctness`` ...) goes through this check, then the same client.
    """
    if not judge_configured(options):
        return HOW_TO_CONFIGURE
    try:
        cfg = config_from_options(options)
    except JudgeConfigError as exc:
        return str(exc)
    if not cfg.dry_run and importlib.util.find_spec(cfg.sdk_module.split(".")[0]) is None or (
            cfg.sdk_module == "google.genai" and importlib.util.find_spec("google.genai") is None):
        return (f"the {cfg.provider} judge needs the {cfg.sdk_module} package: "
                f"pip install 'ragmeter-eval[{cfg.extra_name}]'")
    if not cfg.dry_run and needs_key(cfg) and not cfg.api_key():
        return (f"the judge's API key is not set: export {cfg.api_key_env}=... "
                "(or name another variable with --judge-api-key-env)")
    from ragmeter.llm.prices import PriceTable

    try:
        prices = PriceTable.load(cfg.prices_file)
    except ConfigError as exc:
        return str(exc)
    if cfg.max_cost is not None and prices.get(cfg.provider, cfg.model, cfg.base_url) is None:
        return (f"--max-cost needs a price for {cfg.label}: add it to a price file and pass "
                "--option judge_prices=FILE (see `ragmeter judge-prices`)")
    return None


def needs_key(cfg: JudgeConfig) -> bool:
    """Local OpenAI-compatible servers usually take no key."""
    if cfg.provider == "openai" and cfg.base_url:
        return not _is_local(cfg.base_url)
    return True


def _is_local(url: str) -> bool:
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower()
    return host in {"127.0.0.1", "localhost", "::1", "0.0.0.0"} or host.endswith(".local")
