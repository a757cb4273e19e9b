"""The character sets of the class escapes and `.` in both dialects: ECMA-262's ASCII
`\\d \\w \\s` (`CLASS_ESCAPES`) and `DOT` (no line terminator), and Python's
Unicode-wide `\\d \\w \\s` (`python_class`) and `PYTHON_DOT` (no `\\n`).

Owns: what each escape letter and `.` stand for. Must not read pattern text: the parser
maps its escapes here.
"""

from __future__ import annotations

from functools import lru_cache

from structgen.grammar import charset as C

DIGIT: C.CharSet = ((0x30, 0x39),)
WORD: C.CharSet = C.charset([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE: C.CharSet = C.charset(
    [
        (0x09, 0x0D),  # \t \n \v \f \r
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
LINE_TERMINATORS: C.CharSet = C.charset([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
DOT: C.CharSet = C.complement(LINE_TERMINATORS)

CLASS_ESCAPES: dict[str, C.CharSet] = {
    "d": DIGIT,
    "D": C.complement(DIGIT),
    "w": WORD,
    "W": C.complement(WORD),
    "s": SPACE,
    "S": C.complement(SPACE),
}

PYTHON_DOT: C.CharSet = C.complement(C.charset([(0x0A, 0x0A)]))


@lru_cache(maxsize=None)
def python_class(letter: str) -> C.CharSet:
    """`\\d \\w \\s` (and their complements) as Python's `re` defines them for str patterns."""
    test = {"d": str.isdecimal, "w": lambda ch: ch.isalnum() or ch == "_", "s": str.isspace}[letter.lower()]
    cps = [cp for cp in range(C.MAX_CODE_POINT + 1) if not 0xD800 <= cp <= 0xDFFF and test(chr(cp))]
    cs = C.from_code_points(cps)
    return C.complement(cs) if letter.isupper() else cs
