"""How much memory is available, and refusing by name, before allocating, what would not fit.

The one low-level memory helper of the package (the objectives, the matrix-free operators, the data
loaders and the solve engine's routes call it): :func:`check_memory` raises
:class:`~drflmodel.errors.MemoryLimitError` naming the allocation, its estimate, what is available
(Linux ``MemAvailable``, else the free physical pages ``os.sysconf`` reports, else unknown and not
checked) and what fits instead, rather than swapping or being killed. The routes' own estimates
(which dense route needs how much, from a problem's structure) are in
:mod:`drflmodel.problems.engine.memory`.
"""

from __future__ import annotations

import os

from .errors import InvalidParameterError, MemoryLimitError

#: points at which :class:`~drflmodel.client_oracle.server.FederatedObjectives` keeps the clients' Hessians (each point holds n P x P
#: matrices: 720 MB for 10 clients at P = 3,000); the SQP step needs the current point's and the trial's
HESSIAN_POINTS = 2

#: bytes of full Hessians the server's answer book (:class:`~drflmodel.client_oracle.validation.ClientBook`)
#: keeps per client (the most recent answers': a P x P matrix is 72 MB at
#: P = 3,000, so 64 of them would be 4.6 GB per client). Older records keep their point, value,
#: gradient and products -- the checks against a dropped Hessian are skipped, never decided without
#: it -- and the latest Hessian is always kept whatever its size
HESSIAN_BYTES = 64 * 2**20

__all__ = ["available_memory", "check_memory", "exceeds", "format_bytes", "dense_hessian_bytes",
           "DEFAULT_FRACTION", "MIN_REFUSED_BYTES"]

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


def exceeds(nbytes: int, available: int | None, fraction: float) -> int | None:
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
    free = exceeds(int(nbytes), available, fraction)
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
