"""Client-weight sets (ambiguity sets) :math:`\\Lambda` and penalties :math:`\\psi`.

Every set describes the inner problem :math:`\\max_{\\lambda\\in\\Lambda}\\ \\lambda^\\top f - \\psi(\\lambda)`
of federated DRO (Scaff-PD paper, problem (1.1) and Appendix B) and offers:

* :meth:`WeightSet.worst_case` -- the exact value and a maximizer :math:`\\lambda^\\star`, in numpy
  (sorting, closed forms, or a tiny convex problem);
* :meth:`WeightSet.support_expr` -- a convex, nondecreasing CVXPY expression of the same value for
  a convex vector expression ``f`` (it may introduce auxiliary variables, so it is valid inside a
  *minimization*); sets with negative weights raise :class:`~drflmodel.errors.NotConvexError`;
* :meth:`WeightSet.project` / :meth:`WeightSet.prox` -- Euclidean projection onto
  :math:`\\Lambda` and :math:`\\operatorname{argmin}_{\\lambda\\in\\Lambda}\\psi(\\lambda)+\\frac{1}{2s}\\|\\lambda-v\\|^2`
  for dual steps;
* :meth:`WeightSet.contains`, :meth:`WeightSet.psi`, :meth:`WeightSet.vertices` (where enumerable);
* :meth:`WeightSet.constraints` -- a CVXPY description ``var in Lambda`` (list of constraints)
  and :meth:`WeightSet.psi_expr` -- :math:`\\psi` as a convex CVXPY expression.

The sets (constructors are a public contract):

=====================================  ==============================================================
``Simplex(n)``                         :math:`\\Delta^{n-1}` (AFL)
``CVaR(n, alpha)``                     :math:`\\Delta_\\alpha=\\{\\lambda\\in\\Delta:\\lambda_i\\le 1/(\\alpha n)\\}`
``ChiSquare(n, rho)``                  :math:`\\Delta` with :math:`\\psi=\\frac{\\rho}{2n}\\sum_i(n\\lambda_i-1)^2`
``LpBall(center, radius, p)``          :math:`\\{\\lambda\\in\\Delta:\\|\\lambda-c\\|_p\\le r\\}`
``HCVaR(p, alpha)``                    :math:`\\{\\lambda\\in\\Delta:\\lambda_i\\le p_i/\\alpha_i\\}` (FAFL's :math:`Q_\\alpha`)
``QFFL(n, q)``                         :math:`\\mathbb R^n_{\\ge0}` with :math:`\\psi_q=\\frac q{q+1}\\sum_i\\lambda_i^{1+1/q}`
``Integrated(A, B, phi)``              :math:`\\Lambda_\\varphi(A,B)=\\{(a-\\varphi b)/(1-\\varphi)\\}`
``KLPenalty(n, tau)``                  :math:`\\Delta` with :math:`\\psi=\\tau\\sum_i\\lambda_i\\log(n\\lambda_i)` (tilted risk)
=====================================  ==============================================================

Parameters that users sweep (``alpha`` of CVaR/HCVaR, ``rho`` of ChiSquare, ``radius`` of
LpBall) live in ``cp.Parameter`` objects, so :meth:`support_expr` and :meth:`constraints` stay
DPP and a sweep (``set_alpha``, ``set_rho``, ``set_radius``) re-solves without recompiling.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
from ._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it

from ._validation import as_finite_array, as_real_array, check_int, check_probability_vector, check_real
from .errors import InvalidDataError, InvalidParameterError, NotConvexError, SolverError

__all__ = [
    "WeightSet",
    "Simplex",
    "CVaR",
    "ChiSquare",
    "LpBall",
    "HCVaR",
    "QFFL",
    "Integrated",
    "KLPenalty",
    "WEIGHT_SET_NAMES",
    "canonical_name",
    "from_name",
    "options_of",
    "option_mismatch",
    "project_simplex",
    "project_box_simplex",
]

#: tolerances of the small CVXPY solves done inside this module (Clarabel)
_CLARABEL_OPTS = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "max_iter": 500}
#: the tolerances of the sets' internal problems (tighter than the oracles' documented ones)
_SUBPROBLEM_TOLERANCES = {"CLARABEL": _CLARABEL_OPTS, "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 100_000}}
#: largest vertex list we agree to build
_MAX_VERTICES = 200_000


# ======================================================================================
# exact numpy kernels
# ======================================================================================
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


def project_box_simplex(v, lower, upper) -> np.ndarray:
    """Euclidean projection onto :math:`\\{\\lambda: l\\le\\lambda\\le u,\\ \\mathbf 1^\\top\\lambda=1\\}`.

    The projection is :math:`\\lambda_i=\\operatorname{clip}(v_i-t,l_i,u_i)` where the scalar
    :math:`t` solves :math:`g(t)=\\sum_i\\operatorname{clip}(v_i-t,l_i,u_i)=1` (for the capped
    simplex, the dual step of the Scaff-PD paper's Algorithm 1 in closed form). :math:`g` is continuous, nonincreasing and piecewise linear; :math:`t` is
    bracketed by bisection until the linear piece is identified, then computed in closed form on
    that piece (exact up to rounding). Requires :math:`\\sum l\\le1\\le\\sum u`.
    """
    v = np.asarray(v, float)
    lo_b = np.broadcast_to(np.asarray(lower, float), v.shape)
    up_b = np.broadcast_to(np.asarray(upper, float), v.shape)

    def g(t):
        return np.clip(v - t, lo_b, up_b).sum()

    lo = float(np.min(v - up_b)) - 1.0   # g(lo) = sum(upper) >= 1
    hi = float(np.max(v - lo_b)) + 1.0   # g(hi) = sum(lower) <= 1
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if g(mid) > 1.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(lo), abs(hi)):
            break
    t = 0.5 * (lo + hi)
    # closed form on the identified linear piece: coordinates strictly inside their box are free
    x = v - t
    at_low = x <= lo_b
    at_up = x >= up_b
    free = ~(at_low | at_up)
    if free.any():
        t = (v[free].sum() + lo_b[at_low].sum() + up_b[at_up].sum() - 1.0) / free.sum()
    return np.clip(v - t, lo_b, up_b)


def _box_simplex_max(f, lower, upper):
    """Greedy maximizer of :math:`f^\\top\\lambda` over :math:`\\{l\\le\\lambda\\le u,\\ \\sum\\lambda=1\\}`.

    Start at :math:`\\lambda=l` and pour the remaining mass :math:`1-\\sum l` into the clients in
    decreasing order of :math:`f_i` up to their caps (for the CVaR set this is the exact
    fractional mean of the top :math:`\\alpha`-fraction). Ties are broken by index
    (stable sort). Also returns a minimizer :math:`\\eta^\\star` of the LP dual
    :math:`\\eta+\\sum_i[l_i(f_i-\\eta)+(u_i-l_i)(f_i-\\eta)_+]`: the loss of the client at which
    the mass is exhausted.
    """
    f = np.asarray(f, float)
    lam = np.array(lower, float, copy=True)
    width = np.asarray(upper, float) - lam
    remaining = 1.0 - lam.sum()
    order = np.argsort(-f, kind="stable")
    w = width[order]
    before = np.cumsum(w) - w
    add = np.clip(remaining - before, 0.0, w)
    lam[order] += add
    if remaining <= 0:
        eta = float(f.max())
    else:
        cum = before + w
        idx = int(np.searchsorted(cum, remaining * (1 - 1e-12), side="left"))
        idx = min(idx, f.size - 1)
        eta = float(f[order[idx]])
    return float(lam @ f), lam, eta


def _box_simplex_vertices(lower, upper) -> np.ndarray:
    """All vertices of :math:`\\{l\\le\\lambda\\le u,\\ \\sum\\lambda=1\\}` (rows, deduplicated).

    A vertex has :math:`n-1` active bounds, so every coordinate sits at a bound except at most one
    (the "fractional" one), which is fixed by :math:`\\sum\\lambda=1`. Enumerates the :math:`2^n`
    upper/lower patterns (vectorized); only for small ``n``.
    """
    lower = np.asarray(lower, float)
    upper = np.asarray(upper, float)
    n = lower.size
    if n > 16:
        raise NotImplementedError(f"vertex enumeration of a general capped simplex needs n <= 16; got n={n}")
    masks = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)   # at upper
    base = np.where(masks, upper, lower)                      # (m, n)
    tot = base.sum(axis=1)                                     # (m,)
    rows = []
    for j in range(n):
        x = 1.0 - (tot - base[:, j])                           # value of the free coordinate j
        ok = (x >= lower[j] - 1e-12) & (x <= upper[j] + 1e-12)
        if ok.any():
            V = base[ok].copy()
            V[:, j] = np.clip(x[ok], lower[j], upper[j])
            rows.append(V)
    V = np.concatenate(rows, axis=0)
    return _unique_rows(V)


def _l1_simplex_vertices(c, r) -> np.ndarray:
    """All vertices of :math:`\\{\\lambda\\in\\Delta:\\|\\lambda-c\\|_1\\le r\\}` (rows, deduplicated).

    (Derived here.) At a vertex every coordinate is at 0, at :math:`c_i` (a kink of the ball) or free;
    :math:`\\mathbf 1^\\top\\lambda=1` and :math:`\\|\\lambda-c\\|_1=r` leave at most two free
    coordinates, one up (:math:`u`) and one down (:math:`d`). Solving the two equations: with
    :math:`Z` the set put to 0, :math:`\\lambda_u=c_u+r/2`, :math:`\\lambda_d=c_d-(r/2-c(Z))`,
    valid iff :math:`0\\le r/2-c(Z)\\le c_d`. If the ball is inactive the vertex is a simplex
    vertex :math:`e_u` with :math:`2(1-c_u)\\le r`. Enumerates all :math:`Z` (``n <= 14``).
    """
    c = np.asarray(c, float)
    n = c.size
    if n > 14:
        raise NotImplementedError(f"vertex enumeration of the l1-ball/simplex intersection needs n <= 14; got n={n}")
    h = r / 2.0
    rows = [np.eye(n)[u][None, :] for u in range(n) if 2.0 * (1.0 - c[u]) <= r + 1e-12]
    masks = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)      # Z
    deficit = h - masks @ c
    for u in range(n):
        for d in range(n):
            if d == u:
                continue
            ok = ~masks[:, u] & ~masks[:, d] & (deficit >= -1e-12) & (deficit <= c[d] + 1e-12)
            if ok.any():
                X = np.where(masks[ok], 0.0, c[None, :])
                X[:, u] = c[u] + h
                X[:, d] = np.maximum(c[d] - deficit[ok], 0.0)
                rows.append(X)
    return _unique_rows(np.concatenate(rows, axis=0))


def _unique_rows(V, decimals: int = 12) -> np.ndarray:
    _, idx = np.unique(np.round(V, decimals), axis=0, return_index=True)
    return V[np.sort(idx)]


def _solve(problem: cp.Problem, what: str):
    """Solve a small internal CVXPY problem through the package's solver sequence (Clarabel at
    tight tolerances first, then the other installed solvers; SCS at 1e-9); its optimal value, or
    :class:`~drflmodel.errors.SolverError` naming ``what`` and every attempt."""
    from ._solver_sequence import failure_reason, solve_with_fallback

    attempts = []
    if solve_with_fallback(problem, tolerances=_SUBPROBLEM_TOLERANCES, attempts=attempts) is None:
        raise SolverError(f"{what}: {failure_reason(attempts)}")
    return problem.value


def _check_vector(v, n: int, name: str) -> np.ndarray:
    arr = as_finite_array(v, name)
    if arr.shape != (n,):
        raise InvalidParameterError(f"{name} must have shape ({n},); got {arr.shape}")
    return arr


# ======================================================================================
# base class
# ======================================================================================
class _DPPParameter:
    """A set's ``cp.Parameter`` (a DPP sweep's handle), made on first access -- so a set whose
    routes run no CVXPY model never imports CVXPY -- and given the value of the set's numpy
    attribute ``value_attr`` at every access (one source of truth: ``set_alpha`` writes numpy)."""

    def __init__(self, value_attr: str, name: str, vector: bool = False):
        self.value_attr, self.name, self.vector = value_attr, name, vector

    def __set_name__(self, owner, attr):
        self.slot = "_" + attr

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        param = obj.__dict__.get(self.slot)
        if param is None:
            param = cp.Parameter((obj.n,) if self.vector else (), nonneg=True, name=self.name)
            obj.__dict__[self.slot] = param
        param.value = getattr(obj, self.value_attr)
        return param

    def sync(self, obj) -> None:
        """Give the parameter, if made, the numpy value (a compiled problem reads it in place)."""
        param = obj.__dict__.get(self.slot)
        if param is not None:
            param.value = getattr(obj, self.value_attr)


class WeightSet:
    """Base class of client-weight sets.

    Attributes
    ----------
    n : number of clients.
    nonnegative : ``True`` if :math:`\\Lambda\\subset\\mathbb R^n_{\\ge0}` (then the DRO problem is convex).
    in_simplex : ``True`` if :math:`\\Lambda\\subset\\Delta^{n-1}`.
    polytope : ``True`` if :math:`\\Lambda` is a polytope and :math:`\\psi\\equiv0` (usable in
        :class:`Integrated`).
    strong_concavity : modulus :math:`\\mu_\\lambda` of strong convexity of :math:`\\psi` (0 for polytopes).
    """

    nonnegative = True
    in_simplex = True
    polytope = True
    strong_concavity = 0.0
    name = "weights"

    def __init__(self, n: int):
        self.n = check_int(n, "n", low=1)

    # ---- numpy -------------------------------------------------------------------------
    def single_point(self) -> np.ndarray | None:
        """The one point of :math:`\\Lambda` when the set is a single point (one client in the
        simplex: ERM), else ``None``: a fixed weight set, whose routes need no weight step."""
        return np.ones(1) if self.n == 1 and self.in_simplex else None

    def psi(self, lam) -> float:
        """The penalty :math:`\\psi(\\lambda)` (0 for plain sets)."""
        return 0.0

    def box_bounds(self):
        """``(lower, upper)`` (arrays of length :math:`n`) when the set is
        :math:`\\{l\\le\\lambda\\le u,\\ \\mathbf 1^\\top\\lambda=1\\}` with :math:`\\psi=0` (the simplex,
        CVaR, HCVaR), else ``None``."""
        return None

    def support_is_smooth(self) -> bool:
        """Whether the support function :math:`\\sigma_\\Lambda(f)=\\max_{\\lambda\\in\\Lambda}\\lambda^\\top f-\\psi(\\lambda)`
        is differentiable in :math:`f` (a strongly concave or strictly concave :math:`-\\psi`: the
        :math:`\\chi^2` set with :math:`\\rho>0`, q-FFL), so a smooth route needs no smoothing of it."""
        return False

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
        check_real(step, "step", low=0, low_open=True)
        return self.project(v)

    def vertices(self) -> np.ndarray:
        """The vertices (rows), where enumerable; raises otherwise."""
        raise NotImplementedError(f"{type(self).__name__} has no enumerable vertex list")

    def max_mass(self, masks) -> np.ndarray:
        """:math:`\\max_{\\lambda\\in\\Lambda}\\sum_{i\\in S}\\lambda_i` for each row ``S`` of a boolean
        ``(m, n)`` array (the support function at indicator vectors; used for
        :meth:`Integrated.norm1`). Generic version: one :meth:`worst_case` per row."""
        masks = np.atleast_2d(np.asarray(masks, bool))
        pieces = self.mass_pieces()
        if pieces is not None:
            G, h = pieces
            return np.min(masks.astype(float) @ G.T + h[None, :], axis=1)
        return np.array([self.worst_case(m.astype(float))[0] for m in masks])

    def mass_pieces(self):
        """``(G, h)`` with :math:`\\max_{\\lambda\\in\\Lambda}\\sum_{i\\in S}\\lambda_i=\\min_k(G_k^\\top\\mathbf 1_S+h_k)`
        for every :math:`S` (a min of modular functions), or ``None`` if no such form is known.
        Used by :meth:`max_mass` and by the exact MILP for :meth:`Integrated.norm1`."""
        return None

    # ---- CVXPY -------------------------------------------------------------------------
    def support_expr(self, f):
        """Convex CVXPY expression of :math:`\\max_{\\lambda\\in\\Lambda}\\lambda^\\top f-\\psi(\\lambda)`."""
        raise NotImplementedError

    def constraints(self, var) -> list:
        """CVXPY constraints expressing ``var`` :math:`\\in\\Lambda` (may add auxiliary variables)."""
        raise NotImplementedError(f"{type(self).__name__} has no constraint description")

    def psi_expr(self, var):
        """:math:`\\psi` as a convex CVXPY expression of ``var``."""
        return cp.Constant(0.0)

    # ---- bookkeeping -------------------------------------------------------------------
    def _check_f(self, f) -> np.ndarray:
        f = np.asarray(f, dtype=float)
        if f.shape != (self.n,):
            raise InvalidParameterError(f"loss vector f must have shape ({self.n},); got {f.shape}")
        if not np.all(np.isfinite(f)):
            raise InvalidDataError("loss vector f contains NaN or infinite values")
        return f

    def _check_expr(self, f):
        if isinstance(f, (list, tuple)) and any(isinstance(e, cp.Expression) for e in f):
            f = cp.hstack([cp.reshape(e, (), order="C") if isinstance(e, cp.Expression) else e for e in f])
        if not isinstance(f, cp.Expression):
            f = cp.Constant(np.asarray(f, float))
        if f.shape != (self.n,):
            raise InvalidParameterError(f"loss expression f must have shape ({self.n},); got {f.shape}")
        return f

    def params(self) -> dict:
        return {"n": self.n}

    def to_dict(self) -> dict:
        return {"name": self.name, **{k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                      for k, v in self.params().items()}}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={(v.tolist() if isinstance(v, np.ndarray) else v)!r}"
                         for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class _BoxSimplexSet(WeightSet):
    """Sets of the form :math:`\\{\\lambda: l\\le\\lambda\\le u,\\ \\mathbf 1^\\top\\lambda=1\\}`
    (simplex, CVaR, HCVaR, :math:`\\ell_\\infty`-ball).  Subclasses provide ``_lower``/``_upper``."""

    def _bounds(self):
        return np.broadcast_to(self._lower, (self.n,)), np.broadcast_to(self._upper, (self.n,))

    def box_bounds(self):
        return self._bounds()

    def single_point(self) -> np.ndarray | None:
        """The one point when the caps close the simplex (upper caps summing to 1, e.g. ``HCVaR``
        at level 1 or ``CVaR`` with :math:`\\alpha=1`, the uniform weights; or lower bounds summing
        to 1), else ``None`` (up to :math:`4n` units of round-off in the sums)."""
        point = super().single_point()
        if point is not None:
            return point
        lower, upper = self._bounds()
        slack = 4 * self.n * np.finfo(float).eps
        if float(np.sum(upper)) <= 1.0 + slack or float(np.sum(lower)) >= 1.0 - slack:
            return np.asarray(self.worst_case(np.zeros(self.n))[1], float)
        return None

    def worst_case(self, f, return_eta: bool = False):
        """Exact greedy maximizer (sort). With ``return_eta=True`` also the dual :math:`\\eta^\\star`."""
        f = self._check_f(f)
        value, lam, eta = _box_simplex_max(f, *self._bounds())
        return (value, lam, eta) if return_eta else (value, lam)

    def contains(self, lam, tol=1e-8):
        lam = np.asarray(lam, float)
        if lam.shape != (self.n,):
            return False
        lo, up = self._lower, self._upper
        if np.ndim(lo) == 0 and np.ndim(up) == 0:        # scalar caps (the simplex): no broadcast arrays
            return bool(lam.min() >= lo - tol and lam.max() <= up + tol and abs(lam.sum() - 1) <= tol)
        lo, up = self._bounds()
        return bool(np.all(lam >= lo - tol) and np.all(lam <= up + tol) and abs(lam.sum() - 1) <= tol)

    def project(self, v):
        v = _check_vector(v, self.n, "v")
        return project_box_simplex(v, *self._bounds())

    def vertices(self):
        return _box_simplex_vertices(*self._bounds())

    def mass_pieces(self):
        """:math:`\\max\\sum_{i\\in S}\\lambda_i=\\min(u(S),\\ 1-l(S^c))=\\min(u^\\top\\mathbf 1_S,\\ l^\\top\\mathbf 1_S+1-\\sum l)`."""
        lo, up = self._bounds()
        return np.vstack([up, lo]), np.array([0.0, 1.0 - lo.sum()])

    def constraints(self, var):
        lo, up = self._bounds()
        return [var >= lo, var <= up, cp.sum(var) == 1]

    def support_expr(self, f):
        """LP dual :math:`\\min_\\eta\\ \\eta+\\sum_i[l_i(f_i-\\eta)+(u_i-l_i)(f_i-\\eta)_+]`."""
        f = self._check_expr(f)
        lo, up = self._bounds()
        eta = cp.Variable()
        return eta + lo @ (f - eta) + (up - lo) @ cp.pos(f - eta)


# ======================================================================================
# Simplex
# ======================================================================================
class Simplex(_BoxSimplexSet):
    """The probability simplex :math:`\\Delta^{n-1}` (AFL, Mohri et al. 2019): :math:`\\max_i f_i`."""

    name = "simplex"
    _lower = 0.0
    _upper = 1.0

    def worst_case(self, f, return_eta: bool = False):
        f = self._check_f(f)
        lam = np.zeros(self.n)
        i = int(np.argmax(f))
        lam[i] = 1.0
        return (float(f[i]), lam, float(f[i])) if return_eta else (float(f[i]), lam)

    def project(self, v):
        return project_simplex(_check_vector(v, self.n, "v"))

    def vertices(self):
        return np.eye(self.n)

    def mass_pieces(self):
        """:math:`\\max\\sum_{i\\in S}\\lambda_i=\\min(|S|,1)`."""
        return np.vstack([np.ones(self.n), np.zeros(self.n)]), np.array([0.0, 1.0])

    def constraints(self, var):
        return [var >= 0, cp.sum(var) == 1]

    def support_expr(self, f):
        return cp.max(self._check_expr(f))


# ======================================================================================
# CVaR
# ======================================================================================
class CVaR(_BoxSimplexSet):
    """Capped simplex :math:`\\Delta_\\alpha=\\{\\lambda\\in\\Delta:\\lambda_i\\le1/(\\alpha n)\\}`, :math:`\\alpha\\in[1/n,1]`.

    The value :math:`\\max_{\\lambda\\in\\Delta_\\alpha}\\lambda^\\top f` is the mean of the top
    :math:`\\alpha` fraction of losses with the exact fractional convention (relative-fairness
    paper, Example 1): with :math:`k=\\lfloor\\alpha n\\rfloor`,
    :math:`\\frac1{\\alpha n}(\\sum_{j\\le k}f_{(j)}+(\\alpha n-k)f_{(k+1)})`; equivalently the
    Rockafellar--Uryasev form :math:`\\min_\\eta\\ \\eta+\\frac1{\\alpha n}\\sum_i(f_i-\\eta)_+`
    (Rockafellar and Uryasev, 2000). :math:`\\alpha=1/n` is the simplex (AFL), :math:`\\alpha=1` the uniform
    average. The cap :math:`1/(\\alpha n)` is the ``cp.Parameter`` ``cap_param`` (DPP sweeps via
    :meth:`set_alpha`).
    """

    name = "cvar"
    _lower = 0.0

    def __init__(self, n: int, alpha: float):
        super().__init__(n)
        self.set_alpha(alpha)

    def _validate_alpha(self, alpha) -> float:
        a = check_real(alpha, "alpha")
        lo = 1.0 / self.n
        if not (lo * (1 - 1e-12) <= a <= 1.0):
            raise InvalidParameterError(
                f"alpha must lie in [1/n, 1] = [{lo:.6g}, 1] for n={self.n} (alpha > 1 makes the "
                f"CVaR set empty; alpha < 1/n puts every cap 1/(alpha n) above 1, the simplex of "
                f"alpha = 1/n under another name); got {alpha!r}")
        return min(max(a, lo), 1.0)

    def set_alpha(self, alpha: float) -> None:
        """Change :math:`\\alpha` (numpy side and the DPP parameter ``cap_param``)."""
        self.alpha = self._validate_alpha(alpha)
        self.cap = 1.0 / (self.alpha * self.n)
        CVaR.cap_param.sync(self)

    @property
    def _upper(self):
        return min(self.cap, 1.0)

    cap_param = _DPPParameter("cap", "cvar_cap")

    def vertices(self):
        """Vertices of :math:`\\Delta_\\alpha`: :math:`k=\\lfloor\\alpha n\\rfloor` coordinates at the cap,
        one at :math:`1-k/(\\alpha n)` (if positive), the rest 0."""
        n, cap = self.n, self.cap
        an = self.alpha * n
        k = int(math.floor(an + 1e-9))
        k = min(k, n)
        rem = 1.0 - k * cap
        if rem <= 1e-12:
            k = int(round(an))
            count = math.comb(n, k)
        else:
            count = math.comb(n, k) * (n - k)
        if count > _MAX_VERTICES:
            raise NotImplementedError(f"CVaR(n={n}, alpha={self.alpha}) has {count} vertices; too many to list")
        rows = []
        for S in itertools.combinations(range(n), k):
            base = np.zeros(n)
            base[list(S)] = cap
            if rem <= 1e-12:
                rows.append(base)
            else:
                for j in range(n):
                    if j not in S:
                        r = base.copy()
                        r[j] = rem
                        rows.append(r)
        return np.array(rows)

    def constraints(self, var):
        return [var >= 0, var <= self.cap_param, cp.sum(var) == 1]

    def support_expr(self, f):
        """:math:`\\min_\\eta\\ \\eta+\\frac1{\\alpha n}\\sum_i(f_i-\\eta)_+` (Rockafellar--Uryasev), DPP in :math:`\\alpha`."""
        f = self._check_expr(f)
        eta = cp.Variable(name="cvar_eta")
        return eta + self.cap_param * cp.sum(cp.pos(f - eta))

    def params(self):
        return {"n": self.n, "alpha": self.alpha}


# ======================================================================================
# HCVaR (FAFL)
# ======================================================================================
class HCVaR(_BoxSimplexSet):
    """FAFL's set :math:`Q_\\alpha` in :math:`\\lambda=q\\circ p` form (FAFL paper, Definition 1):
    :math:`\\{\\lambda\\in\\Delta:\\lambda_i\\le p_i/\\alpha_i\\}` with :math:`\\alpha_i\\in[p_i,1]`.

    The value is :math:`f_\\alpha=\\min_\\eta\\ \\eta+\\sum_i\\frac{p_i}{\\alpha_i}(f_i-\\eta)_+`
    (FAFL paper, Lemma 1, eq. (2)), computed exactly by a greedy algorithm, which also gives
    :math:`\\eta^\\star` (``worst_case(f, return_eta=True)``). :math:`\\alpha_i=p_i` is the simplex
    (AFL), :math:`\\alpha_i=1` the :math:`p`-weighted average, equal :math:`\\alpha_i=\\chi` with
    uniform :math:`p` is ``CVaR(n, chi)``. ``tau`` is :math:`\\tau_\\alpha=\\sum_ip_i/\\alpha_i`.

    ``clip_alpha=True`` (off by default) accepts :math:`\\alpha_i<p_i` and replaces it by
    :math:`p_i` (the cap :math:`p_i/\\alpha_i\\ge1` is then vacuous, so
    the set and every value are unchanged); the original values are kept in ``alpha_given``.
    """

    name = "hcvar"
    _lower = 0.0

    def __init__(self, p, alpha, clip_alpha: bool = False):
        p = check_probability_vector(p, "p")
        super().__init__(p.size)
        self.p = p
        self.clip_alpha = bool(clip_alpha)
        self.set_alpha(alpha)

    def set_alpha(self, alpha) -> None:
        """Change :math:`\\alpha` (numpy side and the DPP parameter ``cap_param``)."""
        a = as_real_array(alpha, "alpha")
        if a.ndim == 0:
            a = np.full(self.n, float(a))
        if a.shape != (self.n,):
            raise InvalidParameterError(f"alpha must be a scalar or have shape ({self.n},); got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise InvalidParameterError("alpha contains NaN or infinite values")
        self.alpha_given = a.copy()
        for i in range(self.n):
            lo = self.p[i]
            if a[i] > 1.0 or a[i] <= 0.0 or (a[i] < lo * (1 - 1e-12) and not self.clip_alpha):
                raise InvalidParameterError(
                    f"alpha[{i}] must lie in [p[{i}], 1] = [{lo:.6g}, 1] (and be > 0); got {a[i]!r}"
                    + ("" if a[i] > 1.0 or a[i] <= 0 else
                       "; pass clip_alpha=True to replace alpha_i < p_i by p_i (value unchanged)"))
        if self.clip_alpha and np.any(a < self.p):
            idx = np.flatnonzero(a < self.p).tolist()
            warnings.warn(f"HCVaR: alpha_i < p_i for clients {idx}; replaced by p_i (clip_alpha=True). The cap "
                          "p_i/alpha_i >= 1 is vacuous there, so the set and every value are unchanged.",
                          UserWarning, stacklevel=3)
        self.alpha = np.maximum(a, self.p)
        self.caps = self.p / self.alpha
        HCVaR.cap_param.sync(self)

    @property
    def _upper(self):
        return np.minimum(self.caps, 1.0)

    cap_param = _DPPParameter("caps", "hcvar_caps", vector=True)

    @property
    def tau(self) -> float:
        """:math:`\\tau_\\alpha=\\sum_i p_i/\\alpha_i\\ (\\ge1)`."""
        return float(self.caps.sum())

    tau_alpha = tau

    def constraints(self, var):
        return [var >= 0, var <= self.cap_param, cp.sum(var) == 1]

    def support_expr(self, f):
        """:math:`\\min_\\eta\\ \\eta+\\sum_i\\frac{p_i}{\\alpha_i}(f_i-\\eta)_+` (FAFL paper, eq. (2)), DPP in :math:`\\alpha`."""
        f = self._check_expr(f)
        eta = cp.Variable(name="hcvar_eta")
        return eta + self.cap_param @ cp.pos(f - eta)

    def params(self):
        d = {"p": self.p, "alpha": self.alpha}
        if self.clip_alpha:
            d["clip_alpha"] = True
        return d


# ======================================================================================
# chi-square penalty
# ======================================================================================
class _PenalizedSimplexSet(WeightSet):
    r"""A weight set whose feasible points are the whole simplex :math:`\Delta_n` and whose shape is in
    its penalty :math:`\psi` (:class:`ChiSquare`, :class:`KLPenalty`): membership and projection are
    the simplex's."""

    def contains(self, lam, tol=1e-8):
        return Simplex(self.n).contains(lam, tol)

    def project(self, v):
        return project_simplex(_check_vector(v, self.n, "v"))


