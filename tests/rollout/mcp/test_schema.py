"""MCP input schemas become OpenAI function tools with the full JSON Schema, references inlined."""

from __future__ import annotations

from osmosis_ai.rollout.mcp.schema import inline_references, parameters_schema, tool_from_mcp

PERSON = {
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["city"],
        },
        "Person": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "addresses": {"type": "array", "items": {"$ref": "#/$defs/Address"}},
            },
        },
    },
    "properties": {
        "person": {"$ref": "#/$defs/Person", "description": "who"},
        "level": {"anyOf": [{"type": "null"}, {"type": "integer", "enum": [1, 2, 3]}], "default": None},
    },
    "required": ["person"],
}


def test_nested_objects_and_arrays_reach_the_tool_unflattened_with_references_inlined() -> None:
    tool = tool_from_mcp("register", "Register someone.", PERSON)
    parameters = tool["function"]["parameters"]
    person = parameters["properties"]["person"]
    assert person["description"] == "who" and person["type"] == "object"
    address = person["properties"]["addresses"]["items"]
    assert address["properties"]["zip"]["pattern"] == "^[0-9]{5}$" and address["required"] == ["city"]
    assert "$defs" not in parameters and "$ref" not in repr(parameters)
    assert parameters["required"] == ["person"]


def test_a_property_without_a_type_gets_its_first_non_null_alternative_and_keeps_the_alternatives() -> None:
    level = parameters_schema(PERSON)["properties"]["level"]
    assert level["type"] == "integer"
    assert level["anyOf"][1]["enum"] == [1, 2, 3] and level["default"] is None


def test_a_recursive_definition_keeps_its_reference_and_the_definitions() -> None:
    tree = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }  # fmt: skip
    inlined = inline_references(tree)
    children = inlined["properties"]["root"]["properties"]["children"]
    assert children["items"] == {"$ref": "#/$defs/Node"}
    assert inlined["$defs"] == tree["$defs"]


def test_a_tool_without_description_or_parameters_still_has_the_openai_shape() -> None:
    assert tool_from_mcp("ping", None, None) == {
        "type": "function",
        "function": {
            "name": "ping",
            "description": "Tool: ping",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }


def test_the_input_schema_is_not_modified() -> None:
    before = repr(PERSON)
    parameters_schema(PERSON)
    assert repr(PERSON) == before
