"""Checking a JSON text against a JSON Schema, reading numbers the way the grammars do.

Owns `schema_error(text, schema, formats=False) -> str | None`: None when `text` is JSON
that the `jsonschema` package finds valid against `schema`, else a one-line reason.
Numbers in both are read as exact decimals (`decimal.Decimal`), the reading
jsonschema's maintainers recommend for exact arithmetic: read as floats, 19.99 is not
a multiple of 0.01 (19.99 / 0.01 is 1998.9999999999998 in binary floating point),
while JSON Schema's `multipleOf` is arithmetic on the numbers as written. The grammars'
numeric bounds hold under both readings (grammar/numbers/); a non-integer
`multipleOf` holds under this one. Used by the command line, the benchmarks and the
tests. Must not know about the engine.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any


def schema_error(text: str, schema: Any, formats: bool = False) -> str | None:
    """None when `text` is JSON valid against `schema`; else why not (one line)."""
    from jsonschema.exceptions import best_match

    try:
        instance, schema = _read_exact(text), json.loads(json.dumps(schema), parse_float=Decimal)
    except InvalidOperation:  # an exponent past Decimal's range (1e99999999999999999999)
        instance = json.loads(text, parse_int=_int_or_float)  # the float reading, as a fallback
    except ValueError as e:
        return f"not JSON: {e}"
    try:
        # as many digits as the texts hold: the arithmetic stays exact (Decimal's default
        # 28 would refuse 10**40 % 2.5)
        with localcontext() as context:
            context.prec = max(context.prec, 2 * (len(text) + len(json.dumps(schema, default=str))))
            error = best_match(_validator(schema, formats).iter_errors(instance))
    except Exception as e:  # noqa: BLE001 - a schema the validator cannot use (a remote $ref, ...)
        return f"could not validate ({type(e).__name__}: {e})"[:300]
    if error is None:
        return None
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"at {where}: {error.message}"[:300]


def _read_exact(text: str) -> Any:
    """JSON with every number a Decimal (integers too: Python refuses int texts of over
    4,300 digits)."""
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def _int_or_float(digits: str) -> int | float:
    return int(digits) if len(digits) < 4000 else float(digits)


def _validator(schema: Any, formats: bool):
    """The schema's draft's validator, where a Decimal with no fraction is an integer
    (as 1.0 is for the float reading)."""
    import jsonschema
    from jsonschema import validators

    cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    plain_integer = cls.TYPE_CHECKER.is_type

    def is_integer(checker, instance) -> bool:
        if isinstance(instance, Decimal):
            return instance == instance.to_integral_value()
        return plain_integer(instance, "integer")

    exact = validators.extend(cls, type_checker=cls.TYPE_CHECKER.redefine("integer", is_integer))
    return exact(schema, format_checker=cls.FORMAT_CHECKER if formats else None)
