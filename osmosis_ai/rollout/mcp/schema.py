"""An MCP tool description as an OpenAI function tool, with its full JSON Schema.

The parameters keep every JSON-Schema keyword (nested ``properties``, ``items``, ``anyOf``, ``enum``,
``default``, ...): strict providers reject flattened schemas, and the model needs the nested shape to
fill nested arguments. Local references (``#/$defs/...``, ``#/definitions/...``) are inlined so every
provider can read the schema; a recursive definition cannot be inlined, so there the reference stays and
the definitions are kept beside it.

Each top-level property also gets a ``type`` when it has none (``anyOf``/``oneOf``/``$ref`` only): the
rollout wire format requires one per property, and the first non-null alternative's type is what the
argument usually is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

_DEFINITION_KEYS = ("$defs", "definitions")
_ALTERNATIVES = ("anyOf", "oneOf")


def _lookup(reference: str, root: Mapping[str, Any]) -> Any:
    """The schema a local JSON pointer (``#/a/b``) names in ``root``; ``None`` when it names nothing."""
    if not reference.startswith("#/"):
        return None
    node: Any = root
    for raw in reference[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


class _Inliner:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.kept_references = False  # a recursive (or unresolvable) reference stayed in place

    def inline(self, node: Any, expanding: tuple[str, ...] = ()) -> Any:
        if isinstance(node, list):
            return [self.inline(item, expanding) for item in node]
        if not isinstance(node, Mapping):
            return node
        reference = node.get("$ref")
        if isinstance(reference, str):
            target = _lookup(reference, self.root)
            if target is None or reference in expanding:
                self.kept_references = True
                return {key: self.inline(value, expanding) for key, value in node.items()}
            resolved = self.inline(target, (*expanding, reference))
            siblings = {k: self.inline(v, expanding) for k, v in node.items() if k != "$ref"}
            return {**resolved, **siblings} if isinstance(resolved, Mapping) else resolved
        return {
            key: self.inline(value, expanding) for key, value in node.items() if key not in _DEFINITION_KEYS
        }


def inline_references(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with its local ``$ref`` replaced by the definitions they name (see the module docstring)."""
    inliner = _Inliner(schema)
    result: dict[str, Any] = inliner.inline(schema)
    if inliner.kept_references:
        for key in _DEFINITION_KEYS:
            if key in schema:
                result[key] = copy.deepcopy(schema[key])
    return result


def _first_type(schema: Mapping[str, Any]) -> str:
    """The JSON type an argument most likely has: its own, else the first non-null alternative's."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return next((k for k in kind if isinstance(k, str) and k != "null"), "string")
    for key in _ALTERNATIVES:
        for option in schema.get(key) or ():
            if isinstance(option, Mapping) and option.get("type") != "null":
                return _first_type(option)
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"


def parameters_schema(input_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``parameters`` object of a function tool from an MCP tool's ``inputSchema``."""
    parameters = inline_references(input_schema or {})
    parameters["type"] = "object"
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        properties = parameters["properties"] = {}
    for name, prop in list(properties.items()):
        if isinstance(prop, dict) and not isinstance(prop.get("type"), str):
            properties[name] = {**prop, "type": _first_type(prop)}
    required = parameters.get("required")
    parameters["required"] = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
    return parameters


def tool_from_mcp(
    name: str, description: str | None, input_schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """An OpenAI function tool (a plain dict) for the MCP tool ``name``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description or f"Tool: {name}",
            "parameters": parameters_schema(input_schema),
        },
    }
