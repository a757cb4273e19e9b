"""The regex AST -> byte-level IR (`regex_ir`): each character set becomes its UTF-8
encodings or its JSON string-body spellings, anchors decide where a search may add
characters.

Owns: the encodings, whole-string versus search semantics, and where `^`/`$` may stand.
Must not read pattern text: `parser` gives the AST.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from structgen.errors import RegexError
from structgen.grammar import charset as C
from structgen.grammar import ir
from structgen.grammar.regex.nodes import Alternation, Anchor, Chars, Quantified, RegexNode, Sequence
from structgen.grammar.regex.parser import parse_regex

_Branches = dict  # (anchored_start, anchored_end) -> list of part lists


def _lower(node: RegexNode, char_ir: Callable[[C.CharSet], ir.Node], at_start: bool, at_end: bool, pattern: str):
    """Lower `node` into {(anchored_start, anchored_end): [parts, ...]}: each value lists
    alternatives (each a list of IR parts to concatenate) by how they are anchored.
    Anchors are legal only where at_start/at_end say the node is at the edge."""
    if isinstance(node, Chars):
        return {(False, False): [[char_ir(node.cs)]]}
    if isinstance(node, Anchor):
        if node.kind == "^":
            if not at_start:
                raise RegexError(
                    "'^' is only supported at the start of the pattern (or of a branch or group there)",
                    pattern,
                    node.position,
                )
            return {(True, False): [[]]}
        if not at_end:
            raise RegexError(
                "'$' is only supported at the end of the pattern (or of a branch or group there)",
                pattern,
                node.position,
            )
        return {(False, True): [[]]}
    if isinstance(node, Alternation):
        out: _Branches = {}
        for item in node.items:
            for key, alts in _lower(item, char_ir, at_start, at_end, pattern).items():
                out.setdefault(key, []).extend(alts)
        return out
    if isinstance(node, Quantified):
        inner = _lower(node.item, char_ir, False, False, pattern)
        body = _join(inner[(False, False)])
        return {(False, False): [[ir.rep(body, node.min, node.max)]]}
    if isinstance(node, Sequence):
        acc: _Branches = {(False, False): [[]]}
        last = len(node.items) - 1
        for k, item in enumerate(node.items):
            sub = _lower(item, char_ir, at_start and k == 0, at_end and k == last, pattern)
            if len(sub) == 1 and len(acc) == 1:
                (skey, salts), = sub.items()
                (akey, aalts), = acc.items()
                part = _join(salts)
                key = (akey[0] or skey[0], akey[1] or skey[1])
                if len(aalts) == 1:
                    aalts[0].append(part)
                    acc = {key: aalts}
                else:
                    acc = {key: [[_join(aalts), part]]}
                continue
            new: _Branches = {}
            for akey, aalts in acc.items():
                left = _join(aalts)
                for skey, salts in sub.items():
                    key = (akey[0] or skey[0], akey[1] or skey[1])
                    new.setdefault(key, []).append([left, _join(salts)])
            acc = new
        return acc
    raise TypeError(f"not a regex AST node: {node!r}")


def _join(alternatives: list[list[ir.Node]]) -> ir.Node:
    return ir.alt(*(ir.seq(*parts) for parts in alternatives))


def _json_char(cs: C.CharSet) -> ir.Node:
    return C.json_char_ir(cs)


@lru_cache(maxsize=1024)
def regex_ir(
    pattern: str, *, encoding: str = "utf8", search: bool = False, flavor: str = "ecma", flags: str = ""
) -> ir.Node:
    """Lower an ECMA-262 regex to the byte IR.

    encoding="utf8": the IR matches the UTF-8 bytes of the strings the regex matches.
    encoding="json": the IR matches the JSON string bodies (between the quotes, any
    valid escaping) whose decoded value the regex matches.
    search=False: the whole string must match (`^`/`$` at the ends are redundant).
    search=True: JSON Schema `pattern` semantics, a match anywhere: every branch not
    anchored by `^` may be preceded, and every branch not anchored by `$` followed,
    by any characters (newlines included).
    """
    if encoding == "utf8":
        char_ir: Callable[[C.CharSet], ir.Node] = C.utf8_ir
    elif encoding == "json":
        char_ir = _json_char
    else:
        raise ValueError(f"unknown encoding {encoding!r} (expected 'utf8' or 'json')")
    ast = parse_regex(pattern, flavor, flags)
    branches = _lower(ast, char_ir, True, True, pattern)
    if not search:
        return _join([parts for alts in branches.values() for parts in alts])
    anything = ir.rep(char_ir(C.ANY_CHAR), 0, None)
    out = []
    for (anchored_start, anchored_end), alts in branches.items():
        out.append(
            ir.seq(
                ir.EMPTY if anchored_start else anything,
                _join(alts),
                ir.EMPTY if anchored_end else anything,
            )
        )
    return ir.alt(*out)
