"""structgen: structured generation for LLMs.

Grammar side (no torch needed): `Vocabulary`, `compile_json_schema`, `compile_regex`,
`compile_choice`, `compile_grammar`, `CompiledGrammar`, `Matcher`, `allocate_bitmask`, `clear_cache`.
Names are imported lazily so that `import structgen` stays cheap.
"""

from structgen.errors import (
    CompileCancelledError,
    GrammarError,
    GrammarTooLargeError,
    RegexError,
    SchemaError,
    StructgenError,
    UnsupportedKeywordError,
)
from structgen.lazy import lazy_attributes

__version__ = "0.1.0"

_LAZY = {
    "Vocabulary": "structgen.vocab",
    "compile_json_schema": "structgen.compiler",
    "compile_regex": "structgen.compiler",
    "compile_choice": "structgen.compiler",
    "compile_grammar": "structgen.compiler",
    "compile_tool_calls": "structgen.compiler",
    "clear_cache": "structgen.compiler",
    "cache_info": "structgen.compiler",
    "set_cache_bytes": "structgen.compiler",
    "CompiledGrammar": "structgen.matcher",
    "Matcher": "structgen.matcher",
    "allocate_bitmask": "structgen.matcher",
}

__all__ = [
    "CompileCancelledError",
    "GrammarError",
    "GrammarTooLargeError",
    "RegexError",
    "SchemaError",
    "StructgenError",
    "UnsupportedKeywordError",
    *_LAZY,
]


__getattr__ = lazy_attributes(__name__, _LAZY)
