"""The sets of `\\p{...}` Unicode properties: general categories (from `unicodedata`),
scripts and binary properties (from the `regex` package when it is installed), `Any`,
`ASCII` and `Assigned`: `unicode_property(body)`.

Owns: property names, their aliases and their sets. Must not read pattern text beyond
the property's body: the parser finds the braces and turns an error message into a
RegexError.
"""

from __future__ import annotations

import re as _re
from functools import lru_cache

from structgen.grammar import charset as C

_GC_GROUPS = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LONG = {
    "Letter": "L",
    "Cased_Letter": "LC",
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Mark": "M",
    "Combining_Mark": "M",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Number": "N",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Punctuation": "P",
    "punct": "P",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Symbol": "S",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Other": "C",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Surrogate": "Cs",
    "Private_Use": "Co",
    "Unassigned": "Cn",
}
_GC_ALL = set(_GC_GROUPS) | {c for group in _GC_GROUPS.values() for c in group}

# ECMA-262 binary Unicode properties (table "Binary Unicode property aliases"), long and short names.
_BINARY_PROPERTIES = {
    "ASCII_Hex_Digit": "AHex", "Alphabetic": "Alpha", "Bidi_Control": "Bidi_C",
    "Bidi_Mirrored": "Bidi_M", "Case_Ignorable": "CI", "Cased": None,
    "Changes_When_Casefolded": "CWCF", "Changes_When_Casemapped": "CWCM",
    "Changes_When_Lowercased": "CWL", "Changes_When_NFKC_Casefolded": "CWKCF",
    "Changes_When_Titlecased": "CWT", "Changes_When_Uppercased": "CWU", "Dash": None,
    "Default_Ignorable_Code_Point": "DI", "Deprecated": "Dep", "Diacritic": "Dia",
    "Emoji": None, "Emoji_Component": "EComp", "Emoji_Modifier": "EMod",
    "Emoji_Modifier_Base": "EBase", "Emoji_Presentation": "EPres",
    "Extended_Pictographic": "ExtPict", "Extender": "Ext", "Grapheme_Base": "Gr_Base",
    "Grapheme_Extend": "Gr_Ext", "Hex_Digit": "Hex", "IDS_Binary_Operator": "IDSB",
    "IDS_Trinary_Operator": "IDST", "ID_Continue": "IDC", "ID_Start": "IDS",
    "Ideographic": "Ideo", "Join_Control": "Join_C", "Logical_Order_Exception": "LOE",
    "Lowercase": "Lower", "Math": None, "Noncharacter_Code_Point": "NChar",
    "Pattern_Syntax": "Pat_Syn", "Pattern_White_Space": "Pat_WS", "Quotation_Mark": "QMark",
    "Radical": None, "Regional_Indicator": "RI", "Sentence_Terminal": "STerm",
    "Soft_Dotted": "SD", "Terminal_Punctuation": "Term", "Unified_Ideograph": "UIdeo",
    "Uppercase": "Upper", "Variation_Selector": "VS", "White_Space": "space",
    "XID_Continue": "XIDC", "XID_Start": "XIDS",
}  # fmt: skip
_BINARY_ALIASES = {short: long for long, short in _BINARY_PROPERTIES.items() if short}


@lru_cache(maxsize=1)
def _general_category_table() -> dict[str, C.CharSet]:
    """Code point ranges of every two-letter general category (from `unicodedata`)."""
    import unicodedata

    runs: dict[str, list[tuple[int, int]]] = {}
    cat = unicodedata.category
    start = 0
    current = cat("\x00")
    for cp in range(1, C.MAX_CODE_POINT + 1):
        c = cat(chr(cp))
        if c != current:
            runs.setdefault(current, []).append((start, cp - 1))
            start, current = cp, c
    runs.setdefault(current, []).append((start, C.MAX_CODE_POINT))
    return {k: tuple(v) for k, v in runs.items()}


@lru_cache(maxsize=256)
def _general_category(name: str) -> C.CharSet:
    table = _general_category_table()
    members = _GC_GROUPS.get(name, (name,))
    return C.union(*(table.get(m, ()) for m in members))


@lru_cache(maxsize=1)
def _all_code_points() -> str:
    import numpy as np

    return np.arange(C.MAX_CODE_POINT + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@lru_cache(maxsize=256)
def _property_via_regex_module(expr: str) -> C.CharSet | None:
    """The set of a Unicode property that the `regex` package knows (None if it cannot)."""
    try:
        import regex as _regex_mod  # installed with transformers
    except ImportError:
        return None
    try:
        compiled = _regex_mod.compile(r"\p{%s}+" % expr)
    except Exception:
        return None
    return tuple((m.start(), m.end() - 1) for m in compiled.finditer(_all_code_points()))


def unicode_property(body: str) -> C.CharSet | str:
    """The set for `\\p{body}`, or an error message."""
    if "=" in body:
        name, _, value = body.partition("=")
        if name in ("General_Category", "gc"):
            gc = _GC_LONG.get(value, value)
            if gc in _GC_ALL:
                return _general_category(gc)
            return f"unknown General_Category value {value!r}"
        if name in ("Script", "sc", "Script_Extensions", "scx"):
            if not _re.fullmatch(r"[A-Za-z][A-Za-z_]*", value):
                return f"invalid script name {value!r}"
            key = "Script" if name in ("Script", "sc") else "Script_Extensions"
            cs = _property_via_regex_module(f"{key}={value}")
            if cs is None:
                return f"unsupported Unicode property \\p{{{body}}} (unknown script, or the 'regex' package is missing)"
            return cs
        return f"unsupported Unicode property name {name!r}"
    gc = _GC_LONG.get(body, body)
    if gc in _GC_ALL:
        return _general_category(gc)
    if body == "Any":
        return C.ANY_CHAR
    if body == "ASCII":
        return ((0, 0x7F),)
    if body == "Assigned":
        return C.complement(_general_category("Cn"))
    long = _BINARY_ALIASES.get(body, body)
    if long in _BINARY_PROPERTIES:
        cs = _property_via_regex_module(long)
        if cs is None:
            return f"unsupported Unicode property \\p{{{body}}} (needs the 'regex' package)"
        return cs
    return f"unsupported Unicode property \\p{{{body}}}"
