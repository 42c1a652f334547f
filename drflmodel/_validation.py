"""Small argument checks shared by every module (one place for the error messages)."""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidDataError, InvalidParameterError


def as_real_array(value, name: str, error=InvalidParameterError, dtype=float,
                  allow_bool: bool = False) -> np.ndarray:
    """``value`` as a real float array, or ``error`` naming ``name``: text or bytes (numpy would
    parse ``"1"`` as 1.0), complex entries (numpy would drop the imaginary part with only a
    warning), ragged nesting, objects that are not numbers, and booleans (a boolean *array* only
    with ``allow_bool``, e.g. 0/1 features; never a lone ``True``) are refused, not converted."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise error(f"{name} must be a numeric array; got a ragged or non-numeric "
                    f"{type(value).__name__}") from None
    if raw.dtype.kind in "USV":
        raise error(f"{name} must be numeric; got {'text' if raw.dtype.kind == 'U' else 'bytes'} "
                    f"({type(value).__name__} {_short(value)})")
    if raw.dtype.kind == "b" and (raw.ndim == 0 or not allow_bool):
        raise error(f"{name} must be numeric; got a boolean {_short(value)}")
    if raw.dtype.kind == "c" or (raw.dtype.kind == "O" and any(isinstance(v, complex) for v in raw.flat)):
        raise error(f"{name} must be real; got complex values")
    try:
        return raw.astype(dtype)
    except (TypeError, ValueError):
        raise error(f"{name} must be numeric; got {type(value).__name__} {_short(value)}") from None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def as_finite_array(value, name: str, ndim: int | None = None, dtype=float) -> np.ndarray:
    """Return ``value`` as a real float array (:func:`as_real_array`), raising
    :class:`InvalidDataError` on text, complex entries, NaN/inf or a bad ndim."""
    arr = as_real_array(value, name, InvalidDataError, dtype, allow_bool=True)
    if ndim is not None and arr.ndim != ndim:
        raise InvalidDataError(f"{name} must be {ndim}-dimensional; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidDataError(f"{name} contains NaN or infinite values")
    return arr


def check_real(value, name: str, low=None, high=None, low_open=False, high_open=False,
               allow_inf: bool = False) -> float:
    """Check a real scalar lies in an interval; return it as ``float``.

    The message names the argument and the allowed range, e.g. ``alpha must lie in (0, 1]``.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise InvalidParameterError(f"{name} must be a real number; got {value!r}")
    v = float(value)
    if np.isnan(v) or (np.isinf(v) and not allow_inf):
        raise InvalidParameterError(f"{name} must be finite; got {value!r}")
    rng = interval_text(low, high, low_open, high_open, allow_inf)
    if low is not None and (v < low or (low_open and v == low)):
        raise InvalidParameterError(f"{name} must lie in {rng}; got {value!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise InvalidParameterError(f"{name} must lie in {rng}; got {value!r}")
    return v


def interval_text(low=None, high=None, low_open=False, high_open=False, allow_inf: bool = False) -> str:
    """The range :func:`check_real` accepts, written as an interval: an end is closed (``[``, ``]``)
    exactly when that value is accepted, so a missing end is ``(-inf`` / ``inf)`` unless
    ``allow_inf`` (then ``[-inf`` / ``inf]``), e.g. ``(0, inf)`` for a positive finite number."""
    lo_br = "[" if (low is None and allow_inf) or (low is not None and not low_open) else "("
    hi_br = "]" if (high is None and allow_inf) or (high is not None and not high_open) else ")"
    return f"{lo_br}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_br}"


def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """Check an integer lies in ``[low, high]``; return it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidParameterError(f"{name} must be an integer; got {value!r}")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise InvalidParameterError(
            f"{name} must be an integer in [{'-inf' if low is None else low}, "
            f"{'inf' if high is None else high}]; got {value!r}")
    return v


def check_bool(value, name: str) -> bool:
    """Check ``value`` is a boolean (``True``/``False`` or a numpy bool; not a string or a number
    whose truth would be silently taken); return it as ``bool``."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def check_choice(value, name: str, choices) -> object:
    """Check ``value`` is one of ``choices``."""
    if value not in choices:
        raise InvalidParameterError(f"{name} must be one of {sorted(map(str, choices))}; got {value!r}")
    return value


def check_probability_vector(value, name: str, n: int | None = None, atol: float = 1e-9) -> np.ndarray:
    """Check ``value`` is a probability vector (nonnegative, sums to one within ``atol``)."""
    arr = as_real_array(value, name)
    if arr.ndim != 1:
        raise InvalidParameterError(f"{name} must be a 1-D vector; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise InvalidParameterError(f"{name} must have length {n}; got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"{name} contains NaN or infinite values")
    if np.any(arr < -atol) or abs(arr.sum() - 1.0) > atol:
        raise InvalidParameterError(
            f"{name} must lie on the probability simplex (entries >= 0, sum 1); "
            f"got min {arr.min():.3g}, sum {arr.sum():.12g}")
    return arr
