"""The solve engine's memory estimates: a route's refusal, by name and before allocating, when what
it would allocate does not fit.

Each route declares its own estimate (:meth:`~.route.Route.memory`, from the problem's
:class:`~.structure.Structure` alone); :func:`route_refusal` compares it with the memory available
and returns a :class:`MemoryReason`, which the route contract turns into a
:class:`~drflmodel.errors.MemoryLimitError` when the route is forced. This module names no family
and no route. Reading the memory available and refusing one allocation by name
(:func:`check_memory`) is the package's low-level helper :mod:`drflmodel._memory`, re-exported here.
"""

from __future__ import annotations

from ... import _memory
from ..._memory import available_memory, check_memory, dense_hessian_bytes, format_bytes
from ...errors import MemoryLimitError

__all__ = ["available_memory", "check_memory", "format_bytes", "dense_hessian_bytes", "route_bytes",
           "route_refusal", "dense_route_bytes", "dense_route_refusal", "matrix_free_route_bytes",
           "memory_reason", "MemoryReason"]


def matrix_free_route_bytes(structure) -> int:
    """Bytes the matrix-free objectives take (:func:`drflmodel.matrix_free.matrix_free_bytes`) for
    a problem of this structure (values, gradients and Hessian-vector products from the rows)."""
    from ...matrix_free import matrix_free_bytes

    K = max(int(structure.n_outputs), 1)
    d = int(structure.dim) // K
    return matrix_free_bytes(int(structure.rows), d, K, int(structure.n_clients), feature_bytes(structure, d))


def feature_bytes(structure, n_features: int) -> int:
    """Bytes per stored feature (8, or 4 for float32 features) from the structure's data bytes over
    its padded rows (:math:`d` features, a label and a mask entry of 8 bytes each per row); 8 when
    they are not known."""
    padded, data = int(getattr(structure, "padded_rows", 0)), int(getattr(structure, "data_bytes", 0))
    if padded <= 0 or data <= 0 or n_features <= 0:
        return 8
    return 4 if (data / padded - 16) / n_features < 6 else 8


def route_bytes(route, structure) -> int | None:
    """The route's own estimate (:meth:`~.route.Route.memory`) of the bytes it allocates beyond the
    data, ``None`` when it gives none."""
    needed = route.memory(structure)
    return None if needed is None else int(needed)


def _named(structure, name: str):
    """The route called ``name`` among those of the problem ``structure`` describes."""
    for route in structure.routes:
        if route.name == name:
            return route
    return None


def dense_route_bytes(structure, route: str) -> int | None:
    """The memory estimate of the problem's route named ``route`` (:meth:`~.route.Route.memory`;
    ``None``: no such route or no estimate). Kept for callers that name a route; new code asks the
    route (:func:`route_bytes`)."""
    found = _named(structure, route)
    return None if found is None else route_bytes(found, structure)


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


def route_refusal(route, structure, instead: str | None = None) -> MemoryReason | None:
    """``None`` when ``route``'s estimate (:meth:`~.route.Route.memory`) fits in the memory
    available or it gives none, else the reason: the estimate, what it counts
    (``route.allocates``), the memory available and ``instead`` (default: the route's
    :meth:`~.route.Route.instead`)."""
    needed = route_bytes(route, structure)
    if needed is None or _memory.exceeds(needed, None, _memory.DEFAULT_FRACTION) is None:
        return None                     # it fits: no message (``instead`` asks every other route)
    return memory_reason(needed, f"route {route.name!r} ({route.allocates.format(P=int(structure.dim))})",
                         route.instead(structure) if instead is None else instead)


def dense_route_refusal(structure, route: str, instead: str | None = None) -> MemoryReason | None:
    """:func:`route_refusal` of the problem's route named ``route`` (``None``: no such route, no
    estimate, or it fits). Kept for callers that name a route."""
    found = _named(structure, route)
    return None if found is None else route_refusal(found, structure, instead)
