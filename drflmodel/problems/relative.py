r"""Relative fairness with the integrated ambiguity set :math:`\Lambda_\varphi(A,B)`, certified.

Spec relative-fairness §4.4, problem (6), with the errata and the exact reformulations of §14:

.. math::

    \min_{\theta\in\Theta}\ \max_{\lambda\in\Lambda_\varphi(A,B)}\ \lambda^\top f(\theta)
    \;=\;\min_{\theta\in\Theta}\ \frac{F_{A,\max}(\theta)-\varphi F_{B,\min}(\theta)}{1-\varphi},
    \qquad \Lambda_\varphi(A,B)=\Big\{\tfrac{a-\varphi b}{1-\varphi}: a\in A,\ b\in B\Big\},

with :math:`A, B` polytopes inside the simplex (``Simplex``, ``CVaR``, ``HCVaR``, ``LpBall`` with
:math:`p\in\{1,\infty\}`), :math:`\varphi\in[0,1)` and :math:`\Theta=\mathbb R^d` or a box.
For :math:`\varphi>0` the weights can be negative: the problem is **not convex in general and not
DCP even when it is convex** (§14.2). What the oracle proves depends on the case
(``solution.info["method"]`` records which route was taken):

=====================  ============================================================================
``"FederatedDRO"``     :math:`\varphi=0`, :math:`\Theta=\mathbb R^d`: the problem *is* federated DRO
                       over :math:`A`; delegated (same answer, same certificate).
``"R1"``               quadratic losses, every vertex matrix :math:`Q(\lambda_v)\succeq0` (exact
                       convexity test) and few vertices: vertex-enumeration SOCP. Lower bound by
                       weak duality at :math:`\bar\lambda=\sum_v\mu_v\lambda_v` (the constraint
                       multipliers): :math:`L=\min_{\theta\in\Theta}\bar\lambda^\top f(\theta)`.
``"R3"``               quadratic, convex, :math:`\Theta=\mathbb R^d`: matrix-fractional dual; same
                       weak-duality bound at the dual optimum :math:`\lambda^\star`.
``"R2"``               quadratic otherwise: lifted Shor SDP with the sets' LP duals (+ RLT cuts on
                       a box). The SDP value is a valid lower bound; :math:`U=` objective at the
                       extracted (box-feasible) :math:`\hat\theta`, improved by a local refinement.
                       ``"optimal"`` only if the lifted matrix is numerically rank one **and**
                       :math:`U` equals the bound to tolerance. Otherwise, with a box, a spatial
                       branch-and-bound (SDP + RLT bound on every leaf) may close the gap
                       (``"optimal"`` with that certificate); else ``"optimal_within_gap"``.
``"local"``            non-quadratic losses, :math:`\varphi>0` (or a box at :math:`\varphi=0`): the
                       convex--concave procedure from several seeded starts, with the best valid
                       lower bound of :meth:`RelativeFairness.lower_bounds`; status ``"local"``
                       unless the bound closes the gap.
=====================  ============================================================================

The convexity tests of §14.2 are exposed as :meth:`RelativeFairness.convexity_report` (the exact
vertex PSD test for quadratics and the three :math:`\|\Lambda_\varphi\|_1` conditions of
Prop 10, Theorem 3 and Assumption 8, separately) and :meth:`RelativeFairness.max_convex_phi`.
:func:`select_phi` implements §9 with the errata's stable form (§14.1 items 6--7).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import cvxpy as cp
import scipy.linalg

from .._validation import as_finite_array, check_choice, check_int, check_real
from ..errors import InvalidDataError, InvalidParameterError, NotConvexError
from ..sets import CVaR, Integrated, Simplex, WeightSet
from ..solution import DEFAULT_GAP_TOL, Solution, jsonable, relative_gap
from . import _quadratic as qd
from ._base import SOLVER_OPTIONS, Problem, installed_solvers

__all__ = ["RelativeFairness", "ConvexityReport", "Condition", "PhiSelection", "select_phi"]

_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
METHODS = ("auto", "FederatedDRO", "R1", "R2", "R3", "local")

#: largest number of (a-vertex, b-vertex) pairs for the exact vertex test and for R1
MAX_VERTEX_PAIRS = 400
#: a lifted matrix is "numerically rank one" if lambda_2 <= RANK_TOL * lambda_1
RANK_TOL = 1e-6


# ==============================================================================================
# small helpers
# ==============================================================================================
def _quiet_solve(prob: cp.Problem, **kwargs):
    """``prob.solve`` without CVXPY's "Solution may be inaccurate" warning (the status is
    recorded and the certificate decides, as in :meth:`Problem.solve`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        return prob.solve(**kwargs)


def _vertex_count(S: WeightSet) -> int | None:
    """Number of vertices of ``S`` if it can be known without listing them (else ``None``)."""
    if isinstance(S, Simplex):
        return S.n
    if isinstance(S, CVaR):
        an = S.alpha * S.n
        k = min(int(math.floor(an + 1e-9)), S.n)
        return math.comb(S.n, k) if abs(an - round(an)) < 1e-9 else math.comb(S.n, k) * (S.n - k)
    if S.n <= 10:
        return None   # small: listing is cheap, count after listing
    return 10 ** 9    # unknown and possibly huge: do not list


def _vertices(S: WeightSet, limit: int) -> np.ndarray | None:
    cnt = _vertex_count(S)
    if cnt is not None and cnt > limit:
        return None
    try:
        V = np.asarray(S.vertices(), float)
    except (NotImplementedError, InvalidParameterError):
        return None
    return V if V.shape[0] <= limit else None


def _check_box(box, d: int):
    if box is None:
        return None
    try:
        lower, upper = box
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError("box must be a pair (lower, upper) of arrays of shape (d,)") from exc
    lower = as_finite_array(lower, "box lower bound").reshape(-1) if np.ndim(lower) else np.full(d, float(lower))
    upper = as_finite_array(upper, "box upper bound").reshape(-1) if np.ndim(upper) else np.full(d, float(upper))
    if lower.shape != (d,) or upper.shape != (d,):
        raise InvalidParameterError(
            f"box bounds must have shape ({d},) (the model dimension); got {lower.shape} and {upper.shape}")
    if np.any(lower > upper):
        raise InvalidParameterError(f"box lower bounds must be <= upper bounds; violated at "
                                    f"coordinates {np.flatnonzero(lower > upper).tolist()}")
    return lower, upper


@dataclass
class Condition:
    """One convexity / rate condition of spec §14.2: ``value`` compared with ``threshold``."""

    name: str
    value: float
    threshold: float
    holds: bool
    comparison: str
    source: str

    def to_dict(self) -> dict:
        return jsonable(self.__dict__)


@dataclass
class ConvexityReport:
    r"""The convexity analysis of spec §14.2 for one :math:`\varphi` (see
    :meth:`RelativeFairness.convexity_report`).

    ``conditions`` maps a name to a :class:`Condition`:

    * ``"vertex_psd"`` (quadratic losses, enumerable vertices): the exact test
      :math:`\min_{v}\lambda_{\min}(Q(\lambda_v))\ge0` over the vertex pairs of
      :math:`\Lambda_\varphi` (value = the smallest eigenvalue relative to :math:`\max_i\|Q_i\|`);
    * ``"prop10_convexity"``: :math:`\|\Lambda_\varphi\|_1<1+2m_f/(M_f-m_f)` (uniqueness,
      every :math:`\lambda^\top f` strongly convex);
    * ``"theorem3_printed"``: :math:`\|\Lambda_\varphi\|_1<1+2m_f/M_f`;
    * ``"assumption8_rate"``: :math:`\|\Lambda_\varphi\|_1<1+m_f/(2M_f)` (needed by the rate proof).

    ``convex`` is the best available verdict (vertex test if available, else Prop 10 — a
    *sufficient* condition, so ``False`` then means "not certified convex").
    """

    phi: float
    norm1: float
    m_f: float
    M_f: float
    modulus: float
    conditions: dict
    convex: bool
    convexity_test: str
    max_convex_phi: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return jsonable({**self.__dict__, "conditions": {k: v.to_dict() for k, v in self.conditions.items()}})

    def table(self) -> str:
        """A text table: condition, value, threshold, holds."""
        lines = [f"{'condition':<20} {'value':>14} {'':>2} {'threshold':>14}  holds"]
        for c in self.conditions.values():
            lines.append(f"{c.name:<20} {c.value:>14.6g} {c.comparison:>2} {c.threshold:>14.6g}  {c.holds}")
        return "\n".join(lines)


