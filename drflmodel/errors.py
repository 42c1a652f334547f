"""The exception hierarchy of drflmodel.

Every error raised on purpose by the package derives from :class:`DrflmodelError`, so
``except dm.errors.DrflmodelError`` catches exactly the package's own complaints.

* :class:`InvalidDataError` -- data that cannot be used (shapes, NaN/inf, labels, groups).
* :class:`InvalidParameterError` -- a parameter outside its domain; the message names the
  argument and the allowed range.
* :class:`NotConvexError` -- the requested formulation is not convex (or not DCP) for the
  given data; the message names the failing condition and the exact alternative.
* :class:`SolverError` -- no open solver produced an answer that passed its certificate.
* :class:`MemoryLimitError` -- an allocation the request needs (a dense :math:`P\\times P`
  Hessian, a copy of the data) would exceed the memory available; refused, with the estimate,
  before anything is allocated.

Warnings derive from :class:`DrflmodelWarning` (a ``UserWarning``):

* :class:`SolverFallbackWarning` -- the solver named in ``solve(solver=...)`` did not give a
  certified answer and the others were tried (``fallback=True``, the default); the attempt is
  recorded in ``solution.info["attempts"]``.
"""

from __future__ import annotations

__all__ = [
    "DrflmodelError",
    "InvalidDataError",
    "InvalidParameterError",
    "NotConvexError",
    "SolverError",
    "MemoryLimitError",
    "DrflmodelWarning",
    "SolverFallbackWarning",
    "OracleGapWarning",
]


class DrflmodelError(Exception):
    """Base class of every error raised on purpose by drflmodel."""


class InvalidDataError(DrflmodelError, ValueError):
    """Data that cannot be used: wrong shape, non-finite values, bad labels or groups."""


class InvalidParameterError(DrflmodelError, ValueError):
    """A parameter outside its domain. The message names the argument and the allowed range."""


class NotConvexError(DrflmodelError):
    """The formulation is not convex (or not DCP) for the given data.

    The message states the failing condition and the exact alternative that *is* available.
    """


class SolverError(DrflmodelError, RuntimeError):
    """No available solver produced an answer that passed its certificate."""


class MemoryLimitError(DrflmodelError, MemoryError):
    """An allocation would exceed the available memory: refused before it is made. Attributes
    ``what`` (the allocation), ``needed`` and ``available`` (bytes)."""

    def __init__(self, message: str, what: str = "", needed: int = 0, available: int | None = None):
        super().__init__(message)
        self.what, self.needed, self.available = what, int(needed), available


class DrflmodelWarning(UserWarning):
    """Base class of every warning issued on purpose by drflmodel."""


class OracleGapWarning(DrflmodelWarning):
    """A reference solution's certified gap bounds its own error only above the tolerance it is
    used at (a :class:`~drflmodel.verification.Verifier`'s ``tol``): re-solve it with a smaller
    ``gap_tol``."""


class SolverFallbackWarning(DrflmodelWarning):
    """The solver the user named failed (error, no optimal status, or a certificate that did not
    close) and ``solve(fallback=True)`` went on to the others; see ``info["attempts"]``."""
