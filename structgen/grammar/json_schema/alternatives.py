"""The IR of a union of schemas (`union_ir`): a schema that is only a top-level `anyOf`
(a tool-call schema, one alternative per tool) is compiled one alternative at a time,
and each alternative's IR is cached by its content and options, wherever it sits in the
list. A union that differs from one compiled before by one alternative compiles only
that one.

Each alternative is compiled as a document of its own: a `$ref` inside it resolves
within it, never in a sibling (the server gives each tool's parameters an `$id` that
depends on their content alone, for "#/$defs/..." to resolve in them). A schema of
another shape is one piece, cached the same way.

Owns the cache of alternatives (`clear_alternatives`). Must not know the automata.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from structgen.errors import GrammarTooLargeError, SchemaError
from structgen.grammar import ir
from structgen.grammar.json_schema.combinators import MAX_BRANCHES
from structgen.grammar.json_schema.compiler import SchemaCompiler
from structgen.grammar.json_schema.options import JsonOptions, schema_text
from structgen.grammar.languages import Languages

MAX_CACHED = 2048  # alternatives kept, least recently used dropped first
# ... and at most this many characters of their schemas' text in all: an IR grows with
# its schema's text, and a client sending large tool sets must not fill the process.
MAX_CACHED_TEXT = 16 << 20

_cache: "OrderedDict[tuple, Piece]" = OrderedDict()
_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "text": 0}


@dataclass(frozen=True)
class Piece:
    node: ir.Node
    branches: int  # the alternatives its anyOf/oneOf/if expanded to (the branch budget)


def union_ir(schema: Any, options: JsonOptions, *, deadline: float,
             languages: Languages | None = None) -> ir.Node:
    """The IR of `schema` (already parsed), each alternative of its top-level anyOf from
    the cache where an equal one was compiled before with the same options. Its
    expanded size is not checked against `options.max_states`: the caller checks what
    it builds around it (`structgen.compiler.front`)."""
    alternatives = schema.get("anyOf") if isinstance(schema, dict) and len(schema) == 1 else None
    if not isinstance(alternatives, list) or not alternatives:
        return piece_ir(schema, "", options, deadline, languages).node
    pieces = [piece_ir(alternative, f"/anyOf/{i}", options, deadline, languages)
              for i, alternative in enumerate(alternatives)]
    nodes = [p.node for p in pieces if not ir.is_nothing(p.node)]
    if sum(p.branches for p in pieces) + len(nodes) > MAX_BRANCHES:
        raise GrammarTooLargeError(
            f"the schema's anyOf/oneOf/if/dependencies combinations expand to over {MAX_BRANCHES:,} alternatives"
        )
    return ir.alt(*nodes)


def piece_ir(schema: Any, at: str, options: JsonOptions, deadline: float,
             languages: Languages | None) -> Piece:
    """The IR of the subschema at pointer `at` compiled as its own document (cached);
    its errors point into the whole schema."""
    own = replace(options, strict_pointers=pointers_inside(options.strict_pointers, at))
    key = (schema_text(schema), own, languages)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            _stats["hits"] += 1
            return hit
        _stats["misses"] += 1
    compiler = SchemaCompiler(schema, own, deadline, languages=languages)
    try:
        piece = Piece(compiler.compile_root(check_size=False), compiler.branches)
    except SchemaError as err:
        raise moved_under(err, at) from None
    except RecursionError:  # within the nesting limits this is a bug; still the user's 400
        raise GrammarTooLargeError("the schema is nested too deeply to compile") from None
    with _lock:
        if key not in _cache:
            _cache[key] = piece
            _stats["text"] += len(key[0])
        while len(_cache) > MAX_CACHED or _stats["text"] > MAX_CACHED_TEXT:
            dropped, _ = _cache.popitem(last=False)
            _stats["text"] -= len(dropped[0])
    return piece


def pointers_inside(pointers: tuple[str, ...], at: str) -> tuple[str, ...]:
    """`pointers` (into the whole schema) as seen from the subschema at `at`: those under
    it made relative, those above it (covering it whole) the root's."""
    inside = []
    for p in pointers:
        if p == at or p.startswith(at + "/"):
            inside.append(p[len(at):])
        elif at.startswith(p + "/") or p == "":
            inside.append("")
    return tuple(dict.fromkeys(inside))


def moved_under(err: SchemaError, at: str) -> SchemaError:
    """`err` of a subschema compiled alone, pointing from the root of the whole schema."""
    if not at or err.pointer is None:
        return err
    err.pointer = at + err.pointer
    err.args = (f"{err.detail} (at {err.pointer})",)
    return err


def clear_alternatives() -> None:
    with _lock:
        _cache.clear()
        _stats["text"] = 0


def alternatives_info() -> dict:
    with _lock:
        return {"size": len(_cache), **_stats}
