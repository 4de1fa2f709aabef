"""Kubernetes resource quantities ("500m", "1.5Gi", "1e3") as exact integer milli-units, and back.

The checkers do all quota arithmetic on the integers this module returns; it never uses floats.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable
from decimal import Decimal

__all__ = ["format_milli", "parse_quantity"]

#: Binary suffixes and their power of two (k8s.io/apimachinery/pkg/api/resource/suffix.go).
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
#: Decimal SI suffixes and their power of ten. "n" and "u" are not in quantity.go's grammar comment, but
#: its suffixer accepts them, so a real apiserver does too.
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: <signedNumber><suffix>: a number is digits, digits.digits, digits. or .digits.
_QUANTITY = re.compile(r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>.*)")
_EXPONENT = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")
#: Kubernetes reads the exponent of "1e<n>" as an int32.
_MAX_EXPONENT = 2**31 - 1
#: Refuse absurd magnitudes instead of building a gigantic int; no real quota comes near 10^60 units
#: (Kubernetes itself caps BinarySI values at 2^63-1).
_MAX_ADJUSTED = 60


def parse_quantity(q: str | int | float) -> int:
    """Return `q` in milli-units (1 CPU = 1000, 1Gi of memory = 1073741824000), rounded up.

    Accepts a Kubernetes quantity string: an optionally signed number ("1", "0.5", ".5", "1.") followed
    by one suffix: binary (Ki Mi Gi Ti Pi Ei), decimal (n u m k M G T P E) or an exponent ("1e3",
    "2E-3"). Surrounding whitespace is ignored, as in Quantity.UnmarshalJSON. Also accepts an int or a
    finite float (a JSON number); a float is read through its shortest repr, so 0.1 is exactly 100m.

    Any fraction of a milli-unit is rounded up (0.1m -> 1m, 1.0001 -> 1001m), which is what
    Quantity.MilliValue returns for non-negative values. Negative values use the mathematical ceiling.
    Rule and grammar: k8s.io/apimachinery/pkg/api/resource/quantity.go (ParseQuantity, MilliValue).

    Raises ValueError for a malformed string or a non-finite or absurdly large value, TypeError for
    anything that is not a str, int or float (bool included).
    """
    if isinstance(q, bool) or not isinstance(q, (str, int, float)):
        raise TypeError(f"quantity must be a str, int or float, got {type(q).__name__}: {q!r}")
    if isinstance(q, int):
        return q * 1000
    if isinstance(q, float):
        if not math.isfinite(q):
            raise ValueError(f"quantity must be a finite number, got {q!r}")
        return _ceil_milli(Decimal(repr(q)), q)
    return _ceil_milli(_parse_string(q), q)


def format_milli(m: int, *, binary: bool = True) -> str:
    """Render milli-units `m` as a Kubernetes quantity string that parses back to exactly `m`.

    Fractional units keep the milli suffix (500 -> "500m", 1500 -> "1500m"). Whole units are plain
    integers (1000 -> "1"), except that with `binary` a whole multiple of 1024 uses the largest exact
    binary suffix (1073741824000 -> "1Gi", 1610612736000 -> "1536Mi"). Pass binary=False for resources
    Kueue formats as DecimalSI (cpu, pods, extended resources); see kueue pkg/resources (ResourceQuantity).
    """
    if m == 0:
        return "0"
    sign = "-" if m < 0 else ""
    m = abs(m)
    if m % 1000:
        return f"{sign}{m}m"
    units = m // 1000
    if binary:
        for suffix, power in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            if units % (1 << power) == 0:
                return f"{sign}{units >> power}{suffix}"
    return f"{sign}{units}"


def _parse_string(text: str) -> Decimal:
    """Return the exact value of a quantity string in base units."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"malformed quantity {text!r}: expected an optionally signed number followed by at most one "
            "suffix (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3), "
            "e.g. '500m', '1.5Gi'"
        )
    number = match["number"]
    if number.endswith("."):
        number += "0"
    value = Decimal(match["sign"] + number)  # exact: Decimal from a string never rounds
    suffix = match["suffix"]
    if suffix in _BINARY_SUFFIXES:
        return _exact(lambda ctx: ctx.multiply(value, Decimal(1 << _BINARY_SUFFIXES[suffix])), value)
    if suffix in _DECIMAL_SUFFIXES:
        return _exact(lambda ctx: value.scaleb(_DECIMAL_SUFFIXES[suffix], ctx), value)
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise ValueError(
            f"malformed quantity {text!r}: unknown suffix {suffix!r}; use one of m, k, M, G, T, P, E, "
            "Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3"
        )
    exp = int(exponent["exp"])
    if abs(exp) > _MAX_EXPONENT:
        raise ValueError(f"malformed quantity {text!r}: exponent {exp} does not fit in 32 bits")
    return _exact(lambda ctx: value.scaleb(exp, ctx), value)


def _ceil_milli(value: Decimal, original: object) -> int:
    """Return ceil(value * 1000) as an int, refusing magnitudes no quota can have."""
    if value.is_zero():
        return 0
    if value.adjusted() > _MAX_ADJUSTED:
        raise ValueError(f"quantity {original!r} is too large to be a resource quantity")
    milli = _exact(lambda ctx: value.scaleb(3, ctx), value)
    return int(milli.to_integral_value(rounding=decimal.ROUND_CEILING))


def _exact(op: Callable[[decimal.Context], Decimal], value: Decimal) -> Decimal:
    """Run `op` in a context wide enough that it cannot round, and trap it if it still would."""
    digits = len(value.as_tuple().digits) + 40  # 2**60 has 19 digits, 1000 has 4
    ctx = decimal.Context(
        prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.Inexact, decimal.Overflow]
    )
    return op(ctx)
