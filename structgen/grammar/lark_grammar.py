"""lark EBNF grammars -> `cfg.Grammar`.

Owns: reading a grammar in lark's own syntax. `lark_syntax` reads what people write, in
a fraction of the time lark's loader takes; what it leaves (templates, `%declare`,
`%override`, `%extend`, rules imported from lark's library, and every error) goes to
lark's loader here, which resolves `%import`, templates, `?rule` inlining, `x*`/`x+`/
`x?`/`x~n..m` and terminal composition into plain BNF rules. This module turns those
rules and terminal patterns into the shared CFG form and maps lark's errors to
`GrammarError` with line and column. Both paths refuse the same things first (deep
nesting, imports from outside lark's library). Knows nothing of tokens, matchers or the
engine.

Terminal regexes are Python `re` syntax (as in lark). `common.ESCAPED_STRING` is
defined by lark with a lookbehind, which no automaton can run; it is replaced by the
same language written without one (`lark_syntax.COMMON_REPLACEMENTS`).
"""

from __future__ import annotations

import re

from structgen.errors import GrammarError, RegexError
from structgen.grammar import cfg, ir
from structgen.grammar.lark_syntax import COMMON_REPLACEMENTS, NotRead, pattern_ir, read_lark


def _first_use(text: str, name: str) -> tuple[int, int] | tuple[None, None]:
    """(line, column) of the first use of `name` that is not its own definition."""
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", line):
            if not re.match(r"\s*[?!]?$", line[: m.start()]):  # not `name:` at the line start
                return lineno, m.start() + 1
    return None, None


def _lark_error(e: Exception, text: str) -> GrammarError:
    undefined = re.search(r"(?:Rule|Terminal) '?(\w+)'? used but not defined", str(e))
    if undefined:
        line, column = _first_use(text, undefined.group(1))
        return GrammarError(f"lark grammar: {str(e).strip()}", line, column)
    line = getattr(e, "line", None)
    column = getattr(e, "column", None)
    if line is None or line == -1:
        m = re.search(r"[Ll]ine (\d+)(?:,? col(?:umn)? (\d+))?", str(e))
        if m:
            line, column = int(m.group(1)), int(m.group(2) or 1)
        else:
            line = column = None
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return GrammarError(f"lark grammar: {message}", line, column)


def _terminal_ir(term) -> ir.Node:
    from lark.lexer import PatternStr

    pattern = term.pattern
    is_regex = not isinstance(pattern, PatternStr)
    source = pattern.value
    if is_regex and term.name in COMMON_REPLACEMENTS and "(?<!" in source:  # lark's own, not a user's namesake
        source = COMMON_REPLACEMENTS[term.name]
    try:
        return pattern_ir(source, "".join(pattern.flags), is_regex)
    except RegexError as e:
        raise GrammarError(f"terminal {term.name}: {e}") from None


# Brackets ("(", "[", "{") nested in one rule, as GBNF's parser allows: lark's own
# grammar loader takes time quadratic in the nesting (30 s at 3,000 levels).
MAX_NESTING = 100
# A literal, a regex or a comment: what the nesting check skips.
_SKIPPED = re.compile(r'"(?:[^"\\\n]|\\.)*"i?|/(?![/*])(?:[^/\\\n]|\\.)+/[imslux]*|//[^\n]*')


def _check_nesting(text: str) -> None:
    """GrammarError, with the line and column, where brackets nest past MAX_NESTING."""
    depth = 0
    position = 0
    for match in re.finditer(r'[(\[{)\]}]|"|/', text):
        if match.start() < position:
            continue  # inside a literal, regex or comment skipped below
        skipped = _SKIPPED.match(text, match.start())
        if skipped:
            position = skipped.end()
            continue
        depth += 1 if match.group() in "([{" else -1 if match.group() in ")]}" else 0
        if depth > MAX_NESTING:
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            raise GrammarError(f"lark grammar: brackets nested more than {MAX_NESTING} deep", line, column)


# The grammars lark ships; `%import` of anything else would read the server's files.
LARK_LIBRARY = ("common", "unicode", "python", "lark")
_IMPORT = re.compile(r"^[ \t]*%import[ \t]+(\.*)([\w.]*)", re.MULTILINE)


def _check_imports(text: str) -> None:
    """GrammarError for an `%import` of a module that is not in lark's own library."""
    for match in _IMPORT.finditer(text):
        relative, path = match.groups()
        if relative or path.split(".")[0] not in LARK_LIBRARY:
            line = text.count("\n", 0, match.start()) + 1
            raise GrammarError(f"lark grammar: %import reads only lark's own grammars ({', '.join(LARK_LIBRARY)}), "
                               f"not {relative + path!r}", line, 1)


def parse_lark(text: str, start: str = "start") -> cfg.Grammar:
    """Parse a lark grammar; `start` names the start rule."""
    if not isinstance(text, str):
        raise GrammarError(f"a grammar must be a string, not {type(text).__name__}")
    _check_nesting(text)
    _check_imports(text)
    try:
        return read_lark(text, start)
    except (NotRead, RecursionError):
        return load_with_lark(text, start)


def load_with_lark(text: str, start: str = "start") -> cfg.Grammar:
    """The grammar as lark's own loader reads it (after parse_lark's refusals)."""
    from lark.exceptions import LarkError
    from lark.load_grammar import load_grammar

    try:
        grammar, _ = load_grammar(text, "<grammar>", [], False)
        terminals, rules, ignore_names = grammar.compile([start], set())
    except LarkError as e:
        raise _lark_error(e, text) from None
    except (KeyError, AssertionError, RecursionError, OSError) as e:  # lark's own checks on odd input
        raise GrammarError(f"lark grammar: cannot compile ({type(e).__name__}: {e})") from None
    by_name = {t.name: t for t in terminals}
    term_ir: dict[str, ir.Node] = {}

    def terminal(name: str) -> ir.Node:
        node = term_ir.get(name)
        if node is None:
            if name not in by_name:
                raise GrammarError(f"terminal {name} is used but never defined")
            node = term_ir[name] = _terminal_ir(by_name[name])
        return node

    out: dict[str, list[list]] = {}
    for rule in rules:
        alt = [terminal(s.name) if s.is_term else s.name for s in rule.expansion]
        out.setdefault(rule.origin.name, []).append(alt)
    if start not in out:
        raise GrammarError(f"the start rule {start!r} is not defined (define `{start}: ...` or pass start=)")
    ignore = [terminal(name) for name in ignore_names]
    names = {id(node): name for name, node in term_ir.items()}
    return cfg.Grammar(out, start, ignore, names)
