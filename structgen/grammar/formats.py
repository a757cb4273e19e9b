"""JSON Schema `format` values as regular expressions over the string's content.

    FORMATS: dict[str, str]          format name -> ECMA-262 pattern (implicitly anchored)
    format_pattern(name) -> str | None

Each pattern describes the decoded string content (the JSON-string encoding is the
compiler's business) and is written in the subset that Python `re` and ECMA-262
(Unicode mode) read the same way: `[0-9]` rather than `\\d`, no lookaround, no
backreferences, no flags; non-ASCII ranges are written as literal characters.

Soundness first: every string a pattern accepts is valid for `jsonschema`'s draft
2020-12 FormatChecker (with the optional checkers `fqdn`, `rfc3986-validator`,
`rfc3987`, `isoduration`, `idna`, `jsonpointer`, `rfc3339-validator` where installed)
and for the official test suite. Where a format has more valid spellings than a small
regular expression can check, the pattern accepts a documented subset:

date            RFC 3339 full-date, years 0001-9999, real month lengths, Feb 29 only in
                leap years (Gregorian rule over the 4-digit year).
time            RFC 3339 full-time: hh:mm:ss(.frac)?(Z|z|+hh:mm|-hh:mm). The offset is
                required. Leap seconds (:60) are refused: jsonschema's checker rejects
                them (the suite accepts some).
date-time       date [Tt] time.
duration        RFC 3339 Appendix A (ISO 8601 subset): P[nY[nM[nD]]|nM[nD]|nD][T...],
                PT..., PnW; integers only.
email           dot-atom local part (RFC 5322 atext, <= 63 chars) "@" a domain of at
                least two hostname labels, or an address literal [IPv4] / [IPv6:...].
                Quoted local parts are refused.
idn-email       as email, the local part also taking any non-ASCII character (RFC 6532);
                the domain stays ASCII (U-labels are refused).
hostname        RFC 1123 labels [A-Za-z0-9] / hyphen, no leading/trailing hyphen, no "--"
                in positions 3-4 (refuses every "xn--" A-label: punycode cannot be
                checked by a regex); lengths bounded so that the total stays <= 253
                without counting: a first label of <= 63 chars, then at most 6 more
                labels of <= 30 chars each (<= 249 chars in all).
idn-hostname    the ASCII subset: same as hostname (U-labels are refused).
ipv4            dotted quad, no leading zeros.
ipv6            RFC 4291 text forms incl. "::" and an embedded dotted quad; no zone id.
uuid            8-4-4-4-12 hex digits, either case.
uri             RFC 3986 URI (scheme ":" hier-part [?query] [#fragment]); host is a
                reg-name or an IP-literal ([IPv6] or [vX.future], lowercase "v" only:
                the rfc3987 checker refuses "V"); %HH escapes.
uri-reference   RFC 3986 URI-reference (URI or relative-ref).
iri, iri-reference
                RFC 3987: as uri / uri-reference with ucschar (and iprivate in the query).
json-pointer    RFC 6901: ("/" (unescaped | "~0" | "~1")*)*.
relative-json-pointer
                non-negative integer then "#" or a JSON pointer. The integer prefix is
                restricted to 0 | [1-9]+0? because jsonschema's checker rejects any digit
                that follows a "0" (so "100" is refused, though the suite calls it valid).

Formats without an entry (e.g. "regex", "uri-template", unknown names) return None:
the schema compiler decides whether to ignore them (annotation) or refuse.
"""

from __future__ import annotations

__all__ = ["FORMATS", "format_pattern"]


# ---------------------------------------------------------------- dates and times

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"  # 0001-9999
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"

_PARTIAL_TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIME = _PARTIAL_TIME + _OFFSET
DATE_TIME = f"{DATE}[Tt]{TIME}"

_DUR_SECOND = "[0-9]+S"
_DUR_MINUTE = f"[0-9]+M(?:{_DUR_SECOND})?"
_DUR_HOUR = f"[0-9]+H(?:{_DUR_MINUTE})?"
_DUR_TIME = f"T(?:{_DUR_HOUR}|{_DUR_MINUTE}|{_DUR_SECOND})"
_DUR_DAY = "[0-9]+D"
_DUR_MONTH = f"[0-9]+M(?:{_DUR_DAY})?"
_DUR_YEAR = f"[0-9]+Y(?:{_DUR_MONTH})?"
_DUR_DATE = f"(?:{_DUR_DAY}|{_DUR_MONTH}|{_DUR_YEAR})(?:{_DUR_TIME})?"
DURATION = f"P(?:{_DUR_DATE}|{_DUR_TIME}|[0-9]+W)"

# ---------------------------------------------------------------- IP addresses

_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = f"(?:{_OCTET}\\.){{3}}{_OCTET}"

_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{IPV4})"




def _ipv6_right(budget: int) -> str:
    """What may follow "::" when `budget` groups are left: hex groups, or groups then a quad."""
    if budget <= 0:
        return ""
    forms = [f"{_H16}(?::{_H16}){{0,{budget - 1}}}"]
    if budget >= 2:
        forms.append(f"(?:{_H16}:){{0,{budget - 2}}}{IPV4}")
    return f"(?:{'|'.join(forms)})?"


