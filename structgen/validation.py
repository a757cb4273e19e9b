"""Checking a JSON text against a JSON Schema, reading numbers the way the grammars do.

Owns `schema_error(text, schema, formats=False) -> str | None`: None when `text` is JSON
that the `jsonschema` package finds valid against `schema`, else a one-line reason.
Numbers in both are read as exact decimals (`decimal.Decimal`), the reading
jsonschema's maintainers recommend for exact arithmetic: read as floats, 19.99 is not
a multiple of 0.01 (19.99 / 0.01 is 1998.9999999999998 in binary floating point),
while JSON Schema's `multipleOf` is arithmetic on the numbers as written. The grammars'
numeric bounds hold under both readings (grammar/numbers.py); a non-integer
`multipleOf` holds under this one. Used by the command line, the benchmarks and the
tests. Must not know about the engine.
"""

from __future__ import annotations

import json
from decimal import Decimal, localcontext
from typing import Any


def schema_error(text: str, schema: Any, formats: bool = False) -> str | None:
    """None when `text` is JSON valid against `schema`; else why not (one line)."""
    import jsonschema
    from jsonschema.validators import validator_for

    try:
        instance = json.loads(text, parse_float=Decimal)
    except ValueError as e:
        return f"not JSON: {e}"
    try:
        exact = json.loads(json.dumps(schema), parse_float=Decimal)
        cls = validator_for(exact, default=jsonschema.Draft202012Validator)
        checker = cls.FORMAT_CHECKER if formats else None
        # as many digits as the texts hold: the arithmetic stays exact (Decimal's default
        # 28 would refuse 10**40 % 2.5)
        with localcontext() as context:
            context.prec = max(context.prec, 2 * (len(text) + len(json.dumps(schema))))
            error = jsonschema.exceptions.best_match(cls(exact, format_checker=checker).iter_errors(instance))
    except Exception as e:  # noqa: BLE001 - a schema the validator cannot use (a remote $ref, ...)
        return f"could not validate ({type(e).__name__}: {e})"[:300]
    if error is None:
        return None
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"at {where}: {error.message}"[:300]
