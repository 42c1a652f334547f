"""Exact convex reformulations of the relative-fairness problem for **quadratic** client losses
(derived here; the relative-fairness paper gives none).

Client losses are written :math:`f_i(\\theta)=\\theta^\\top Q_i\\theta-2r_i^\\top\\theta+c_i`
(:meth:`~drflmodel.objectives.ClientObjectives.quadratic_forms`), and for a weight vector
:math:`\\lambda` the aggregate is :math:`\\lambda^\\top f(\\theta)=\\theta^\\top Q(\\lambda)\\theta
-2r(\\lambda)^\\top\\theta+c(\\lambda)` with :math:`Q(\\lambda)=\\sum_i\\lambda_iQ_i` etc.

* **R1** (:func:`build_r1`, SOCP): :math:`\\min t` s.t. :math:`t\\ge\\lambda_v^\\top f(\\theta)` for
  every vertex :math:`\\lambda_v` of :math:`\\Lambda_\\varphi(A,B)`; exact when every
  :math:`Q(\\lambda_v)\\succeq0`. The aggregate matrices are formed **numerically** and factored
  (:func:`psd_factor`), never as ``lam_i * sum_squares(...)`` with negative weights.
* **R2** (:func:`build_r2`, lifted Shor SDP): :math:`\\begin{bmatrix}W&\\theta\\\\\\theta^\\top&1\\end{bmatrix}\\succeq0`,
  :math:`F_i=\\langle Q_i,W\\rangle-2r_i^\\top\\theta+c_i` (affine), objective
  :math:`\\frac1{1-\\varphi}\\big[\\sigma_A(F)+\\varphi\\,\\sigma_B(-F)\\big]` with the support functions
  (CVaR / LP duals) of the sets; optional RLT (McCormick) cuts from a box. A relaxation in general;
  exact when :math:`Q(\\lambda)\\succeq0` on :math:`\\Lambda_\\varphi`.
* **R3** (:func:`build_r3`, matrix-fractional dual): :math:`\\max_{a\\in A,b\\in B}c(\\lambda)-
  r(\\lambda)^\\top Q(\\lambda)^{-1}r(\\lambda)` for :math:`\\Theta=\\mathbb R^d` and convex data.

Plus the numpy helpers used by the certificates: :func:`aggregate`, :func:`min_quadratic`
(a lower bound of :math:`\\min_{\\theta\\in\\Theta}` of a convex quadratic in exact arithmetic) and
:func:`certified_min_quadratic` (the same, lowered by a proved bound on every floating-point error).
"""

from __future__ import annotations


import numpy as np
import cvxpy as cp

from ...errors import NotConvexError
from ..._solver_sequence import SOLVER_DEFAULTS, solve_with_fallback

__all__ = ["aggregate", "psd_factor", "quad_value", "min_quadratic", "certified_min_quadratic", "preconditioner",
           "build_r1", "build_r2", "build_r3", "rlt_data", "rlt_constraints", "set_box"]


def aggregate(Q: np.ndarray, r: np.ndarray, c: np.ndarray, lam) -> tuple:
    """:math:`(Q(\\lambda), r(\\lambda), c(\\lambda))` for weights ``lam`` (entries may be negative)."""
    lam = np.asarray(lam, float)
    P = np.einsum("i,ijk->jk", lam, Q)
    return 0.5 * (P + P.T), lam @ r, float(lam @ c)


def quad_value(P, q, c0, theta) -> float:
    """:math:`\\theta^\\top P\\theta-2q^\\top\\theta+c_0`."""
    theta = np.asarray(theta, float)
    return float(theta @ P @ theta - 2 * q @ theta + c0)


