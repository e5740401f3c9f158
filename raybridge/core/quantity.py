"""Kubernetes resource quantities as plain numbers.

The pure core needs to compare "16Gi" with "17179869184" and add CPU requests
without importing the kubernetes client; this is the small, exact parser for
that. It does not format quantities back except for the few shapes the
manifests need.
"""

from __future__ import annotations

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
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|([eE][+-]?\d+))?$")


def parse_quantity(value: str | int | float) -> Decimal:
    """Return the quantity as a Decimal in base units; ValueError if malformed."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, suffix, exponent = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from exc
    if exponent:
        return base * (Decimal(10) ** int(exponent[1:]))
    return base * _SUFFIXES[suffix or ""]


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
    if isinstance(value, bool) or not is_quantity(value):
        return f"is not a Kubernetes quantity (got {value!r})"
    if parse_quantity(value) <= 0:  # type: ignore[arg-type]
        return f"must be above 0 (got {value!r})"
    return None


def format_cpu(cores: Decimal | float | int) -> str:
    """Whole cores as "4", fractions as millicores "1500m"."""
    cores = Decimal(str(cores))
    if cores == cores.to_integral_value():
        return str(int(cores))
    return f"{int((cores * 1000).to_integral_value())}m"


def format_memory(num_bytes: Decimal | int) -> str:
    """Bytes in the largest binary unit that divides them exactly."""
    num_bytes = Decimal(num_bytes).to_integral_value()
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        size = _SUFFIXES[unit]
        if num_bytes % size == 0 and num_bytes >= size:
            return f"{int(num_bytes / size)}{unit}"
    return str(int(num_bytes))


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
