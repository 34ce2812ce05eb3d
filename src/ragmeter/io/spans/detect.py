"""Which span format a file holds, and the reader of each format."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace
from ragmeter.io.spans import otlp


def kind_of_object(obj: Any) -> str | None:
    """The span format of one parsed JSON value (the first of a file), or ``None``."""
    item = obj[0] if isinstance(obj, list) and obj else obj
    if not isinstance(item, Mapping):
        return None
    if "context.trace_id" in item and "context.span_id" in item:  # Phoenix's span dataframe as JSON
        return "phoenix"
    if "resourceSpans" in item or "resource_spans" in item or ("context" in item and "start_time" in item):
        return "otlp"
    from ragmeter.io.spans import agents_sdk

    if agents_sdk.is_agents_sdk(item) or (isinstance(item.get("data"), list) and item["data"]
                                          and agents_sdk.is_agents_sdk(item["data"][0])):
        return "agents-sdk"
    from ragmeter.io.spans import langchain, langfuse, mlflow

    for fmt, mod, test in (("mlflow", mlflow, mlflow.is_mlflow), ("langsmith", langchain, langchain.is_run),
                           ("langfuse", langfuse, langfuse.is_langfuse)):
        objs = mod.objects(item) if hasattr(mod, "objects") else [item]
        if test(item) or (objs and test(objs[0])):
            return fmt
    return None


def span_format(path: Path) -> str | None:
    """The format of a span file, from its suffix (``.pb``) and its first JSON value."""
    if otlp.is_protobuf_file(path):
        return "otlp-proto"
    suffix = (Path(path.stem).suffix if path.suffix.lower() == ".gz" else path.suffix).lower()
    if suffix in (".parquet", ".pq", ".csv", ".tsv"):
        from ragmeter.io.spans import phoenix

        return "phoenix" if phoenix.is_phoenix(path) else None
    if suffix not in (".json", ".jsonl", ".ndjson", ""):
        return None
    try:
        head, whole = _head(path)
    except (OSError, EOFError):  # EOFError: a .gz cut short (the reader then says so)
        return None
    import json

    text = head.lstrip("\ufeff \t\r\n")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        # the first value does not end within the head (a large pretty-printed export): its keys
        return None if whole else _sniff(text)
    return kind_of_object(obj)


#: bytes read to recognise a span file: a dataset is never read whole to be recognised
HEAD_BYTES = 1 << 20

#: a key near the start of a value that only a span format's first value has
_MARKERS = (("otlp", '"resourceSpans"'), ("otlp", '"resource_spans"'), ("agents-sdk", '"trace.span"'),
            ("mlflow", '"trace_location"'), ("langsmith", '"run_type"'), ("langfuse", '"observations"'))


def _head(path: Path) -> tuple[str, bool]:
    """The file's first :data:`HEAD_BYTES` as text (gunzipped), and whether that is all of it."""
    if path.suffix.lower() == ".gz":
        import gzip

        with gzip.open(path, "rb") as fh:
            raw = fh.read(HEAD_BYTES + 1)
    else:
        with path.open("rb") as fh:
            raw = fh.read(HEAD_BYTES + 1)
    return raw[:HEAD_BYTES].decode("utf-8", errors="ignore"), len(raw) <= HEAD_BYTES


def _sniff(text: str) -> str | None:
    import re

    for fmt, key in _MARKERS:  # as a key (followed by a colon), or as the Agents SDK's object type
        if re.search(re.escape(key) + (r"\s*[,}]" if fmt == "agents-sdk" else r"\s*:"), text[:65536]):
            return fmt
    return None


def read(path: Path, fmt: str) -> list[AgentTrace]:
    try:
        return _read(path, fmt)
    except DatasetError:
        raise
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError) as exc:
        # JSON of the format's outline whose values have shapes no such export has
        raise DatasetError(f"{path}: not readable as {fmt} spans ({type(exc).__name__}: {str(exc)[:200]})") from None


def _read(path: Path, fmt: str) -> list[AgentTrace]:
    from ragmeter.io.spans import agent_traces_from_spans

    if fmt in ("otlp", "otlp-proto"):
        records = otlp.read_spans(path) if fmt == "otlp" or otlp.is_protobuf_file(path) else \
            otlp.spans_from_protobuf(path.read_bytes())
        return agent_traces_from_spans(records, where=str(path))
    if fmt == "phoenix":
        from ragmeter.io.spans import phoenix

        return phoenix.read(path)
    items = [(line, x) for line, obj in otlp.objects_in_text(otlp.read_text(path), str(path))
             for x in _objects(fmt, obj)]
    from ragmeter.io.spans import agents_sdk, langchain, langfuse, mlflow

    readers = {"agents-sdk": agents_sdk.read, "langsmith": langchain.read, "langfuse": langfuse.read,
               "mlflow": mlflow.read}
    if fmt in readers:
        return readers[fmt](items, str(path))
    raise DatasetError(f"{path}: no reader for span format {fmt!r}")


def _objects(fmt: str, obj: Any) -> list[Any]:
    from ragmeter.io.spans import agents_sdk, langchain, langfuse

    split = {"agents-sdk": agents_sdk.objects, "langsmith": langchain.objects, "langfuse": langfuse.objects}
    if fmt in split:
        return split[fmt](obj)
    return obj if isinstance(obj, list) else [obj]
