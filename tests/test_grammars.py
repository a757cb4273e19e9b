"""The grammar library in grammars/: every file accepts realistic samples token by token
with the real SmolLM2 tokenizer, rejects near-misses, and (for .lark files) agrees with
lark itself (Earley, lexer="dynamic_complete": the semantics structgen implements).

Samples are keyed by the file's stem, so a GBNF twin (json.gbnf) is held to exactly the
same samples as its lark original (json.lark): the two must define the same language.
Every grammar file needs an entry in SAMPLES (test_every_grammar_has_samples).
"""

from __future__ import annotations

import functools
import importlib.util

import pytest

import structgen
from tests.paths import GRAMMARS

FILES = sorted(p.name for p in GRAMMARS.iterdir() if p.suffix in (".lark", ".gbnf"))
LARK_FILES = [f for f in FILES if f.endswith(".lark")]
HAVE_GBNF = importlib.util.find_spec("structgen.grammar.gbnf") is not None


# ---------------------------------------------------------------- samples
# valid: what an LLM would write for this grammar. near_misses: what an LLM gets wrong.

SAMPLES: dict[str, dict[str, list[str]]] = {
    "json": {
        "valid": [
            '{"name": "Alice", "age": 30, "email": "alice@example.com"}',
            '{\n  "id": 42,\n  "tags": ["admin", "beta"],\n  "active": true,\n  "manager": null\n}',
            '{"a":1,"b":[true,false],"c":{}}',
            '[1, -2.5, 3e10, 0.001, -0, 6.02E+23, 1e-7]',
            '{"city": "Zürich", "note": "caf\\u00e9 \\"quoted\\" \\\\ \\/ \\n\\t", "emoji": "🎉"}',
            '{"path": "C:\\\\Users\\\\me", "nested": {"deep": [[], {}, [{"x": 1}]]}}',
            " [ ] ",
            '"just a string"',
            "-12.5E-3",
            "null",
        ],
        "near_misses": [
            "",
            '{"a": 1,}',
            "[1, 2, 3,]",
            "{'name': 'Alice'}",
            '{name: "Alice"}',
            '{"zip": 01234}',
            '{"ratio": .5}',
            '{"value": NaN}',
            '{"ok": True}',
            '{"a": 1} // done',
            '{"name": "Alice"',
            '{"a" 1}',
            '{"a": 1}}',
            "{} {}",
            "+1",
            '{"path": "C:\\Users\\me"}',  # \U is not a JSON escape
            '{"text": "col1\tcol2"}',  # a raw tab inside a string
            '{"text": "line1\nline2"}',  # a raw newline inside a string
            '{"c": "\\u00e"}',  # \u needs four hex digits
            '{"a": 1}\f',  # form feed is not JSON whitespace
        ],
    },
    "arithmetic": {
        "valid": [
            "1 + 2 * 3",
            "(1 + 2) * 3",
            "-4.5 / (2 - 0.5)",
            "2 * -3",
            "10 - 4 - 3",
            "((7))",
            "3.14159 * 2 * 2",
            "100/4/5",
            " 42 ",
            "-(2 + 3) * 4",
            "2 - -3",
            "1\t+\t1",
        ],
        "near_misses": [
            "",
            "1 +",
            "(1 + 2",
            "1 + 2)",
            "2 (3 + 4)",
            ".5 * 2",
            "5. + 1",
            "1e3",
            "2 ^ 3",
            "3 ** 2",
            "1 2",
            "+1",
            "1 + * 2",
            "x + 1",
            "()",
            "1 + 2\n",
        ],
    },
    "sql_select": {
        "valid": [
            "SELECT * FROM users;",
            "SELECT name, email FROM users WHERE age >= 18 ORDER BY name ASC LIMIT 10;",
            ("SELECT u.name, COUNT(o.id) AS order_count\nFROM users u\nLEFT JOIN orders o ON o.user_id = u.id\n"
             "GROUP BY u.name\nHAVING COUNT(o.id) > 5\nORDER BY order_count DESC;"),
            "select distinct city from customers where country in ('France', 'Germany') and city is not null",
            ("SELECT p.product_name, SUM(oi.quantity * oi.unit_price) AS revenue FROM order_items AS oi "
             "INNER JOIN products p ON p.id = oi.product_id WHERE oi.created_at BETWEEN '2024-01-01' AND "
             "'2024-12-31' GROUP BY p.product_name ORDER BY revenue DESC LIMIT 5"),
            "SELECT COUNT(*) FROM employees WHERE department_id IN (SELECT id FROM departments WHERE name LIKE 'Eng%');",
            ("SELECT e.first_name, e.salary FROM hr.employees e WHERE NOT (e.salary < 50000 OR e.manager_id IS NULL) "
             "ORDER BY e.salary DESC, e.first_name LIMIT 20 OFFSET 40"),
            "SELECT AVG(price) AS avg_price, MIN(price), MAX(price) FROM products WHERE publisher = 'O''Reilly'",
            "SELECT LOWER(email) FROM users WHERE email NOT LIKE '%@example.com' AND status != 'banned'",
            "SELECT COUNT(DISTINCT customer_id) AS customers FROM orders WHERE total > 100.50 AND status <> 'cancelled'",
            'SELECT t.*, "first name", `order` FROM "My Table" t',
        ],
        "near_misses": [
            "",
            "SELECT * FROM users WHERE",
            "SELECT * FROM users ORDER BY",
            "SELECT * FROM users LIMIT",
            "SELECT name FROM users WHERE age >",
            "SELECT * FROM t WHERE a = 1 AND",
            "SELECT name, FROM users",
            "SELECT * FROM users LIMIT ten",
            "SELECT nameFROM users",
            "SELECT * users",
            "SELECT * FROM users WHERE name = 'Bob",
            "SELECT * FROM users;;",
            "SELECT * FROM users WHERE id IN ()",
            "SELECT * FROM orders JOIN users",
            "SELECT * FROM users GROUP name",
            "SELECT * FROM users WHERE age BETWEEN 18",
            "SELECT COUNT(* FROM t",
            "DELETE FROM users",
            "SELECT * FROM users; DROP TABLE users;",
        ],
    },
    "csv": {
        "valid": [
            "name,age,city\nAlice,30,Paris\nBob,25,Berlin\n",
            'id,description,price\r\n1,"Widget, large",9.99\r\n2,"The ""best"" gadget",19.50\r\n',
            'product,notes\nlamp,"Line one\nline two"\n',
            "a,b,c\n1,,3\n,,\n",
            "header_only",
            "name,email\nJosé,jose@example.com\n",
            "x,y\n1.5,-2\n3,4",
            '"quoted header",plain\nv1, v2 with spaces \n',
        ],
        "near_misses": [
            "",
            ",a,b\n1,2,3\n",
            'name,age\nAlice,"30\n',
            'name,comment\nBob,he said "hi"\n',
            'name,comment\nBob,"hi" there\n',
            'name,age\n"Alice" ,30\n',
            "a,b\r1,2\r",
        ],
    },
    "tool_call": {
        "valid": [
            'get_weather(city="Paris", unit="celsius")',
            '[get_weather(city="Paris"), get_time(timezone="Europe/Paris")]',
            "list_files()",
            'search_web(query="structgen grammar", max_results=5, safe_search=true)',
            ('create_event(title="Team sync", attendees=["ana@example.com", "li@example.com"], '
             "duration_minutes=30.5, location=null)"),
            'db.query(sql="SELECT * FROM t WHERE x = \\"y\\"", params={"limit": 10, "filters": {"active": true}})',
            '[\n  send_email(to="bob@example.com", subject="Hi", body="Line 1\\nLine 2"),\n  log_event(level="info")\n]',
            "set_temperature(value=-3.5e1)",
        ],
        "near_misses": [
            "",
            'get_weather("Paris")',
            "get_weather(city='Paris')",
            "set_flag(enabled=True)",
            'get_weather(city="Paris",)',
            'get_weather(city="Paris"',
            '[get_weather(city="Paris"), ]',
            "[]",
            'get weather(city="Paris")',
            'get_weather(city="Paris") get_time()',
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
            "resize(width=1, height=)",
            "get_weather(city=Paris)",
        ],
    },
}

