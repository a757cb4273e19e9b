"""How deep user input may nest, checked before anything walks it recursively.

Owns the nesting limits of schemas and of JSON texts, an iterative check that names
where a schema passes its limit (a JSON pointer), a fast depth scan of JSON text (run
before `json.loads`, whose parser recurses in C), and the interpreter's recursion limit
that compiling input this deep needs. Must not walk anything recursively itself.
"""

from __future__ import annotations

import re
import sys
from itertools import accumulate
from typing import Any

from structgen.errors import SchemaError

MAX_SCHEMA_LEVELS = 1_000  # nested subschemas a schema may have (documented)
# An object property is two levels of JSON ({"properties": {"a": ...}}), an anyOf branch
# too; the margin covers the keywords around the deepest subschema.
MAX_JSON_NESTING = 2 * MAX_SCHEMA_LEVELS + 48
# Python frames a compile may stack while it walks MAX_SCHEMA_LEVELS levels (about ten
# per level), or while an automaton's closure follows a grammar's rules
# (automata.nfa.MAX_RULE_NESTING of them, a few frames each): far above the default
# 1,000. Raised once and never lowered, so that no compile lowers it under another.
RECURSION_LIMIT = 50_000

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def make_room_for_deep_input() -> None:
    """Raise the interpreter's recursion limit to RECURSION_LIMIT (never lower it)."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def text_nesting(text: str | bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(_STEP[b] for b in brackets), default=0)


def check_text_nesting(text: str | bytes, what: str = "the schema", limit: int = MAX_JSON_NESTING) -> None:
    """SchemaError when a JSON text nests deeper than `limit` (before it is parsed)."""
    depth = text_nesting(text)
    if depth > limit:
        raise SchemaError(f"{what} nests {depth} levels of JSON arrays and objects; the limit is {limit} "
                          f"(about {MAX_SCHEMA_LEVELS} levels of subschemas)", "")


def check_nesting(value: Any, limit: int = MAX_JSON_NESTING) -> None:
    """SchemaError, with the pointer of the first value past the limit, when `value`
    (a parsed schema) nests deeper than `limit` levels of arrays and objects."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node if isinstance(node, list) else ():
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    raise SchemaError(f"the schema nests deeper than {limit} levels of JSON arrays and objects "
                                      f"(about {MAX_SCHEMA_LEVELS} levels of subschemas), the limit",
                                      _pointer_to(value, child))
                stack.append((child, depth + 1))


def _pointer_to(root: Any, target: Any) -> str:
    """The JSON pointer of `target` (an object inside `root`), found without recursion."""
    stack = [(root, "")]
    while stack:
        node, pointer = stack.pop()
        if node is target:
            return pointer
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"))
    return ""
