"""The functions the tools suite offers a model: read from MaskBench-dev's Glaive and BFCL
records, and drawn into seeded tool sets.

A Glaive record (`Glaiveai2K---<function>_<id>.json`) holds one function's parameters
as its "schema" and argument objects as its tests. A BFCL record (`BFCL_*.json`) wraps
each function as {"properties": {<name>: <parameters>}, "required": [<name>]}, several
of them under "anyOf" (BFCL "multiple") or as array items (BFCL "parallel"), and its
tests wrap the arguments the same way.

Owns the `Function`s (name, parameters, one valid arguments object), the tool sets, and
the text of one call. Must not compile or time anything.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

GLAIVE_PREFIX = "Glaiveai2K---"
BFCL_PREFIX = "BFCL_"
# OpenAI's function names are ^[a-zA-Z0-9_-]{1,64}$: BFCL's dotted names are written with "_".
NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64


@dataclass(frozen=True, eq=False)
class Function:
    name: str
    parameters: dict
    arguments: dict | None  # a valid arguments object from the record's tests, if it has one
    source: str  # the record's file name


def load_functions(folder: Path) -> list[Function]:
    """Every function of the Glaive and BFCL records under `folder`, one per name (the
    first record in file-name order wins)."""
    found: dict[str, Function] = {}
    for path in sorted(folder.glob(f"{GLAIVE_PREFIX}*.json")) + sorted(folder.glob(f"{BFCL_PREFIX}*.json")):
        record = json.loads(path.read_text())
        read = glaive_functions if path.name.startswith(GLAIVE_PREFIX) else bfcl_functions
        for name, parameters, arguments in read(path.stem, record):
            name = NOT_IN_NAMES.sub("_", name)[:MAX_NAME]
            found.setdefault(name, Function(name, parameters, arguments, path.name))
    return list(found.values())


def valid_data(record: dict) -> list:
    return [test["data"] for test in record.get("tests", []) if test.get("valid")]


def glaive_functions(stem: str, record: dict) -> list[tuple[str, dict, dict | None]]:
    name = stem[len(GLAIVE_PREFIX):].rsplit("_", 1)[0]
    arguments = [data for data in valid_data(record) if isinstance(data, dict)]
    return [(name, record["schema"], arguments[0] if arguments else None)]


def bfcl_functions(stem: str, record: dict) -> list[tuple[str, dict, dict | None]]:
    arguments: dict[str, dict] = {}
    for data in valid_data(record):
        for call in data if isinstance(data, list) else [data]:
            if isinstance(call, dict) and len(call) == 1:
                name, value = next(iter(call.items()))
                arguments.setdefault(name, value)
    return [(name, parameters, arguments.get(name)) for name, parameters in wrapped(record["schema"])]


def wrapped(schema: dict) -> list[tuple[str, dict]]:
    """(name, parameters) of each function BFCL's schema wraps."""
    properties = schema.get("properties", {})
    if len(properties) == 1 and schema.get("required") == list(properties):
        return list(properties.items())
    found = []
    for variant in schema.get("anyOf", []) + schema.get("oneOf", []):
        found += wrapped(variant)
    if isinstance(schema.get("items"), dict):
        found += wrapped(schema["items"])
    return found


def tool_set(functions: list[Function], size: int, seed: int) -> list[Function]:
    return random.Random(seed).sample(functions, size)


def one_replaced(tools: list[Function], functions: list[Function], seed: int) -> list[Function]:
    """`tools` with its last function swapped for another one of `functions`."""
    names = {f.name for f in tools}
    return tools[:-1] + [random.Random(seed).choice([f for f in functions if f.name not in names])]


def call_text(tools: list[Function], open_tag: str, close_tag: str) -> tuple[str, str, str]:
    """(name, where its arguments come from, text) of one call, `open_tag {"name": ...,
    "arguments": ...} close_tag`: of the first of `tools` that has a valid arguments
    object (written in its schema's property order), else of the first tool with
    `minimal` arguments; json.dumps' separators."""
    f = next((f for f in tools if f.arguments is not None), None)
    if f is not None:
        arguments, origin = in_schema_order(f.arguments, f.parameters), f"a valid test of {f.source}"
    else:
        f = tools[0]
        arguments, origin = minimal(f.parameters), "minimal"
    return f.name, origin, open_tag + json.dumps({"name": f.name, "arguments": arguments}) + close_tag


def in_schema_order(data, schema):
    """`data` with each object's members in the order its schema's "properties" lists them
    (the others after), at every depth the schema describes."""
    if not isinstance(schema, dict):
        return data
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [in_schema_order(item, schema["items"]) for item in data]
    if not isinstance(data, dict):
        return data
    properties = schema.get("properties") or {}
    order = [k for k in properties if k in data] + [k for k in data if k not in properties]
    return {k: in_schema_order(data[k], properties.get(k)) for k in order}


MINIMAL = {"string": "", "integer": 0, "number": 0, "boolean": False, "null": None, "array": []}


def minimal(schema):
    """A small instance of a simple schema: its const or first enum value, the required
    members of an object, an empty array or string, zero."""
    if not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties") or {}
        return {k: minimal(properties.get(k)) for k in schema.get("required", [])}
    return MINIMAL.get(kind, {})
