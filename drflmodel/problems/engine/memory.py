"""Refuse, by name and before allocating, what would not fit in memory.

A route that is about to allocate something large -- a dense :math:`P\\times P` Hessian
(``problem.structure.hessian_bytes``), one per client, a copy of the rows -- calls
:func:`check_memory` first: when the estimate exceeds the memory available (Linux
``MemAvailable``, else the free physical pages ``os.sysconf`` reports, else unknown and not
checked) it raises :class:`~drflmodel.errors.MemoryLimitError` naming the allocation, the
estimate, what is available and what fits instead, rather than swapping or being killed.

A route's ``applies(structure)`` says it does not fit through :func:`dense_route_refusal` (the
estimate of the dense routes of the client-weight min-max family, from the structure alone); the
reason it returns is a :class:`MemoryReason`, which the route contract turns into a
:class:`~drflmodel.errors.MemoryLimitError` when the route is forced.
"""

from __future__ import annotations

import os

from ...errors import InvalidParameterError, MemoryLimitError

__all__ = ["available_memory", "check_memory", "format_bytes", "dense_hessian_bytes", "dense_route_bytes",
           "dense_route_refusal", "matrix_free_route_bytes", "memory_reason", "MemoryReason"]

#: the share of the available memory one allocation may take (the rest: the process's other arrays)
DEFAULT_FRACTION = 0.8

#: allocations below this size are never refused when the available memory is read from the system:
#: on a shared machine it dips for a moment now and then, and a small problem must not fail for it
MIN_REFUSED_BYTES = 256 * 2**20


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable`` of ``/proc/meminfo``; else
    the free physical pages of ``os.sysconf``), or ``None`` where the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    """``1.5 GiB``-style text for a byte count."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} TiB"


def _exceeds(nbytes: int, available: int | None, fraction: float) -> int | None:
    """The available bytes when ``nbytes`` exceeds ``fraction`` of them, else ``None``. Below
    :data:`MIN_REFUSED_BYTES` nothing read from the system is refused."""
    if available is None:
        if nbytes < MIN_REFUSED_BYTES:
            return None
        available = available_memory()
    if available is None or nbytes <= fraction * available:
        return None
    return int(available)


def check_memory(nbytes: int, what: str, available: int | None = None,
                 fraction: float = DEFAULT_FRACTION, instead: str | None = None) -> None:
    """Raise :class:`~drflmodel.errors.MemoryLimitError` when allocating ``nbytes`` for ``what``
    would take more than ``fraction`` of the available memory (``available`` bytes, default
    :func:`available_memory`; nothing is checked when it is unknown, nor below
    :data:`MIN_REFUSED_BYTES` when it is read from the system). ``instead``: what fits (named in
    the message)."""
    if nbytes < 0:
        raise InvalidParameterError(f"nbytes must be >= 0; got {nbytes}")
    if not 0 < fraction <= 1:
        raise InvalidParameterError(f"fraction must lie in (0, 1]; got {fraction}")
    free = _exceeds(int(nbytes), available, fraction)
    if free is None:
        return
    hint = f"; {instead}" if instead else ""
    raise MemoryLimitError(
        f"{what} needs about {format_bytes(nbytes)} but {format_bytes(free)} of memory is available "
        f"(at most {fraction:.0%} of it is used for one allocation); refused before allocating{hint}",
        what=what, needed=int(nbytes), available=free)


def dense_hessian_bytes(dim: int, copies: int = 2) -> int:
    """Bytes of ``copies`` dense ``dim x dim`` float64 matrices (a Hessian and its Cholesky factor)."""
    return int(copies) * 8 * int(dim) ** 2


def matrix_free_route_bytes(structure) -> int:
    """Bytes the matrix-free objectives take (:func:`drflmodel.matrix_free.matrix_free_bytes`) for
    a problem of this structure."""
    from ...matrix_free import matrix_free_bytes

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
    free = _exceeds(int(needed), None, DEFAULT_FRACTION)
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
