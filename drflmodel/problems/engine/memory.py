"""The solve engine's memory estimates: what each route of a problem would allocate, from its
structure alone, and the reason a route that would not fit gives.

A route's ``applies(structure)`` says it does not fit through :func:`dense_route_refusal` (the
estimate of the dense routes of the client-weight min-max family: a dense :math:`P\\times P`
Hessian, one per client, the conic model of every row); the reason it returns is a
:class:`MemoryReason`, which the route contract turns into a
:class:`~drflmodel.errors.MemoryLimitError` when the route is forced. Reading the memory available
and refusing one allocation by name (:func:`check_memory`) is the package's low-level helper
:mod:`drflmodel._memory`, re-exported here.
"""

from __future__ import annotations

from ... import _memory
from ..._memory import available_memory, check_memory, dense_hessian_bytes, format_bytes
from ...errors import MemoryLimitError
from ...matrix_free import matrix_free_bytes

__all__ = ["available_memory", "check_memory", "format_bytes", "dense_hessian_bytes", "dense_route_bytes",
           "dense_route_refusal", "matrix_free_route_bytes", "memory_reason", "MemoryReason"]


def matrix_free_route_bytes(structure) -> int:
    """Bytes the matrix-free objectives take (:func:`drflmodel.matrix_free.matrix_free_bytes`) for
    a problem of this structure."""
    K = max(int(structure.n_outputs), 1)
    return matrix_free_bytes(int(structure.rows), int(structure.dim) // K, K, int(structure.n_clients))


def dense_route_bytes(structure, route: str) -> int | None:
    """An estimate of the memory a dense route of the client-weight min-max family allocates
    beyond the data (``None``: no estimate for this route). ``P`` parameters, ``N`` rows, ``n``
    clients:

    * ``"sqp"``: the weighted :math:`P\\times P` Hessian, its deflated copy, its Cholesky factor and
      a damped copy (4 matrices), the clients' gradients and :math:`H^{-1}G^\\top` (:math:`nP` each)
      and the weight step's :math:`n\\times n` curvature and its factor;
    * ``"newton"``: one :math:`P\\times P` Cholesky factor per client, held twice (the CVXPY
      parameter and its canonicalized copy), plus the certificate's Newton solve (3 matrices);
    * ``"conic"``: CVXPY's coefficients of the :math:`N` rows' scores (about 24 bytes per entry of
      an :math:`N\\times P` block) plus the certificate's Newton solve (3 matrices).
    """
    P, n = int(structure.dim), int(structure.n_clients)
    if route == "sqp":
        return dense_hessian_bytes(P, 4) + 8 * (3 * n * P + 3 * n * n)
    if route == "newton":
        return dense_hessian_bytes(P, 2 * n + 3)
    if route == "conic":
        return 24 * int(structure.rows) * P + dense_hessian_bytes(P, 3)
    return None


class MemoryReason(str):
    """A route's reason for not applying that is a memory estimate (``needed``, ``available``
    bytes): forced, the route is refused with a :class:`~drflmodel.errors.MemoryLimitError`."""

    needed: int = 0
    available: int | None = None

    def error(self, route: str) -> MemoryLimitError:
        return MemoryLimitError(f"method {route!r} does not apply to this problem: {self}",
                                what=f"method {route!r}", needed=self.needed, available=self.available)


def memory_reason(needed: int, what: str, instead: str) -> MemoryReason | None:
    """``None`` when ``needed`` bytes for ``what`` fit in the memory available (see
    :func:`check_memory`), else the :class:`MemoryReason` naming the estimate, the memory available
    and ``instead``."""
    free = _memory.exceeds(int(needed), None, _memory.DEFAULT_FRACTION)
    if free is None:
        return None
    reason = MemoryReason(f"{what} would allocate about {format_bytes(needed)} but only {format_bytes(free)} of "
                          f"memory is available; {instead}")
    reason.needed, reason.available = int(needed), free
    return reason


def dense_route_refusal(structure, route: str, instead: str | None = None) -> MemoryReason | None:
    """``None`` when the dense route ``route`` fits in the memory available, else the reason: its
    estimate (:func:`dense_route_bytes`), the memory available and ``instead`` (the route that
    fits; default: the matrix-free ``method='hessian_free'`` for a smooth loss, with its estimate)."""
    needed = dense_route_bytes(structure, route)
    if needed is None:
        return None
    P = int(structure.dim)
    if instead is None:
        instead = (f"method='hessian_free' needs no P x P array (about "
                   f"{format_bytes(matrix_free_route_bytes(structure))}: values, gradients and Hessian-vector "
                   f"products)" if structure.smooth else
                   "no route of this problem fits: use fewer parameters or rows, or a machine with more memory")
    what = (f"route {route!r} (dense {P} x {P} matrices"
            + (" and the conic model of every row" if route == "conic" else "") + ")")
    return memory_reason(needed, what, instead)
