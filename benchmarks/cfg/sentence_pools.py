"""Built-in sentences for the grammars of grammars/: SQL queries, tool calls, JSON texts
and arithmetic (fixed lists, valid and not), random arithmetic expressions (`arith_expr`)
and CSV files (`csv_pool`).

Must not label sentences: lark's parser says which are valid (sentences.py).
"""

from __future__ import annotations


def arith_expr(rng, depth=0):
    def num():
        return str(rng.randint(0, 999)) if rng.random() < 0.75 else f"{rng.randint(0, 99)}.{rng.randint(0, 99):d}"

    if depth > 2 or rng.random() < 0.3:
        x = num()
        return ("-" + x) if rng.random() < 0.1 else x
    a, b = arith_expr(rng, depth + 1), arith_expr(rng, depth + 1)
    op = rng.choice("+-*/")
    sp = rng.choice([" ", " ", ""])
    e = f"{a}{sp}{op}{sp}{b}"
    return f"({e})" if rng.random() < 0.3 else e


SQL_POOL = [
    "SELECT * FROM users",
    "SELECT id, name, email FROM users WHERE active = TRUE;",
    "SELECT name FROM employees WHERE salary > 50000 ORDER BY salary DESC LIMIT 10",
    "SELECT DISTINCT country FROM customers ORDER BY country",
    "SELECT COUNT(*) FROM orders WHERE status = 'shipped'",
    "SELECT department, AVG(salary) AS avg_salary FROM employees GROUP BY department HAVING AVG(salary) > 60000",
    "SELECT u.name, o.total FROM users u JOIN orders o ON u.id = o.user_id WHERE o.total >= 100.50",
    ("SELECT c.name, COUNT(o.id) AS n FROM customers AS c LEFT JOIN orders AS o ON o.customer_id = c.id "
    "GROUP BY c.name ORDER BY n DESC"),
    "SELECT p.title, a.name FROM posts p INNER JOIN authors a ON p.author_id = a.id WHERE p.published IS NOT NULL",
    "SELECT * FROM products WHERE price BETWEEN 10 AND 20 AND category IN ('books', 'music')",
    "SELECT name FROM users WHERE email LIKE '%@example.com' OR name LIKE 'A%'",
    "SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE country = 'FR')",
    "SELECT LOWER(name) AS lname, COALESCE(nickname, name) FROM people",
    "select id, created_at from events where type != 'click' order by created_at asc limit 50 offset 100",
    "SELECT COUNT(DISTINCT user_id) FROM sessions WHERE duration > 30",
    "SELECT t.* FROM transactions t WHERE t.amount < 0",
    "SELECT year, SUM(revenue) - SUM(cost) AS profit FROM finance.yearly GROUP BY year ORDER BY year",
    "SELECT \"first name\", `last name` FROM contacts",
    "SELECT name FROM users WHERE NOT (age < 18 OR banned = TRUE)",
    "SELECT id, price * quantity AS total FROM order_items WHERE order_id = 42;",
    "SELECT MAX(score), MIN(score) FROM results WHERE game_id = 7 AND deleted_at IS NULL",
    "SELECT e.name, d.name FROM employees e RIGHT OUTER JOIN departments d ON e.dept_id = d.id",
    "SELECT name\nFROM users\nWHERE id = 1\n",
    "SELECT a.id FROM a FULL OUTER JOIN b ON a.id = b.id WHERE b.id IS NULL",
    "SELECT title FROM books WHERE author NOT IN ('Smith', 'O''Brien') ORDER BY title",
    "SELECT city, COUNT(*) AS n FROM stores GROUP BY city HAVING COUNT(*) >= 3 ORDER BY n DESC, city ASC",
    "SELECT id FROM logs WHERE level = 'ERROR' AND (service = 'api' OR service = 'web') LIMIT 5",
    "SELECT -balance AS debt FROM accounts WHERE balance < 0",
    "SELECT ROUND(AVG(rating), 2) FROM reviews WHERE product_id = 3",
    "SELECT id FROM tasks WHERE due_date NOT BETWEEN '2024-01-01' AND '2024-12-31'",
    # invalid
    "SELECT FROM users",
    "SELECT name FROM",
    "SELECT name FROM users WHERE",
    "SELECT nameFROM users",
    "SELECT * FROM users LIMIT ten",
    "SELECT * FROM users ORDER name",
    "SELECT id, FROM users",
    "SELECT * FROM users WHERE id = 1;;",
    "SELECT * FROM t UNION SELECT * FROM u",
    "WITH x AS (SELECT 1 FROM t) SELECT * FROM x",
    "SELECT name FROM users WHERE name = \"bob' ",
]

