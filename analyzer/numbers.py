"""How numbers read in every report: person-days, money, counts with their noun, sizes.

One rule per kind, so `scan`, `ci`, `diff`, Markdown and HTML print the same figure for the same
report. Person-days are rounded to the two decimals the JSON report stores first, then shown with
one (half up): a figure read back from a JSON report prints as it did when it was computed.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CURRENCY = "USD"


def pd(x: float) -> str:
    """Person-days as every renderer prints them: 3.2502 and its JSON form 3.25 both print 3.3."""
    return str(Decimal(repr(round(float(x), 2))).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def pd_delta(x: float) -> str:
    """A change of person-days: +1.2, −0.4 (a true minus sign), ±0 when nothing moved."""
    shown = pd(abs(x))
    if shown == "0.0":
        return "±0"
    return ("+" if x > 0 else "−") + shown


def money(x: float) -> str:
    """Dollars: cents below $100, whole dollars above; the sign before the symbol (-$100.00)."""
    sign = "-" if x < 0 and round(abs(x), 2) != 0 else ""
    x = abs(x)
    return f"{sign}${x:,.0f}" if x >= 100 else f"{sign}${x:,.2f}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 file`, `2 files`, `1 class`, `2 classes` (give `many` when adding an s is wrong)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


_UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def size(n: int) -> str:
    """A byte count in the unit it was most likely given: 2097152 -> 2 MiB, 1500 -> 1,500 bytes."""
    for unit, mult in _UNITS:
        if n >= mult and n % mult == 0:
            return f"{n // mult:,} {unit}"
    return plural(n, "byte")
