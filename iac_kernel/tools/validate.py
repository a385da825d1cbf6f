"""Check tool arguments against the tool's JSON Schema (the subset our tools use)."""

from __future__ import annotations

from typing import Any

from iac_kernel.tools.base import ToolError

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _check_value(name: str, value: Any, spec: dict[str, Any]) -> tuple[Any, str | None]:
    """Return the (possibly normalised) value and an error message or ``None``."""
    expected = spec.get("type")
    actual = _json_type(value)
    if expected == "integer" and actual == "number" and float(value).is_integer():
        value, actual = int(value), "integer"
    ok = expected is None or actual == expected or (expected == "number" and actual == "integer")
    if not ok:
        want = _TYPE_NAMES.get(expected, expected)
        return value, f"'{name}' must be {want} (got {actual})"
    if "enum" in spec and value not in spec["enum"]:
        allowed = ", ".join(repr(v) for v in spec["enum"])
        return value, f"'{name}' must be one of {allowed} (got {value!r})"
    if actual in ("integer", "number"):
        if "minimum" in spec and value < spec["minimum"]:
            return value, f"'{name}' must be >= {spec['minimum']} (got {value})"
        if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
            return value, f"'{name}' must be > {spec['exclusiveMinimum']} (got {value})"
        if "maximum" in spec and value > spec["maximum"]:
            return value, f"'{name}' must be <= {spec['maximum']} (got {value})"
    if actual == "string" and len(value) < spec.get("minLength", 0):
        return value, f"'{name}' must not be empty"
    return value, None


def validate_args(tool_name: str, schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """Return a copy of ``args`` with defaults filled in, or raise ToolError listing every problem.

    ``null`` for an optional field counts as absent (models send it for "not given").
    """
    if not isinstance(args, dict):
        raise ToolError(
            f"Invalid input for {tool_name}: arguments must be a JSON object "
            f"(got {_json_type(args)})"
        )
    props: dict[str, dict[str, Any]] = schema.get("properties", {})
    required = schema.get("required", [])
    problems: list[str] = []
    result: dict[str, Any] = {}
    for name in required:
        if args.get(name) is None:
            problems.append(f"missing required field '{name}'")
    if schema.get("additionalProperties") is False:
        for name in args:
            if name not in props:
                problems.append(f"unknown field '{name}'")
    for name, spec in props.items():
        value = args.get(name)
        if value is None:
            if "default" in spec:
                result[name] = spec["default"]
            continue
        value, problem = _check_value(name, value, spec)
        if problem:
            problems.append(problem)
        result[name] = value
    if problems:
        allowed = ", ".join(props) or "none"
        raise ToolError(f"Invalid input for {tool_name}: {'; '.join(problems)}. Fields: {allowed}.")
    return result


def check(tool: Any, args: Any) -> dict[str, Any]:
    """Validate ``args`` against ``tool.input_schema``; the usual first line of ``run``."""
    return validate_args(tool.name, tool.input_schema, args)
