"""structgen: structured generation for LLMs.

Public API (grammar side): Vocabulary, compile_json_schema, compile_regex, compile_choice,
CompiledGrammar, Matcher, allocate_bitmask. See README.md.
"""

from structgen.errors import (
    GrammarTooLargeError,
    RegexError,
    SchemaError,
    StructgenError,
    UnsupportedKeywordError,
)

__version__ = "0.1.0"