class ChiSquare(_PenalizedSimplexSet):
    """Simplex with the :math:`\\chi^2` penalty :math:`\\psi(\\lambda)=\\frac{\\rho}{2n}\\sum_i(n\\lambda_i-1)^2
    =\\frac{\\rho n}2\\|\\lambda-\\mathbf 1/n\\|^2` (Scaff-PD paper, (B.2)), :math:`\\rho\\ge0`.

    * ``worst_case``: :math:`\\lambda^\\star=\\Pi_\\Delta(\\mathbf 1/n+f/(\\rho n))`, i.e.
      :math:`\\lambda^\\star_i=\\frac1n(1+(f_i-\\eta)/\\rho)_+` with :math:`\\eta` fixed by
      :math:`\\sum\\lambda=1` (sort-based, exact); :math:`\\rho=0`: :math:`\\max_i f_i`.
    * ``support_expr``: the exact dual (derived by Lagrangian duality over the simplex),
      :math:`\\min_\\eta\\ \\eta+\\frac\\rho{2n}\\sum_i(1+\\frac{f_i-\\eta}\\rho)_+^2-\\frac\\rho2`,
      written after the shift :math:`\\eta=\\eta'+\\rho` as
      :math:`\\min_{\\eta'}\\ \\eta'+\\frac\\rho2+\\frac1{2n\\rho}\\sum_i(f_i-\\eta')_+^2`, which is DPP in
      :math:`\\rho` (parameters ``rho_param`` and ``inv_rho_param``). With :math:`\\rho=0` at the
      time of the call it is ``cp.max(f)``; an expression built for :math:`\\rho>0` cannot be swept
      to :math:`\\rho=0` (and vice versa): rebuild it.
    * ``prox(v, s)`` :math:`=\\Pi_\\Delta(v/(1+s\\rho n))` (the
      :math:`\\rho\\mathbf 1` term is a shift along :math:`\\mathbf 1`, which the projection ignores).
    * ``strong_concavity`` :math:`=\\rho n`.
    """

    name = "chi_square"
    polytope = False

    def __init__(self, n: int, rho: float):
        super().__init__(n)
        self.set_rho(rho)

    rho_param = _DPPParameter("rho", "chi2_rho")
    inv_rho_param = _DPPParameter("inv_rho", "chi2_inv_rho")

    def set_rho(self, rho: float) -> None:
        """Change :math:`\\rho` (numpy side and the DPP parameters)."""
        self.rho = check_real(rho, "rho", low=0)
        self.inv_rho = 1.0 / self.rho if self.rho > 0 else 0.0
        ChiSquare.rho_param.sync(self)
        ChiSquare.inv_rho_param.sync(self)

    @property
    def strong_concavity(self) -> float:
        return self.rho * self.n

    def support_is_smooth(self) -> bool:
        return self.rho > 0

    def _psi_nearest(self, lam) -> float:
        r""":math:`\psi(\lambda)` as plainly evaluated (for the worst-case value, an upper bound)."""
        lam = np.asarray(lam, float)
        return float(self.rho / (2 * self.n) * np.sum((self.n * lam - 1.0) ** 2))

    def psi(self, lam) -> float:
        r""":math:`\psi(\lambda)=\frac\rho{2n}\sum_i(n\lambda_i-1)^2`, rounded **up** past its exact
        value, so that a lower bound :math:`\min_\theta\lambda^\top f-\psi(\lambda)` is never raised
        by round-off (:func:`~drflmodel._rounding.upper_psi_chi_square` gives the bound's proof)."""
        from ._rounding import upper_psi_chi_square

        return upper_psi_chi_square(np.asarray(lam, float), self.rho)

    def psi_expr(self, var):
        return (self.n / 2) * self.rho_param * cp.sum_squares(var - 1.0 / self.n)

    def worst_case(self, f):
        f = self._check_f(f)
        if self.rho == 0:
            lam = np.zeros(self.n)
            lam[int(np.argmax(f))] = 1.0
        else:
            # shift along 1 (ignored by the projection) to avoid cancellation when rho is tiny;
            # entries with z_i < -1 are zero after projection anyway, so clipping at -2 is exact
            with np.errstate(over="ignore"):
                z = np.maximum((f - f.max()) / (self.rho * self.n), -2.0)
            lam = project_simplex(1.0 / self.n + z)
        return float(lam @ f - self._psi_nearest(lam)), lam

    def prox(self, v, step):
        step = check_real(step, "step", low=0, low_open=True)
        v = _check_vector(v, self.n, "v")
        return project_simplex(v / (1.0 + step * self.rho * self.n))

    def vertices(self):
        raise NotImplementedError("ChiSquare has a strictly concave objective; use Simplex(n).vertices() for the feasible set")

    def constraints(self, var):
        return [var >= 0, cp.sum(var) == 1]

    def support_expr(self, f):
        f = self._check_expr(f)
        if self.rho == 0:
            return cp.max(f)
        eta = cp.Variable(name="chi2_eta")
        return (eta + 0.5 * self.rho_param
                + (0.5 / self.n) * self.inv_rho_param * cp.sum_squares(cp.pos(f - eta)))

    def params(self):
        return {"n": self.n, "rho": self.rho}


