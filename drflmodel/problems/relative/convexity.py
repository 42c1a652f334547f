r"""Convexity of the relative-fairness problem and the choice of :math:`\varphi`
(relative-fairness paper, §5.3 and Appendix C; the convexity conditions of Proposition 10,
Theorem 3 and Assumption 8).

* :class:`ConvexityAnalysis` (mixed into :class:`~.problem.RelativeFairness`): the exact vertex
  PSD test for quadratic losses, the three :math:`\|\Lambda_\varphi\|_1` conditions of Prop 10,
  Theorem 3 and Assumption 8 (:meth:`~ConvexityAnalysis.convexity_report`), and
  :meth:`~ConvexityAnalysis.max_convex_phi`;
* :class:`Condition`, :class:`ConvexityReport` -- the table of conditions;
* :func:`select_phi` -- the paper's :math:`\varphi`-selection rule (8) in a numerically stable form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ..._validation import check_choice, check_real
from ...errors import InvalidParameterError, NotConvexError
from ...sets import CVaR, Integrated, Simplex, WeightSet
from ...solution import jsonable

__all__ = ["ConvexityAnalysis", "ConvexityReport", "Condition", "MAX_VERTEX_PAIRS"]

#: largest number of (a-vertex, b-vertex) pairs for the exact vertex test and for R1
MAX_VERTEX_PAIRS = 400


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


@dataclass
class Condition:
    """One convexity / rate condition: ``value`` compared with ``threshold``."""

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
    r"""The convexity analysis for one :math:`\varphi` (see
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


class ConvexityAnalysis:
    r"""The convexity tests for a :class:`~.problem.RelativeFairness` (a mixin: it
    reads ``A``, ``B``, ``phi``, ``loss`` and ``objectives``)."""

    @property
    def is_quadratic(self) -> bool:
        return bool(self.loss.is_quadratic)

    def curvature_constants(self) -> tuple[float, float]:
        r""":math:`(m_f, M_f)`: the smallest strong-convexity and the largest smoothness modulus of the
        :math:`f_i` (Assumption A4; for the squared loss :math:`2\lambda_{\min/\max}(X_i^\top X_i/N_i)+\ell_2`)."""
        return float(np.min(self.objectives.strong_convexity())), float(np.max(self.objectives.smoothness()))

    def norm1(self, phi: float | None = None) -> float:
        """Exact :math:`\\|\\Lambda_\\varphi(A,B)\\|_1` (``Integrated.norm1``)."""
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
        r"""Exact convexity test for quadratic losses (derived here, not in the paper): :math:`\lambda^\top f`
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

    def prop10_condition(self, phi: float | None = None) -> Condition:
        r"""Prop 10 / Lemma 8 at :math:`\varphi`: :math:`\|\Lambda_\varphi\|_1<1+2m_f/(M_f-m_f)`
        (every :math:`\lambda^\top f` strongly convex; sufficient for convexity)."""
        phi = self.phi if phi is None else check_real(phi, "phi", low=0.0, high=1.0, high_open=True)
        m, M = self.curvature_constants()
        nrm = self.norm1(phi)
        thr10 = 1 + 2 * m / (M - m) if M > m else float("inf")
        return Condition("prop10_convexity", nrm, thr10, bool(nrm < thr10 or (M == m and m > 0)),
                         "<", "Prop 10 / Lemma 8: every lambda^T f strongly convex")

    def convexity_report(self, phi: float | None = None) -> ConvexityReport:
        r"""The table of convexity conditions for :math:`\varphi` (default: the problem's): each condition with
        its value, threshold and whether it holds, plus the exact vertex test for quadratics and
        :meth:`max_convex_phi` for each criterion."""
        phi = self.phi if phi is None else check_real(phi, "phi", low=0.0, high=1.0, high_open=True)
        m, M = self.curvature_constants()
        nrm = self.norm1(phi)
        inf = float("inf")
        conds = {
            "prop10_convexity": self.prop10_condition(phi),
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
