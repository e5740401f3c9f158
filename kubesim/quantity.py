"""Kubernetes resource quantities as kube-apiserver reads and prints them.

The API server decodes every `resource.Quantity` field with Go's
`resource.ParseQuantity` (a value it cannot parse fails the whole request
with 400), rounds container resource lists up to milli units when defaulting
(`SetDefaults_ResourceList`), and its validation messages print quantities in
two ways: `quantity.String()` (the canonical form, `0.5` -> `500m`) and, where
the Go code passes the Quantity itself as a field error's value, Go's `%#v` of
the struct (`resource.Quantity{i:resource.int64Amount{value:5, scale:-1}, ...}`).
`Quantity` here keeps exactly what the Go struct keeps for the values clients
write (the int64 fast path: value, scale, cached string, format), so messages
come out the same.

Written from apimachinery@v0.33.1 (kubernetes v1.33) pkg/api/resource:
quantity.go (parseQuantityString, ParseQuantity, CanonicalizeBytes,
UnmarshalJSON), amount.go (int64Amount.AsCanonicalBytes,
AsCanonicalBase1024Bytes), suffix.go (interpret, construct) and
k8s.io/api@v0.33.1 core/v1 defaults (SetDefaults_ResourceList in
kubernetes/pkg/apis/core/v1/defaults.go).

What this does not do: values beyond the int64 fast path (more than 18
significant digits, or finer than nano units) are kept exactly but their Go
`%#v` shows a placeholder where Go prints an `*inf.Dec` pointer; no
arithmetic beyond comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["FORMAT_WRONG", "Quantity", "QuantityError", "parse_quantity", "quantity_from_json"]

SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_WRONG = f"quantities must match the regular expression '{SPLIT_RE}'"
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"

_DIGITS = "0123456789"
_SUFFIX_CHARS = "eEinumkKMGTP"
_MAX_INT64_FACTORS = 18  # maxInt64Factors
_NANO = -9
_INT64_MAX = 2**63 - 1
_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY_SUFFIX = {0: "", **{exponent: suffix for suffix, exponent in _BINARY.items()}}


class QuantityError(ValueError):
    """ParseQuantity's error; its text is what the API server answers."""


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: its exact value and what Go's struct holds."""

    value: Fraction
    format: str  # DecimalSI | BinarySI | DecimalExponent
    int_value: int | None = None  # int64Amount.value (None: the inf.Dec path)
    int_scale: int = 0  # int64Amount.scale
    cached: str = ""  # the `s` field: the text as given, when it was canonical

    def go_repr(self) -> str:
        """Go's `%#v` of the struct, as field errors print a Quantity passed by value."""
        if self.int_value is None:
            amount = "resource.int64Amount{value:0, scale:0}"
            dec = "resource.infDecAmount{Dec:(*inf.Dec)(0xc000000000)}"
        else:
            amount = f"resource.int64Amount{{value:{self.int_value}, scale:{self.int_scale}}}"
            dec = "resource.infDecAmount{Dec:(*inf.Dec)(nil)}"
        return f'resource.Quantity{{i:{amount}, d:{dec}, s:"{self.cached}", Format:"{self.format}"}}'

    def canonical(self) -> str:
        """`quantity.String()`: CanonicalizeBytes."""
        if self.cached:
            return self.cached
        if self.value == 0:
            return "0"
        form = self.format
        if form == "BinarySI":
            if -1024 < self.value < 1024 or self.value.denominator != 1:
                form = "DecimalSI"
        if form == "BinarySI":
            amount, exponent = int(self.value), 0
            while amount % 1024 == 0 and exponent < 60:
                amount //= 1024
                exponent += 10
            return f"{amount}{_BINARY_SUFFIX[exponent]}"
        amount, exponent = _decimal_parts(self.value)
        if form == "DecimalSI" and exponent in _DECIMAL_SUFFIX:
            return f"{amount}{_DECIMAL_SUFFIX[exponent]}"
        return f"{amount}" + (f"e{exponent}" if exponent else "")

    def milli_rounded(self) -> "Quantity":
        """`RoundUp(-3)`, as SetDefaults_ResourceList applies it to container resources (away from zero)."""
        if self.int_value is not None and self.int_scale >= -3:
            return self
        milli = _away_from_zero(self.value * 1000)
        if self.int_value is not None:
            return Quantity(Fraction(milli, 1000), self.format, milli, -3, "")
        return Quantity(Fraction(milli, 1000), self.format, None, 0, "")

    def milli_value(self) -> int:
        """`MilliValue()`: the value in milli units, rounded away from zero."""
        return _away_from_zero(self.value * 1000)


