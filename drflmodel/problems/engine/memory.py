"""Refuse, by name and before allocating, what would not fit in memory.

A route that is about to allocate something large -- a dense :math:`P\\times P` Hessian
(``problem.structure.hessian_bytes``), one per client, a copy of the rows -- calls
:func:`check_memory` first: when the estimate exceeds the memory available (Linux
``MemAvailable``, else unknown and not checked) it raises
:class:`~drflmodel.errors.MemoryLimitError` naming the allocation, the estimate and what is
available, instead of swapping or being killed.
"""

from __future__ import annotations

from ...errors import InvalidParameterError, MemoryLimitError

__all__ = ["available_memory", "check_memory", "format_bytes"]

#: the share of the available memory one allocation may take (the rest: the process's other arrays)
DEFAULT_FRACTION = 0.8


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable`` of ``/proc/meminfo``), or
    ``None`` where the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def format_bytes(n: float) -> str:
    """``1.5 GiB``-style text for a byte count."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} TiB"


def check_memory(nbytes: int, what: str, available: int | None = None,
                 fraction: float = DEFAULT_FRACTION) -> None:
    """Raise :class:`~drflmodel.errors.MemoryLimitError` when allocating ``nbytes`` for ``what``
    would take more than ``fraction`` of the available memory (``available`` bytes, default
    :func:`available_memory`; nothing is checked when it is unknown)."""
    if nbytes < 0:
        raise InvalidParameterError(f"nbytes must be >= 0; got {nbytes}")
    if not 0 < fraction <= 1:
        raise InvalidParameterError(f"fraction must lie in (0, 1]; got {fraction}")
    free = available_memory() if available is None else int(available)
    if free is None or nbytes <= fraction * free:
        return
    raise MemoryLimitError(
        f"{what} needs about {format_bytes(nbytes)} but {format_bytes(free)} of memory is available "
        f"(at most {fraction:.0%} of it is used for one allocation); refused before allocating",
        what=what, needed=int(nbytes), available=free)
