"""GBNF grammars (llama.cpp's format) read by structgen.grammar.gbnf: the language each
grammar accepts, the errors it raises, and token-level matching through compile_grammar."""

from __future__ import annotations

import pytest

import structgen
from structgen.automata.languages import AUTOMATA
from structgen.errors import GrammarError
from structgen.grammar import cfg
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.gbnf import parse_gbnf

# llama.cpp's grammars/arithmetic.gbnf
ARITHMETIC = r"""
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
"""

# llama.cpp's grammars/json.gbnf
JSON = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"""

# the list grammar of llama.cpp's grammars/README.md
LIST = r"""
# a grammar for lists
root ::= ("- " item)+
item ::= [^\n]+ "\n"
"""


def accepts(text: str, data: str | bytes, start: str = "root") -> bool:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return ir_accepts(cfg.grammar_to_ir(parse_gbnf(text, start), AUTOMATA), data)


def check_language(text: str, good: list, bad: list) -> None:
    for s in good:
        assert accepts(text, s), f"should accept {s!r}"
    for s in bad:
        assert not accepts(text, s), f"should reject {s!r}"


# ---------------------------------------------------------------- llama.cpp's grammars


def test_arithmetic():
    check_language(
        ARITHMETIC,
        good=["1+2=3\n", "(a +b)*c = x\n", "x=1\ny_2 = (3)\n", "( 1 ) /2 = 0\n"],
        bad=["", "1+2=3", "1+=3\n", "1+ 2=3\n", "A=1\n", "(1=1\n", "1=2+3\n"],
    )


def test_json():
    check_language(
        JSON,
        good=[
            "{}",
            '{"a": 1}',
            '{"a": [1, -2.5, 3e12, true, false, null], "b": {"c": "d"}}',
            '{"esc": "q\\"\\\\\\n\\u00e9", "utf8": "h\u00e9\u4e16"}',
            '{\n  "a": []\n}',
        ],
        bad=["", "[]", "{", '{"a": 1,}', '{"a": 01x}', '{"a": "\x01"}', '{"a": "\\x"}', "{'a': 1}"],
    )


def test_list():
    check_language(LIST, good=["- a\n", "- milk\n- eggs and ham\n"], bad=["", "- \n", "- a", "* a\n"])


def test_result_has_no_ignore_and_no_named_terminals():
    grammar = parse_gbnf(JSON)
    assert grammar.start == "root"
    assert grammar.ignore == []
    assert grammar.terminal_names == {}


# ---------------------------------------------------------------- terminals


def test_literals_and_escapes():
    text = r'root ::= "a\"b\\c\n\r\t\[\]\-" "\x41\u00e9\U0001F600" "" "世界"'
    check_language(text, good=['a"b\\c\n\r\t[]-Aé😀世界'], bad=['a"b\\c', "", "x"])


def test_empty_literal_and_empty_alternative():
    check_language('root ::= "" | "a" |', good=["", "a"], bad=["aa"])
    check_language("root ::=", good=[""], bad=["a"])


def test_character_classes():
    check_language(r"root ::= [a-cx0-9_]+", good=["abc", "x_9", "_"], bad=["", "d", "A", "-"])
    check_language(r'root ::= [^"\\]', good=["a", "'", "é", "\n", "😀"], bad=['"', "\\", "", "ab"])
    check_language(r"root ::= [\x41-\x43\u00e0-\u00e2]", good=["A", "C", "à", "â"], bad=["D", "ã", "a"])
    check_language(r"root ::= [\[\]\-\\]", good=["[", "]", "-", "\\"], bad=["a"])
    check_language(r"root ::= [a-]", good=["a", "-"], bad=["b"])
    check_language(r"root ::= [-a]", good=["a", "-"], bad=["b"])
    check_language(r"root ::= [ぁ-ゟ]+", good=["ひらがな"], bad=["カ", "a"])
    check_language(r"root ::= [^\x00-\x7F]", good=["é", "😀"], bad=["a", "\x7f"])
    check_language(r'root ::= "x" [^]', good=["xa", "x\n"], bad=["x"])
    check_language(r'root ::= "[#]" ["#]', good=["[#]#", '[#]"'], bad=["[#]"])


def test_empty_class_matches_nothing():
    check_language('root ::= [] | "a"', good=["a"], bad=[""])


def test_dot_is_any_one_character():
    check_language(
        'root ::= "<" . ">"',
        good=["<a>", "<\n>", "<é>", "<😀>", "<\x00>"],
        bad=["<>", "<ab>", b"<\xff>", b"<\xed\xa0\x80>"],
    )


# ---------------------------------------------------------------- repetition

REPETITIONS = {
    "*": range(0, 8),
    "+": range(1, 8),
    "?": range(0, 2),
    "{3}": range(3, 4),
    "{2,}": range(2, 8),
    "{1,3}": range(1, 4),
    "{,2}": range(0, 3),
    "{0}": range(0, 1),
    "{ 1 , 2 }": range(1, 3),
}

# "ab" repeated, as a terminal, a rule reference, and a group holding a rule reference
REPEATED_ITEMS = {
    "literal": 'root ::= "ab"{op}',
    "terminal group": 'root ::= ("a" "b"){op}',
    "rule": 'root ::= x{op}\nx ::= "ab"',
    "rule group": 'root ::= ("a" y){op}\ny ::= "b"',
    "rule alternation": 'root ::= (x | "ab"){op}\nx ::= "ab"',
}


@pytest.mark.parametrize("item", REPEATED_ITEMS)
@pytest.mark.parametrize("op", REPETITIONS)
def test_repetition(item, op):
    text = REPEATED_ITEMS[item].replace("{op}", op)
    node = cfg.grammar_to_ir(parse_gbnf(text), AUTOMATA)
    for n in range(7):
        assert ir_accepts(node, b"ab" * n) == (n in REPETITIONS[op]), (text, n)
    assert not ir_accepts(node, b"aba")


def test_repetition_binds_to_the_preceding_element_only():
    check_language('root ::= "a" "b"*', good=["a", "abbb"], bad=["", "abab"])
    check_language('root ::= "a" x+\nx ::= "b"', good=["ab", "abbb"], bad=["a", "abab"])


def test_repetition_of_a_repetition():
    check_language('root ::= ("a"{2})*', good=["", "aa", "aaaa"], bad=["a", "aaa"])
    check_language('root ::= x{2}*\nx ::= "a"', good=["", "aa", "aaaa"], bad=["a", "aaa"])
    check_language('root ::= "a"?+ "b"', good=["b", "ab", "aaab"], bad=["a"])


def test_star_of_a_rule_that_can_be_empty():
    check_language('root ::= (x y)* "."\nx ::= "a"?\ny ::= "b" | ""', good=[".", "a.", "bab.", "aab."], bad=["c."])


def test_large_bounded_repetition():
    check_language('root ::= [0-9]{0,500} "."', good=[".", "1" * 500 + "."], bad=["1" * 501 + "."])
    check_language('root ::= d{3,300} "."\nd ::= [0-9]', good=["123.", "1" * 300 + "."], bad=["12.", "1" * 301 + "."])


# ---------------------------------------------------------------- rules


def test_recursion_and_forward_references():
    check_language('root ::= parens\nparens ::= "(" parens ")" parens | ""', good=["", "()", "(()())()"], bad=["(", ")("])
    check_language('root ::= "[" (root ("," root)*)? "]"', good=["[]", "[[],[[]]]"], bad=["[", "[],[]"])


def test_left_recursion():
    check_language('root ::= root "+" num | num\nnum ::= [0-9]+', good=["1", "1+22+3"], bad=["", "+1", "1+"])


def test_mutual_recursion():
    text = 'root ::= a\na ::= "x" b | "."\nb ::= "y" a'
    check_language(text, good=[".", "xy.", "xyxy."], bad=["x.", "xy"])


def test_names_with_dashes_digits_and_underscores_do_not_clash_with_helpers():
    text = 'root ::= root-1 (root_2 root-1)*\nroot-1 ::= "a"\nroot_2 ::= "b"\n3d ::= "unused"'
    check_language(text, good=["a", "aba", "ababa"], bad=["ab", "b"])


def test_start_argument():
    assert accepts(ARITHMETIC, "a +1", start="expr")
    assert not accepts(ARITHMETIC, "a=1\n", start="expr")


# ---------------------------------------------------------------- layout


def test_comments():
    text = """# leading comment
