"""`format` patterns (structgen.grammar.formats): soundness against jsonschema's
FormatChecker, the official test suite, and the obvious stdlib parsers.

Soundness (every accepted string is valid) is asserted; completeness on the suite's
valid instances is measured and only required where the format has no documented
refusals.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import ipaddress
import json
import os
import re
import uuid

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.grammar import formats as F
from structgen.grammar.formats import FORMATS, format_pattern
from tests.paths import JSON_SCHEMA_SUITE

FORMAT_DIR = JSON_SCHEMA_SUITE / "optional" / "format"

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
EXAMPLES = int(os.environ.get("STRUCTGEN_HYPOTHESIS_EXAMPLES", "200"))

# Minimum number of the suite's valid instances each pattern must accept (documented
# refusals: leap seconds, quoted local parts, U-labels / xn-- A-labels, "100" prefix).
MIN_VALID_ACCEPTED = {
    "date": 17, "time": 7, "date-time": 6, "duration": 21, "email": 7, "idn-email": 6,
    "hostname": 8, "idn-hostname": 7, "ipv4": 5, "ipv6": 11, "uuid": 9, "uri": 15,
    "uri-reference": 11, "iri": 11, "iri-reference": 5, "json-pointer": 22,
    "relative-json-pointer": 6,
}


def _compiled(name: str) -> re.Pattern:
    return re.compile(FORMATS[name])


def accepts(name: str, text: str) -> bool:
    return _compiled(name).fullmatch(text) is not None


def _suite_cases(name: str):
    path = FORMAT_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"no test-suite file for {name}")
    for group in json.loads(path.read_text(encoding="utf-8")):
        for test in group["tests"]:
            if isinstance(test["data"], str):
                yield test["data"], test["valid"], test["description"]


# ---------------------------------------------------------------- independent validators


def _optional(module: str):
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return importlib.import_module(module)
    except Exception:  # a broken optional install must not break the test
        return None

_idna = _optional("idna")
_jsonpointer = _optional("jsonpointer")
_fqdn = _optional("fqdn")
_rfc3986 = _optional("rfc3986_validator")
_rfc3987 = _optional("rfc3987")
_isoduration = _optional("isoduration")


def _host_ok(host: str) -> bool:
    if not (1 <= len(host) <= 253) or host.endswith("."):
        return False
    labels = host.split(".")
    if any(not (1 <= len(x) <= 63) for x in labels):
        return False
    if any(not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?", x) for x in labels):
        return False
    if any(x[2:4] == "--" for x in labels):
        return False
    if _idna is not None:
        _idna.encode(host)  # raises if IDNA 2008 rejects it
    if _fqdn is not None:
        assert _fqdn.FQDN(host, min_labels=1).is_valid
    return True


def _email_ok(text: str) -> bool:
    local, _, domain = text.rpartition("@")
    assert local and domain and '"' not in local
    assert not local.startswith(".") and not local.endswith(".") and ".." not in local
    assert len(local) <= 64
    if domain.startswith("[IPv6:"):
        ipaddress.IPv6Address(domain[6:-1])
    elif domain.startswith("["):
        ipaddress.IPv4Address(domain[1:-1])
    else:
        assert "." in domain and _host_ok(domain)
    return True


def _independent_check(name: str, text: str) -> None:
    """Raise / fail if an independent parser rejects `text` for format `name`."""
    if name == "date":
        datetime.date.fromisoformat(text)
    elif name == "time":
        t = datetime.time.fromisoformat(text.upper())
        assert t.tzinfo is not None
    elif name == "date-time":
        d = datetime.datetime.fromisoformat(text.upper())
        assert d.tzinfo is not None
    elif name == "ipv4":
        ipaddress.IPv4Address(text)
    elif name == "ipv6":
        assert "%" not in text
        ipaddress.IPv6Address(text)
    elif name == "uuid":
        uuid.UUID(text)
        assert all(text[i] == "-" for i in (8, 13, 18, 23))
    elif name in ("hostname", "idn-hostname"):
        assert _host_ok(text)
    elif name in ("email", "idn-email"):
        assert _email_ok(text)
    elif name == "json-pointer" and _jsonpointer is not None:
        _jsonpointer.JsonPointer(text)
    elif name == "duration" and _isoduration is not None:
        _isoduration.parse_duration(text)
    elif name in ("uri", "uri-reference") and _rfc3986 is not None:
        rule = "URI" if name == "uri" else "URI_reference"
        assert _rfc3986.validate_rfc3986(text, rule=rule)
    elif name in ("iri", "iri-reference") and _rfc3987 is not None:
        _rfc3987.parse(text, rule="IRI" if name == "iri" else "IRI_reference")
    if name in ("uri", "iri"):
        assert re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text)


def assert_valid(name: str, text: str) -> None:
    assert CHECKER.conforms(text, name), (name, text, "jsonschema FormatChecker rejects")
    try:
        _independent_check(name, text)
    except AssertionError:
        raise
    except Exception as exc:  # a parser's ValueError etc.
        raise AssertionError((name, text, f"independent parser rejects: {exc!r}")) from exc


# ---------------------------------------------------------------- API


def test_api():
    assert format_pattern("date") == FORMATS["date"]
    assert format_pattern("no-such-format") is None
    assert format_pattern("regex") is None
    for name in ("date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri",
                 "uri-reference", "iri", "iri-reference", "idn-email", "idn-hostname", "json-pointer",
                 "relative-json-pointer"):
        assert name in FORMATS


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_ecma_compatible_subset(name):
    pattern = FORMATS[name]
    assert "\\d" not in pattern and "\\w" not in pattern and "\\s" not in pattern
    assert "(?=" not in pattern and "(?!" not in pattern and "(?<" not in pattern
    assert "(?P" not in pattern and "\\b" not in pattern
    assert not pattern.startswith("^") and not pattern.endswith("$")
    re.compile(pattern)


# ---------------------------------------------------------------- the official suite


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_suite_invalid_instances_are_rejected(name):
    accepted_valid = total_valid = 0
    for data, valid, description in _suite_cases(name):
        ok = accepts(name, data)
        if valid:
            total_valid += 1
            accepted_valid += ok
        else:
            assert not ok, (name, data, description)
        if ok:
            assert_valid(name, data)
    assert accepted_valid >= MIN_VALID_ACCEPTED[name], (name, accepted_valid, total_valid)


def test_suite_acceptance_report(capsys):
    rows = []
    for name in sorted(FORMATS):
        cases = list(_suite_cases(name))
        valid = [d for d, v, _ in cases if v]
        invalid = [d for d, v, _ in cases if not v]
        rows.append(
            f"{name:22s} valid accepted {sum(accepts(name, d) for d in valid):3d}/{len(valid):3d}   "
            f"invalid rejected {sum(not accepts(name, d) for d in invalid):3d}/{len(invalid):3d}"
        )
    with capsys.disabled():
        print("\n" + "\n".join(rows))


# ---------------------------------------------------------------- hand-picked cases


def test_calendar():
    assert accepts("date", "2020-02-29") and accepts("date", "2000-02-29") and accepts("date", "0400-02-29")
    for bad in ("2021-02-29", "1900-02-29", "2100-02-29", "0000-01-01", "2020-04-31", "2020-02-30"):
        assert not accepts("date", bad), bad
    for y in range(1, 10000):
        text = f"{y:04d}-02-29"
        leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
        assert accepts("date", text) == leap, text
    for m, days in enumerate([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], start=1):
        assert accepts("date", f"2019-{m:02d}-{days:02d}")
        assert not accepts("date", f"2019-{m:02d}-{days + 1:02d}")


def test_times():
    for ok in ("00:00:00Z", "23:59:59.999999999+14:00", "12:00:00z", "08:30:06-23:59"):
        assert accepts("time", ok), ok
        assert_valid("time", ok)
    for bad in ("24:00:00Z", "12:00:00", "12:00Z", "12:00:00+24:00", "23:59:60Z", "12:00:00.Z", "12:00:00 Z"):
        assert not accepts("time", bad), bad
    assert accepts("date-time", "1985-04-12t23:20:50.52z")
    assert not accepts("date-time", "1985-04-12 23:20:50Z")


def test_hosts_and_addresses():
    for ok in ("localhost", "a.b", "www.example.com", "a-b.c-d.e", "1host", "x" * 63 + ".com"):
        assert accepts("hostname", ok), ok
    for bad in ("-a", "a-", "a..b", "a.", ".a", "a_b", "ab--cd", "xn--nxasmq6b", "x" * 64, "a b"):
        assert not accepts("hostname", bad), bad
    for ok in ("::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
               "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5::1.2.3.4", "fe80::1:2"):
        assert accepts("ipv6", ok), ok
        assert_valid("ipv6", ok)
    for bad in ("1:2:3:4:5:6:7:8:9", "1::2::3", "1:2:3:4:5:6::1.2.3.4", "::1.2.3.04", ":1:2", "12345::",
                "1:2:3:4:5:6:7:8::", "::1%eth0"):
        assert not accepts("ipv6", bad), bad
    for bad in ("01.2.3.4", "256.1.1.1", "1.2.3", "1.2.3.4.5"):
        assert not accepts("ipv4", bad), bad
    assert accepts("email", "first.last+tag@mail.example.co.uk")
    assert not accepts("email", "user@localhost")  # documented: at least two labels
    assert accepts("idn-email", "δοκιμή@example.com")
    assert not accepts("email", "δοκιμή@example.com")


def test_uris():
    for ok in ("http://example.com", "urn:isbn:0451450523", "mailto:a@b.c", "file:///etc/hosts", "a:",
               "http://[::1]:8080/p?q#f", "http://u:p@h:1/%20", "x:/", "http://[v1.x]/"):
        assert accepts("uri", ok), ok
        assert accepts("uri-reference", ok), ok
    for bad in ("//host/p", "/p", "", "1a:b", "http://h/%zz", "http://h:8o/", "http://[::1", "a b:c"):
        assert not accepts("uri", bad), bad
    for ok in ("", "/p", "p", "//h", "?q", "#f", "./a:b", "../x"):
        assert accepts("uri-reference", ok), ok
    for bad in ("a:b c", "1:b", "\\x", "/a b", "%"):
        assert not accepts("uri-reference", bad), bad


def test_relative_json_pointer_prefix():
    for ok in ("0", "1", "10", "120", "0#", "3/a~0b", "0/"):
        assert accepts("relative-json-pointer", ok), ok
        assert_valid("relative-json-pointer", ok)
    for bad in ("01", "100", "-1", "#", "0##", "1#/a", "/a"):
        assert not accepts("relative-json-pointer", bad), bad


# ---------------------------------------------------------------- properties

SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


def _representatives(ranges: str) -> str:
    """Each range's ends and middle: hypothesis is very slow on huge Unicode classes, and
    validators treat a range uniformly, so its ends and an inner point stand for it."""
    out = []
    for i in range(0, len(ranges), 3):
        lo, dash, hi = ranges[i : i + 3]
        assert dash == "-"
        out += [lo, chr((ord(lo) + ord(hi)) // 2), hi]
    return "".join(out)


def _generation_pattern(name: str) -> str:
    pattern = FORMATS[name]
    for ranges in (F._UCSCHAR, F._IPRIVATE, F._NON_ASCII):
        pattern = pattern.replace(ranges, _representatives(ranges))
    return pattern


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_generated_strings_are_valid(name):
    """Every string the pattern generates passes jsonschema and the independent parsers."""

    @SETTINGS
    @given(st.from_regex(re.compile(_generation_pattern(name)), fullmatch=True))
    def check(text):
        assert accepts(name, text)
        assert_valid(name, text)

    check()


_ALPHABETS = {
    "date": "0123456789-:T",
    "time": "0123456789:.Z+-z",
    "date-time": "0123456789-:T.Z+",
    "duration": "PYMWDTHS0123.",
    "ipv4": "0123456789.",
    "ipv6": "0123456789abcdefABCDEF:.",
    "uuid": "0123456789abcdefABCDEFG-",
    "hostname": "ab01-.",
    "idn-hostname": "ab01-.",
    "email": "ab0.-@[]:+",
    "idn-email": "ab0.-@[]:é",
    "json-pointer": "/~01a",
    "relative-json-pointer": "0129#/~a",
    "uri": "ab:/?#%[]@.1-",
    "uri-reference": "ab:/?#%[]@.1-",
    "iri": "ab:/?#%[]é.1",
    "iri-reference": "ab:/?#%[]é.1",
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_random_near_misses_never_slip_through(name):
    """Random strings over the format's own alphabet: whatever the pattern accepts is valid."""

    @SETTINGS
    @given(st.text(alphabet=_ALPHABETS[name], max_size=40))
    def check(text):
        if accepts(name, text):
            assert_valid(name, text)

    check()


def test_agrees_with_project_regex_front_end():
    """The patterns mean the same to structgen's own ECMA regex compiler (when present)."""
    try:
        from structgen.grammar.acceptor import ir_accepts
        from structgen.grammar.regex import regex_ir
    except ImportError:
        pytest.skip("regex front end not available")
    samples = {
        "date": ["2020-02-29", "2021-02-29", "0000-01-01"],
        "ipv6": ["::", "1::2:3.4.5.6", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6::1.2.3.4"],
        "iri": ["http://ƒøø.ßår/?∂éœ=πîx#πîüx", "http://x/\U0001f600", "http://x/\ue000"],
        "idn-email": ["δοκιμή@example.com", "a@b.c", "\x85@example.com"],
        "hostname": ["a" * 63 + ".com", "a" * 64 + ".com", "ab--c.d"],
        "json-pointer": ["/a~0b/c~1d", "/~2", "/\x00\n"],
    }
    for name, texts in samples.items():
        node = regex_ir(FORMATS[name])
        for text in texts:
            assert ir_accepts(node, text.encode("utf-8")) == accepts(name, text), (name, text)