def _away_from_zero(value: Fraction) -> int:
    return math.ceil(value) if value > 0 else math.floor(value)


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """AsCanonicalBytes: the mantissa and an exponent that is a multiple of 3."""
    exponent = 0
    while value.denominator != 1:
        value *= 10
        exponent -= 1
    amount = value.numerator
    while amount and amount % 10 == 0:
        amount //= 10
        exponent += 1
    remainder = exponent % 3
    amount *= 10**remainder
    exponent -= remainder
    return amount, exponent


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, value, numerator, denominator, suffix); QuantityError if malformed."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, text, text[start:], "", ""
    num = text[start:pos] or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    raise QuantityError(FORMAT_WRONG)


def _interpret(suffix: str) -> tuple[int, int, str]:
    """suffixer.interpret: (base, exponent, format); QuantityError for an unknown suffix."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = int(suffix[1:], 10)
        except ValueError:
            raise QuantityError(SUFFIX) from None
        if -(2**63) <= exponent < 2**63 and suffix[1:].lstrip("+-").isdigit():
            return 10, exponent, "DecimalExponent"
    raise QuantityError(SUFFIX)


def parse_quantity(text: str) -> Quantity:
    """ParseQuantity; QuantityError (with the API server's text) when `text` is not a quantity."""
    if not text:
        raise QuantityError(FORMAT_WRONG)
    if text == "0":
        return Quantity(Fraction(0), "DecimalSI", 0, 0, "0")
    positive, value_text, num, denom, suffix = _scan(text)
    base, exponent, form = _interpret(suffix)
    sign = 1 if positive else -1
    precision, scale, mantissa = 0, 0, 1
    if form in ("DecimalExponent", "DecimalSI"):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            number = int(shifted)
            if number > _INT64_MAX:
                raise QuantityError(NUMERIC)
            result = number * mantissa
            if result <= _INT64_MAX:
                result *= sign
                exact = Fraction(result) * Fraction(10) ** scale
                canonical = (exponent % 10 == 0 and number & 7 != 0) if form == "BinarySI" else (
                    scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0")
                return Quantity(exact, form, result, scale, text if canonical else "")
    try:
        amount = Fraction(value_text)
    except ValueError:
        raise QuantityError(NUMERIC) from None
    amount = amount * (Fraction(10) ** exponent if base == 10 else Fraction(2) ** exponent)
    magnitude = abs(amount)
    magnitude = Fraction(_away_from_zero(magnitude * 10**9), 10**9)  # up to the next nano unit
    if form == "BinarySI" and 0 < magnitude < 1:
        form = "DecimalSI"
    return Quantity(magnitude if amount >= 0 else -magnitude, form, None, 0, "")


def quantity_from_json(value: Any) -> Quantity:
    """Quantity.UnmarshalJSON of a decoded JSON value (a string, or a number as its JSON text)."""
    if isinstance(value, bool):
        raise QuantityError(FORMAT_WRONG)
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        text = repr(value) if value != int(value) or abs(value) >= 1e16 else str(int(value))
    elif isinstance(value, str):
        text = value
    else:
        raise QuantityError(FORMAT_WRONG)
    return parse_quantity(text.strip())
