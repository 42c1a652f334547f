"""Sizes refused by name before anything is allocated.

A route that would build an array larger than the memory available says so -- with its estimate,
the memory available, and the route that fits -- instead of letting numpy raise a raw
``MemoryError`` (or the machine swap) halfway through a solve. The available memory is read from
``/proc/meminfo`` (``MemAvailable``), else from ``os.sysconf`` (free physical pages), else unknown
(then nothing is refused).
"""

from __future__ import annotations

import os

from .errors import InvalidParameterError

__all__ = ["available_memory", "dense_hessian_bytes", "check_memory", "format_bytes"]

#: the part of the available memory a single solve may plan to use (the rest: the data already
#: held, the interpreter, temporaries numpy allocates beside the estimated arrays)
USABLE_FRACTION = 0.8

#: allocations below this size are never refused: on a shared machine the available memory
#: dips for a moment now and then, and a small problem must not fail for it
MIN_REFUSED_BYTES = 256 * 2**20


def available_memory() -> int | None:
    """Bytes of physical memory available now, or ``None`` when unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    """``"19.6 GiB"``, ``"310 MiB"``."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB"


def _too_large(needed: int) -> bool:
    """Whether ``needed`` bytes exceed what a solve may take now (see :data:`MIN_REFUSED_BYTES`)."""
    if needed < MIN_REFUSED_BYTES:
        return False
    available = available_memory()
    return available is not None and needed > USABLE_FRACTION * available


def dense_hessian_bytes(dim: int, copies: int = 2) -> int:
    """Bytes of ``copies`` dense ``dim x dim`` float64 matrices (a Hessian and its Cholesky factor)."""
    return int(copies) * 8 * int(dim) ** 2


def check_memory(needed: int, what: str, instead: str | None = None, error=InvalidParameterError) -> None:
    """Raise ``error`` (a drflmodel error) when ``needed`` bytes exceed :data:`USABLE_FRACTION` of
    the memory available; the message names ``what`` needs it, the estimate, the memory available
    and ``instead`` (what fits). Nothing is refused when the available memory is unknown, nor below
    :data:`MIN_REFUSED_BYTES`."""
    if not _too_large(needed):
        return
    available = available_memory()
    hint = f"; {instead}" if instead else ""
    raise error(f"{what} would need about {format_bytes(needed)} but only {format_bytes(available)} of memory "
                f"is available{hint}")


def _rows(problem) -> int:
    sizes = getattr(getattr(problem, "federation", None), "sizes", None)
    return int(sum(sizes)) if sizes is not None else 0


def route_memory_bytes(problem, route: str) -> int | None:
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
    P, n = int(problem.dim), int(problem.n_clients)
    if route == "sqp":
        return dense_hessian_bytes(P, 4) + 8 * (3 * n * P + 3 * n * n)
    if route == "newton":
        return dense_hessian_bytes(P, 2 * n + 3)
    if route == "conic":
        return 24 * _rows(problem) * P + dense_hessian_bytes(P, 3)
    return None


def route_memory_refusal(problem, route: str) -> str | None:
    """``None`` when the dense route ``route`` fits in the memory available, else the reason: its
    estimate (:func:`route_memory_bytes`), the memory available and the route that fits (the
    matrix-free ``method='hessian_free'``, memory :math:`O(NK+Pm)`, where it applies)."""
    needed = route_memory_bytes(problem, route)
    if needed is None or not _too_large(needed):
        return None
    available = available_memory()
    P = int(problem.dim)
    what = (f"route {route!r} would allocate about {format_bytes(needed)} (dense {P} x {P} matrices"
            + (" and the conic model of every row" if route == "conic" else "")
            + f") but only {format_bytes(available)} of memory is available")
    fits = _matrix_free_alternative(problem)
    return f"{what}; {fits}"


def _matrix_free_alternative(problem) -> str:
    """Which route fits instead (for the message of a refusal)."""
    routes = {r.name: r for r in problem.routes()} if hasattr(problem, "routes") else {}
    route = routes.get("hessian_free")
    if route is not None and route.applies(problem) is None:
        from .matrix_free import matrix_free_bytes

        obj = problem.objectives
        need = matrix_free_bytes(_rows(problem), obj.n_features, obj.n_outputs, int(problem.n_clients))
        return (f"method='hessian_free' needs no P x P array (about {format_bytes(need)}: values, gradients "
                f"and Hessian-vector products)")
    return "no route of this problem fits: use fewer parameters or rows, or a machine with more memory"