# ==============================================================================================
# the problem
# ==============================================================================================
class RelativeFairness(Problem):
    r"""Relative fairness (spec relative-fairness (6)):
    :math:`\min_{\theta\in\Theta}\max_{\lambda\in\Lambda_\varphi(A,B)}\sum_i\lambda_if_i(\theta)`.

    Parameters
    ----------
    federation, loss, l2 : as for every :class:`~drflmodel.problems._base.Problem`
        (:math:`f_i` = mean loss + :math:`\frac{\ell_2}2\|\theta\|^2`).
    A, B : weight sets of size ``federation.n_clients``, polytopes inside the simplex without
        penalty (``Simplex``, ``CVaR``, ``HCVaR``, ``LpBall`` with p in {1, inf}).
    phi : :math:`\varphi\in[0,1)`.
    box : ``None`` (:math:`\Theta=\mathbb R^d`) or ``(lower, upper)`` arrays of shape ``(d,)``:
        :math:`\Theta=\{l\le\theta\le u\}`. The box is a *constraint* of the problem; returned
        points are feasible for it.

    ``solve(method="auto")`` chooses the route (see the module doc) and records it in
    ``solution.info["method"]``; ``solution.info["indices"]`` holds :math:`\mathfrak R_{A,B}`,
    20:20, Palma, Atkinson and Gini of the client losses at the solution.
    """

    family = "relative"

    def __init__(self, federation, loss, A, B, phi, l2: float = 0.0, box=None):
        super().__init__(federation, loss, l2)
        n = self.n_clients
        for nm, S in (("A", A), ("B", B)):
            if not isinstance(S, WeightSet):
                raise InvalidParameterError(f"{nm} must be a drflmodel.sets.WeightSet; got {type(S).__name__}")
            if S.n != n:
                raise InvalidParameterError(
                    f"{nm} has size n={S.n} but the federation has {n} clients; "
                    f"the weight sets' size must equal the number of clients")
        self.A, self.B = A, B
        self.phi = check_real(phi, "phi", low=0.0, high=1.0, high_open=True)
        # Integrated validates that A and B are penalty-free polytopes inside the simplex
        self.integrated = Integrated(A, B, self.phi)
        self.box = _check_box(box, self.dim)
        self._r2 = None           # (problem, handles) of the lifted SDP (DPP in phi)
        self._ccp_cache = None    # (problem, theta, const, J, p1, p2) of the CCP majorizer
        self._wmin = None         # (problem, theta, lam) of the fixed-weight minimization
        self._last_method = None

    # ------------------------------------------------------------------ numpy side
    def _split(self, f):
        """``(F_A, a*, F_B, b*)``: :math:`\\max_{a\\in A}a^\\top f`, :math:`\\min_{b\\in B}b^\\top f`."""
        FA, a = self.A.worst_case(f)[:2]
        negFB, b = self.B.worst_case(-f)[:2]
        return float(FA), np.asarray(a, float), -float(negFB), np.asarray(b, float)

    def objective(self, theta) -> float:
        r"""Exact :math:`g(\theta)=(F_{A,\max}(\theta)-\varphi F_{B,\min}(\theta))/(1-\varphi)` in numpy
        (sorting / closed forms of the sets; no CVXPY)."""
        theta = as_finite_array(theta, "theta")
        if theta.shape != (self.dim,):
            raise InvalidDataError(f"theta must have shape ({self.dim},); got {theta.shape}")
        FA, _, FB, _ = self._split(self.client_losses(theta))
        return (FA - self.phi * FB) / (1.0 - self.phi)

    def worst_case_weights(self, theta):
        """``(lam, a, b)``: a maximizer :math:`\\lambda^\\star=(a^\\star-\\varphi b^\\star)/(1-\\varphi)` at ``theta``."""
        _, a, _, b = self._split(self.client_losses(theta))
        return (a - self.phi * b) / (1.0 - self.phi), a, b

    def in_box(self, theta, tol: float = 0.0) -> bool:
        if self.box is None:
            return True
        return bool(np.all(theta >= self.box[0] - tol) and np.all(theta <= self.box[1] + tol))

    def _feasible(self, theta) -> np.ndarray:
        """A box-feasible version of a solver's point (clipping is only used to make a *feasible
        point* out of an approximately feasible solver answer; user input is never clipped)."""
        theta = np.asarray(theta, float).reshape(-1)
        return theta if self.box is None else np.clip(theta, self.box[0], self.box[1])

    # ------------------------------------------------------------------ parameters
    def set_parameter(self, name: str, value) -> None:
        """Only ``"phi"`` is sweepable (R2 keeps :math:`1/(1-\\varphi)` and :math:`\\varphi/(1-\\varphi)`
        as ``cp.Parameter`` s, so a sweep re-solves without recompiling)."""
        if name != "phi":
            raise InvalidParameterError(f"RelativeFairness has one sweepable parameter 'phi'; got {name!r}")
        self.phi = check_real(value, "phi", low=0.0, high=1.0, high_open=True)
        self.integrated = Integrated(self.A, self.B, self.phi)

    @property
    def parameters(self) -> dict:
        r"""The ``cp.Parameter`` s :math:`p_1=1/(1-\varphi)`, :math:`p_2=\varphi/(1-\varphi)` of the
        built problem (set from ``phi`` at each solve)."""
        if self.is_quadratic:
            h = self._build_r2()[1]
            return {"p1": h["p1"], "p2": h["p2"]}
        prob, _, _, _, p1, p2 = self._build_ccp()
        return {"p1": p1, "p2": p2}

    def sweep_phi(self, values, **solve_kwargs) -> list[Solution]:
        """One :class:`Solution` per :math:`\\varphi` in ``values`` (``info["phi"]`` set). The problem
        keeps the last value afterwards."""
        out = []
        for v in values:
            self.set_parameter("phi", v)
            sol = self.solve(**solve_kwargs)
            sol.info["phi"] = self.phi
            out.append(sol)
        return out

    def sweep(self, param: str, values, **solve_kwargs) -> list[Solution]:
        if param != "phi":
            raise InvalidParameterError(f"RelativeFairness has one sweepable parameter 'phi'; got {param!r}")
        return self.sweep_phi(values, **solve_kwargs)

    # ------------------------------------------------------------------ convexity (§14.2)
    @property
    def is_quadratic(self) -> bool:
        return bool(self.loss.is_quadratic)

    def curvature_constants(self) -> tuple[float, float]:
        r""":math:`(m_f, M_f)`: the smallest strong-convexity and the largest smoothness modulus of the
        :math:`f_i` (Assumption A4; for the squared loss :math:`2\lambda_{\min/\max}(X_i^\top X_i/N_i)+\ell_2`)."""
        return float(np.min(self.objectives.strong_convexity())), float(np.max(self.objectives.smoothness()))

    def norm1(self, phi: float | None = None) -> float:
        """Exact :math:`\\|\\Lambda_\\varphi(A,B)\\|_1` (``Integrated.norm1``, spec §14.2)."""
        phi = self.phi if phi is None else check_real(phi, "phi", low=0.0, high=1.0, high_open=True)
        return Integrated(self.A, self.B, phi).norm1()

    def _vertex_lists(self):
        VA = _vertices(self.A, MAX_VERTEX_PAIRS)
        VB = _vertices(self.B, MAX_VERTEX_PAIRS)
        if VA is None or VB is None or VA.shape[0] * VB.shape[0] > MAX_VERTEX_PAIRS:
            return None
        return VA, VB

    def vertex_weights(self, phi: float | None = None) -> np.ndarray | None:
        r"""The points :math:`(a_v-\varphi b_w)/(1-\varphi)` over the vertex lists of :math:`A, B`
        (deduplicated; a superset of the vertices of :math:`\Lambda_\varphi`), or ``None`` if there are
        more than :data:`MAX_VERTEX_PAIRS` pairs."""
        phi = self.phi if phi is None else phi
        vl = self._vertex_lists()
        if vl is None:
            return None
        VA, VB = vl
        V = (VA[:, None, :] - phi * VB[None, :, :]).reshape(-1, self.n_clients) / (1.0 - phi)
        _, idx = np.unique(np.round(V, 12), axis=0, return_index=True)
        return V[np.sort(idx)]

    def vertex_psd_test(self, phi: float | None = None) -> dict | None:
        r"""Exact convexity test for quadratic losses (spec §14.2, [derived]): :math:`\lambda^\top f`
        is convex for every :math:`\lambda\in\Lambda_\varphi` iff :math:`Q(\lambda_v)\succeq0` at every
        vertex. Returns ``{"min_eig", "relative_min_eig", "holds", "n_vertices"}`` or ``None`` when
        the loss is not quadratic or the vertices are too many to list."""
        if not self.is_quadratic:
            return None
        V = self.vertex_weights(phi)
        if V is None:
            return None
        Q = self.objectives.quadratic_forms()[0]
        P = np.einsum("vi,ijk->vjk", V, Q)
        eig = np.linalg.eigvalsh(0.5 * (P + P.transpose(0, 2, 1)))[:, 0]
        scale = max(1.0, float(np.max(np.abs(np.linalg.eigvalsh(Q)))))
        mn = float(eig.min())
        return {"min_eig": mn, "relative_min_eig": mn / scale, "holds": bool(mn >= -1e-10 * scale),
                "n_vertices": int(V.shape[0])}

    def convexity_report(self, phi: float | None = None) -> ConvexityReport:
        r"""The table of spec §14.2 for :math:`\varphi` (default: the problem's): each condition with
        its value, threshold and whether it holds, plus the exact vertex test for quadratics and
        :meth:`max_convex_phi` for each criterion."""
        phi = self.phi if phi is None else check_real(phi, "phi", low=0.0, high=1.0, high_open=True)
        m, M = self.curvature_constants()
        nrm = self.norm1(phi)
        inf = float("inf")
        thr10 = 1 + 2 * m / (M - m) if M > m else inf
        conds = {
            "prop10_convexity": Condition("prop10_convexity", nrm, thr10, bool(nrm < thr10 or (M == m and m > 0)),
                                          "<", "Prop 10 / Lemma 8: every lambda^T f strongly convex"),
            "theorem3_printed": Condition("theorem3_printed", nrm, 1 + 2 * m / M if M > 0 else inf,
                                          bool(nrm < (1 + 2 * m / M if M > 0 else inf)), "<",
                                          "Theorem 3 as printed"),
            "assumption8_rate": Condition("assumption8_rate", nrm, 1 + m / (2 * M) if M > 0 else inf,
                                          bool(nrm < (1 + m / (2 * M) if M > 0 else inf)), "<",
                                          "Assumption 8 (kappa_Lambda > 0), used by the rate proof"),
        }
        vt = self.vertex_psd_test(phi)
        if vt is not None:
            conds["vertex_psd"] = Condition("vertex_psd", vt["relative_min_eig"], 0.0, vt["holds"], ">=",
                                            f"exact: Q(lambda_v) PSD at all {vt['n_vertices']} vertex points")
            convex, test = vt["holds"], "vertex_psd"
        else:
            convex, test = conds["prop10_convexity"].holds, "prop10_convexity (sufficient only)"
        modulus = m - (M - m) * (nrm - 1) / 2 if np.isfinite(M) else -inf
        mcp = {"prop10": self.max_convex_phi("prop10")}
        if vt is not None:
            mcp["vertex"] = self.max_convex_phi("vertex")
        return ConvexityReport(phi=phi, norm1=nrm, m_f=m, M_f=M, modulus=modulus, conditions=conds,
                               convex=bool(convex), convexity_test=test, max_convex_phi=mcp)

    def convexity_certified(self, phi: float | None = None) -> bool:
        """``True`` iff the problem is certified convex at :math:`\\varphi` (exact vertex test for
        quadratics where the vertices are enumerable, else Prop 10)."""
        return self.convexity_report(phi).convex

    def rate_conditions_hold(self, phi: float | None = None) -> bool:
        """Assumption 8 (the strictest condition; needed whenever the Theorem 3 rate is claimed)."""
        return self.convexity_report(phi).conditions["assumption8_rate"].holds

    def max_convex_phi(self, criterion: str = "auto", tol: float = 1e-10) -> float:
        r"""The largest :math:`\varphi` keeping the problem convex for this data, in :math:`[0,1]`
        (1 means: convex for every :math:`\varphi<1`).

        * ``"vertex"`` (quadratic losses): for each vertex pair :math:`(a_v,b_w)`,
          :math:`\sup\{\varphi: Q(a_v)-\varphi Q(b_w)\succeq0\}=1/\mu_{\max}` with :math:`\mu` the
          generalized eigenvalues of :math:`Q(b_w)v=\mu Q(a_v)v` (bisection on
          :math:`\lambda_{\min}` if :math:`Q(a_v)` is singular); the minimum over pairs. Exact.
          For :math:`A=B=\Delta` this is :math:`\min_{i\ne j}\lambda_{\min}(Q_j^{-1/2}Q_iQ_j^{-1/2})`.
        * ``"prop10"``: bisection on :math:`\varphi` for
          :math:`\|\Lambda_\varphi\|_1<1+2m_f/(M_f-m_f)` (sufficient only; :math:`\|\Lambda_\varphi\|_1`
          is nondecreasing in :math:`\varphi`).
        * ``"auto"``: ``"vertex"`` where available, else ``"prop10"``.
        """
        check_choice(criterion, "criterion", ("auto", "vertex", "prop10"))
        vl = self._vertex_lists() if self.is_quadratic else None
        if criterion == "auto":
            criterion = "vertex" if vl is not None else "prop10"
        if criterion == "vertex":
            if vl is None:
                raise NotConvexError("the exact vertex test needs a quadratic loss and at most "
                                     f"{MAX_VERTEX_PAIRS} vertex pairs; use criterion='prop10'")
            Q = self.objectives.quadratic_forms()[0]
            VA, VB = vl
            PA = np.einsum("vi,ijk->vjk", VA, Q)
            PB = np.einsum("vi,ijk->vjk", VB, Q)
            best = 1.0
            for Pa in PA:
                Pa = 0.5 * (Pa + Pa.T)
                wa = np.linalg.eigvalsh(Pa)
                scale = max(1.0, float(abs(wa).max()))
                for Pb in PB:
                    Pb = 0.5 * (Pb + Pb.T)
                    best = min(best, _pair_phi(Pa, Pb, wa[0] > 1e-9 * scale, scale, tol))
            return float(best)
        m, M = self.curvature_constants()
        if not np.isfinite(M) or m <= 0:
            return 0.0
        if M <= m:
            return 1.0
        thr = 1 + 2 * m / (M - m)
        lo, hi = 0.0, 1.0 - 1e-12
        if self.norm1(hi) < thr:
            return 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self.norm1(mid) < thr:
                lo = mid
            else:
                hi = mid
            if hi - lo < tol:
                break
        return float(lo)

    # ------------------------------------------------------------------ method choice
    def choose_method(self) -> str:
        """The automatic route: FederatedDRO (:math:`\\varphi=0`, no box), R1 (quadratic, exact
        vertex test passes, few vertices), R3 (quadratic, convex, no box), R2 (quadratic otherwise),
        local (other losses)."""
        if self.phi == 0 and self.box is None:
            return "FederatedDRO"
        if not self.is_quadratic:
            return "local"
        vt = self.vertex_psd_test()
        if vt is not None and vt["holds"]:
            return "R1"
        if self.box is None and vt is None and self.convexity_report().conditions["prop10_convexity"].holds:
            return "R3"
        return "R2"

    def _build(self) -> cp.Problem:
        r"""The lifted SDP (quadratic losses) or the CCP majorizer (other losses); both keep
        :math:`\varphi` in ``cp.Parameter`` s."""
        return self._build_r2()[0] if self.is_quadratic else self._build_ccp()[0]

    def _build_r2(self):
        if self._r2 is None:
            Q, r, c = self.objectives.quadratic_forms()
            self._r2 = qd.build_r2(Q, r, c, self.A, self.B, box=self.box, rlt=True)
        return self._r2

    # ------------------------------------------------------------------ solve
    def solve(self, solver: str | None = None, gap_tol: float = DEFAULT_GAP_TOL, verbose: bool = False,
              method: str = "auto", refine: bool = True, n_starts: int = 3, max_iter: int = 50, seed=0,
              max_nodes: int = 100, **solver_options) -> Solution:
        r"""Solve and certify (same leading arguments as :meth:`Problem.solve`).

        Parameters
        ----------
        solver : a CVXPY solver to try first.
        gap_tol : relative certificate gap for ``"optimal"``.
        method : ``"auto"`` (see :meth:`choose_method`), ``"FederatedDRO"`` (:math:`\varphi=0`
            only), ``"R1"``, ``"R2"``, ``"R3"`` (quadratic losses) or ``"local"``.
        refine : R2 only: when the gap is open, run the convex--concave procedure from the extracted
            point, then the multi-start local search (it can only lower :math:`U`).
        n_starts, max_iter, seed : the local (CCP) search: number of starts, iterations per start,
            seed of the random starts.
        max_nodes : R2 with a box: if the root relaxation does not certify, a spatial
            branch-and-bound (:meth:`branch_and_bound`) with at most this many SDP solves
            (0 disables it).
        """
        check_choice(method, "method", METHODS)
        gap_tol = check_real(gap_tol, "gap_tol", low=0.0)
        n_starts = check_int(n_starts, "n_starts", low=1)
        max_iter = check_int(max_iter, "max_iter", low=1)
        max_nodes = check_int(max_nodes, "max_nodes", low=0)
        t0 = time.perf_counter()
        m = self.choose_method() if method == "auto" else method
        if m in ("R1", "R2", "R3") and not self.is_quadratic:
            raise InvalidParameterError(f"method {m!r} needs a quadratic loss (Squared); got {self.loss!r}")
        if m == "FederatedDRO" and (self.phi != 0 or self.box is not None):
            raise InvalidParameterError("method 'FederatedDRO' is the phi = 0 reduction without a box; "
                                        f"got phi={self.phi}, box={'set' if self.box is not None else None}")
        if m == "R3" and self.box is not None:
            raise InvalidParameterError("method 'R3' needs Theta = R^d (box=None); use 'R1' or 'R2' with a box")
        opts = dict(solver=solver, gap_tol=gap_tol, verbose=verbose, solver_options=solver_options)
        if m == "FederatedDRO":
            sol = self._solve_dro(**opts)
        elif m == "R1":
            sol = self._solve_r1(**opts)
        elif m == "R3":
            sol = self._solve_r3(**opts)
        elif m == "R2":
            sol = self._solve_r2(refine=refine, max_iter=max_iter, n_starts=n_starts, seed=seed,
                                 max_nodes=max_nodes, **opts)
        else:
            sol = self._solve_local(n_starts=n_starts, max_iter=max_iter, seed=seed, **opts)
        self._last_method = m
        sol.info["method"] = m
        sol.info["phi"] = self.phi
        sol.info["box"] = None if self.box is None else [self.box[0], self.box[1]]
        sol.info["gap_tol"] = gap_tol
        if sol.client_losses is not None:
            sol.info["indices"] = self.indices(sol.client_losses)
        sol.info["solve_time"] = time.perf_counter() - t0
        sol.problem = self
        return sol

    # ---- indices ------------------------------------------------------------------------
    def indices(self, losses) -> dict:
        r""":math:`\mathfrak R_{A,B}` (this problem's sets), 20:20, Palma, Atkinson (infinite
        aversion), Gini and :math:`\max/\min` of a loss vector (:mod:`drflmodel.metrics`)."""
        from .. import metrics

        f = np.asarray(losses, float)
        out = {}
        try:
            out["relative_unfairness"] = metrics.relative_unfairness(f, self.A, self.B)
        except (InvalidDataError, InvalidParameterError) as exc:
            out["relative_unfairness"] = None
            out["relative_unfairness_error"] = str(exc)
        try:
            out.update(metrics.summary_indices(f))
        except (InvalidDataError, InvalidParameterError) as exc:
            out["summary_error"] = str(exc)
        return out

    # ---- solver loop ----------------------------------------------------------------------
    def _solver_order(self, prob: cp.Problem, solver):
        has_sdp = any(isinstance(c, cp.constraints.PSD) for c in prob.constraints) or any(
            v.attributes.get("PSD") for v in prob.variables())
        order = ["CLARABEL", "SCS"] if has_sdp else ["CLARABEL", "ECOS", "SCS"]
        avail = set(installed_solvers())
        order = [s for s in order if s in avail]
        if solver is not None:
            order = [solver.upper()] + [s for s in order if s != solver.upper()]
        return order

    def _run_solvers(self, prob, solver, verbose, solver_options, certify, exact: bool = True):
        """Try solvers in order; ``certify(name)`` turns a solved problem into a Solution. Stops at the
        first ``"optimal"`` answer (for a relaxation, ``exact=False``, at the first answer that is not
        ``"failed"``: its gap is structural, another solver cannot close it); returns the best
        (smallest relative gap) with ``info["attempts"]``."""
        attempts, best = [], None
        order = self._solver_order(prob, solver)
        for k, name in enumerate(order):
            opts = {**SOLVER_OPTIONS.get(name, {}), **(solver_options if k == 0 else {})}
            t0 = time.perf_counter()
            try:
                _quiet_solve(prob, solver=name, verbose=verbose, **opts)
            except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
                attempts.append({"solver": name, "error": str(exc)[:200]})
                continue
            rec = {"solver": name, "cvxpy_status": prob.status, "time": time.perf_counter() - t0,
                   "cvxpy_value": prob.value}
            if prob.status not in _OK:
                attempts.append(rec)
                continue
            sol = certify(name)
            rec.update(status=sol.status, relative_gap=sol.relative_gap)
            attempts.append(rec)
            if best is None or sol.relative_gap < best.relative_gap:
                best = sol
            if sol.status == "optimal" or (not exact and sol.status != "failed"):
                break
        if best is None:
            best = self._failed_solution(attempts)
        best.info["attempts"] = attempts
        best.info.setdefault("solver", next((a["solver"] for a in reversed(attempts) if "status" in a), None))
        return best

    def _solution(self, theta, L, status, certificate, gap_tol, duals=None, info=None) -> Solution:
        theta = self._feasible(theta)
        losses = self.client_losses(theta)
        U = self.objective(theta)
        lam, a, b = self.worst_case_weights(theta)
        if status is None:
            from ..solution import status_from_gap
            status = status_from_gap(L, U, gap_tol)
        info = dict(info or {})
        lam_bar = (duals or {}).get("lambda_bar")
        if lam_bar is not None:
            # saddle check of spec §14.3 (verification protocol, step 3): the (projected) gradient of
            # lam_bar^T f at theta vanishes at a saddle point
            grad = np.asarray(lam_bar, float) @ self.objectives.gradients(theta)
            step = theta - grad if self.box is None else np.clip(theta - grad, self.box[0], self.box[1])
            info["stationarity_residual"] = float(np.linalg.norm(theta - step))
        return Solution(theta=theta, weights=lam, client_losses=losses, value=U, lower_bound=float(L),
                        upper_bound=U, status=status, certificate=certificate,
                        duals={"a": a, "b": b, **(duals or {})}, info=info)

    # ---- phi = 0: delegate ----------------------------------------------------------------
    def _solve_dro(self, solver, gap_tol, verbose, solver_options):
        from .dro import FederatedDRO

        dro = FederatedDRO(self.federation, self.loss, weights=self.A, l2=self.l2)
        sol = dro.solve(solver=solver, gap_tol=gap_tol, verbose=verbose, **solver_options)
        sol.info["delegated_to"] = "FederatedDRO (phi = 0 reduction, spec §4.4: Lambda_0(A, B) = A)"
        if sol.theta is not None:
            lam, a, b = self.worst_case_weights(sol.theta)
            sol.duals = {**sol.duals, "b": b}
        return sol

    # ---- R1 -------------------------------------------------------------------------------
    def _solve_r1(self, solver, gap_tol, verbose, solver_options):
        V = self.vertex_weights()
        if V is None:
            raise NotConvexError(f"R1 needs at most {MAX_VERTEX_PAIRS} vertex pairs; use method='R2'")
        Q, r, c = self.objectives.quadratic_forms()
        prob, theta, t, vcons = qd.build_r1(Q, r, c, V, box=self.box)   # raises NotConvexError if not PSD

        def certify(name):
            mu = np.array([float(np.asarray(cn.dual_value).reshape(-1)[0]) for cn in vcons])
            mu = np.maximum(mu, 0.0)
            lam_bar = (mu / mu.sum()) @ V if mu.sum() > 0 else V[0]
            L, _ = qd.min_quadratic(*qd.aggregate(Q, r, c, lam_bar), box=self.box)
            info = {"solver": name, "r1_value": float(prob.value), "n_vertices": int(V.shape[0]),
                    "lower_bound_kind": "weak duality: min over Theta of lam_bar^T f, lam_bar = vertex "
                                        "multipliers' convex combination (in Lambda_phi)"}
            return self._solution(theta.value, L, None, "R1 vertex SOCP + weak duality at the multipliers",
                                  gap_tol, duals={"lambda_bar": lam_bar, "vertex_multipliers": mu}, info=info)

        return self._run_solvers(prob, solver, verbose, solver_options, certify)

    # ---- R3 -------------------------------------------------------------------------------
    def _solve_r3(self, solver, gap_tol, verbose, solver_options):
        Q, r, c = self.objectives.quadratic_forms()
        n = self.n_clients
        a, b = cp.Variable(n, name="a"), cp.Variable(n, name="b")
        S = qd.preconditioner(Q)      # theta = S z: same dual optimum, better-conditioned matrices
        Qs, rs = np.einsum("jk,ikl,lm->ijm", S, Q, S), r @ S
        prob, lam = qd.build_r3(Qs, rs, c, a, b, self.phi, self.A.constraints(a) + self.B.constraints(b))

        def certify(name):
            av = self.A.project(np.asarray(a.value, float))   # exactly feasible -> valid weak-duality bound
            bv = self.B.project(np.asarray(b.value, float))
            lam_bar = (av - self.phi * bv) / (1.0 - self.phi)
            L, z = qd.min_quadratic(*qd.aggregate(Qs, rs, c, lam_bar), box=None)
            if z is None:
                Pz, qz, _ = qd.aggregate(Qs, rs, c, lam_bar)
                z = np.linalg.lstsq(Pz, qz, rcond=None)[0]
            theta = S @ z
            info = {"solver": name, "r3_value": float(prob.value),
                    "lower_bound_kind": "weak duality: min_theta lam*^T f (closed form) at the R3 dual optimum"}
            return self._solution(theta, L, None, "R3 matrix-fractional dual + weak duality", gap_tol,
                                  duals={"lambda_bar": lam_bar, "a_dual": av, "b_dual": bv}, info=info)

        return self._run_solvers(prob, solver, verbose, solver_options, certify)

    # ---- R2 -------------------------------------------------------------------------------
    def _solve_r2(self, solver, gap_tol, verbose, solver_options, refine, max_iter, n_starts, seed, max_nodes):
        prob, h = self._build_r2()
        h["p1"].value = 1.0 / (1.0 - self.phi)
        h["p2"].value = self.phi / (1.0 - self.phi)
        d = self.dim

        def certify(name):
            Mv = np.asarray(h["M"].value, float)
            Mv = 0.5 * (Mv + Mv.T)
            w, V = np.linalg.eigh(Mv)
            rank_ratio = float(max(w[-2], 0.0) / w[-1]) if w[-1] > 0 else float("inf")
            cands = [Mv[:d, d]]
            if abs(V[d, -1]) > 1e-12:
                cands.append(V[:d, -1] / V[d, -1])
            cands = [self._feasible(cnd) for cnd in cands]
            vals = [self.objective(cnd) for cnd in cands]
            theta = cands[int(np.argmin(vals))]
            L = float(prob.value)
            info = {"solver": name, "sdp_value": L, "lifted_eigenvalues": w,
                    "rank_one_ratio": rank_ratio, "rank_one": bool(rank_ratio <= RANK_TOL),
                    "rlt_cuts": self.box is not None, "extracted_objective": float(min(vals)),
                    "lower_bound_kind": "lifted Shor SDP value (a relaxation of the problem)"}
            U = float(min(vals))
            if refine and relative_gap(L, U) > gap_tol:
                th2, U2, it = self._ccp(theta, max_iter=max_iter)
                info.update(refined=True, refine_iterations=it, refine_improvement=U - U2)
                if U2 < U:
                    theta, U = th2, U2
                if relative_gap(L, U) > gap_tol and n_starts > 1:
                    th3, U3, runs = self.local_search(n_starts=n_starts, max_iter=max_iter, seed=seed)
                    info.update(multistart_values=[r_["value"] for r_ in runs])
                    if U3 < U:
                        theta, U = th3, U3
            closed = relative_gap(L, U) <= gap_tol
            status = "optimal" if (closed and rank_ratio <= RANK_TOL) else "optimal_within_gap"
            cert = "lifted SDP (Shor" + (" + RLT" if self.box is not None else "") + ") bound, rank-one check"
            if status != "optimal" and self.box is not None and max_nodes > 0 and not closed:
                bb = self.branch_and_bound(theta, U, L, gap_tol=gap_tol, max_nodes=max_nodes)
                info["branch_and_bound"] = {k: v for k, v in bb.items() if k != "theta"}
                theta, U, L = bb["theta"], bb["upper"], max(L, bb["lower"])
                if relative_gap(L, U) <= gap_tol:
                    status = "optimal"
                    cert = ("spatial branch-and-bound over the box: lifted SDP + RLT bound on every leaf "
                            f"({bb['nodes']} nodes)")
            if relative_gap(L, U) < -max(gap_tol, 1e-6):
                status = "failed"
            return self._solution(theta, L, status, cert, gap_tol, info=info)

        return self._run_solvers(prob, solver, verbose, solver_options, certify, exact=False)

    def branch_and_bound(self, theta, upper: float, lower: float, gap_tol: float = DEFAULT_GAP_TOL,
                         max_nodes: int = 100, time_limit: float = 60.0) -> dict:
        r"""Spatial branch-and-bound over the box for quadratic losses.

        Every node is a sub-box :math:`[l,u]\subseteq\Theta`; its bound is the lifted SDP with the
        RLT cuts of that sub-box (a relaxation of the problem restricted to it), and never below its
        parent's. The node with the smallest bound is split at the midpoint of its widest side
        (relative to the root box). The point extracted from each node's lifted matrix, clipped into
        the node, is a feasible candidate for the incumbent. Nodes whose bound is within ``gap_tol``
        of the incumbent are closed. The returned ``lower`` is the minimum bound over all leaves
        (open and closed), a valid lower bound of the problem over the whole box; ``upper`` is
        :meth:`objective` at ``theta``. Starts from the root's ``lower`` bound and incumbent.
        """
        import heapq

        if self.box is None or not self.is_quadratic:
            raise InvalidParameterError("branch_and_bound needs a quadratic loss and a box")
        prob, h = self._build_r2()
        h["p1"].value = 1.0 / (1.0 - self.phi)
        h["p2"].value = self.phi / (1.0 - self.phi)
        lo0, hi0 = self.box
        width0 = np.where(hi0 > lo0, hi0 - lo0, 1.0)
        d = self.dim
        best_theta, U = self._feasible(theta), float(upper)
        heap = [(float(lower), 0, lo0.copy(), hi0.copy())]
        closed_min, count, nodes, t0 = float("inf"), 1, 0, time.perf_counter()
        try:
            while heap and nodes < max_nodes and time.perf_counter() - t0 < time_limit:
                if relative_gap(min(heap[0][0], closed_min), U) <= gap_tol:
                    break
                bnd, _, lo, hi = heapq.heappop(heap)
                if relative_gap(bnd, U) <= gap_tol:
                    closed_min = min(closed_min, bnd)
                    continue
                j = int(np.argmax((hi - lo) / width0))
                mid = 0.5 * (lo[j] + hi[j])
                for clo, chi in ((lo, np.where(np.arange(d) == j, mid, hi)),
                                 (np.where(np.arange(d) == j, mid, lo), hi)):
                    qd.set_box(h, clo, chi)
                    nodes += 1
                    try:
                        _quiet_solve(prob, solver="CLARABEL", **SOLVER_OPTIONS["CLARABEL"])
                        ok = prob.status in _OK
                    except cp.error.SolverError:
                        ok = False
                    v = bnd
                    if ok:
                        v = max(bnd, float(prob.value))
                        Mv = np.asarray(h["M"].value, float)
                        cand = np.clip(Mv[:d, d], clo, chi)
                        gc = self.objective(cand)
                        if gc < U:
                            best_theta, U = cand, gc
                    if relative_gap(v, U) <= gap_tol:
                        closed_min = min(closed_min, v)
                    else:
                        heapq.heappush(heap, (v, count, clo, chi))
                        count += 1
        finally:
            qd.set_box(h, lo0, hi0)
        L = min([heap[0][0]] if heap else [float("inf")])
        L = min(L, closed_min, U) if (heap or np.isfinite(closed_min)) else U
        return {"theta": best_theta, "upper": U, "lower": float(L), "nodes": nodes,
                "open_nodes": len(heap), "time": time.perf_counter() - t0}

    # ------------------------------------------------------------------ local (DC) machinery
    def _build_ccp(self):
        if self._ccp_cache is None:
            n, d = self.n_clients, self.dim
            theta = cp.Variable(d, name="theta")
            const = cp.Parameter(n, name="lin_const")
            J = cp.Parameter((n, d), name="lin_jac")
            p1 = cp.Parameter(nonneg=True, name="p1")
            p2 = cp.Parameter(nonneg=True, name="p2")
            f = cp.hstack(self.objectives.expressions(theta))
            lin = cp.Variable(n, name="lin_f")              # the linearized losses (keeps DPP)
            tA, tB = cp.Variable(name="sigma_A"), cp.Variable(name="sigma_B")
            obj = p1 * tA + p2 * tB
            cons = [lin == const + J @ theta, self.A.support_expr(f) <= tA, self.B.support_expr(-lin) <= tB]
            if self.box is not None:
                cons += [theta >= self.box[0], theta <= self.box[1]]
            self._ccp_cache = (cp.Problem(cp.Minimize(obj), cons), theta, const, J, p1, p2)
        return self._ccp_cache

    def _ccp(self, theta0, max_iter: int = 50, tol: float = 1e-10):
        r"""Convex--concave procedure (majorize--minimize) from ``theta0``.

        :math:`-\varphi F_{B,\min}(\theta)=\varphi\max_{b}(-b^\top f(\theta))` and each
        :math:`-b^\top f` is concave, so replacing :math:`f` by its linearization
        :math:`\tilde f_k(\theta)=f(\theta_k)+J_k(\theta-\theta_k)` inside :math:`F_{B,\min}` gives a
        convex majorizer :math:`G_k(\theta)=\frac{1}{1-\varphi}[\sigma_A(f(\theta))+\varphi\sigma_B(-\tilde f_k(\theta))]
        \ge g(\theta)` with equality at :math:`\theta_k`; minimizing it cannot increase :math:`g`.
        Returns ``(theta, g(theta), iterations)``.
        """
        prob, theta, const, J, p1, p2 = self._build_ccp()
        p1.value = 1.0 / (1.0 - self.phi)
        p2.value = self.phi / (1.0 - self.phi)
        th = self._feasible(theta0)
        g = self.objective(th)
        it = 0
        for it in range(1, max_iter + 1):
            fk = self.client_losses(th)
            Jk = self.objectives.gradients(th)
            const.value = fk - Jk @ th
            J.value = Jk
            try:
                _quiet_solve(prob, solver="CLARABEL", **SOLVER_OPTIONS["CLARABEL"])
            except cp.error.SolverError:
                try:
                    _quiet_solve(prob, solver="SCS", **SOLVER_OPTIONS["SCS"])
                except cp.error.SolverError:
                    break
            if prob.status not in _OK or theta.value is None:
                break
            new = self._feasible(theta.value)
            gn = self.objective(new)
            if gn < g:
                improved = g - gn
                th, g = new, gn
                if improved <= tol * max(1.0, abs(g)):
                    break
            else:
                break
            if self.phi == 0:   # the majorizer is exact: one step is the global minimum
                break
        return th, g, it

    def _starts(self, n_starts: int, seed, base: np.ndarray) -> list[np.ndarray]:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        starts = [base]
        for _ in range(n_starts - 1):
            if self.box is not None:
                starts.append(rng.uniform(self.box[0], self.box[1]))
            else:
                scale = max(1.0, float(np.linalg.norm(base)))
                starts.append(base + scale * rng.normal(size=self.dim) / np.sqrt(self.dim))
        return starts

    def local_search(self, n_starts: int = 3, max_iter: int = 50, seed=0, starts=None):
        r"""Multi-start convex--concave procedure. The first start is the minimizer of the convex
        :math:`\varphi=0` surrogate :math:`\sigma_A(f(\theta))` over :math:`\Theta`; the others are
        seeded random points (uniform in the box, or Gaussian around the first start). Returns
        ``(theta, value, runs)`` with one record per start."""
        if starts is None:
            base = self._phi0_point()
            starts = self._starts(n_starts, seed, base)
        runs = []
        best = (None, float("inf"))
        for s in starts:
            th, g, it = self._ccp(s, max_iter=max_iter)
            runs.append({"start": np.asarray(s, float), "theta": th, "value": g, "iterations": it})
            if g < best[1]:
                best = (th, g)
        return best[0], best[1], runs

    def _phi0_point(self) -> np.ndarray:
        prob, theta, const, J, p1, p2 = self._build_ccp()
        p1.value, p2.value = 1.0, 0.0
        const.value = np.zeros(self.n_clients)
        J.value = np.zeros((self.n_clients, self.dim))
        try:
            _quiet_solve(prob, solver="CLARABEL", **SOLVER_OPTIONS["CLARABEL"])
        except cp.error.SolverError:
            pass
        if theta.value is None:
            return np.zeros(self.dim) if self.box is None else 0.5 * (self.box[0] + self.box[1])
        return self._feasible(theta.value)

    # ---- lower bounds for the local route --------------------------------------------------
    def _weighted_min(self, lam: np.ndarray):
        r"""``(value, theta)``: :math:`\min_{\theta\in\Theta}\lambda^\top f(\theta)` for :math:`\lambda\ge0`
        (convex, DCP), the optimal value reported by Clarabel at the documented tight tolerances
        (the project's convention for "fix the weights and minimize", as in FederatedDRO);
        ``(-inf, None)`` if unbounded or unsolved. For smooth losses the value is made
        solver-independent by :meth:`_convex_min_bound` where that applies."""
        if self._wmin is None:
            theta = cp.Variable(self.dim, name="theta_w")
            lp = cp.Parameter(self.n_clients, nonneg=True, name="lam_w")
            f = cp.hstack(self.objectives.expressions(theta))
            cons = [] if self.box is None else [theta >= self.box[0], theta <= self.box[1]]
            self._wmin = (cp.Problem(cp.Minimize(lp @ f), cons), theta, lp)
        prob, theta, lp = self._wmin
        lp.value = np.maximum(lam, 0.0)
        for name in ("CLARABEL", "SCS"):
            try:
                _quiet_solve(prob, solver=name, **SOLVER_OPTIONS[name])
            except cp.error.SolverError:
                continue
            if prob.status in _OK:
                th = self._feasible(theta.value)
                rig = self._convex_min_bound(lam, th)
                return (float(prob.value) if rig is None else rig), th
            if prob.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
                return float("-inf"), None
        return float("-inf"), None

    def _convex_min_bound(self, lam, theta):
        r"""A numpy lower bound of :math:`\min_{\Theta}h`, :math:`h=\lambda^\top f` (:math:`\lambda\ge0`,
        smooth losses), at a point :math:`\hat\theta`: with :math:`s=\nabla h(\hat\theta)` and
        :math:`\mu=\sum_i\lambda_i\mu_i`, :math:`h(\theta)\ge h(\hat\theta)+s^\top(\theta-\hat\theta)
        +\frac\mu2\|\theta-\hat\theta\|^2`, minimized in closed form over the box (Frank--Wolfe when
        :math:`\mu=0`) or over :math:`\mathbb R^d` (needs :math:`\mu>0`). ``None`` if not applicable."""
        if not np.isfinite(self.loss.smoothness):
            return None
        lam = np.maximum(np.asarray(lam, float), 0.0)
        mu = float(lam @ self.objectives.strong_convexity())
        h = float(lam @ self.client_losses(theta))
        s = lam @ self.objectives.gradients(theta)
        if self.box is not None:
            lo, hi = self.box[0] - theta, self.box[1] - theta
            t = np.where(s > 0, lo, hi) if mu <= 0 else np.clip(-s / mu, lo, hi)
            return h + float(s @ t) + 0.5 * max(mu, 0.0) * float(t @ t)
        if mu > 0:
            return h - float(s @ s) / (2 * mu)
        return None

    def kelley_bound(self, cuts, max_iter: int = 15, tol: float = 1e-7) -> dict:
        r"""Weak duality over the **nonnegative part** :math:`\Lambda^+=\Lambda_\varphi\cap\mathbb R^n_{\ge0}`:
        for every :math:`\lambda\in\Lambda^+`, :math:`D(\lambda)=\min_{\theta\in\Theta}\lambda^\top f(\theta)
        \le\min_\theta\max_{\Lambda^+}\le\min_\theta\max_{\Lambda_\varphi}` (a convex problem, since
        :math:`\lambda\ge0`). :math:`D` is maximized by Kelley's cutting planes
        (:math:`D(\lambda)\le\lambda^\top f(\theta_j)` for every evaluated :math:`\theta_j`; each
        master problem is an LP over :math:`(a,b)\in A\times B`). ``cuts`` are initial loss
        vectors :math:`f(\theta_j)`. Returns ``{"value", "lam", "iterations", "model_gap"}``; value
        :math:`-\infty` if :math:`\Lambda^+` is empty."""
        n, phi = self.n_clients, self.phi
        a, b, s = cp.Variable(n), cp.Variable(n), cp.Variable()
        lam = (a - phi * b) / (1 - phi)
        base = self.A.constraints(a) + self.B.constraints(b) + [lam >= 0]
        cuts = [np.asarray(c_, float) for c_ in cuts]
        best, best_lam, it, model = float("-inf"), None, 0, float("inf")
        for it in range(1, max_iter + 1):
            F = np.array(cuts)
            prob = cp.Problem(cp.Maximize(s), base + [s <= F @ lam])
            try:
                _quiet_solve(prob, solver="CLARABEL")
            except cp.error.SolverError:
                break
            if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
                return {"value": float("-inf"), "lam": None, "iterations": it, "model_gap": None,
                        "note": "Lambda_phi has no nonnegative element"}
            if prob.status not in _OK:
                break
            model = float(prob.value)
            # project a, b onto A, B: lam is then exactly in Lambda_phi; the LP kept lam >= 0, so
            # any negative entry left is solver round-off (clipped, at most ~1e-9)
            av = self.A.project(np.asarray(a.value, float))
            bv = self.B.project(np.asarray(b.value, float))
            lv = (av - phi * bv) / (1 - phi)
            if lv.min() < -1e-8:
                break
            val, th = self._weighted_min(lv)
            if val > best:
                best, best_lam = val, lv
            if th is None:
                break
            cuts.append(self.client_losses(th))
            if model - best <= tol * max(1.0, abs(best)):
                break
        return {"value": best, "lam": best_lam, "iterations": it,
                "model_gap": (model - best) if np.isfinite(best) else None}

    def strong_convexity_bound(self, theta) -> dict | None:
        r"""Valid when Prop 10 holds strictly (smooth losses): every :math:`\lambda^\top f` with
        :math:`\lambda\in\Lambda_\varphi` is :math:`\mu`-strongly convex,
        :math:`\mu=m_f-\frac{M_f-m_f}2(\|\Lambda_\varphi\|_1-1)>0` (Lemma 8), so for any
        :math:`\lambda\in\Lambda_\varphi`

        .. math:: \min_\Theta g\ \ge\ \min_{\theta\in\Theta}\lambda^\top f(\theta)\ \ge\
           \lambda^\top f(\hat\theta)+\min_{\theta\in\Theta}\big[s^\top(\theta-\hat\theta)+\tfrac\mu2\|\theta-\hat\theta\|^2\big],
           \quad s=\textstyle\sum_i\lambda_i\nabla f_i(\hat\theta),

        (closed form per coordinate on a box). :math:`\lambda` maximizes the unconstrained version
        :math:`\lambda^\top f(\hat\theta)-\|s\|^2/(2\mu)` over :math:`A\times B` (a concave QP).
        Returns ``None`` when the condition fails."""
        m, M = self.curvature_constants()
        if not np.isfinite(M):
            return None
        mu = m - (M - m) * (self.norm1() - 1) / 2
        if not mu > 0:
            return None
        theta = np.asarray(theta, float)
        fv = self.client_losses(theta)
        G = self.objectives.gradients(theta)
        n, phi = self.n_clients, self.phi
        a, b = cp.Variable(n), cp.Variable(n)
        lam = (a - phi * b) / (1 - phi)
        prob = cp.Problem(cp.Maximize(fv @ lam - cp.sum_squares(G.T @ lam) / (2 * mu)),
                          self.A.constraints(a) + self.B.constraints(b))
        try:
            _quiet_solve(prob, solver="CLARABEL")
        except cp.error.SolverError:
            return None
        if prob.status not in _OK:
            return None
        av = self.A.project(np.asarray(a.value, float))
        bv = self.B.project(np.asarray(b.value, float))
        lv = (av - phi * bv) / (1 - phi)
        s = lv @ G
        if self.box is None:
            val = float(lv @ fv - s @ s / (2 * mu))
        else:
            t = np.clip(-s / mu, self.box[0] - theta, self.box[1] - theta)
            val = float(lv @ fv + s @ t + 0.5 * mu * t @ t)
        return {"value": val, "lam": lv, "mu": mu}

    def lower_bounds(self, theta, cuts=()) -> dict:
        """All valid lower bounds available at ``theta`` (see :meth:`kelley_bound` and
        :meth:`strong_convexity_bound`); ``"best"`` is the largest with its method."""
        out = {}
        kb = self.kelley_bound([self.client_losses(theta), *cuts])
        out["weak_duality_nonnegative_part"] = kb
        sc = self.strong_convexity_bound(theta)
        if sc is not None:
            out["strong_convexity_prop10"] = sc
        name, best = max(((k, v["value"]) for k, v in out.items()), key=lambda kv: kv[1])
        out["best"] = {"method": name, "value": best}
        return out

    def _solve_local(self, solver, gap_tol, verbose, solver_options, n_starts, max_iter, seed):
        t0 = time.perf_counter()
        theta, U, runs = self.local_search(n_starts=n_starts, max_iter=max_iter, seed=seed)
        t_local = time.perf_counter() - t0
        bounds = self.lower_bounds(theta, cuts=[self.client_losses(r["theta"]) for r in runs])
        L = bounds["best"]["value"]
        closed = relative_gap(L, U) <= gap_tol
        if closed:
            status = "optimal"
        elif self.phi == 0:
            status = "optimal_within_gap" if np.isfinite(L) else "local"   # convex: CCP is exact
        else:
            status = "local"
        info = {"local_runs": [{k: v for k, v in r.items()} for r in runs], "local_time": t_local,
                "lower_bounds": bounds, "lower_bound_kind": bounds["best"]["method"],
                "note": "no exact reformulation is known for non-quadratic losses with phi > 0 "
                        "(a DC program); theta is a local solution of the convex-concave procedure"}
        return self._solution(theta, L, status, f"local CCP; lower bound: {bounds['best']['method']}",
                              gap_tol, info=info)

    def __repr__(self) -> str:
        return (f"RelativeFairness(n_clients={self.n_clients}, dim={self.dim}, loss={self.loss!r}, "
                f"A={self.A!r}, B={self.B!r}, phi={self.phi}, l2={self.l2}, "
                f"box={'None' if self.box is None else 'set'})")


