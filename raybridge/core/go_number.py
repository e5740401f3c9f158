"""Numbers in annotations, read exactly as KAI reads them: Go's strconv.ParseFloat and ParseInt.

KAI-Scheduler (v0.13.0) reads `gpu-fraction` with `strconv.ParseFloat(s, 64)`
(pkg/common/resources/gpu_sharing.go GetGPUFraction, pkg/scheduler/api/pod_info/
pod_info.go) and `gpu-memory` and `gpu-fraction-num-devices` with
`strconv.ParseInt(s, 10, 64)`. The adjuster's planner, its KAI baseline and the
fair-share view must agree with KAI on which texts are numbers, so they all read
them here. What Go accepts (go1.x src/strconv/atof.go readFloat, special,
atoi.go underscoreOK and ParseInt):

* ParseFloat: an optional sign; decimal digits with an optional point and an
  `e` exponent, or `0x` hex digits with an optional point and a required `p`
  exponent (so "0x1p-1" is 0.5); `_` only between digits or after the `0x`
  prefix ("1_0.5" is 10.5; "_1", "1_", "1__0", "1_.5" are errors); "Inf",
  "Infinity" (signed) and "NaN" (unsigned), any case. Only ASCII: no spaces, no
  newline, no other scripts' digits. A value beyond float64 is a range error.
* ParseInt base 10: an optional sign and ASCII digits, no `_` (Go allows it with
  base 0 only), within int64.

Python's float(), int() and Decimal() are looser (they take "0.5\\n", " 0.5",
Arabic-Indic and full-width digits), and `re`'s `\\d` and `$` are too (Unicode
digits, a trailing newline), so the patterns below use [0-9] and fullmatch.
What KAI does with the number afterwards (its ranges) is each caller's rule.
Texts longer than `MAX_TEXT` are refused before any parsing, to bound the cost.
Pure; no I/O.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Optional

#: Longer texts are not read (Go has no limit; an annotation value is at most 256 KiB in all).
MAX_TEXT = 4096
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_DEC = r"[0-9]+(?:_[0-9]+)*"
_HEX = r"[0-9a-fA-F]+(?:_[0-9a-fA-F]+)*"
_DECIMAL = re.compile(rf"[+-]?(?:{_DEC}(?:\.(?:{_DEC})?)?|\.{_DEC})(?:[eE][+-]?{_DEC})?")
_HEXADECIMAL = re.compile(rf"[+-]?0[xX]_?(?:{_HEX}(?:\.(?:{_HEX})?)?|\.{_HEX})[pP][+-]?{_DEC}")
_INFINITY = re.compile(r"[+-]?(?:inf|infinity)", re.IGNORECASE)
_NAN = re.compile(r"nan", re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?[0-9]+")


def go_float_kind(text: Any) -> Optional[str]:
    """Which of Go's float syntaxes `text` is: "decimal", "hex", "inf", "nan", or None (a syntax error)."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return None
    for kind, pattern in (("decimal", _DECIMAL), ("hex", _HEXADECIMAL), ("inf", _INFINITY), ("nan", _NAN)):
        if pattern.fullmatch(text):
            return kind
    return None


def go_parse_float(text: Any) -> Optional[float]:
    """strconv.ParseFloat(text, 64), or None where Go returns an error (syntax, or overflow to ±Inf)."""
    kind = go_float_kind(text)
    if kind == "nan":
        return math.nan
    if kind == "inf":
        return -math.inf if text.startswith("-") else math.inf
    if kind is None:
        return None
    digits = text.replace("_", "")
    try:
        value = float(digits) if kind == "decimal" else float.fromhex(digits)
    except OverflowError:
        return None
    return None if math.isinf(value) else value


def go_float_exact(text: Any) -> Optional[Fraction]:
    """The exact number a finite ParseFloat text writes (0.33 is 33/100, not float64's nearest), or None where
    Go returns an error or NaN or ±Inf. A value Go rounds to zero (below float64's smallest) is 0 here too."""
    value = go_parse_float(text)
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return Fraction(0)
    digits = text.replace("_", "")
    if go_float_kind(text) == "hex":
        return Fraction(value)  # a hex float is binary: exact unless it has more bits than float64 keeps
    return Fraction(Decimal(digits))  # within float64's range, so the exponent is small


def go_parse_int(text: Any) -> Optional[int]:
    """strconv.ParseInt(text, 10, 64), or None on a syntax or range error."""
    if not isinstance(text, str) or len(text) > MAX_TEXT or not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else None
