"""The files the DeepEval metrics take by run option, read before a run starts: ``--option
dag=dag.json`` (a DAG of DeepEval's JSON shape, ``DeepAcyclicGraph.to_json()``, or the same
document in YAML) and ``--option expected_schema=schema.json`` (the JSON schema of
``deepeval:json_correctness``). :func:`resolve_options` replaces each path by the parsed document,
so the metrics receive data (metrics never read files) and a run stores what it scored with.

A bad file is a :class:`~ragmeter.core.errors.ConfigError` naming the file (and, for a DAG, the
node): the command exits 2 before anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragmeter.core.deepeval_dag import MULTI_TURN_PARAMS, DagError, flat_document, parse_dag
from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.files import read_text

#: run options that name a file -> what the file is (for messages)
FILE_OPTIONS = {"dag": "DAG file", "expected_schema": "JSON schema file", "quality_model": "quality model file"}


def read_document(path: str | Path, what: str) -> Any:
    """A JSON or YAML document (YAML for ``.yaml`` / ``.yml``).

    Raises:
        ConfigError: the file is missing or unreadable, or not JSON / YAML (line named).
    """
    p = Path(path)
    try:
        text = read_text(p, what)
    except DatasetError as exc:
        raise ConfigError(str(exc)) from None
    if p.suffix.lower() in {".yaml", ".yml"}:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConfigError(f"{p}: the {what} is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: the {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def read_dag(path: str | Path) -> dict[str, Any]:
    """A DAG file, checked as DeepEval checks it (:func:`ragmeter.core.deepeval_dag.parse_dag`).

    Returns:
        the document in DeepEval's serialized shape (``{"nodes": {...}}``; a nested document is
        flattened), to pass as ``deepeval:dag``'s ``dag``.

    Raises:
        ConfigError: naming the file, and the node when one is wrong.
    """
    doc = read_document(path, FILE_OPTIONS["dag"])
    try:
        flat = flat_document(doc)
        parse_dag(flat)
    except DagError as exc:
        try:  # a conversational DAG (deepeval:conversational_dag): turn fields, turn windows
            parse_dag(flat, params=MULTI_TURN_PARAMS, multiturn=True)
        except DagError as multi:
            also = "" if str(multi) == str(exc) else f" (read as a conversational DAG: {multi})"
            raise ConfigError(f"{path}: {exc}{also}") from None
    return flat


def read_json_schema(path: str | Path) -> dict[str, Any]:
    """A JSON schema file (an object), for ``deepeval:json_correctness``."""
    doc = read_document(path, FILE_OPTIONS["expected_schema"])
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a JSON schema is an object, got {type(doc).__name__}")
    return doc


def resolve_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with each file option given as a path replaced by the parsed document."""
    out = dict(options)
    if isinstance(out.get("dag"), str):
        out["dag"] = read_dag(out["dag"])
    if isinstance(out.get("expected_schema"), str):
        out["expected_schema"] = read_json_schema(out["expected_schema"])
    if isinstance(out.get("quality_model"), str) and out["quality_model"]:
        from ragmeter.io.quality_model import read_quality_model

        out["quality_model"] = read_quality_model(out["quality_model"])
    return out