def _pair_phi(Pa, Pb, pa_pd: bool, scale: float, tol: float) -> float:
    r""":math:`\sup\{\varphi\in[0,1]: P_a-\varphi P_b\succeq0\}` for PSD :math:`P_a, P_b`."""
    if pa_pd:
        mu = scipy.linalg.eigh(Pb, Pa, eigvals_only=True)
        mmax = float(mu.max())
        return 1.0 if mmax <= 1.0 else 1.0 / mmax
    ok = lambda p: np.linalg.eigvalsh(Pa - p * Pb)[0] >= -1e-10 * scale  # noqa: E731
    if ok(1.0):
        return 1.0
    lo, hi = 0.0, 1.0
    if not ok(0.0):
        return 0.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


# ==============================================================================================
# phi selection (spec §9 with §14.1 items 6-7)
# ==============================================================================================
@dataclass
class PhiSelection:
    r"""Result of :func:`select_phi`: :math:`\varphi` and the quantities of spec §9,
    :math:`\mathfrak a=a_0^{\star\top}f(\theta_0^\star)`, :math:`\mathfrak b=b_0^{\star\top}f(\theta_0^\star)`,
    :math:`\mathfrak c=g^\top H^{-1}g`."""

    phi: float
    raw_phi: float
    clipped: bool
    a: float
    b: float
    c: float
    theta0: np.ndarray
    a0: np.ndarray
    b0: np.ndarray

    def __float__(self) -> float:
        return float(self.phi)

    def to_dict(self) -> dict:
        return jsonable(self.__dict__)


