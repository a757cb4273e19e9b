"""`canonical_key`: the compile cache's key of a schema and its options.
"""

from __future__ import annotations

from structgen.grammar.json_schema import JsonOptions, canonical_key


def test_canonical_key():
    a = canonical_key({"type": "string", "maxLength": 3}, JsonOptions())
    assert a == canonical_key({"type": "string", "maxLength": 3}, JsonOptions())
    assert a != canonical_key({"type": "string", "maxLength": 3}, JsonOptions(whitespace="compact"))
    # property order matters (it decides the emitted order)
    assert canonical_key({"properties": {"a": {}, "b": {}}}) != canonical_key({"properties": {"b": {}, "a": {}}})
