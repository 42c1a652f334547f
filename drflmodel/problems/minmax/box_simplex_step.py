r"""The SQP weight step over a box-simplex weight set in numpy (no CVXPY): simplex (AFL), CVaR, HCVaR.

The step problem of :mod:`.lagrangian_sqp` (and of the Hessian-free route) over
:math:`\Lambda=\{\lambda: l\le\lambda\le u,\ \mathbf 1^\top\lambda=1\}` with :math:`\psi=0` is the
convex quadratic program in the :math:`n` client weights

.. math::

    \max_{\lambda\in\Lambda}\ f^\top\lambda-\tfrac12\lambda^\top S\lambda
    \quad\Longleftrightarrow\quad
    \min_{\lambda\in\Lambda}\ q(\lambda)=\tfrac12\lambda^\top S\lambda-f^\top\lambda,
    \qquad S=GH^{-1}G^\top\succeq0 .

It is solved exactly (finitely many steps, each exact up to rounding) by the primal active-set
method for convex QP (Nocedal and Wright, *Numerical Optimization*, 2nd ed., Algorithm 16.3): on the
face where the working set :math:`\mathcal W` of bounds holds, the step minimizes :math:`q` over
:math:`\{\lambda_F+p:\mathbf 1^\top p=0\}` through the null-space basis :math:`Z` of
:math:`\mathbf 1^\top` (reduced Hessian :math:`Z^\top S_{FF}Z`, eigen-decomposed because :math:`S`
is only semidefinite: a direction of zero curvature along which :math:`q` decreases is followed to
the first bound, which exists because :math:`\Lambda` is bounded); a blocking bound joins
:math:`\mathcal W`; at the face's minimizer the KKT multipliers
:math:`\nu=-\overline{(S\lambda-f)_F}`, :math:`\mu_i=\pm((S\lambda-f)_i+\nu)` decide: all
:math:`\mu_i\ge0` is the optimum (the KKT conditions of a convex QP are sufficient), else the most
negative bound leaves :math:`\mathcal W`. Each call starts from the previous call's answer (the
SQP's weights change little near the solution, so a few face steps suffice).

The :math:`\chi^2` set (the simplex with :math:`\psi(\lambda)=\frac{\rho n}2\|\lambda-\mathbf 1/n\|^2`,
the Scaff-PD paper's (B.2)) gives the same program: on the simplex
:math:`\psi(\lambda)=\frac{\rho n}2\|\lambda\|^2-\frac\rho2`, so its step is the box-simplex QP
with :math:`S+\rho nI` and the bounds :math:`0\le\lambda\le1` (:class:`ChiSquareStep`).

The answer only steers the SQP: the certificate is computed at whatever weights the route ends
with (:meth:`~drflmodel.problems.minmax.dro.WeightedMinMax.certify_at`), so a less accurate step
can cost iterations, never rigor. When the method does not terminate within its step budget the
compiled CVXPY step model (:class:`~.lagrangian_sqp.WeightStepModel`) answers instead.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["BoxSimplexStep", "ChiSquareStep", "box_simplex_qp", "numpy_weight_step", "has_numpy_step",
           "NUMPY_STEP_MAX_CLIENTS"]

#: up to this many clients the box-simplex weight step runs in numpy (each face step costs an
#: eigen-decomposition of at most n x n; above, CVXPY's sparse conic model is cheaper)
NUMPY_STEP_MAX_CLIENTS = 200


class _NoConvergence(ArithmeticError):
    pass


def box_simplex_qp(S, f, lower, upper, start) -> np.ndarray:
    r"""The minimizer of :math:`\frac12\lambda^\top S\lambda-f^\top\lambda` over
    :math:`\{l\le\lambda\le u,\ \mathbf 1^\top\lambda=1\}` (``S`` symmetric PSD; ``start`` a
    feasible point), by the primal active-set method of the module docstring. Raises
    ``ArithmeticError`` if it does not terminate within :math:`50+10n` face steps."""
    S = np.asarray(S, float)
    f = np.asarray(f, float)
    lo = np.broadcast_to(np.asarray(lower, float), f.shape).astype(float)
    up = np.broadcast_to(np.asarray(upper, float), f.shape).astype(float)
    n = f.size
    lam = np.asarray(start, float).copy()
    scale = max(float(np.abs(S).max(initial=0.0)), float(np.abs(f).max(initial=0.0)), 1e-300)
    tol_mult = 1e-11 * scale                        # a multiplier below -tol_mult is negative
    tol_step = 1e-15                                # weights live in [0, 1]
    # working set: +1 at the upper bound, -1 at the lower bound, 0 free
    state = np.where(lam <= lo, -1, np.where(lam >= up, 1, 0))
    lam = np.where(state < 0, lo, np.where(state > 0, up, lam))
    if not (state == 0).any():
        state[int(np.argmax(up - lo))] = 0          # one free weight carries the equality
    at_face_minimum = False                         # after a full, unblocked step: p = 0 there
    for _ in range(50 + 10 * n):
        F = np.flatnonzero(state == 0)
        g = S @ lam - f
        p, ray = (None, False) if at_face_minimum else _face_step(S if F.size == n else S[np.ix_(F, F)], g[F])
        at_face_minimum = False
        if p is not None and (ray or np.max(np.abs(p)) > tol_step):
            alpha, block, to = np.inf if ray else 1.0, -1, 0
            lam_F = lam[F]                                            # the first bound met along p
            reach = np.divide(np.where(p < 0, lo[F], up[F]) - lam_F, p, out=np.full(F.size, np.inf), where=p != 0)
            k = int(np.argmin(reach))
            if reach[k] < alpha:
                alpha, block, to = max(float(reach[k]), 0.0), int(F[k]), (-1 if p[k] < 0 else 1)
            if not np.isfinite(alpha):
                raise _NoConvergence("a direction of zero curvature met no bound")
            lam[F] += alpha * p
            if block >= 0:
                state[block] = to
                lam[block] = lo[block] if to < 0 else up[block]
            else:
                at_face_minimum = not ray
            continue
        # the face's minimizer: the multipliers decide
        nu = -float(np.mean(g[F]))
        mu = np.where(state < 0, g + nu, np.where(state > 0, -(g + nu), np.inf))
        worst = int(np.argmin(mu))
        if mu[worst] >= -tol_mult:
            return lam
        state[worst] = 0
    raise _NoConvergence(f"the active-set method took more than {50 + 10 * n} face steps")


def _face_step(S_FF, g_F):
    r"""``(p, ray)``: the step :math:`p` (:math:`\mathbf 1^\top p=0`) to the minimizer of the
    quadratic on the face (``ray=False``), or a zero-curvature direction along which it decreases,
    of max-norm 1, to follow up to the first bound (``ray=True``); ``(None, False)`` with one free
    weight (no move keeps the sum)."""
    m = g_F.size
    if m <= 1:
        return None, False
    Z = _null_basis(m)
    R = Z.T @ S_FF @ Z
    r = Z.T @ g_F
    ev, V = np.linalg.eigh(0.5 * (R + R.T))
    flat = ev <= 1e-12 * max(float(ev[-1]), 0.0)
    r_flat = V[:, flat].T @ r
    if flat.any() and np.max(np.abs(r_flat)) > 1e-13 * max(float(np.max(np.abs(g_F))), 1e-300):
        d = -(Z @ (V[:, flat] @ r_flat))                         # q decreases linearly along d
        return d / np.max(np.abs(d)), True
    curved = ~flat
    return -(Z @ (V[:, curved] @ ((V[:, curved].T @ r) / ev[curved]))), False


@functools.lru_cache(maxsize=64)
def _null_basis(m: int) -> np.ndarray:
    """An orthonormal basis of :math:`\\{p\\in\\mathbb R^m:\\mathbf 1^\\top p=0\\}` (``m x (m-1)``, from a
    complete QR factorization of :math:`\\mathbf 1`; cached: it depends on :math:`m` only)."""
    Q, _ = np.linalg.qr(np.ones((m, 1)), mode="complete")
    Z = Q[:, 1:]
    Z.setflags(write=False)
    return Z


class BoxSimplexStep:
    r"""The weight step of a box-simplex set (:class:`~drflmodel.sets.Simplex`,
    :class:`~drflmodel.sets.CVaR`, :class:`~drflmodel.sets.HCVaR`) in numpy: :func:`box_simplex_qp`,
    warm-started at the previous call's answer; ``fallback()`` builds the CVXPY model
    (:class:`~.lagrangian_sqp.WeightStepModel`) used if the active-set method does not terminate."""

    solver = "numpy-active-set"

    def __init__(self, weight_set, fallback):
        self.weight_set = weight_set
        self._fallback_model = None
        self._fallback = fallback
        self._previous = None
        self.fell_back = 0

    def _program(self, S):
        """``(curvature, lower, upper)`` of the box-simplex QP the step solves."""
        return S, *self.weight_set.box_bounds()

    def solve(self, f: np.ndarray, S: np.ndarray):
        """``(lambda, model value)``: :math:`\\arg\\max_{\\lambda\\in\\Lambda}f^\\top\\lambda-\\frac12\\lambda^\\top S\\lambda-\\psi(\\lambda)`."""
        W = self.weight_set
        f = np.asarray(f, float)
        S = 0.5 * (S + S.T)
        # the previous answer is feasible (the method keeps its iterates in the set); a first call
        # starts from the projected greedy worst case
        start = self._previous if self._previous is not None else np.asarray(W.project(W.worst_case(f)[1]), float)
        curvature, lower, upper = self._program(S)
        try:
            lam = box_simplex_qp(curvature, f, lower, upper, start=start)
        except _NoConvergence:
            if self._fallback_model is None:
                self._fallback_model = self._fallback()
            self.fell_back += 1
            lam, value = self._fallback_model.solve(f, S)
            self._previous = lam
            return lam, value
        self._previous = lam
        return lam, float(lam @ f) - 0.5 * float(lam @ S @ lam) - float(W.psi(lam))


class ChiSquareStep(BoxSimplexStep):
    r"""The weight step of the :math:`\chi^2` set (:class:`~drflmodel.sets.ChiSquare`, :math:`\rho>0`)
    in numpy: the box-simplex QP with curvature :math:`S+\rho nI` and bounds :math:`[0,1]` (module
    docstring); the model value subtracts :math:`\psi(\lambda)`."""

    def _program(self, S):
        W = self.weight_set
        return S + W.rho * W.n * np.eye(W.n), np.zeros(W.n), np.ones(W.n)

    def solve(self, f: np.ndarray, S: np.ndarray):
        """As :meth:`BoxSimplexStep.solve`; first the minimizer on the whole simplex's affine hull, from
        the KKT system :math:`(S+\\rho nI)\\lambda+\\nu\\mathbf 1=f`, :math:`\\mathbf 1^\\top\\lambda=1`
        (one solve): when it has no negative weight it is the step (no bound is active, so the KKT
        conditions of the program hold), else the active-set method runs."""
        W = self.weight_set
        n, curvature = W.n, W.rho * W.n
        S = 0.5 * (S + S.T)
        f = np.asarray(f, float)
        if curvature > 1e-8 * float(np.abs(S).max(initial=0.0)):      # well posed: S + rho n I is definite
            K = np.ones((n + 1, n + 1))
            K[:n, :n] = S
            K[np.arange(n), np.arange(n)] += curvature
            K[n, n] = 0.0
            try:
                lam = np.linalg.solve(K, np.append(f, 1.0))[:n]
            except np.linalg.LinAlgError:
                lam = None
            if lam is not None and np.all(np.isfinite(lam)) and lam.min() >= 0.0:
                self._previous = lam
                return lam, float(lam @ f) - 0.5 * float(lam @ S @ lam) - float(W.psi(lam))
        return super().solve(f, S)


def numpy_weight_step(weight_set, fallback):
    """The numpy weight step of ``weight_set`` (:class:`BoxSimplexStep` for a box-simplex set,
    :class:`ChiSquareStep` for the :math:`\\chi^2` set) when :func:`has_numpy_step`, else ``None``;
    ``fallback()`` builds the CVXPY model."""
    if not has_numpy_step(weight_set):
        return None
    if weight_set.box_bounds() is not None:
        return BoxSimplexStep(weight_set, fallback)
    return ChiSquareStep(weight_set, fallback)


def has_numpy_step(weight_set) -> bool:
    """Whether the weight step of ``weight_set`` runs in numpy: a box-simplex set or the
    :math:`\\chi^2` set, of at most :data:`NUMPY_STEP_MAX_CLIENTS` clients."""
    from ...sets import ChiSquare

    return weight_set.n <= NUMPY_STEP_MAX_CLIENTS and (
        weight_set.box_bounds() is not None or type(weight_set) is ChiSquare)
