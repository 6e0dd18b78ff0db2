"""Sample values as prometheus_client writes them (its `utils.floatToGoString`), in bulk."""

from __future__ import annotations

from collections.abc import Iterable

_SPECIAL = {"inf": "+Inf", "-inf": "-Inf", "nan": "NaN"}


# Exponent suffixes by the number of digits before the point (repr switches to exponent
# notation itself from 1e16 on).
EXPONENT = {digits: f"e+{digits - 1:02d}" for digits in range(7, 17)}


def _exponent_form(s: str) -> str:
    """repr() of a finite float, switched to Go's exponent form where Go would use it: a positive
    value with more than 6 digits before the point (prometheus_client's rule)."""
    if s[-2:] == ".0" and s[0] != "-":  # an integral value, the usual counter: the fast way
        suffix = EXPONENT.get(len(s) - 2)
        if suffix is not None:
            digits = s[:-2].rstrip("0")
            return f"{digits[0]}.{digits[1:]}{suffix}" if len(digits) > 1 else digits + suffix
    dot = s.find(".")
    if dot > 6 and s[0] != "-":
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


# Below 2**53 every integer is a float exactly, and the shortest repr() of that float is the
# integer's own digits: str() of the int gives repr(float)'s digits without the float.
EXACT_INT = 2**53


def go_float(value: float) -> str:
    """One value, exactly as floatToGoString writes it. runs.format_values inlines the two
    integer cases below for a run's values (no call per value): change both together."""
    if type(value) is int:
        if -1000000 < value < 1000000:  # a small counter: repr(float) is "<int>.0"
            return f"{value}.0"
        if 0 < value <= EXACT_INT:  # a large counter (bytes, packets): 7 to 16 digits
            digits = str(value)
            mantissa = f"{digits[0]}.{digits[1:]}".rstrip("0.")
            return mantissa + EXPONENT[len(digits)]
    s = repr(float(value))
    special = _SPECIAL.get(s)
    if special is not None:
        return special
    return s if len(s) < 9 else _exponent_form(s)


def go_floats(values: Iterable[float]) -> list[str]:
    """Many values at once: repr() of each in C, then only the long ones (7+ digits before the
    point needs at least 9 characters) go through the exponent rule."""
    floats = list(map(float, values))
    total = sum(floats)
    if total - total != 0.0:  # some value is NaN or infinite (or the sum overflowed): rare
        return list(map(go_float, floats))
    reprs = list(map(repr, floats))
    if reprs and max(map(len, reprs)) >= 9:
        return [s if len(s) < 9 else _exponent_form(s) for s in reprs]
    return reprs


def small_go_floats(values: Iterable[float]) -> list[str]:
    """A few values (no bulk setup): small integers, the usual counters of a node, without a call
    per value; anything else through go_float."""
    return [f"{v}.0" if type(v) is int and -1000000 < v < 1000000 else go_float(v) for v in values]