JSON_EXTRA = ['[1, 2, 3]', '"hello"', '-0.5e10', 'true', 'null', '[]', '{}', ' {"a": 1} \n',
              '[{"id": 1, "tags": ["x", "y"]}, {"id": 2, "tags": []}]', '{"nested": {"deep": {"deeper": [null, false]}}}',
              '{"a": 1,}', "{'a': 1}", '[1, 2', '{"a": 01}', 'NaN', '{"a": "line\nbreak"}', '{"a" 1}', '[1 2]',
              '{"a": tru}', '{"a": 1}}', '{"x": "\\q"}', '// comment\n{}']

ARITH_EXTRA = ["2 - -3", "(1 + 2) * 3.5", "42", "--1", "10 / 4 / 2", "((7))", "3.14159 * 2 * 10",
               ".5", "5.", "1e3", "+1", "2(3)", "2 ^ 3", "1 +", "(1 + 2", "3 ** 2", "1 + 2)", "", "4 /", "a + 1"]


def csv_pool(rng):
    names = ["Alice", "Bob", "Chloé", "Dmitri", "Eve", "Frank O'Hara", "Smith, John", 'say "hi"']
    out = []
    for k in range(26):
        ncol = rng.randint(2, 5)
        header = ",".join(["id", "name", "email", "age", "city"][:ncol])
        rows = []
        for i in range(rng.randint(1, 6)):
            vals = [str(i + 1)]
            for c in range(1, ncol):
                v = rng.choice(names) if c == 1 else rng.choice(["x@example.com", str(rng.randint(18, 90)), "Paris", ""])
                if any(ch in v for ch in ',"') or (rng.random() < 0.15 and v):
                    v = '"' + v.replace('"', '""') + '"'
                vals.append(v)
            rows.append(",".join(vals))
        eol = "\r\n" if k % 5 == 4 else "\n"
        text = eol.join([header] + rows) + (eol if k % 3 else "")
        out.append(text)
    out += ["a,b\n1,2\n", "a\n1\n", 'name,quote\nx,"unterminated\n', 'a,b\n"x"y,2\n', "a,b\n1,2\n\n\n"]
    return out


TOOL_CALL_POOL = [
    'get_weather(city="Paris", unit="celsius")',
    'get_weather(city="San Francisco, CA")',
    'search(query="best pizza near me", max_results=5)',
    '[get_weather(city="Paris"), get_time(timezone="Europe/Paris")]',
    'send_email(to="alice@example.com", subject="Meeting", body="See you at 3pm.\\nThanks!")',
    'calendar.create_event(title="Standup", start="2024-05-01T09:00:00Z", duration_min=15, attendees=[])',
    'get_stock_price(symbol="AAPL")',
    'book_flight(origin="JFK", destination="LHR", date="2024-07-14", passengers=2, class="economy")',
    'set_thermostat(temperature=21.5, mode="heat")',
    'lookup_order(order_id=123456)',
    'translate(text="Good morning", source="en", target="fr")',
    '[search(query="weather Tokyo"), search(query="weather Osaka")]',
    'update_user(id=7, fields={"email": "new@example.com", "newsletter": false})',
    'list_files()',
    'run_sql(query="SELECT count(*) FROM users", timeout=null)',
    'math.evaluate(expression="2 + 2 * 3")',
    'create_ticket(title="Login fails", priority="high", tags=["auth", "bug"], assignee=null)',
    'get_directions(from_location={"lat": 48.8566, "lon": 2.3522}, to_location={"lat": 51.5074, "lon": -0.1278})',
    '[\n  get_weather(city="Rome"),\n  get_weather(city="Milan")\n]',
    'play_music(artist="Miles Davis", shuffle=true)',
    # other tool-call styles (not this grammar's language, unless it is JSON-based)
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    '{"name": "search", "arguments": {"query": "structured generation", "max_results": 5}}',
    '{"name": "send_email", "arguments": {"to": ["a@example.com"], "subject": "Hi", "body": "See you at 5."}}',
    '{"name": "get_time", "arguments": {}}',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>',
    '<tool_call>{"name": "lookup", "arguments": {"id": 42}}</tool_call>',
    '[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": true}}]',
    'get_weather(city="Paris", unit="celsius")',
    'search(query="llm grammars", max_results=3)',
    '{"tool": "calculator", "input": "2 + 2"}',
    '{"name": "create_event", "arguments": {"title": "Standup", "start": "2024-05-01T09:00:00Z", "duration_min": 15}}',
    '{"name": "get_weather", "parameters": {"city": "Berlin"}}',
    # likely invalid
    '{"name": "get_weather", "arguments": {"city": "Paris"}',
    '{"arguments": {"city": "Paris"}}',
    'get_weather(',
    '<tool_call>{"name": "x"}',
]