def certified_min_quadratic(Q, r, c, lam, box=None, weight_error=None, tol: float = 1e-9):
    r"""A lower bound of :math:`\min_{\theta\in\Theta}\lambda^\top f(\theta)` (:math:`f_i` the quadratics
    :math:`(Q_i,r_i,c_i)`) that floating-point error can only lower: :func:`min_quadratic` on the
    computed aggregate, minus a proved bound on every rounding, then one ulp down. Returns
    ``(bound, point)`` like :func:`min_quadratic`.

    ``weight_error`` (:math:`e\ge0`, entrywise) bounds :math:`|\lambda-\lambda^{\rm exact}|` when the
    float weights ``lam`` only approximate a point of the weight set (e.g. :math:`(a-\varphi b)/(1-\varphi)`
    computed in floats). With :math:`u` the unit round-off, :math:`\gamma_k=ku/(1-ku)` (N. J. Higham,
    "Accuracy and Stability of Numerical Algorithms", 2nd ed., Lemma 3.1 and §3.1 for sums and dot
    products) and :math:`\hat P,\hat q,\hat c` the computed aggregate, :math:`\hat h` its quadratic:

    * aggregation: :math:`|\hat P-P^{\rm exact}|\le E_P=\gamma_{n+2}\sum_i|\lambda_i||Q_i|+\sum_ie_i|Q_i|`
      (likewise :math:`E_q`, :math:`E_c`), so
      :math:`h^{\rm exact}(\theta)\ge\hat h(\theta)-(|\theta|^\top E_P|\theta|+2E_q^\top|\theta|+E_c)`
      for every :math:`\theta`; it is taken at a box containing the exact minimizer (the box
      :math:`\Theta`, or for :math:`\Theta=\mathbb R^d` :math:`|\hat\theta|+\rho` with
      :math:`\rho=\|\nabla h^{\rm exact}(\hat\theta)\|/(2\lambda_{\min}(P^{\rm exact}))` bounded from the
      terms below);
    * :math:`\Theta=\mathbb R^d`: :math:`\min\hat h\ge\hat h(\hat\theta)-\|\hat P\hat\theta-\hat q\|^2/\lambda_{\min}(\hat P)`
      (:math:`\hat h` is :math:`2\lambda_{\min}`-strongly convex), the residual bounded by its computed
      value plus :math:`\gamma_{d+1}(|\hat P||\hat\theta|+|\hat q|)`, and :math:`\lambda_{\min}` by the computed
      eigenvalue minus :math:`16\,d\,u\|\hat P\|_F` (the symmetric eigensolver's backward error
      :math:`p(d)u\|P\|_2`, LAPACK Users' Guide §4.7, with :math:`p(d)=16d`); when that is not positive no
      finite bound is claimed (``-inf``);
    * a box: the Frank--Wolfe bound of :func:`min_quadratic` with the gradient's error
      :math:`E_g=2\gamma_{d+1}(|\hat P||\bar\theta|+|\hat q|)` times the box's reach from
      :math:`\bar\theta`, the rounding of :math:`g^\top(\theta_{\min}-\bar\theta)`, and
      :math:`\max(0,-\lambda_{\min})` times the squared reach when :math:`\hat P` has round-off
      negative eigenvalues;
    * the evaluation of :math:`\hat h(\bar\theta)`: :math:`\gamma_{2d+3}(|\bar\theta|^\top|\hat P||\bar\theta|+2|\hat q|^\top|\bar\theta|+|\hat c|)`.

    The allowance is summed in floats and multiplied by :math:`1+10^{-10}` (covering its own
    roundings); the last subtraction is moved one ulp down."""
    Q, r, c = (np.asarray(x, float) for x in (Q, r, c))
    lam = np.asarray(lam, float)
    P, q, c0 = aggregate(Q, r, c, lam)
    bound, theta = min_quadratic(P, q, c0, box=box, tol=tol)
    if theta is None or not np.isfinite(bound):
        return bound, theta
    n, d = lam.size, q.size
    u = np.finfo(float).eps / 2

    def gamma(k):
        return k * u / (1 - k * u)

    err = gamma(n + 2) * np.abs(lam) + (0.0 if weight_error is None else np.asarray(weight_error, float))
    EP, Eq, Ec = np.einsum("i,ijk->jk", err, np.abs(Q)), err @ np.abs(r), float(err @ np.abs(c))
    absP, absq = np.abs(P), np.abs(q)
    t = np.abs(theta)
    w_min = float(np.linalg.eigvalsh(P)[0]) - 16 * d * u * float(np.linalg.norm(P))
    if box is None:
        if w_min <= 0:
            return float("-inf"), theta
        res = np.abs(P @ theta - q) + gamma(d + 1) * (absP @ t + absq)
        res_norm = float(np.linalg.norm(res))
        w_exact = w_min - float(np.linalg.norm(EP))
        if w_exact <= 0:
            return float("-inf"), theta
        rho = (res_norm + float(np.linalg.norm(EP @ t + Eq))) / w_exact
        reach = t + rho
        terms = res_norm ** 2 / w_min
    else:
        lower, upper = (np.asarray(x, float) for x in box)
        reach = np.maximum(np.abs(lower), np.abs(upper))
        g = 2 * (P @ theta - q)
        step = np.abs(_box_linear_min(g, lower, upper) - theta)
        width = np.maximum(np.abs(lower - theta), np.abs(upper - theta))
        Eg = 2 * gamma(d + 1) * (absP @ t + absq)
        terms = float(Eg @ width + gamma(2 * d + 2) * (np.abs(g) @ step) + max(0.0, -w_min) * (width @ width))
    evaluation = gamma(2 * d + 3) * float(t @ absP @ t + 2 * absq @ t + abs(c0))
    aggregation = float(reach @ EP @ reach + 2 * Eq @ reach + Ec)
    allowance = (evaluation + aggregation + terms) * (1 + 1e-10)
    return float(np.nextafter(bound - allowance, -np.inf)), theta


