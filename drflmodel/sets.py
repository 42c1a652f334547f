"""Client-weight sets (ambiguity sets) :math:`\\Lambda` and penalties :math:`\\psi`.

Every set describes the inner problem :math:`\\max_{\\lambda\\in\\Lambda}\\ \\lambda^\\top f - \\psi(\\lambda)`
of federated DRO (spec scaffpd §1.1) and offers:

* :meth:`WeightSet.worst_case` -- the exact value and a maximizer :math:`\\lambda^\\star`, in numpy
  (sorting, closed forms, or a tiny LP with HiGHS);
* :meth:`WeightSet.support_expr` -- a convex, nondecreasing CVXPY expression of the same value for
  a convex vector expression ``f`` (it may introduce auxiliary variables, so it is valid inside a
  *minimization*); sets with negative weights raise :class:`~drflmodel.errors.NotConvexError`;
* :meth:`WeightSet.project` / :meth:`WeightSet.prox` -- Euclidean projection onto
  :math:`\\Lambda` and :math:`\\operatorname{argmin}_{\\lambda\\in\\Lambda}\\psi(\\lambda)+\\frac{1}{2s}\\|\\lambda-v\\|^2`
  for dual steps;
* :meth:`WeightSet.contains`, :meth:`WeightSet.psi`, :meth:`WeightSet.vertices` (where enumerable).
"""

from __future__ import annotations

import numpy as np
import cvxpy as cp

from ._validation import check_int
from .errors import InvalidParameterError

__all__ = ["WeightSet", "Simplex", "project_simplex"]


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (sort-based, exact)."""
    v = np.asarray(v, dtype=float)
    n = v.size
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, n + 1)
    cond = u - css / k > 0
    rho = k[cond][-1]
    tau = css[cond][-1] / rho
    return np.maximum(v - tau, 0.0)


class WeightSet:
    """Base class of client-weight sets.

    Attributes
    ----------
    n : number of clients.
    nonnegative : ``True`` if :math:`\\Lambda\\subset\\mathbb R^n_{\\ge0}` (then the DRO problem is convex).
    strong_concavity : modulus :math:`\\mu_\\lambda` of strong convexity of :math:`\\psi` (0 for polytopes).
    """

    nonnegative = True
    strong_concavity = 0.0
    name = "weights"

    def __init__(self, n: int):
        self.n = check_int(n, "n", low=1)

    # ---- numpy -------------------------------------------------------------------------
    def psi(self, lam) -> float:
        """The penalty :math:`\\psi(\\lambda)` (0 for plain sets)."""
        return 0.0

    def worst_case(self, f) -> tuple[float, np.ndarray]:
        """``(value, lam)`` with value :math:`=\\max_{\\lambda\\in\\Lambda}\\lambda^\\top f-\\psi(\\lambda)`."""
        raise NotImplementedError

    def contains(self, lam, tol: float = 1e-8) -> bool:
        raise NotImplementedError

    def project(self, v) -> np.ndarray:
        """Euclidean projection onto :math:`\\Lambda`."""
        raise NotImplementedError

    def prox(self, v, step: float) -> np.ndarray:
        """:math:`\\operatorname{argmin}_{\\lambda\\in\\Lambda}\\ \\psi(\\lambda) + \\frac1{2\\,step}\\|\\lambda - v\\|^2`."""
        return self.project(v)

    def vertices(self) -> np.ndarray:
        """The vertices (rows), where enumerable; raises otherwise."""
        raise NotImplementedError(f"{type(self).__name__} has no enumerable vertex list")

    # ---- CVXPY -------------------------------------------------------------------------
    def support_expr(self, f):
        """Convex CVXPY expression of :math:`\\max_{\\lambda\\in\\Lambda}\\lambda^\\top f-\\psi(\\lambda)`."""
        raise NotImplementedError

    # ---- bookkeeping -------------------------------------------------------------------
    def _check_f(self, f) -> np.ndarray:
        f = np.asarray(f, dtype=float)
        if f.shape != (self.n,):
            raise InvalidParameterError(f"loss vector f must have shape ({self.n},); got {f.shape}")
        return f

    def params(self) -> dict:
        return {"n": self.n}

    def to_dict(self) -> dict:
        return {"name": self.name, **{k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                      for k, v in self.params().items()}}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class Simplex(WeightSet):
    """The probability simplex :math:`\\Delta^{n-1}` (AFL, Mohri et al. 2019): :math:`\\max_i f_i`."""

    name = "simplex"

    def worst_case(self, f):
        f = self._check_f(f)
        lam = np.zeros(self.n)
        lam[int(np.argmax(f))] = 1.0
        return float(f.max()), lam

    def contains(self, lam, tol=1e-8):
        lam = np.asarray(lam, float)
        return lam.shape == (self.n,) and bool(np.all(lam >= -tol) and abs(lam.sum() - 1) <= tol)

    def project(self, v):
        return project_simplex(v)

    def vertices(self):
        return np.eye(self.n)

    def support_expr(self, f):
        return cp.max(f)
