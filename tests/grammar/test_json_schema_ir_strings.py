"""JSON Schema -> IR for strings: lengths in code points, `pattern` (search semantics, with
lengths, intersected), `format` (with lengths too) and unknown formats.
"""

from __future__ import annotations

import pytest

from structgen.errors import UnsupportedKeywordError
from structgen.grammar import ir
from tests.grammar.schema_checks import G, check, raises


def test_string_lengths_count_code_points():
    g = check({"type": "string", "minLength": 2, "maxLength": 3}, accepted=["ab", "abc", "é😀", "\n\t"])
    assert g.ok('"\\u00e9\\ud83d\\ude00"') and g.ok('"a\\n"')  # escapes are one character each
    assert not g.ok('"a"') and not g.ok('"abcd"') and not g.ok('"\\ud83d"')  # lone surrogate
    check({"type": "string", "maxLength": 0}, accepted=[""], rejected=["a"])


def test_pattern_search_semantics():
    check({"type": "string", "pattern": "b+"}, accepted=["abbc", "b"], rejected=["", "ac"])
    check({"type": "string", "pattern": "^a\\d{2}$"}, accepted=["a12"], rejected=["a123", "xa12", "a1"])
    # the pattern constrains the decoded string, whatever the escaping
    g = G({"type": "string", "pattern": "^é$"})
    assert g.ok('"é"') and g.ok('"\\u00e9"') and g.ok('"\\u00E9"') and not g.ok('"e"')


def test_pattern_with_lengths():
    check(
        {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4},
        accepted=["ab", "abcd"],
        rejected=["a", "abcde", "aB", ""],
    )
    check(
        {"type": "string", "pattern": "[0-9]", "maxLength": 3},
        accepted=["a1", "123", "1"],
        rejected=["abcd1", "ab", "1234"],
    )
    # implied bounds: the pattern's own lengths are within the bounds
    check({"type": "string", "pattern": "^[0-9]{4}$", "maxLength": 10}, accepted=["1234"], rejected=["123"])
    # anchors inside the pattern keep ECMA semantics
    check({"type": "string", "pattern": "^a|b$", "maxLength": 3}, accepted=["abc", "cab", "b"], rejected=["cde"])


def test_two_patterns_intersect():
    check(
        {"allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "x"}], "type": "string"},
        accepted=["abx", "x"],
        rejected=["ab", "aX", "1x"],
    )


def test_format():
    formats = pytest.importorskip("structgen.grammar.formats")
    if formats.format_pattern("date") is None:
        pytest.skip("no date format")
    check({"type": "string", "format": "date"}, accepted=["2024-02-29"], rejected=["2024-2-29", "x"])
    # format applies to strings only
    check({"type": "integer", "format": "date"}, accepted=[3])
    check({"format": "date"}, accepted=[3, None], rejected=["x"])


def test_unknown_format():
    e = raises(UnsupportedKeywordError, {"type": "string", "format": "no-such-format"}, "/format", "format")
    assert "no-such-format" in str(e)
    check({"type": "string", "format": "no-such-format"}, accepted=["x"], unknown_formats="ignore")
    check({"type": "string", "format": "no-such-format"}, accepted=["x"], lenient=True)


def test_format_with_length_bounds():
    formats = pytest.importorskip("structgen.grammar.formats")
    if formats.format_pattern("email") is None:
        pytest.skip("no email format")
    g = check(
        {"type": "string", "format": "email", "minLength": 6, "maxLength": 40},
        accepted=["a@b.co", "john.doe@example.com"],
        rejected=["a@b.c", "x" * 40 + "@example.com", "not an email"],
    )
    assert ir.expanded_size(g.node) < 5_000_000
    check(
        {"type": "string", "pattern": "^(?:\\S+\\s+){0,49}\\S+$", "maxLength": 500},
        accepted=["one two three", "x" * 10],
        rejected=["", " lead", "y" * 501],
    )


def test_string_bodies_are_shared_across_compiles_only_while_small():
    """A format's body is built once per process and reused by later compiles; a large
    body, a word-count pattern under a long maxLength, is not kept, so that what the
    process holds stays small whatever schemas clients send."""
    from structgen.grammar.json_schema import schema_to_ir, strings

    small = {"type": "string", "format": "date-time"}
    large = {"type": "string", "pattern": "^(?:\\S+\\s+){0,150}\\S+$", "maxLength": 10_000}  # 600 states
    strings._BODIES.clear()
    schema_to_ir(small)
    (kept,) = strings._BODIES._entries.values()
    assert ir.footprint(kept, 10**6) <= strings._CACHED_BODY_FOOTPRINT
    schema_to_ir({"type": "array", "items": small})
    assert list(strings._BODIES._entries.values()) == [kept]
    assert ir.footprint(schema_to_ir(large), 10**6) > strings._CACHED_BODY_FOOTPRINT
    assert list(strings._BODIES._entries.values()) == [kept]
