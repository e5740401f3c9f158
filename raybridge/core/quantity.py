"""Kubernetes resource quantities as plain numbers.

The pure core needs to compare "16Gi" with "17179869184" and add CPU requests
without importing the kubernetes client; this is the small, exact parser for
that. It does not format quantities back except for the few shapes the
manifests need.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Optional

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|([eE][+-]?[0-9]+))?")
#: raybridge's bounds, far beyond any real resource: a quantity is at most 2^63-1 base units (bytes,
#: cores, GPUs), written in at most 64 characters with an exponent of at most 30, so no arithmetic
#: on it can overflow or take long (`1e99999999` would make Decimal overflow).
MAX_QUANTITY = Decimal(2**63 - 1)
MAX_QUANTITY_TEXT = 64
MAX_EXPONENT = 30


def parse_quantity(value: str | int | float) -> Decimal:
    """Return the quantity as a Decimal in base units; ValueError if malformed or out of bounds.

    The whole text must be a quantity (ASCII digits only: `fullmatch`, so no trailing newline).
    A float (a YAML or JSON number) is read as its shortest text, by the same rules as text: what is
    read from `1.0e-31` is what is read from the text `str(1.0e-31)` that a spec keeps and reads again.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite quantity: {value!r}")
    if isinstance(value, int) and abs(value) > MAX_QUANTITY:
        raise ValueError(f"quantity too large (above 2^63-1): {value.bit_length()}-bit integer")
    if isinstance(value, int):
        return _bounded(Decimal(value), value)
    text = repr(value) if isinstance(value, float) else str(value).strip()
    if len(text) > MAX_QUANTITY_TEXT:
        raise ValueError(f"not a Kubernetes quantity (longer than {MAX_QUANTITY_TEXT} characters): {text[:20]!r}...")
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, suffix, exponent = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from exc
    if exponent:
        power = int(exponent[1:])
        if abs(power) > MAX_EXPONENT:
            raise ValueError(f"quantity out of range (an exponent outside -{MAX_EXPONENT}..{MAX_EXPONENT}): {value!r}")
        return _bounded(base * (Decimal(10) ** power), value)
    return _bounded(base * _SUFFIXES[suffix or ""], value)


def _bounded(quantity: Decimal, value: object) -> Decimal:
    if abs(quantity) > MAX_QUANTITY:
        raise ValueError(f"quantity too large (above 2^63-1): {value!r}")
    return quantity


def is_quantity(value: object) -> bool:
    """Any well-formed quantity, negative and zero included (Kubernetes' own syntax check)."""
    try:
        return parse_quantity(value).is_finite()  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False


def amount_problem(value: object) -> Optional[str]:
    """Why `value` cannot be a CPU or memory amount for a pod (a quantity above 0), or None.

    Kubernetes' syntax admits "-16Gi" and "0"; neither is something a pod can
    be given, so raybridge refuses them rather than render them.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"is not a Kubernetes quantity (got {value!r})"
    try:
        parse_quantity(value)
    except ValueError as exc:
        return f"{exc}" if "too large" in str(exc) or "out of range" in str(exc) else f"is not a Kubernetes quantity (got {value!r})"
    if parse_quantity(value) <= 0:  # type: ignore[arg-type]
        return f"must be above 0 (got {value!r})"
    return None


def format_cpu(cores: Decimal | float | int) -> str:
    """Whole cores as "4", fractions as millicores "1500m" (rounded half even). Exact at any size: whole
    numbers, not Decimal arithmetic, whose 28 digits would round (or raise) above them."""
    exact = Fraction(Decimal(str(cores)))
    if exact.denominator == 1:
        return str(exact.numerator)
    return f"{round(exact * 1000)}m"


def format_memory(num_bytes: Decimal | int) -> str:
    """Bytes (rounded half even to a whole number) in the largest binary unit that divides them exactly; exact at
    any size, as `format_cpu`."""
    whole = round(Fraction(Decimal(num_bytes)))
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        size = int(_SUFFIXES[unit])
        if whole % size == 0 and whole >= size:
            return f"{whole // size}{unit}"
    return str(whole)


#: Decimal places of a fraction shown as a JSON number (a millionth of a GPU: below any share KAI hands out).
FRACTION_PLACES = 6


def fraction_number(value: Fraction) -> int | float:
    """A fraction as a JSON number: whole numbers as integers, else rounded to FRACTION_PLACES decimals."""
    if value.denominator == 1:
        return value.numerator
    return round(float(value), FRACTION_PLACES)


def format_fraction(value: Fraction) -> str:
    """An exact decimal when there is one ("1.8"), else the fraction ("2/3")."""
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = max(twos, fives)
    text = f"{value.numerator * 10**digits // value.denominator}"
    if digits == 0:
        return text
    negative = text.startswith("-")
    text = text.lstrip("-").rjust(digits + 1, "0")
    out = f"{text[:-digits]}.{text[-digits:]}".rstrip("0").rstrip(".")
    return f"-{out}" if negative else out
