"""core/quantity.py: a number is read as its text is, and quantities are written exactly at any size.

A YAML or JSON number (a float) and the text a spec keeps of it (`str(value)`) once took two roads: the float
was read as a Decimal, the text by the quantity grammar, so `memoryPerGpu: 1.0e-31` passed the spec's check
and failed, as an internal error, where the manifests read it again. The formatters computed in Decimal's 28
digits and raised DivisionImpossible above them (`gpus: 1e40` with `render --no-ray`).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from raybridge.core.quantity import amount_problem, format_cpu, format_memory, parse_quantity

FLOATS = [1e-31, 1e-30, 5e-324, 0.1, 1.5, 1e16, 1.5e10, 9.2e18, 1e19, 1e300, -0.5, 123456789.125]


def _read(value: object) -> object:
    try:
        return parse_quantity(value)  # type: ignore[arg-type]
    except ValueError as exc:
        return str(exc).replace(repr(value), "VALUE").replace(repr(str(value)), "VALUE")


@pytest.mark.parametrize("value", FLOATS, ids=[repr(f) for f in FLOATS])
def test_a_float_is_read_as_its_text_is(value: float) -> None:
    assert _read(value) == _read(str(value))
    assert amount_problem(value) == amount_problem(str(value)) or (amount_problem(value) or "").replace(repr(value), "") == (
        amount_problem(str(value)) or "").replace(repr(str(value)), "")


def test_a_float_beyond_the_exponent_bound_is_refused_as_its_text() -> None:
    with pytest.raises(ValueError, match=r"out of range \(an exponent outside -30\.\.30\)"):
        parse_quantity(1e-31)


# (what is formatted, CPU as written, memory as written): beyond Decimal's 28 digits, and ordinary amounts rounded
# half even, as before
AMOUNTS = [
    (Decimal(10**50), str(10**50), f"{5**50 * 2**10}Ti"),
    (Decimal(2**100 + 1), str(2**100 + 1), str(2**100 + 1)),
    (Decimal(f"{2**100}.5"), f"{(2**101 + 1) * 500}m", f"{2**60}Ti"),  # half even: 2^100
    (Decimal("1.0005"), "1000m", "1"),
    (Decimal("0.0015"), "2m", "0"),
    (Decimal("1023.5"), "1023500m", "1Ki"),
    (Decimal(3 * 2**40), str(3 * 2**40), "3Ti"),
    (4, "4", "4"),
]


@pytest.mark.parametrize("value, cpu, memory", AMOUNTS, ids=[str(a[0])[:12] for a in AMOUNTS])
def test_formatting_is_exact_at_any_size(value: Decimal, cpu: str, memory: str) -> None:
    assert (format_cpu(value), format_memory(value)) == (cpu, memory)
