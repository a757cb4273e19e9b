"""The size caps on texts written without an exponent: at most `PLAIN_MAX_DIGITS` integer
digits when an upper bound allows more, and no magnitude below 10**`PLAIN_MIN_EXP` when
a positive lower bound exists (see the package docstring). Exponent notation still
covers what they refuse.

Owns: where the caps fall. Must not build IR: the integer and decimal range modules
narrow their bounds here before they build texts.
"""

from __future__ import annotations

from typing import Optional

from structgen.grammar.numbers.bounds import Threshold
from structgen.grammar.numbers.decimals import pow10

PLAIN_MAX_DIGITS = 40  # integer digits of a text without exponent, when an upper bound allows more
PLAIN_MIN_EXP = -30  # smallest magnitude written without exponent, when a lower bound > 0 exists


def cap_plain_decimals(lo: Threshold, hi: Threshold):
    """Narrow the magnitudes written without an exponent (sound: only refuses texts).

    A plain text below 10**PLAIN_MIN_EXP (more than 30 zeros after the point) is refused
    when a positive lower bound exists, and one of more than PLAIN_MAX_DIGITS integer
    digits when a larger upper bound exists; exponent notation still covers both. This
    keeps e.g. exclusiveMinimum 0 (threshold 5e-324) from costing a 330-state chain.
    """
    tiny = pow10(PLAIN_MIN_EXP)
    huge = pow10(PLAIN_MAX_DIGITS)
    if lo is not None and 0 < lo[0] < tiny:
        lo = (tiny, False)
    if hi is not None and hi[0] > huge and (lo is None or lo[0] < huge):
        hi = (huge, True)
    return lo, hi


def cap_plain_integer(lo: int, hi: Optional[int]) -> Optional[int]:
    """Cap an integer text's magnitude at PLAIN_MAX_DIGITS digits when the bound allows more."""
    cap = 10**PLAIN_MAX_DIGITS - 1
    if hi is not None and hi > cap and lo <= cap:
        return cap
    return hi
