"""A pydantic model rebuilt from the JSON schema pydantic wrote for it (``Model.model_json_schema()``),
so a JSON text validates here exactly as it does against the original model (DeepEval's
``JsonCorrectnessMetric`` validates with the model itself).

Covered: objects (``properties``, ``required``, ``default``, ``additionalProperties: false`` ->
``extra="forbid"``), ``string`` / ``integer`` / ``number`` / ``boolean`` / ``null``, arrays
(``items``), mappings (``additionalProperties`` schema), nested models (``$ref`` to ``$defs``),
``enum`` and ``const`` (``Literal``), ``anyOf`` (unions, ``Optional``), and pydantic's constraints
(``minLength``, ``maxLength``, ``pattern``, ``minimum``, ``maximum``, ``exclusiveMinimum``,
``exclusiveMaximum``, ``multipleOf``, ``minItems``, ``maxItems``). Any other keyword is refused with
:class:`SchemaError` naming it: a schema is never validated more loosely than its model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

#: keywords that only describe (they never change what validates)
_DESCRIPTIVE = {"title", "description", "examples", "default", "$defs", "definitions", "$schema", "deprecated",
                "readOnly", "writeOnly", "format", "$comment"}
_CONSTRAINTS = {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern", "minimum": "ge",
                "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt", "multipleOf": "multiple_of",
                "minItems": "min_length", "maxItems": "max_length"}
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


class SchemaError(ValueError):
    """A JSON schema this module cannot rebuild into a model (the path and the keyword named)."""


def model_from_json_schema(schema: dict[str, Any]) -> type[BaseModel]:
    """The pydantic model of ``schema`` (a top-level object schema).

    Raises:
        SchemaError: not an object schema, a broken ``$ref``, or a keyword not covered.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object" and "$ref" not in schema:
        raise SchemaError("the top level must be an object schema ({\"type\": \"object\", \"properties\": ...})")
    return _Builder(schema).model(schema, "#", schema.get("title") or "ExpectedSchema")


class _Builder:
    def __init__(self, root: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = {**(root.get("definitions") or {}), **(root.get("$defs") or {})}
        self.models: dict[str, Any] = {}

    def ref(self, ref: str, path: str) -> Any:
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in self.defs:
            raise SchemaError(f"{path}: $ref {ref!r} does not name a definition of the schema")
        if name not in self.models:
            self.models[name] = None  # a recursive reference is not rebuilt
            self.models[name] = self.type(self.defs[name], f"#/$defs/{name}", name)
        if self.models[name] is None:
            raise SchemaError(f"{path}: recursive $ref {ref!r} is not supported")
        return self.models[name]

    def model(self, s: dict[str, Any], path: str, name: str) -> type[BaseModel]:
        self._known(s, path, {"type", "properties", "required", "additionalProperties"})
        props = s.get("properties") or {}
        required = set(s.get("required") or [])
        extra = s.get("additionalProperties")
        if extra not in (None, False):
            raise SchemaError(f"{path}: additionalProperties with properties is not supported")
        fields: dict[str, Any] = {}
        for key, sub in props.items():
            t = self.type(sub, f"{path}/properties/{key}", f"{name}_{key}")
            if key in required:
                fields[key] = (t, ...)
            else:
                fields[key] = (t, sub.get("default") if isinstance(sub, dict) else None)
        config = ConfigDict(extra="forbid" if extra is False else "ignore")
        try:
            return create_model(name.replace(" ", "_") or "Model", __config__=config, **fields)
        except Exception as exc:  # noqa: BLE001 - pydantic refuses a field name (e.g. a leading underscore)
            raise SchemaError(f"{path}: cannot rebuild the model: {exc}") from None

    def type(self, s: Any, path: str, name: str) -> Any:
        if s is True or s == {}:
            return Any
        if not isinstance(s, dict):
            raise SchemaError(f"{path}: expected a schema object, got {s!r:.60}")
        if "$ref" in s:
            self._known(s, path, {"$ref"})
            return self.ref(s["$ref"], path)
        if "anyOf" in s or "oneOf" in s:
            key = "anyOf" if "anyOf" in s else "oneOf"
            self._known(s, path, {key})
            opts = [self.type(x, f"{path}/{key}/{i}", f"{name}_{i}") for i, x in enumerate(s[key])]
            if not opts:
                raise SchemaError(f"{path}: empty {key}")
            if key == "oneOf":
                raise SchemaError(f"{path}: oneOf is not supported (pydantic writes anyOf)")
            return Union[tuple(opts)] if len(opts) > 1 else opts[0]  # noqa: UP007 - built at run time
        if "enum" in s or "const" in s:
            self._known(s, path, {"enum", "const", "type"})
            values = s["enum"] if "enum" in s else [s["const"]]
            if not values:
                raise SchemaError(f"{path}: empty enum")
            return Literal[tuple(values)]
        t = s.get("type")
        if isinstance(t, list):
            self._known(s, path, {"type"})
            return Union[tuple(_SCALARS[x] for x in t if x in _SCALARS)]  # noqa: UP007
        if t == "object":
            if "properties" in s or s.get("additionalProperties") is False:
                return self.model(s, path, s.get("title") or name)
            self._known(s, path, {"type", "additionalProperties"})
            value = self.type(s.get("additionalProperties", True), f"{path}/additionalProperties", name + "_value")
            return dict[str, value]
        if t == "array":
            self._known(s, path, {"type", "items", "minItems", "maxItems"})
            item = self.type(s.get("items", True), f"{path}/items", name + "_item")
            return self._constrained(list[item], s, path)
        if t in _SCALARS:
            allowed = {"type"} | ({"minLength", "maxLength", "pattern"} if t == "string" else set()) | (
                {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
                if t in ("integer", "number") else set())
            self._known(s, path, allowed)
            return self._constrained(_SCALARS[t], s, path)
        raise SchemaError(f"{path}: cannot rebuild type {t!r}")

    @staticmethod
    def _constrained(t: Any, s: dict[str, Any], path: str) -> Any:
        kw = {_CONSTRAINTS[k]: v for k, v in s.items() if k in _CONSTRAINTS}
        return Annotated[t, Field(**kw)] if kw else t

    @staticmethod
    def _known(s: dict[str, Any], path: str, allowed: set[str]) -> None:
        unknown = sorted(set(s) - allowed - _DESCRIPTIVE)
        if unknown:
            raise SchemaError(f"{path}: the keyword(s) {', '.join(unknown)} are not supported here")