# Inputs where structgen and lark disagree because of a structgen bug. Each is run as a
# strict xfail: when the bug is fixed the test XPASSes (fails), and the entry must go.
KNOWN_BUGS: dict[tuple[str, str], str] = {}


def _stem(file: str) -> str:
    return file.rsplit(".", 1)[0]


def _syntax(file: str) -> str:
    return "gbnf" if file.endswith(".gbnf") else "lark"


def _skip_if_unavailable(file: str) -> None:
    if _syntax(file) == "gbnf" and not HAVE_GBNF:
        pytest.skip("structgen/grammar/gbnf.py does not exist yet (GBNF support is being written)")


@functools.cache
def _grammar_text(file: str) -> str:
    return (GRAMMARS / file).read_text(encoding="utf-8")


_compiled: dict[str, structgen.CompiledGrammar] = {}


def _compile(file: str, vocab) -> structgen.CompiledGrammar:
    g = _compiled.get(file)
    if g is None:
        g = _compiled[file] = structgen.compile_grammar(_grammar_text(file), vocab, syntax=_syntax(file))
    return g


@functools.cache
def _lark_parser(file: str):
    import lark

    return lark.Lark(_grammar_text(file), parser="earley", lexer="dynamic_complete")


def _walk(grammar, tokenizer, text: str) -> tuple[bool, str]:
    """Feed the text's tokens one by one. Returns (accepted, explanation); checks on the
    way that the mask and accept_token agree about every token."""
    m = grammar.matcher()
    mask = structgen.allocate_bitmask(1, grammar.vocab_size)
    ids = tokenizer.encode(text, add_special_tokens=False)
    for i, tid in enumerate(ids):
        m.fill_bitmask(mask, 0)
        in_mask = bool((int(mask[0, tid >> 5]) >> (tid & 31)) & 1)
        accepted = m.accept_token(tid)
        assert in_mask == accepted, f"mask says {in_mask}, accept_token says {accepted} for token {tid}"
        if not accepted:
            done = tokenizer.decode(ids[:i])
            return False, f"token {i} {tokenizer.decode([tid])!r} refused after {done!r}"
    if not m.is_accepting():
        return False, "all tokens accepted but the end is not accepting (EOS not allowed)"
    return True, "accepted"