# ======================================================================================
# l_p ball intersected with the simplex
# ======================================================================================
class LpBall(WeightSet):
    """:math:`\\{\\lambda\\in\\Delta:\\|\\lambda-c\\|_p\\le r\\}` with :math:`c\\in\\Delta`, :math:`r>0`,
    :math:`p\\in[1,\\infty]` (the weight set :math:`\\mathcal Q` of the DRFL paper's Theorem 4.3).

    ``center`` must lie on the simplex; it is checked, never renormalized.

    * ``worst_case``: exact closed forms for :math:`p=1` (move :math:`t=\\min(r/2,1-c_{i^\\star})`
      of mass from the lowest losses, greedily, to the largest loss :math:`i^\\star`) and
      :math:`p=\\infty` (a box-capped simplex, greedy); for :math:`p=2`,
      :math:`\\lambda(\\beta)=\\Pi_\\Delta(c+f/\\beta)` with the multiplier :math:`\\beta` of the ball
      found by bisection so that :math:`\\|\\lambda-c\\|_2=r` (exact to rounding); other :math:`p`:
      a small Clarabel solve (accuracy ~1e-8).
    * ``support_expr``: the support function of an intersection is the infimal convolution of the
      support functions (both sets are convex and compact and :math:`\\operatorname{ri}\\Delta`
      meets the interior of the ball), so
      :math:`\\max_{\\lambda}\\lambda^\\top f=\\min_y\\ \\max_i(f_i-y_i)+c^\\top y+r\\|y\\|_{p^*}`.
      This is the dual of the DRFL paper's Proposition A.1 (:math:`\\min_{\\gamma,\\eta\\ge0}c^\\top(f+\\eta)+
      r\\|f+\\eta-\\gamma\\mathbf 1\\|_{p^*}`) written so that it is DCP and nondecreasing for a
      *convex* ``f``; DPP in the radius (``radius_param``). For non-integer :math:`p^*` CVXPY's
      ``pnorm`` uses a rational approximation of the exponent.
    * ``project``: :math:`p=\\infty` exact (box-capped simplex); :math:`p=2` exact to rounding via
      :math:`\\Pi_\\Delta((v+\\mu c)/(1+\\mu))` with the ball multiplier :math:`\\mu` by bisection;
      other :math:`p`: a small Clarabel solve.
    """

    name = "lp_ball"

    def __init__(self, center, radius: float, p=2):
        c = check_probability_vector(center, "center")
        super().__init__(c.size)
        self.center = c
        if isinstance(p, str) and p.lower() in ("inf", "infinity"):
            p = np.inf
        self.p = check_real(p, "p", low=1, allow_inf=True)
        self.polytope = self.p in (1.0, np.inf)
        self.set_radius(radius)

    radius_param = _DPPParameter("radius", "lp_radius")

    def set_radius(self, radius: float) -> None:
        """Change the radius (numpy side and the DPP parameter ``radius_param``)."""
        self.radius = check_real(radius, "radius", low=0, low_open=True)
        LpBall.radius_param.sync(self)

    @property
    def p_dual(self) -> float:
        """The dual exponent :math:`p^*` (:math:`1/p+1/p^*=1`)."""
        if self.p == 1:
            return np.inf
        if self.p == np.inf:
            return 1.0
        return self.p / (self.p - 1.0)

    def _box(self):
        c, r = self.center, self.radius
        return np.maximum(c - r, 0.0), np.minimum(c + r, 1.0)

    def _norm(self, x) -> float:
        return float(np.linalg.norm(x, ord=self.p))

    # ---- numpy -------------------------------------------------------------------------
    def contains(self, lam, tol=1e-8):
        lam = np.asarray(lam, float)
        return (lam.shape == (self.n,) and bool(np.all(lam >= -tol)) and abs(lam.sum() - 1) <= tol
                and self._norm(lam - self.center) <= self.radius + tol)

    def worst_case(self, f):
        f = self._check_f(f)
        if self.p == np.inf:
            value, lam, _ = _box_simplex_max(f, *self._box())
            return value, lam
        if self.p == 1:
            return self._worst_case_l1(f)
        if self.p == 2:
            return self._worst_case_l2(f)
        lam = cp.Variable(self.n)
        prob = cp.Problem(cp.Maximize(f @ lam), self.constraints(lam))
        _solve(prob, "LpBall.worst_case")
        lam_v = np.asarray(lam.value, float)
        return float(f @ lam_v), lam_v

    def _worst_case_l1(self, f):
        c = self.center
        i_star = int(np.argmax(f))
        t = min(self.radius / 2.0, 1.0 - c[i_star])
        lam = c.copy()
        # remove mass t greedily from the smallest losses (excluding i_star)
        order = np.argsort(f, kind="stable")
        order = order[order != i_star]
        take_cap = c[order]
        before = np.cumsum(take_cap) - take_cap
        take = np.clip(t - before, 0.0, take_cap)
        lam[order] -= take
        lam[i_star] += take.sum()
        return float(lam @ f), lam

    def _worst_case_l2(self, f):
        c, r = self.center, self.radius
        fmax = f.max()
        top = f >= fmax - 0.0
        # beta -> 0: projection of c onto the face of maximizers
        lam0 = np.zeros(self.n)
        lam0[top] = project_simplex(c[top])
        if np.linalg.norm(lam0 - c) <= r:
            return float(lam0 @ f), lam0

        fs = f - fmax  # the simplex projection ignores shifts along 1; shifting keeps c + fs/beta accurate

        def lam_of(beta):
            return project_simplex(c + fs / beta)

        def dist(beta):
            return np.linalg.norm(lam_of(beta) - c)

        spread = float(np.linalg.norm(f - f.mean())) + 1e-300
        hi = spread / r * 4.0 + 1e-300
        while dist(hi) > r:
            hi *= 4.0
        lo = hi
        while dist(lo) <= r:
            lo /= 4.0
            if lo < 1e-300:
                break
        llo, lhi = math.log(lo), math.log(hi)
        for _ in range(200):
            mid = 0.5 * (llo + lhi)
            if dist(math.exp(mid)) > r:
                llo = mid
            else:
                lhi = mid
            if lhi - llo < 1e-15:
                break
        lam = lam_of(math.exp(lhi))
        return float(lam @ f), lam

    def project(self, v):
        v = _check_vector(v, self.n, "v")
        if self.p == np.inf:
            return project_box_simplex(v, *self._box())
        if self.p == 2:
            c, r = self.center, self.radius
            x = project_simplex(v)
            if np.linalg.norm(x - c) <= r:
                return x

            def proj(mu):
                return project_simplex((v + mu * c) / (1.0 + mu))

            lo, hi = 0.0, 1.0
            while np.linalg.norm(proj(hi) - c) > r:
                hi *= 4.0
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if np.linalg.norm(proj(mid) - c) > r:
                    lo = mid
                else:
                    hi = mid
                if hi - lo <= 1e-15 * max(1.0, hi):
                    break
            return proj(hi)
        lam = cp.Variable(self.n)
        prob = cp.Problem(cp.Minimize(cp.sum_squares(lam - v)), self.constraints(lam))
        _solve(prob, "LpBall.project")
        return np.asarray(lam.value, float)

    def vertices(self):
        """Vertices for the polytopes :math:`p\\in\\{1,\\infty\\}` (small ``n``)."""
        if self.p == np.inf:
            return _box_simplex_vertices(*self._box())
        if self.p == 1:
            return _l1_simplex_vertices(self.center, self.radius)
        raise NotImplementedError(f"LpBall with p={self.p} is not a polytope: no vertex list")

    def mass_pieces(self):
        """:math:`p=\\infty`: the box form; :math:`p=1`: :math:`\\min(c(S)+r/2,\\ 1,\\ |S|)` (move
        :math:`r/2` of mass into :math:`S`, at most :math:`c(S^c)`, and none if :math:`S=\\emptyset`)."""
        n = self.n
        if self.p == np.inf:
            lo, up = self._box()
            return np.vstack([up, lo]), np.array([0.0, 1.0 - lo.sum()])
        if self.p == 1:
            return (np.vstack([self.center, np.zeros(n), np.ones(n)]),
                    np.array([self.radius / 2.0, 1.0, 0.0]))
        return None

    # ---- CVXPY -------------------------------------------------------------------------
    def constraints(self, var):
        return [var >= 0, cp.sum(var) == 1, cp.norm(var - self.center, self.p) <= self.radius_param]

    def support_expr(self, f):
        f = self._check_expr(f)
        y = cp.Variable(self.n, name="lp_dual_y")
        return cp.max(f - y) + self.center @ y + self.radius_param * cp.norm(y, self.p_dual)

    def params(self):
        return {"center": self.center, "radius": self.radius,
                "p": "inf" if self.p == np.inf else self.p}