root ::= "a" # after an element
    # on its own line inside the body
    ( "b" # inside a group
      | "#" ) # after a group
# between rules
other ::= "x" # unused
"""
    check_language(text, good=["ab", "a#"], bad=["a", "ab#"])


def test_multi_line_rules():
    text = """
root ::=
    "a"
    ( "b"
    | "c"
    )
    tail |
    "z"
tail ::= "1"
    | "2"
"""
    check_language(text, good=["ab1", "ac2", "z"], bad=["a1", "ab", "ab1z"])


def test_crlf_line_endings_and_tabs():
    text = 'root ::=\t"a" b\r\n\r\nb ::= [\\r\\n]\r\n'
    check_language(text, good=["a\r", "a\n"], bad=["a"])


# ---------------------------------------------------------------- errors

ERRORS = [
    ('root ::= "abc', 1, 10, "unterminated string"),
    ('root ::= "a"\nx ::= "b\n', 2, 7, "unterminated string"),
    ("root ::= [a-z", 1, 10, "unterminated character class"),
    ('root "a"', 1, 6, "expected '::='"),
    ('root ::= "a"\nfoo = "b"', 2, 5, "expected '::='"),
    ('"a"', 1, 1, "expected a rule definition"),
    ('root ::= ("a" "b"\nx ::= "c"', 1, 10, "'(' is never closed"),
    ('root ::= (("a")', 1, 10, "'(' is never closed"),
    ('root ::= "a")', 1, 13, "unmatched ')'"),
    ('root ::= ( "a" ] )', 1, 16, "unmatched ']'"),
    (r'root ::= "\q"', 1, 11, "unknown escape"),
    (r"root ::= [\d]", 1, 11, "unknown escape"),
    (r'root ::= "\x4"', 1, 11, "2 hex digits"),
    (r'root ::= "\u12G4"', 1, 11, "4 hex digits"),
    (r'root ::= "\U00110000"', 1, 11, "beyond the last Unicode code point"),
    (r'root ::= "\ud800"', 1, 11, "surrogate"),
    ('root ::= "a"{3,1}', 1, 13, "less than its minimum"),
    ('root ::= "a"{}', 1, 14, "expected a number"),
    ('root ::= "a"{,}', 1, 13, "needs a bound"),
    ('root ::= "a"{1,2', 1, 17, "expected '}'"),
    ('root ::= "a"{1;2}', 1, 15, "expected ',' or '}'"),
    ('root ::= "a"{x}', 1, 14, "expected a number"),
    ("root ::= * \"a\"", 1, 10, "must follow something"),
    ('root ::= "a" | +', 1, 16, "must follow something"),
    ("root ::= [z-a]", 1, 11, "out of order"),
    ('root ::= "a" @', 1, 14, "unexpected character '@'"),
    ("root ::= 'a'", 1, 10, "unexpected character \"'\""),
    ("root ::= <think>", 1, 10, "token references"),
    ('root ::= "a" b ::= "c"', 1, 14, "own line"),
    ('root ::= "a"\n\nroot ::= "b"', 3, 1, "defined twice (first on line 1)"),
    ('root ::= x y\nx ::= "a"\n', 1, 12, "rule 'y' is used but never defined"),
    ('root ::= "a"\n  | (("b" missing))', 2, 11, "rule 'missing' is used but never defined"),
    ("root ::= " + "(" * 150 + '"a"' + ")" * 150, 1, 110, "nested more than 100 deep"),
    ('root ::= x{2001}\nx ::= "a"', 1, 11, "at most 2000 times"),
]


@pytest.mark.parametrize("text, line, column, message", ERRORS)
def test_errors(text, line, column, message):
    with pytest.raises(GrammarError) as info:
        parse_gbnf(text)
    assert message in str(info.value)
    assert (info.value.line, info.value.column) == (line, column)


@pytest.mark.parametrize("text", ['x ::= "a"', "", "# only a comment\n"])
def test_missing_start_rule(text):
    with pytest.raises(GrammarError, match="start rule 'root' is not defined") as info:
        parse_gbnf(text)
    assert info.value.line is None


def test_missing_custom_start_rule():
    with pytest.raises(GrammarError, match="start rule 'main' is not defined"):
        parse_gbnf('root ::= "a"', start="main")


def test_not_a_string():
    with pytest.raises(GrammarError, match="must be a string"):
        parse_gbnf(b'root ::= "a"')


@pytest.mark.parametrize("cut", range(0, len(JSON), 7))
def test_truncated_grammars_raise_only_grammar_errors(cut):
    try:
        cfg.grammar_to_ir(parse_gbnf(JSON[:cut]), AUTOMATA)
    except GrammarError:
        pass


# ---------------------------------------------------------------- tokens


@pytest.fixture(scope="module")
def tokenizer():
    from structgen.default_model import load_default_tokenizer

    return load_default_tokenizer()


def feed(grammar, tokenizer, text: str) -> tuple[list[bool], bool]:
    matcher = grammar.matcher()
    results = []
    for token_id in tokenizer.encode(text, add_special_tokens=False):
        results.append(matcher.accept_token(token_id))
        if not results[-1]:
            break
    return results, matcher.is_accepting()


def test_json_token_level(smollm2_vocab, tokenizer):
    grammar = structgen.compile_grammar(JSON, smollm2_vocab, syntax="gbnf")
    results, accepting = feed(grammar, tokenizer, '{"name": "Ada", "tags": ["x", 1, true], "n": -2.5e3}')
    assert all(results) and accepting
    results, _ = feed(grammar, tokenizer, '{"name": "Ada", "tags": ["x",]}')
    assert results[-1] is False


def test_arithmetic_token_level(smollm2_vocab, tokenizer):
    grammar = structgen.compile_grammar(ARITHMETIC, smollm2_vocab, syntax="gbnf")
    results, accepting = feed(grammar, tokenizer, "(total+12)*rate = cost\nx = 1\n")
    assert all(results) and accepting
    results, accepting = feed(grammar, tokenizer, "(total+12)*rate = cost")
    assert all(results) and not accepting  # a prefix: the final newline is missing
    results, _ = feed(grammar, tokenizer, "Total = 1\n")
    assert results[-1] is False


def test_compile_grammar_reports_gbnf_errors(smollm2_vocab):
    with pytest.raises(GrammarError) as info:
        structgen.compile_grammar('root ::= "a" | b', smollm2_vocab, syntax="gbnf")
    assert (info.value.line, info.value.column) == (1, 16)