def _cases(kind: str, files: list[str], structgen_bugs: bool = True):
    for file in files:
        for i, text in enumerate(SAMPLES.get(_stem(file), {}).get(kind, [])):
            marks = ()
            if structgen_bugs and (file, text) in KNOWN_BUGS:
                marks = (pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[(file, text)]),)
            yield pytest.param(file, text, id=f"{file}-{i}", marks=marks)


# ---------------------------------------------------------------- the library itself


def test_every_grammar_has_samples():
    assert FILES, "grammars/ holds no grammar"
    for file in FILES:
        samples = SAMPLES.get(_stem(file))
        assert samples and samples["valid"] and samples["near_misses"], f"add samples for grammars/{file}"
    for stem in ("json", "arithmetic", "tool_call"):
        assert f"{stem}.gbnf" in FILES, f"grammars/{stem}.gbnf (the GBNF twin of {stem}.lark) is missing"
    assert (GRAMMARS / "README.md").is_file()


@pytest.mark.parametrize("file", FILES)
def test_file_starts_with_a_comment(file):
    first = _grammar_text(file).lstrip().splitlines()[0]
    assert first.startswith("//" if file.endswith(".lark") else "#"), f"{file} should open with what it accepts"


# ---------------------------------------------------------------- token by token


@pytest.mark.parametrize("file, text", list(_cases("valid", FILES)))
def test_sample_accepted_token_by_token(file, text, smollm2_tokenizer, smollm2_vocab):
    _skip_if_unavailable(file)
    g = _compile(file, smollm2_vocab)
    ok, why = _walk(g, smollm2_tokenizer, text)
    assert ok, f"{file} should accept {text!r}: {why}"
    assert g.accepts_bytes(text.encode())


@pytest.mark.parametrize("file, text", list(_cases("near_misses", FILES)))
def test_near_miss_rejected(file, text, smollm2_tokenizer, smollm2_vocab):
    _skip_if_unavailable(file)
    g = _compile(file, smollm2_vocab)
    ok, _ = _walk(g, smollm2_tokenizer, text)
    assert not ok, f"{file} should reject {text!r}"
    assert not g.accepts_bytes(text.encode())


# ---------------------------------------------------------------- lark agrees


@pytest.mark.parametrize("file, text", list(_cases("valid", LARK_FILES, structgen_bugs=False)))
def test_lark_parses_sample(file, text):
    _lark_parser(file).parse(text)


@pytest.mark.parametrize("file, text", list(_cases("near_misses", LARK_FILES, structgen_bugs=False)))
def test_lark_rejects_near_miss(file, text):
    import lark

    with pytest.raises(lark.exceptions.LarkError):
        _lark_parser(file).parse(text)
