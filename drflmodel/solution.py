"""Result of an exact oracle: :class:`Solution`, and the status values.

Every solution carries a **certificate**: an upper bound computed by evaluating the true robust
objective at the returned :math:`\\theta` (numpy, independent of the conic solver) and a lower
bound from a dual argument (a fixed-weight minimization, a conic dual, an SDP relaxation). The
status is derived from the bounds, never copied from the solver:

``"optimal"``             relative gap <= tolerance
``"optimal_within_gap"``  a valid gap larger than the tolerance
``"local"``               a stationary point with a valid lower bound; no global claim
``"infeasible"``          the problem has no feasible point
``"failed"``              no solver produced an answer that passed its certificate
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Solution", "STATUSES", "DEFAULT_GAP_TOL", "ORACLE_GAP_TOL", "relative_gap", "status_from_gap", "jsonable"]

STATUSES = ("optimal", "optimal_within_gap", "local", "infeasible", "failed")

#: default relative gap below which a certified solution is called "optimal"
DEFAULT_GAP_TOL = 1e-6

#: the relative gap the package's own verifications ask of their oracle (``problem.solve(gap_tol=...)``):
#: ``method="auto"`` stops at the gap it is asked, and a distance or an objective error verified at
#: 1e-6 to 1e-8 needs a reference whose certificate bounds its own error well below that
#: (for ``dist_theta_sq`` and a :math:`\\mu`-strongly convex objective :math:`2(U-L)/\\mu`)
ORACLE_GAP_TOL = 1e-10


def relative_gap(lower: float, upper: float) -> float:
    """:math:`(U - L) / \\max(1, |U|)`; ``inf`` if either bound is missing."""
    if lower is None or upper is None or not np.isfinite(lower) or not np.isfinite(upper):
        return float("inf")
    return float((upper - lower) / max(1.0, abs(upper)))


def status_from_gap(lower: float, upper: float, tol: float = DEFAULT_GAP_TOL) -> str:
    """``"optimal"`` if the relative gap is within ``tol`` (a small negative gap from solver
    round-off counts as closed), ``"optimal_within_gap"`` if finite, ``"failed"`` otherwise."""
    g = relative_gap(lower, upper)
    if not np.isfinite(g):
        return "failed"
    if g < -max(tol, 1e-6):
        # lower bound above the upper bound beyond round-off: one of the two is wrong
        return "failed"
    return "optimal" if g <= tol else "optimal_within_gap"


def jsonable(obj: Any) -> Any:
    """Convert numpy arrays / scalars (recursively) into JSON-serializable Python objects."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if np.isfinite(v) else (None if np.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if hasattr(obj, "to_dict"):
        return jsonable(obj.to_dict())
    return repr(obj)


@dataclass
class Solution:
    """The certified answer of an oracle (one per :meth:`Problem.solve` call).

    Attributes
    ----------
    theta : the model :math:`\\theta^\\star`.
    weights : worst-case client weights :math:`\\lambda^\\star` (indexed like ``federation.clients``),
        or ``None`` where the formulation has none.
    client_losses : :math:`f_i(\\theta^\\star)`.
    value : the robust objective at :math:`\\theta^\\star` (equals ``upper_bound``).
    lower_bound, upper_bound : the certificate's bounds; ``gap = upper - lower`` (absolute) and
        ``relative_gap = gap / max(1, |upper|)``.
    status : one of :data:`STATUSES`.
    certificate : the name of the method that produced the lower bound.
    duals : named dual quantities (multipliers, :math:`\\eta^\\star`, ...).
    info : anything else: ``method`` (the solve route that answered), ``attempts`` (every solver
        attempt; the one the user named carries ``"requested": True``), ``route_attempts``, solver
        name, times, convexity checks, indices, ...

    Modelled on SciPy's ``OptimizeResult`` (one result object with the answer, a status and the
    diagnostics of the run), but a dataclass with fixed attributes: there is deliberately no
    dict-style access (``sol["theta"]``) -- a second spelling of the same fields; :meth:`to_dict`
    gives the mapping (JSON-ready).
    """

    theta: np.ndarray | None
    weights: np.ndarray | None
    client_losses: np.ndarray | None
    value: float
    lower_bound: float
    upper_bound: float
    status: str
    certificate: str
    duals: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    problem: Any = field(default=None, repr=False, compare=False)

    @property
    def gap(self) -> float:
        """Absolute certificate gap :math:`U - L`."""
        if self.lower_bound is None or self.upper_bound is None:
            return float("inf")
        return float(self.upper_bound - self.lower_bound)

    @property
    def relative_gap(self) -> float:
        return relative_gap(self.lower_bound, self.upper_bound)

    @property
    def certified(self) -> bool:
        """``True`` iff the status is ``"optimal"`` (the gap closed within tolerance)."""
        return self.status == "optimal"

    def to_dict(self) -> dict:
        """JSON-serializable dictionary (numpy arrays become lists)."""
        return jsonable({
            "theta": self.theta,
            "weights": self.weights,
            "client_losses": self.client_losses,
            "value": self.value,
            "lower_bound": self.lower_bound,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "status": self.status,
            "certificate": self.certificate,
            "duals": self.duals,
            "info": self.info,
        })

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def summary(self) -> str:
        """One line: status, value, gap and certificate."""
        return (f"{self.status}: value={self.value:.8g} "
                f"[L={self.lower_bound:.8g}, U={self.upper_bound:.8g}, rel.gap={self.relative_gap:.2e}] "
                f"certificate={self.certificate}")