def select_phi(federation, loss, A, B, l2: float = 0.0, solution: Solution | None = None) -> PhiSelection:
    r"""The :math:`\varphi`-selection rule of spec §9 (paper §5.3, eq. (8)), in the errata's stable form.

    1. Solve the :math:`\varphi=0` problem (federated DRO over :math:`A`; or pass ``solution``):
       :math:`\theta_0^\star`, :math:`a_0^\star` (its worst-case weights),
       :math:`b_0^\star\in\operatorname{argmin}_{b\in B}b^\top f(\theta_0^\star)`.
    2. :math:`H=\sum_ia^\star_{0,i}\nabla^2f_i(\theta_0^\star)`, :math:`g=\sum_ib^\star_{0,i}\nabla f_i(\theta_0^\star)`,
       :math:`\mathfrak c=g^\top H^{-1}g` (by solving :math:`Hv=g`, Cholesky; errata item 7).
    3. :math:`\varphi=\mathfrak a/(\mathfrak b+\sqrt{\mathfrak b^2+1.5\,\mathfrak a\mathfrak c})`,
       clipped to :math:`[0,1-10^{-6}]` (errata item 6).

    Raises :class:`~drflmodel.errors.NotConvexError` if :math:`H` is not positive definite (then
    :math:`\mathfrak c` is undefined or negative) and :class:`InvalidParameterError` for losses
    without a Hessian.
    """
    if not np.isfinite(loss.smoothness):
        raise InvalidParameterError(f"select_phi needs a twice-differentiable loss (Hessians); got {loss!r}")
    prob = RelativeFairness(federation, loss, A, B, phi=0.0, l2=l2)
    sol = prob.solve() if solution is None else solution
    if sol.theta is None:
        raise InvalidDataError(f"the phi = 0 problem could not be solved (status {sol.status})")
    theta0 = np.asarray(sol.theta, float)
    f0 = prob.client_losses(theta0)
    a0 = np.asarray(sol.weights, float) if sol.weights is not None else prob.A.worst_case(f0)[1]
    b0 = np.asarray(prob.B.worst_case(-f0)[1], float)
    H = np.einsum("i,ijk->jk", a0, prob.objectives.hessians(theta0))
    g = b0 @ prob.objectives.gradients(theta0)
    H = 0.5 * (H + H.T)
    ev = np.linalg.eigvalsh(H)
    try:
        if ev[0] <= 1e-12 * max(1.0, abs(ev[-1])):
            raise np.linalg.LinAlgError(f"smallest eigenvalue {ev[0]:.3g}")
        cho = scipy.linalg.cho_factor(H)
    except np.linalg.LinAlgError as exc:
        raise NotConvexError("select_phi: H = sum_i a0_i Hess f_i(theta0) is not positive definite, so "
                             "c = g^T H^{-1} g is undefined (spec §14.1 item 6); add l2 > 0") from exc
    c = float(g @ scipy.linalg.cho_solve(cho, g))
    a_ = float(a0 @ f0)
    b_ = float(b0 @ f0)
    disc = b_ * b_ + 1.5 * a_ * c
    if c < 0 or disc < 0 or b_ + math.sqrt(max(disc, 0.0)) <= 0:
        raise NotConvexError(f"select_phi: c = {c:.3g}, b = {b_:.3g} give no valid phi (spec §14.1 item 6)")
    raw = a_ / (b_ + math.sqrt(disc))
    phi = min(max(raw, 0.0), 1.0 - 1e-6)
    return PhiSelection(phi=phi, raw_phi=raw, clipped=bool(phi != raw), a=a_, b=b_, c=c, theta0=theta0,
                        a0=a0, b0=b0)
