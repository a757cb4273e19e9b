"""Errors structgen raises for bad input, each saying what is wrong and where.

Every error a user can cause derives from `StructgenError` (a `ValueError`), so a server
can turn any of them into a 400 without catching unrelated bugs.
"""

from __future__ import annotations


class StructgenError(ValueError):
    """Base class of every error caused by user input."""

    def __reduce__(self):
        # Pickled as they are (a compile worker process raises them): the subclasses'
        # constructors format their message, and must not format it twice.
        return rebuilt_error, (type(self), self.args, self.__dict__)


def rebuilt_error(cls: type, args: tuple, state: dict) -> StructgenError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class SchemaError(StructgenError):
    """An invalid JSON Schema. `pointer` is the JSON pointer of the offending subschema."""

    def __init__(self, message: str, pointer: str = ""):
        self.pointer = pointer
        self.detail = message
        super().__init__(f"{message} (at {pointer or '/'})" if pointer is not None else message)


class UnsupportedKeywordError(SchemaError):
    """A JSON Schema keyword structgen cannot enforce (refused unless lenient=True)."""

    def __init__(self, keyword: str, pointer: str = "", reason: str = ""):
        self.keyword = keyword
        msg = f"unsupported JSON Schema keyword {keyword!r}"
        if reason:
            msg += f": {reason}"
        super().__init__(msg, pointer)


class RegexError(StructgenError):
    """A regular expression that does not parse, or uses a construct that is not regular."""

    def __init__(self, message: str, pattern: str = "", position: int | None = None):
        self.pattern = pattern
        self.position = position
        where = f" at position {position}" if position is not None else ""
        shown = f" in {pattern!r}" if pattern else ""
        super().__init__(f"{message}{where}{shown}")


class GrammarTooLargeError(StructgenError):
    """Compiling would exceed the configured state or time budget."""


class CompileCancelledError(StructgenError):
    """A compile stopped because whoever asked for it no longer waits (a client that
    disconnected): nothing is cached, and its CPU is freed."""


class GrammarError(StructgenError):
    """A lark / GBNF grammar that does not parse or cannot be compiled. `line` and
    `column` (1-based) say where, when the problem has a place in the text."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.line = line
        self.column = column
        self.detail = message
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{message}{where}")


class KernelsNotBuiltError(StructgenError):
    """The compiled automaton kernels (a C extension built at install time) cannot be
    imported: an installation problem, not the input's, raised at the first compile so
    that it is the one error a broken install gives (see automata/kernels.py)."""