# ======================================================================================
# q-FFL
# ======================================================================================
class QFFL(WeightSet):
    """q-FFL as a penalized weight set (Li, Sanjabi, Beirami and Smith, ICLR 2020; the Scaff-PD paper's
    Appendix B prints the penalty :math:`\\|\\lambda\\|^{1+1/q}`, whose minimizer does not depend on
    :math:`q`; corrected here):
    :math:`\\Lambda=\\mathbb R^n_{\\ge0}`, :math:`\\psi_q(\\lambda)=\\frac q{q+1}\\sum_i\\lambda_i^{1+1/q}`, :math:`q>0`.

    :math:`\\max_{\\lambda\\ge0}\\lambda^\\top f-\\psi_q(\\lambda)=\\frac1{q+1}\\sum_i(f_i)_+^{q+1}`
    with :math:`\\lambda_i^\\star=(f_i)_+^q` (the q-FFL objective for :math:`f\\ge0`). The weights
    do **not** sum to one (``in_simplex = False``). ``prox`` solves the separable problems
    :math:`\\min_{\\lambda\\ge0}\\psi_q(\\lambda)+\\frac1{2s}(\\lambda-v)^2` by bisection on the
    monotone derivative :math:`\\lambda^{1/q}+(\\lambda-v)/s`. ``support_expr`` uses
    ``cp.power(pos(f), q+1)`` (SOC form, exact for rational exponents with denominator <= 1024).
    """

    name = "qffl"
    in_simplex = False
    polytope = False

    def __init__(self, n: int, q: float):
        super().__init__(n)
        self.q = check_real(q, "q", low=0, low_open=True)

    @property
    def strong_concavity(self) -> float:
        # psi'' = (1/q) lam^(1/q - 1): bounded below by 1 only for q = 1 (psi = |lam|^2/2)
        return 1.0 if self.q == 1.0 else 0.0

    def support_is_smooth(self) -> bool:
        return True

    def psi(self, lam) -> float:
        r""":math:`\psi_q(\lambda)=\frac q{q+1}\sum_i\lambda_i^{1+1/q}` (:math:`+\infty` off the
        orthant), rounded **up** past its exact value (:func:`~drflmodel._rounding.upper_psi_qffl`
        gives the bound's proof)."""
        from ._rounding import upper_psi_qffl

        lam = np.asarray(lam, float)
        if np.any(lam < 0):
            return float("inf")
        return upper_psi_qffl(lam, self.q)

    def psi_expr(self, var):
        q = self.q
        return q / (q + 1) * cp.sum(cp.power(var, 1.0 + 1.0 / q))

    def worst_case(self, f):
        f = self._check_f(f)
        fp = np.maximum(f, 0.0)
        lam = fp ** self.q
        return float(np.sum(fp ** (self.q + 1)) / (self.q + 1)), lam

    def contains(self, lam, tol=1e-8):
        lam = np.asarray(lam, float)
        return lam.shape == (self.n,) and bool(np.all(lam >= -tol))

    def project(self, v):
        return np.maximum(_check_vector(v, self.n, "v"), 0.0)

    def prox(self, v, step):
        step = check_real(step, "step", low=0, low_open=True)
        v = _check_vector(v, self.n, "v")
        q = self.q
        lam = np.zeros(self.n)
        pos = v > 0
        if not pos.any():
            return lam
        vp = v[pos]
        lo, hi = np.zeros_like(vp), vp.copy()        # root of h(x) = x^(1/q) + (x - v)/s in (0, v)
        with np.errstate(over="ignore"):                # mid**(1/q) = inf for tiny q just means h > 0
            for _ in range(300):
                mid = 0.5 * (lo + hi)
                h = mid ** (1.0 / q) + (mid - vp) / step
                lo = np.where(h < 0, mid, lo)
                hi = np.where(h < 0, hi, mid)
                if np.all(hi - lo <= 4e-16 * hi):
                    break
        lam[pos] = 0.5 * (lo + hi)
        return lam

    def constraints(self, var):
        return [var >= 0]

    def support_expr(self, f):
        f = self._check_expr(f)
        q = self.q
        return cp.sum(cp.power(cp.pos(f), q + 1.0)) / (q + 1.0)

    def params(self):
        return {"n": self.n, "q": self.q}