def _ipv6_left(k: int) -> str:
    """After k >= 1 groups: more groups, "::", a final quad (k == 6), or the end (k == 8)."""
    if k == 8:
        return ""
    forms = [f"::{_ipv6_right(7 - k)}", f":{_H16}{_ipv6_left(k + 1)}"]
    if k == 6:
        forms.append(f":{IPV4}")
    return f"(?:{'|'.join(forms)})"


# RFC 4291 section 2.2 (the RFC 3986 IPv6address rule), written as a left-to-right
# decision on the number of groups seen so that it determinizes into a small automaton.
IPV6 = f"(?:::{_ipv6_right(7)}|{_H16}{_ipv6_left(1)})"

UUID = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"

# ---------------------------------------------------------------- host names

_AN = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"


def _label(max_len: int) -> str:
    """A label of 1..max_len chars: alnum ends, hyphens inside, never "--" at positions 3-4."""
    return (
        f"{_AN}(?:{_LDH}?{_AN}|{_LDH}{_LDH}{_AN}"
        f"|{_LDH}(?:{_AN}{_LDH}|-{_AN}){_LDH}{{0,{max_len - 5}}}{_AN})?"
    )


_L63, _L30 = _label(63), _label(30)
# a first label of <= 63 chars, then up to 6 labels of <= 30: at most 63 + 6*31 = 249 chars
HOSTNAME = f"{_L63}(?:\\.{_L30}){{0,6}}"
_DOMAIN2 = f"{_L63}(?:\\.{_L30}){{1,6}}"  # the same with at least two labels

# ---------------------------------------------------------------- e-mail

_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LOCAL = f"{_ATEXT}(?:\\.?{_ATEXT}){{0,31}}"  # dot-atom of at most 63 chars
_EMAIL_DOMAIN = f"(?:{_DOMAIN2}|\\[{IPV4}\\]|\\[IPv6:{IPV6}\\])"
EMAIL = f"{_LOCAL}@{_EMAIL_DOMAIN}"
# RFC 6531/6532: atext also takes any non-ASCII character (UTF8-non-ascii); ASCII domain
_NON_ASCII = "\u0080-\ud7ff\ue000-\U0010ffff"  # every non-ASCII code point but surrogates
_UATEXT = f"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~{_NON_ASCII}-]"
IDN_EMAIL = f"{_UATEXT}(?:\\.?{_UATEXT}){{0,31}}@{_EMAIL_DOMAIN}"

# ---------------------------------------------------------------- URIs and IRIs

_PCT = "%[0-9A-Fa-f]{2}"
_SUB_DELIMS = "!$&'()*+,;="
_UCSCHAR = (
    "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
    "\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd\U00040000-\U0004fffd"
    "\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd\U00080000-\U0008fffd"
    "\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd\U000c0000-\U000cfffd"
    "\U000d0000-\U000dfffd\U000e1000-\U000efffd"
)
_IPRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"


def _uri_patterns(extra: str, query_extra: str) -> tuple[str, str]:
    """(absolute, reference) patterns; `extra` widens unreserved (IRIs: ucschar)."""

    def cls(more: str) -> str:
        return f"[A-Za-z0-9._~{extra}{_SUB_DELIMS}{more}-]"

    pchar = f"(?:{cls(':@')}|{_PCT})"
    segment = f"{pchar}*"
    segment_nz = f"{pchar}+"
    segment_nz_nc = f"(?:{cls('@')}|{_PCT})+"
    userinfo = f"(?:{cls(':')}|{_PCT})*"
    reg_name = f"(?:{cls('')}|{_PCT})*"
    ip_literal = f"\\[(?:{IPV6}|v[0-9A-Fa-f]+\\.[A-Za-z0-9._~{_SUB_DELIMS}:-]+)\\]"
    authority = f"(?:{userinfo}@)?(?:{ip_literal}|{reg_name})(?::[0-9]*)?"
    query = f"(?:{pchar}|[/?{query_extra}])*"
    fragment = f"(?:{pchar}|[/?])*"
    tail = f"(?:\\?{query})?(?:#{fragment})?"
    scheme = "[A-Za-z][A-Za-z0-9+.-]*:"
    more = f"(?:/{segment})*"
    # hier-part = "//" authority path-abempty / path-absolute / path-rootless / path-empty,
    # factored so that the shared tails appear once (smaller automata):
    absolute = f"{scheme}(?:(?://{authority}|/?{segment_nz}){more}|/)?{tail}"
    # URI-reference = URI / relative-ref, relative-part using path-noscheme:
    reference = (
        f"(?:(?:(?:{scheme})?(?://{authority}|/{segment_nz})|{scheme}{segment_nz}|{segment_nz_nc}){more}"
        f"|(?:{scheme})?/?){tail}"
    )
    return absolute, reference


URI, URI_REFERENCE = _uri_patterns("", "")
IRI, IRI_REFERENCE = _uri_patterns(_UCSCHAR, _IPRIVATE)

# ---------------------------------------------------------------- JSON pointers

JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"
RELATIVE_JSON_POINTER = f"(?:0|[1-9]+0?)(?:#|{JSON_POINTER})"


FORMATS: dict[str, str] = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "duration": DURATION,
    "email": EMAIL,
    "idn-email": IDN_EMAIL,
    "hostname": HOSTNAME,
    "idn-hostname": HOSTNAME,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "iri": IRI,
    "iri-reference": IRI_REFERENCE,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
}


def format_pattern(name: str) -> str | None:
    """The content pattern for a `format` value, or None when structgen has none."""
    return FORMATS.get(name)