def psd_factor(P: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """``L`` with :math:`P = LL^\\top` (clipped eigen-decomposition; ``L`` has shape ``(d, k)``).

    Eigenvalues in :math:`[-tol\\cdot\\max(1,\\|P\\|), 0)` are treated as round-off and clipped;
    a more negative eigenvalue raises :class:`NotConvexError` (the quadratic is not convex).
    """
    P = 0.5 * (P + P.T)
    w, V = np.linalg.eigh(P)
    scale = max(1.0, float(np.abs(w).max()) if w.size else 1.0)
    if w.size and w[0] < -tol * scale:
        raise NotConvexError(
            f"aggregate matrix Q(lambda) has eigenvalue {w[0]:.3g} < 0: this vertex term is not convex; "
            "use the lifted SDP (method='R2') instead of vertex enumeration (R1)")
    keep = w > tol * scale
    return V[:, keep] * np.sqrt(w[keep])


def _box_linear_min(g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Minimizer over the box of the linear function :math:`g^\\top\\theta`."""
    return np.where(g > 0, lower, upper)


def min_quadratic(P, q, c0, box=None, tol: float = 1e-9) -> tuple[float, np.ndarray | None]:
    """A **valid lower bound** of :math:`\\min_{\\theta\\in\\Theta}\\theta^\\top P\\theta-2q^\\top\\theta+c_0`
    for PSD ``P`` and :math:`\\Theta=\\mathbb R^d` (``box=None``) or a box ``(lower, upper)``;
    returns ``(bound, minimizer)`` (minimizer ``None`` if unbounded).

    * :math:`\\Theta=\\mathbb R^d`: closed form :math:`c_0-q^\\top P^+q` when :math:`q\\in\\operatorname{range}P`
      (checked by the stationarity residual), else :math:`-\\infty`.
    * box: a convex QP is solved (Clarabel) for a point :math:`\\bar\\theta`, then the bound is the
      Frank--Wolfe bound :math:`h(\\bar\\theta)+\\min_{\\theta\\in\\text{box}}\\nabla h(\\bar\\theta)^\\top
      (\\theta-\\bar\\theta)\\le\\min h` (valid for any :math:`\\bar\\theta` by convexity; no trust in
      the QP solver is needed).

    Raises :class:`NotConvexError` if ``P`` has a clearly negative eigenvalue.
    """
    P = 0.5 * (np.asarray(P, float) + np.asarray(P, float).T)
    q = np.asarray(q, float)
    w = np.linalg.eigvalsh(P)
    scale = max(1.0, float(np.abs(w).max()))
    if w[0] < -tol * scale:
        raise NotConvexError(f"min_quadratic needs a PSD matrix; smallest eigenvalue {w[0]:.3g}")
    if box is None:
        theta = np.linalg.lstsq(P, q, rcond=None)[0]
        resid = np.linalg.norm(P @ theta - q)
        if resid > 1e-8 * max(1.0, np.linalg.norm(q)):
            return float("-inf"), None
        return quad_value(P, q, c0, theta), theta
    lower, upper = box
    d = q.size
    S = preconditioner(P[None])
    z = cp.Variable(d)
    expr = _completed_square(psd_factor(S @ P @ S, tol=max(tol, 1e-12)), S @ q, c0, z)
    prob = cp.Problem(cp.Minimize(expr), [S @ z >= lower, S @ z <= upper])
    # any point of the box gives a valid bound: the solver's accuracy matters for tightness only
    solved = solve_with_fallback(prob, tolerances=SOLVER_DEFAULTS) is not None and z.value is not None
    tb = S @ z.value if solved else None
    if tb is None:
        tb = 0.5 * (lower + upper)
    tb = np.clip(tb, lower, upper)
    g = 2 * (P @ tb - q)
    tmin = _box_linear_min(g, lower, upper)
    return quad_value(P, q, c0, tb) + float(g @ (tmin - tb)), tb


# ------------------------------------------------------------------------------------------ R1
def preconditioner(Q: np.ndarray) -> np.ndarray:
    r""":math:`S=\bar Q^{-1/2}` with :math:`\bar Q=\frac1n\sum_iQ_i` (+ a tiny ridge if singular):
    the change of variables :math:`\theta=Sz` makes the quadratic pieces well conditioned (the
    penguins data have :math:`\operatorname{cond}\bar Q\approx10^{9}`), which the interior-point
    solvers need for 1e-9 accuracy. Exact: it is only a reparametrization."""
    Qb = 0.5 * (Q.mean(axis=0) + Q.mean(axis=0).T)
    w, V = np.linalg.eigh(Qb)
    w = np.maximum(w, 1e-12 * max(1.0, float(w.max())))
    return (V / np.sqrt(w)) @ V.T


def _completed_square(L: np.ndarray, q: np.ndarray, c0: float, z):
    r""":math:`z^\top LL^\top z-2q^\top z+c_0` written as :math:`\|L^\top z-w\|^2-2q_\perp^\top z+(c_0-\|w\|^2)`
    with :math:`Lw` the projection of :math:`q` on :math:`\operatorname{range}L` (avoids the
    cancellation of large terms, e.g. :math:`\|y\|^2/m` against :math:`2q^\top z`)."""
    if L.shape[1] == 0:
        return -2 * q @ z + c0
    w = np.linalg.lstsq(L, q, rcond=None)[0]
    q_perp = q - L @ w
    expr = cp.sum_squares(L.T @ z - w) + (c0 - float(w @ w))
    if np.linalg.norm(q_perp) > 1e-14 * max(1.0, np.linalg.norm(q)):
        expr = expr - 2 * q_perp @ z
    return expr


def build_r1(Q, r, c, lambdas, box=None):
    """R1: :math:`\\min_{\\theta,t} t` s.t. :math:`t\\ge\\theta^\\top P_v\\theta-2q_v^\\top\\theta+c_v`
    for every vertex weight vector :math:`\\lambda_v` (rows of ``lambdas``), :math:`\\theta\\in\\Theta`.

    Returns ``(problem, theta, t, vertex_constraints)``; the duals of ``vertex_constraints`` are
    convex-combination weights over the vertices (used by the weak-duality certificate).
    """
    n, d = r.shape
    S = preconditioner(Q)
    z = cp.Variable(d, name="z")
    theta = S @ z                       # theta = S z, S = mean(Q_i)^(-1/2): well-conditioned pieces
    t = cp.Variable(name="t")
    vcons = []
    for lam in np.atleast_2d(lambdas):
        P, q, c0 = aggregate(Q, r, c, lam)
        vcons.append(_completed_square(psd_factor(S @ P @ S), S @ q, c0, z) <= t)
    cons = list(vcons)
    if box is not None:
        cons += [theta >= box[0], theta <= box[1]]
    return cp.Problem(cp.Minimize(t), cons), theta, t, vcons


# ------------------------------------------------------------------------------------------ R2
def rlt_data(lower: np.ndarray, upper: np.ndarray) -> dict:
    r"""The constant matrices of the RLT cuts for the box :math:`[l,u]`: ``Lr[a,b]=l_a``,
    ``Ur[a,b]=u_a``, ``LL=l l^T``, ``UU=u u^T``, ``LU=l u^T``."""
    d = lower.size
    one = np.ones(d)
    return {"Lr": np.outer(lower, one), "Ur": np.outer(upper, one), "LL": np.outer(lower, lower),
            "UU": np.outer(upper, upper), "LU": np.outer(lower, upper)}


def rlt_constraints(W, theta, data) -> list:
    r"""RLT / McCormick cuts for :math:`W\approx\theta\theta^\top` on the box
    :math:`l\le\theta\le u`: for all :math:`a,b`,
    :math:`W_{ab}-l_a\theta_b-l_b\theta_a+l_al_b\ge0`, :math:`W_{ab}-u_a\theta_b-u_b\theta_a+u_au_b\ge0`,
    :math:`W_{ab}-l_a\theta_b-u_b\theta_a+l_au_b\le0`. ``data`` is :func:`rlt_data` (numpy
    arrays, or ``cp.Parameter`` s of the same shapes: the cuts stay DPP)."""
    d = theta.shape[0]
    T = cp.reshape(theta, (d, 1), order="F") @ np.ones((1, d))     # T[a, b] = theta_a
    TT = T.T                                                         # TT[a, b] = theta_b
    Lr, Ur = data["Lr"], data["Ur"]
    return [
        W - cp.multiply(Lr, TT) - cp.multiply(Lr.T, T) + data["LL"] >= 0,
        W - cp.multiply(Ur, TT) - cp.multiply(Ur.T, T) + data["UU"] >= 0,
        W - cp.multiply(Lr, TT) - cp.multiply(Ur.T, T) + data["LU"] <= 0,
    ]


def build_r2(Q, r, c, A, B, box=None, rlt: bool = True):
    r"""R2, the lifted (Shor) SDP with the support functions of ``A`` and ``B``.

    :math:`\min\ p_1\,\sigma_A(F)+p_2\,\sigma_B(-F)` over
    :math:`M=\begin{bmatrix}W&\theta\\\theta^\top&1\end{bmatrix}\succeq0`, with
    :math:`F_i=\langle Q_i,W\rangle-2r_i^\top\theta+c_i` and the parameters
    :math:`p_1=1/(1-\varphi)`, :math:`p_2=\varphi/(1-\varphi)` (``cp.Parameter`` s, so a φ sweep
    re-solves without recompiling). :math:`\sigma_S(F)=\max_{s\in S}s^\top F` comes from
    ``S.support_expr`` (CVaR: Rockafellar--Uryasev; simplex: ``max``); it is convex and
    non-decreasing, and :math:`\sigma_B(-F)=-\min_{b\in B}b^\top F`.

    With a box, its bounds (and the RLT matrices) are ``cp.Parameter`` s too, so a
    branch-and-bound can re-solve on sub-boxes (:func:`set_box`).
    Returns ``(problem, handles)`` with handles ``M, W, theta, F, p1, p2`` (and ``box``).
    """
    n, d = r.shape
    M = cp.Variable((d + 1, d + 1), PSD=True, name="M")
    W = M[:d, :d]
    theta = M[:d, d]
    Qflat = Q.reshape(n, d * d)
    # <Q_i, W> for all i at once: vec(W) in row-major order matches Q.reshape
    F = Qflat @ cp.vec(W, order="C") - 2 * r @ theta + c
    p1 = cp.Parameter(nonneg=True, name="p1")
    p2 = cp.Parameter(nonneg=True, name="p2")
    # epigraph variables keep the problem DPP (a set's support may itself carry a cp.Parameter)
    tA, tB = cp.Variable(name="sigma_A"), cp.Variable(name="sigma_B")
    obj = p1 * tA + p2 * tB
    cons = [M[d, d] == 1, A.support_expr(F) <= tA, B.support_expr(-F) <= tB]
    handles = {"M": M, "W": W, "theta": theta, "F": F, "p1": p1, "p2": p2}
    if box is not None:
        bp = {"lower": cp.Parameter(d, name="box_lower"), "upper": cp.Parameter(d, name="box_upper")}
        bp.update({k: cp.Parameter((d, d), name=f"rlt_{k}") for k in ("Lr", "Ur", "LL", "UU", "LU")})
        cons += [theta >= bp["lower"], theta <= bp["upper"]]
        if rlt:
            cons += rlt_constraints(W, theta, bp)
        handles["box"] = bp
        set_box(handles, *box)
    prob = cp.Problem(cp.Minimize(obj), cons)
    return prob, handles


def set_box(handles: dict, lower: np.ndarray, upper: np.ndarray) -> None:
    """Set the box parameters of an R2 problem built with a box."""
    bp = handles["box"]
    bp["lower"].value = np.asarray(lower, float)
    bp["upper"].value = np.asarray(upper, float)
    for k, v in rlt_data(np.asarray(lower, float), np.asarray(upper, float)).items():
        bp[k].value = v


# ------------------------------------------------------------------------------------------ R3
def build_r3(Q, r, c, a, b, phi: float, constraints: list):
    """R3, the matrix-fractional dual for :math:`\\Theta=\\mathbb R^d` (Sion):
    :math:`\\max_{a\\in A,b\\in B}\\ c(\\lambda)-r(\\lambda)^\\top Q(\\lambda)^{-1}r(\\lambda)`,
    :math:`\\lambda=(a-\\varphi b)/(1-\\varphi)`, with ``cp.matrix_frac`` (jointly convex in
    :math:`(r,Q)`, so the objective is concave with affine arguments).

    ``a``, ``b`` are CVXPY variables and ``constraints`` encode :math:`a\\in A`, :math:`b\\in B`.
    Returns ``(problem, lam_expr)``.
    """
    n, d = r.shape
    lam = (a - phi * b) / (1 - phi)
    Qlam = cp.reshape(Q.reshape(n, d * d).T @ lam, (d, d), order="C")
    rlam = r.T @ lam
    prob = cp.Problem(cp.Maximize(c @ lam - cp.matrix_frac(rlam, Qlam)), list(constraints))
    return prob, lam