# ======================================================================================
# KL penalty (tilted / entropic risk)
# ======================================================================================
class KLPenalty(_PenalizedSimplexSet):
    """Simplex with the Kullback-Leibler penalty :math:`\\psi(\\lambda)=\\tau\\sum_i\\lambda_i\\log(n\\lambda_i)`
    (:math:`\\tau` times the divergence from the uniform weights), :math:`\\tau>0`. By the
    Donsker-Varadhan (Gibbs) variational formula

    .. math::

        \\max_{\\lambda\\in\\Delta}\\ \\lambda^\\top f-\\psi(\\lambda)=\\tau\\log\\Big(\\frac1n\\sum_ie^{f_i/\\tau}\\Big),
        \\qquad\\lambda^\\star_i=\\frac{e^{f_i/\\tau}}{\\sum_je^{f_j/\\tau}},

    the tilted empirical risk with tilt :math:`t=1/\\tau` (T. Li, A. Beirami, M. Sanjabi and V. Smith
    2021, "Tilted Empirical Risk Minimization", ICLR, eq. (2)): between the mean of :math:`f` and its
    maximum, within :math:`\\tau\\log n` of the maximum.

    * ``worst_case``: the closed form above (shifted by :math:`\\max f`, no overflow).
    * ``support_expr``: :math:`\\tau\\,\\mathrm{logsumexp}(f/\\tau)-\\tau\\log n` (exponential cone).
    * ``prox(v, s)``: :math:`\\lambda_i=a\\,\\omega((v_i-s\\nu)/a-1-\\log n-\\log a)`, :math:`a=s\\tau`,
      :math:`\\omega` the Wright omega function (:math:`\\omega+\\log\\omega=z`), :math:`\\nu` the
      multiplier of :math:`\\sum\\lambda=1` (Brent's method; the sum falls as :math:`\\nu` grows).
    * ``strong_concavity`` :math:`=\\tau` (:math:`\\nabla^2\\psi=\\tau\\,\\mathrm{diag}(1/\\lambda)\\succeq\\tau I`
      on the simplex).

    :math:`\\tau=0` would be the simplex (the largest loss): use :class:`Simplex`.
    """

    name = "kl_penalty"
    polytope = False

    def __init__(self, n: int, tau: float):
        super().__init__(n)
        self.tau = check_real(tau, "tau", low=0, low_open=True)

    @property
    def strong_concavity(self) -> float:
        return self.tau

    def support_is_smooth(self) -> bool:
        return True

    def psi(self, lam) -> float:
        """:math:`\\psi(\\lambda)`, evaluated in its 1-homogeneous form
        :math:`\\tau\\sum_i\\lambda_i\\log(n\\lambda_i/s)`, :math:`s=\\sum_i\\lambda_i` (equal on the
        simplex). A certificate's weights sum to 1 only to round-off :math:`\\delta`; the plain
        formula moves by about :math:`\\tau\\delta` there (its slope along :math:`\\mathbf 1` is
        :math:`\\tau(1+\\log n\\lambda_i)`), which at :math:`\\tau=100` lifted a lower bound
        :math:`\\lambda^\\top f-\\psi(\\lambda)` above the optimum by :math:`7\\cdot10^{-12}`; the
        homogeneous form scales with :math:`s` as :math:`\\lambda^\\top f` does.

        The value is rounded **up** by a bound on its floating-point error, so that a lower bound
        :math:`\\min_\\theta\\lambda^\\top f-\\psi(\\lambda)` is never raised by it (at
        :math:`\\tau=100` the plain evaluation fell :math:`1.4\\cdot10^{-14}` below the exact
        value): with :math:`s` and the final sum by ``math.fsum`` (correctly rounded), each argument
        :math:`n\\lambda_i/s` carries three roundings and each log at most two ulps, so with
        :math:`u` the unit round-off and :math:`\\gamma_k=ku/(1-ku)` the error is at most
        :math:`\\tau\\gamma_4\\sum_i\\lambda_i(1+|\\ell_i|)+3u|\\psi|`, :math:`\\ell_i` the
        computed logs."""
        from scipy.special import xlogy

        lam = np.asarray(lam, float)
        total = math.fsum(lam)
        if total <= 0.0:
            return 0.0
        logs = xlogy(np.sign(lam), self.n * lam / total)          # 0 where lambda_i = 0
        value = self.tau * math.fsum(lam * logs)
        u = np.finfo(float).eps / 2
        gamma4 = 4 * u / (1 - 4 * u)
        error = self.tau * gamma4 * math.fsum(lam * (1.0 + np.abs(logs))) + 3 * u * abs(value)
        return float(value + error)

    def psi_expr(self, var):
        return self.tau * (-cp.sum(cp.entr(var)) + math.log(self.n) * cp.sum(var))

    def worst_case(self, f):
        f = self._check_f(f)
        z = (f - f.max()) / self.tau
        e = np.exp(z)
        lam = e / e.sum()
        # tau log(mean e): as log1p(mean(expm1 z)) where the mean of e is near 1 (large tau), so the
        # round-off is about u |f - max f| rather than tau u
        m1 = float(np.mean(np.expm1(z)))
        tilt = math.log1p(m1) if m1 > -0.5 else math.log(e.sum()) - math.log(self.n)
        return float(f.max() + self.tau * tilt), lam

    def prox(self, v, step):
        from scipy.optimize import brentq
        from scipy.special import wrightomega

        step = check_real(step, "step", low=0, low_open=True)
        v = _check_vector(v, self.n, "v")
        a = step * self.tau
        base = -1.0 - math.log(self.n) - math.log(a)

        def lam(nu):
            return a * np.real(wrightomega((v - step * nu) / a + base))

        # sum(lam) falls as nu grows: expand a bracket around the multiplier of the plain projection
        lo = hi = float(np.max(v)) / step
        width = 1.0 + abs(lo)
        for _ in range(200):
            if lam(hi).sum() <= 1.0:
                break
            hi, width = hi + width, 2.0 * width
        width = 1.0 + abs(lo)
        for _ in range(200):
            if lam(lo).sum() >= 1.0:
                break
            lo, width = lo - width, 2.0 * width
        nu = brentq(lambda x: lam(x).sum() - 1.0, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
        out = lam(nu)
        return out / out.sum()

    def vertices(self):
        raise NotImplementedError("KLPenalty has a strictly concave objective; use Simplex(n).vertices() for the feasible set")

    def constraints(self, var):
        return [var >= 0, cp.sum(var) == 1]

    def support_expr(self, f):
        f = self._check_expr(f)
        return self.tau * cp.log_sum_exp(f / self.tau) - self.tau * math.log(self.n)

    def params(self):
        return {"n": self.n, "tau": self.tau}


# ======================================================================================
# integrated ambiguity set (relative fairness)
# ======================================================================================
class Integrated(WeightSet):
    """The integrated ambiguity set of the relative-fairness paper, eq. (5):
    :math:`\\Lambda_\\varphi(A,B)=\\{(a-\\varphi b)/(1-\\varphi): a\\in A,\\ b\\in B\\}`, :math:`\\varphi\\in[0,1)`.

    ``A`` and ``B`` are polytopes inside the simplex without penalty (:class:`Simplex`,
    :class:`CVaR`, :class:`HCVaR`, :class:`LpBall` with :math:`p\\in\\{1,\\infty\\}`) over the same
    number of clients. Entries of :math:`\\lambda` can be negative for :math:`\\varphi>0`
    (``nonnegative = (phi == 0)``); every :math:`\\lambda` sums to one.

    * ``worst_case(f)`` :math:`=(\\max_{a\\in A}a^\\top f-\\varphi\\min_{b\\in B}b^\\top f)/(1-\\varphi)`
      (the paper's problem (6)) with :math:`\\lambda^\\star=(a^\\star-\\varphi b^\\star)/(1-\\varphi)`; the witness
      pair is in ``last_witness`` (not unique).
    * ``support_expr`` is :math:`A`'s for :math:`\\varphi=0` and raises :class:`NotConvexError`
      for :math:`\\varphi>0` (a convex minus a convex function is not DCP).
    * ``project``: a QP over :math:`(a,b)` (Clarabel; cached DPP problem).
    * ``norm1()``: the exact :math:`\\|\\Lambda_\\varphi\\|_1=\\max_{\\lambda}\\|\\lambda\\|_1`. Because
      :math:`\\mathbf 1^\\top\\lambda=1`, :math:`\\|\\lambda\\|_1=1+2\\max_S(-\\sum_{i\\in S}\\lambda_i)`, so
      :math:`\\|\\Lambda_\\varphi\\|_1=1+\\frac2{1-\\varphi}\\max_{S\\subseteq[n]}\\big[\\varphi\\,M_B(S)-(1-M_A(S^c))\\big]`
      with :math:`M_X(S)=\\max_{x\\in X}\\sum_{i\\in S}x_i` (closed forms per set). For two
      permutation-invariant sets (Simplex, CVaR) only :math:`|S|` matters: this is the
      :math:`O(n)` formula; otherwise all :math:`2^n` subsets for ``n <= 16`` and
      an exact MILP (HiGHS, zero gap) over :math:`\\mathbf 1_S` for larger ``n``, using that every
      admissible set has :math:`M(S)=\\min_k(G_k^\\top\\mathbf 1_S+h_k)` (:meth:`WeightSet.mass_pieces`).
    """

    name = "integrated"
    polytope = False
    in_simplex = False

    def __init__(self, A: WeightSet, B: WeightSet, phi: float):
        for nm, S in (("A", A), ("B", B)):
            if not isinstance(S, WeightSet):
                raise InvalidParameterError(f"{nm} must be a WeightSet; got {type(S).__name__}")
            if not (S.in_simplex and S.polytope):
                raise InvalidParameterError(
                    f"{nm} must be a polytope inside the probability simplex without penalty "
                    f"(Simplex, CVaR, HCVaR, LpBall with p in {{1, inf}}); got {S!r}")
        if A.n != B.n:
            raise InvalidParameterError(f"A and B must have the same number of clients; got A.n={A.n}, B.n={B.n}")
        super().__init__(A.n)
        self.A, self.B = A, B
        self.last_witness = None
        self.set_phi(phi)

    def set_phi(self, phi: float) -> None:
        """Change :math:`\\varphi\\in[0,1)` (drops the cached projection QP)."""
        self.phi = check_real(phi, "phi", low=0, high=1, high_open=True)
        self._proj_cache = None

    @property
    def nonnegative(self) -> bool:
        return self.phi == 0

    def _lam(self, a, b):
        return (a - self.phi * b) / (1.0 - self.phi)

    def worst_case(self, f):
        f = self._check_f(f)
        va, a = self.A.worst_case(f)[:2]
        vb, b = self.B.worst_case(-f)[:2]          # vb = -min_b b^T f
        self.last_witness = (a, b)
        return float((va + self.phi * vb) / (1.0 - self.phi)), self._lam(a, b)

    def support_expr(self, f):
        if self.phi == 0:
            return self.A.support_expr(f)
        raise NotConvexError(
            f"max over Integrated(phi={self.phi}) of lambda^T f is max_a a^T f - phi*min_b b^T f, a convex "
            "minus a convex function of f: not DCP. Use "
            "RelativeFairness, which certifies it by R1 (vertex enumeration, SOCP), R2 (lifted SDP "
            "with CVaR duals) or R3 (matrix-fractional dual) for quadratic losses.")

    def constraints(self, var):
        a = cp.Variable(self.n, name="integrated_a")
        b = cp.Variable(self.n, name="integrated_b")
        return ([(1.0 - self.phi) * var == a - self.phi * b]
                + self.A.constraints(a) + self.B.constraints(b))

    def contains(self, lam, tol=1e-8):
        lam = np.asarray(lam, float)
        if lam.shape != (self.n,) or not np.all(np.isfinite(lam)):
            return False
        a = cp.Variable(self.n)
        b = cp.Variable(self.n)
        prob = cp.Problem(cp.Minimize(cp.norm(self._lam(a, b) - lam, "inf")),
                          self.A.constraints(a) + self.B.constraints(b))
        _solve(prob, "Integrated.contains")
        return bool(prob.value <= tol)

    def project(self, v):
        v = _check_vector(v, self.n, "v")
        if self._proj_cache is None:
            a = cp.Variable(self.n)
            b = cp.Variable(self.n)
            vp = cp.Parameter(self.n)
            lam = (a - self.phi * b) / (1.0 - self.phi)
            prob = cp.Problem(cp.Minimize(cp.sum_squares(lam - vp)),
                              self.A.constraints(a) + self.B.constraints(b))
            self._proj_cache = (prob, a, b, vp)
        prob, a, b, vp = self._proj_cache
        vp.value = v
        _solve(prob, "Integrated.project")
        return self._lam(np.asarray(a.value), np.asarray(b.value))

    def vertices(self):
        """All :math:`(a_v-\\varphi b_w)/(1-\\varphi)` over vertex lists of :math:`A` and :math:`B`
        (deduplicated). Their convex hull is :math:`\\Lambda_\\varphi`; every vertex of
        :math:`\\Lambda_\\varphi` is in the list (some listed points may be interior)."""
        VA, VB = self.A.vertices(), self.B.vertices()
        if VA.shape[0] * VB.shape[0] > _MAX_VERTICES:
            raise NotImplementedError(f"{VA.shape[0]} x {VB.shape[0]} vertex pairs: too many to list")
        V = (VA[:, None, :] - self.phi * VB[None, :, :]).reshape(-1, self.n) / (1.0 - self.phi)
        return _unique_rows(V)

    def norm1(self) -> float:
        """Exact :math:`\\|\\Lambda_\\varphi(A,B)\\|_1`, see the class doc."""
        n, phi = self.n, self.phi
        if phi == 0:
            return 1.0
        exch = (Simplex, CVaR)
        if isinstance(self.A, exch) and isinstance(self.B, exch):
            masks = np.arange(n)[None, :] < np.arange(n + 1)[:, None]        # |S| = 0..n
        elif n <= 16:
            masks = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
        else:
            masks = self._norm1_milp()[None, :]
        neg = self._negative_mass(masks)
        return float(1.0 + 2.0 / (1.0 - self.phi) * max(0.0, float(neg.max())))

    def _negative_mass(self, masks):
        """:math:`(1-\\varphi)\\max_{\\lambda}(-\\sum_{i\\in S}\\lambda_i)=\\varphi M_B(S)-(1-M_A(S^c))` per row."""
        masks = np.atleast_2d(np.asarray(masks, bool))
        return self.phi * self.B.max_mass(masks) - (1.0 - self.A.max_mass(~masks))

    def _norm1_milp(self) -> np.ndarray:
        """The maximizing subset :math:`S` of :meth:`norm1` by a MILP (HiGHS, zero gap):
        :math:`\\max\\ \\varphi t_B+t_A` s.t. :math:`t_B\\le G^B_kz+h^B_k`,
        :math:`t_A\\le G^A_k(1-z)+h^A_k`, :math:`z\\in\\{0,1\\}^n`, using :meth:`mass_pieces`."""
        from scipy.optimize import Bounds, LinearConstraint, milp

        n, phi = self.n, self.phi
        GA, hA = self.A.mass_pieces()
        GB, hB = self.B.mass_pieces()
        # variables x = (z_1..z_n, t_B, t_A)
        c = np.r_[np.zeros(n), -phi, -1.0]
        rows_B = np.hstack([-GB, np.ones((GB.shape[0], 1)), np.zeros((GB.shape[0], 1))])
        rows_A = np.hstack([GA, np.zeros((GA.shape[0], 1)), np.ones((GA.shape[0], 1))])
        cons = [LinearConstraint(rows_B, -np.inf, hB), LinearConstraint(rows_A, -np.inf, hA + GA.sum(axis=1))]
        res = milp(c, integrality=np.r_[np.ones(n), 0, 0], constraints=cons,
                   bounds=Bounds(np.r_[np.zeros(n), -2.0, -2.0], np.r_[np.ones(n), 2.0, 2.0]),
                   options={"mip_rel_gap": 0.0})
        if res.status != 0:
            raise SolverError(f"Integrated.norm1: MILP failed ({res.message})")
        return np.round(res.x[:n]).astype(bool)

    def to_dict(self):
        return {"name": self.name, "A": self.A.to_dict(), "B": self.B.to_dict(), "phi": self.phi}

    def params(self):
        return {"A": self.A, "B": self.B, "phi": self.phi}


def feasible_weights(W: WeightSet, lam_raw: np.ndarray, tol: float = 1e-12) -> tuple[np.ndarray, bool]:
    r"""Solver multipliers as a point of :math:`\Lambda` (a certificate's lower bound
    :math:`\min_\theta\lambda^\top f(\theta)-\psi(\lambda)` is at most the optimum only for
    :math:`\lambda\in\Lambda`, by weak duality). Returns ``(lam, projected)``.

    The multipliers are kept when they lie in :math:`\Lambda` up to ``tol`` (round-off), else
    replaced by ``W.project(lam_raw)`` (``projected=True``). The tolerance is at round-off level on
    purpose: a multiplier vector outside :math:`\Lambda` by a solver tolerance (e.g.
    :math:`\sum_i\lambda_i=1+10^{-9}`) would make the fixed-weight value exceed the true minimax
    value by about that tolerance times the losses. Either way the point is then moved **exactly**
    into the set where the set allows it:

    * sets of the form :math:`\{l\le\lambda\le u,\ \mathbf 1^\top\lambda=1\}` (:class:`Simplex`,
      :class:`CVaR`, :class:`HCVaR`; :class:`ChiSquare` and :class:`KLPenalty` with :math:`l=0`,
      :math:`u=1`; :class:`Integrated` at :math:`\varphi=0`, which is its set :math:`A`): the
      weights are rounded to the grid :math:`2^{-52}\mathbb Z`, clipped to the (grid-rounded inward)
      caps, and the integer number of grid units by which their sum misses one is added to (taken
      from) the coordinates with room, largest weight first (:func:`_exact_unit_sum`). The result's
      **exact** sum is one (every entry is an integer multiple of :math:`2^{-52}`, so the sum is an
      integer identity) and every cap holds exactly. In all (the sum of the moves) the weights move by
      at most the amount the sum missed plus :math:`n` grid units. (Before, weights summing to :math:`1+3\cdot10^{-13}` were
      kept: at :math:`s\lambda`, :math:`s>1`, the dual value is about :math:`s` times the one at
      :math:`\lambda`, and a lower bound rose :math:`1.2\cdot10^{-13}` above the optimum; weights
      summing *below* one are no safer: :math:`\lambda/s` is in the simplex and the dual value
      at it is :math:`v/s`, which is below :math:`v` when the fixed-weight minimum :math:`v` is
      negative, e.g. a loss that takes negative values.)
    * :class:`Integrated` with :math:`\varphi>0` (negative weights allowed, nothing clipped): the
      same exact unit sum without caps; membership in :math:`\Lambda_\varphi` beyond the sum is
      checked to ``tol`` only.
    * :class:`QFFL` (the nonnegative orthant): clipping the negative entries is exact.
    * :class:`LpBall` with :math:`p=\infty` (a box: :math:`\max(0,c_i-r)\le\lambda_i\le\min(1,c_i+r)`,
      the float caps rounded inward exactly): as the capped sets.
    * :class:`LpBall` with :math:`p<\infty`, and a capped set whose float caps admit no exact point
      (e.g. caps :math:`\mathrm{fl}(1/3)` summing to one minus an ulp): clipped, and scaled down by
      the exact sum (``math.fsum``) when it is above one; the ball constraint holds to ``tol`` only.
    """
    integrated_signed = isinstance(W, Integrated) and W.phi > 0
    if isinstance(W, Integrated) and not integrated_signed:
        return feasible_weights(W.A, lam_raw, tol)
    lam = np.asarray(lam_raw, float) if integrated_signed else np.maximum(lam_raw, 0.0)
    projected = not W.contains(lam, tol=tol)
    if projected:
        lam = np.asarray(W.project(lam_raw), float)
    caps = _unit_sum_caps(W)
    if caps is not None:
        exact = _exact_unit_sum(lam, *caps)
        if exact is not None:
            return exact, projected
    if (W.in_simplex or caps is not None) and math.fsum(lam) > 1.0:   # no exact point (caps summing to 1 - ulp)
        lam = lam / math.fsum(lam)
        while math.fsum(lam) > 1.0:                  # at most a step or two of one ulp
            lam = lam * (1.0 - np.finfo(float).eps)
    return lam, projected


def _unit_sum_caps(W: WeightSet):
    r"""``(lower, upper)`` of a set :math:`\{l\le\lambda\le u,\ \mathbf 1^\top\lambda=1\}` (no
    caps, ``(-inf, inf)``, for a signed :class:`Integrated`), else ``None``."""
    if isinstance(W, Integrated):
        return np.full(W.n, -np.inf), np.full(W.n, np.inf)
    if isinstance(W, _PenalizedSimplexSet):
        return np.zeros(W.n), np.ones(W.n)
    if isinstance(W, LpBall) and W.p == np.inf:        # |lam_i - c_i| <= r: a box, rounded inward exactly
        return _inward_box(W.center, W.radius)
    box = W.box_bounds()
    return None if box is None else (np.asarray(box[0], float), np.asarray(box[1], float))


def _inward_box(center, radius):
    r"""Floats :math:`l_i\ge\max(0,c_i-r)` and :math:`u_i\le\min(1,c_i+r)` (exactly, checked in
    rationals), each within an ulp of the rounded value: the box of the :math:`\ell_\infty` ball."""
    from fractions import Fraction

    c = np.asarray(center, float)
    lower, upper = np.maximum(c - radius, 0.0), np.minimum(c + radius, 1.0)
    r = Fraction(radius)
    for i, ci in enumerate(c):
        if Fraction(float(lower[i])) < Fraction(float(ci)) - r:
            lower[i] = np.nextafter(lower[i], np.inf)
        if Fraction(float(upper[i])) > Fraction(float(ci)) + r:
            upper[i] = np.nextafter(upper[i], -np.inf)
    return lower, upper


def _exact_unit_sum(lam, lower, upper) -> np.ndarray | None:
    r"""``lam`` moved to a point of the grid :math:`g\mathbb Z`, :math:`g=2^{-52+m}` (:math:`2^m`
    bounds every magnitude, so every grid point used is a float), whose **exact** sum is one, with
    :math:`l\le\lambda\le u` exactly; ``None`` when the caps leave no such point. In grid units
    :math:`k_i=\lambda_i/g` (integers below :math:`2^{53}`, held exactly in floats): round, clip to
    :math:`[\lceil l_i/g\rceil,\lfloor u_i/g\rfloor]`, then add the missing units :math:`1/g-\sum k_i`
    (or take the excess) coordinate by coordinate, largest :math:`\lambda_i` first, within the caps;
    :math:`\lambda_i=k_ig`. Every sum here is exact: ``math.fsum`` of integers whose total is an
    integer below :math:`2^{53}`, and cumulative sums of steps each at most the missing units."""
    lam = np.asarray(lam, float)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    finite = np.abs(np.r_[lam, lower[np.isfinite(lower)], upper[np.isfinite(upper)], 1.0])
    m = max(0, math.ceil(math.log2(float(finite.max()))))
    unit = math.ldexp(1.0, 52 - m)                          # 1/g; lam_i / g is exact (a power of two)
    lo, up = np.ceil(lower * unit), np.floor(upper * unit)   # +-inf stay infinite
    k = np.clip(np.rint(lam * unit), lo, up)
    miss = unit - math.fsum(k)
    if miss != 0:
        order = np.argsort(-lam, kind="stable")
        room = (up - k)[order] if miss > 0 else (k - lo)[order]
        room = np.minimum(room, abs(miss))
        step = np.clip(abs(miss) - (np.cumsum(room) - room), 0.0, room)
        k[order] += step if miss > 0 else -step
        miss = unit - math.fsum(k)
    if miss != 0:
        return None
    return np.ldexp(k, m - 52)


# ---------------------------------------------------------------------------------- names
#: the one name of each weight set -- its ``name`` attribute, the ``name`` of a TOML ``weights``
#: table and the ``weights=`` of the scikit-learn estimators -- and its class here
WEIGHT_SET_NAMES = {"simplex": "Simplex", "cvar": "CVaR", "chi_square": "ChiSquare", "qffl": "QFFL",
                    "hcvar": "HCVaR", "lp_ball": "LpBall", "kl_penalty": "KLPenalty"}
#: names used before, accepted with a ``DeprecationWarning``: the name each one became
_FORMER_NAMES = {"chi2": "chi_square"}


def canonical_name(name, what: str = "weights") -> str:
    """The weight set's name (:data:`WEIGHT_SET_NAMES`) for ``name``; a former name (``"chi2"``)
    is accepted with a ``DeprecationWarning`` naming the current one, anything else is an
    :class:`~drflmodel.errors.InvalidParameterError` naming ``what`` and the allowed names."""
    if name in _FORMER_NAMES:
        new = _FORMER_NAMES[name]
        warnings.warn(f"{what}={name!r} is now {what}={new!r} (one name in Python, TOML files and the command "
                      f"line); {name!r} will stop working in a later release", DeprecationWarning, stacklevel=3)
        return new
    if name not in WEIGHT_SET_NAMES:
        raise InvalidParameterError(f"{what} must be one of {', '.join(map(repr, WEIGHT_SET_NAMES))}; got {name!r}")
    return name


def from_name(name, n: int, proportions=None, what: str = "weights", **options) -> WeightSet:
    """The weight set ``name`` (:data:`WEIGHT_SET_NAMES`; a former name warns, see
    :func:`canonical_name`) over ``n`` clients, with its ``options``: the one constructor behind a
    TOML ``weights`` table and the scikit-learn estimators' ``weights=``.

    * ``"simplex"``: :class:`Simplex` ``(n)``; ``"cvar"``: :class:`CVaR` ``(n, alpha)``;
      ``"chi_square"``: :class:`ChiSquare` ``(n, rho)``; ``"qffl"``: :class:`QFFL` ``(n, q)``;
      ``"kl_penalty"``: :class:`KLPenalty` ``(n, tau)``;
    * ``"hcvar"``: :class:`HCVaR` ``(proportions, alpha)``;
    * ``"lp_ball"``: :class:`LpBall` ``(center, radius, p=2)`` with ``center`` a vector, or
      ``"proportions"`` (the default) or ``"uniform"`` (:math:`1/n` each).

    ``proportions`` are the clients' sample shares :math:`p_i=N_i/N` (needed by ``hcvar`` and the
    default ``lp_ball`` center). ``what`` names the argument in errors. A missing or unknown option
    raises :class:`~drflmodel.errors.InvalidParameterError` naming it and the set's options."""
    name = canonical_name(name, what)
    options = dict(options)
    unknown, missing = option_mismatch(name, options)
    if unknown or missing:
        listed = ", ".join(sum(options_of(name), ())) or "none"
        raise InvalidParameterError(f"{unknown} is not an option of {what}={name!r} (its options: {listed})" if unknown
                                    else f"{missing} is required by {what}={name!r} (its options: {listed})")
    if name == "lp_ball":
        center = options.pop("center", "proportions")
        if isinstance(center, str):
            if center not in ("proportions", "uniform"):
                raise InvalidParameterError(f"center must be a vector, 'proportions' or 'uniform'; got {center!r}")
            center = np.full(n, 1.0 / n) if center == "uniform" else proportions
        if center is None:
            raise InvalidParameterError(f"{what}={name!r} needs the clients' proportions for its center")
        first = {"center": np.asarray(center, float)}
    elif name == "hcvar":
        if proportions is None:
            raise InvalidParameterError(f"{what}={name!r} needs the clients' proportions")
        first = {"p": np.asarray(proportions, float)}
    else:
        first = {"n": n}
    cls = globals()[WEIGHT_SET_NAMES[name]]
    return cls(**first, **options)


def options_of(name) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(required, optional)``: the options :func:`from_name` takes for the weight set ``name``
    (its constructor's parameters after the clients' count or proportions; ``lp_ball`` also takes
    ``center``)."""
    import inspect

    cls = globals()[WEIGHT_SET_NAMES[canonical_name(name)]]
    params = list(inspect.signature(cls.__init__).parameters.values())[2:]     # self, then n / p / center
    required = tuple(p.name for p in params if p.default is inspect.Parameter.empty)
    optional = tuple(p.name for p in params if p.default is not inspect.Parameter.empty)
    return required, optional + (("center",) if cls is LpBall else ())


def option_mismatch(name, options) -> tuple[str | None, str | None]:
    """``(unknown, missing)``: the first of ``options`` that the weight set ``name`` does not take,
    and the first option it requires that ``options`` lacks (``None`` when there is none)."""
    required, optional = options_of(name)
    unknown = sorted(set(options) - set(required) - set(optional))
    missing = [o for o in required if o not in options]
    return (unknown[0] if unknown else None), (missing[0] if missing else None)
