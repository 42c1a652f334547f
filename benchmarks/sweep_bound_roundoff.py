"""Can floating-point round-off lift a certified lower bound L above the optimum? A sweep over random
small least-squares federations (3 clients, 2 features, 4 rows each, ridge l2) for every weight set
kind that ``FederatedDRO`` certifies through its dual weights: chi-square penalty, KL penalty, CVaR,
the simplex (AFL), HCVaR (FAFL's set) and ``Integrated(CVaR, Simplex, phi=0)`` (relative fairness at
phi = 0, where it is a ``FederatedDRO`` set). Each instance is solved by the default route
(``solve()``) and by the conic route (``solve(method="conic")``). The last kind, ``relative``, is
``RelativeFairness`` with ``Integrated(CVaR, Simplex, phi)`` weights, phi in [0.05, 0.3] (negative
weights), solved by its exact routes R1 (vertex SOCP) and R3 (matrix-fractional dual).

The optimum is bracketed independently of drflmodel, in exact rational arithmetic
(``fractions.Fraction``; the KL penalty's logarithms and exponentials in 60-digit ``decimal``):

* ``lo`` = the exact dual value :math:`\\min_\\theta\\sum_i\\tilde\\lambda_if_i(\\theta)-\\psi(\\tilde\\lambda)` at
  weights :math:`\\tilde\\lambda` *exactly* in the set (each route's weights, repaired exactly when
  they are not: clipped to the caps, the missing or excess mass moved in rationals); the minimum
  over :math:`\\theta` of a quadratic is solved exactly. By weak duality ``lo`` <= optimum.
* ``hi`` = the exact objective :math:`\\max_{\\lambda\\in\\Lambda}\\lambda^\\top f(\\theta)-\\psi(\\lambda)` at
  each route's :math:`\\theta` (greedy over the caps, the chi-square projection, or
  :math:`\\tau\\log` of the mean of :math:`e^{f_i/\\tau}`), so optimum <= ``hi``.

Per set and route: the largest ``L - lo`` (an upper bound on ``L - optimum``: <= 0 proves no lower
bound exceeded the optimum), how many instances had ``L > hi`` (a proven false certificate), and the
largest bracket width ``hi - lo``. Run it with the drflmodel to measure first on the path:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/sweep_bound_roundoff.py [count]
"""

import sys
import time
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

import drflmodel as dm

N, DIM, ROWS = 3, 2, 4
ROUTES = ("default", "conic")


def _weight_set(kind, rng, proportions):
    if kind == "chi_square":
        return dm.sets.ChiSquare(N, float(10 ** rng.uniform(-2, 4)))
    if kind == "kl_penalty":
        return dm.sets.KLPenalty(N, float(10 ** rng.uniform(-2, 4)))
    if kind == "cvar":
        return dm.sets.CVaR(N, float(rng.uniform(0.34, 0.95)))
    if kind == "simplex":
        return dm.sets.Simplex(N)
    if kind == "hcvar":
        return dm.sets.HCVaR(proportions, float(rng.uniform(0.4, 0.95)))
    if kind == "integrated":
        return dm.sets.Integrated(dm.sets.CVaR(N, float(rng.uniform(0.34, 0.95))), dm.sets.Simplex(N), 0.0)
    raise ValueError(kind)


KINDS = ("chi_square", "kl_penalty", "cvar", "simplex", "hcvar", "integrated", "relative")
#: the routes compared per kind (relative fairness at phi > 0: its two exact routes)
ROUTES_OF = {"relative": ("R1", "R3")}


# ---------------------------------------------------------------- exact arithmetic
class Exact:
    """Client i's f_i(theta) = mean_j (x_j.theta - y_j)^2 + (l2/2)|theta|^2 as exact rational
    quadratics theta' A_i theta - 2 b_i' theta + c_i + (l2/2) theta' theta."""

    def __init__(self, fed, l2):
        self.l2 = Fraction(l2)
        self.A, self.b, self.c = [], [], []
        for cl in fed.clients:
            X = [[Fraction(float(v)) for v in row] for row in np.asarray(cl.X, float)]
            y = [Fraction(float(v)) for v in np.asarray(cl.y, float)]
            m = len(y)
            self.A.append([[sum(r[a] * r[b] for r in X) / m for b in range(DIM)] for a in range(DIM)])
            self.b.append([sum(r[a] * t for r, t in zip(X, y)) / m for a in range(DIM)])
            self.c.append(sum(t * t for t in y) / m)

    def losses(self, theta):
        th = [Fraction(float(v)) for v in theta]
        sq = sum(t * t for t in th)
        return [sum(th[a] * A[a][b] * th[b] for a in range(DIM) for b in range(DIM))
                - 2 * sum(bb[a] * th[a] for a in range(DIM)) + c + self.l2 / 2 * sq
                for A, bb, c in zip(self.A, self.b, self.c)]

    def weighted_minimum(self, lam):
        """min over theta of sum_i lam_i f_i(theta), exactly (lam >= 0, sum lam = 1 > 0)."""
        s = sum(lam)
        H = [[sum(l * A[a][b] for l, A in zip(lam, self.A)) + (self.l2 / 2 * s if a == b else 0)
              for b in range(DIM)] for a in range(DIM)]
        g = [sum(l * bb[a] for l, bb in zip(lam, self.b)) for a in range(DIM)]
        x = _solve(H, g)
        return sum(l * c for l, c in zip(lam, self.c)) - sum(gi * xi for gi, xi in zip(g, x))


def _solve(H, g):
    """H x = g in rationals (Gaussian elimination, H positive definite)."""
    n = len(g)
    M = [row[:] + [g[i]] for i, row in enumerate(H)]
    for k in range(n):
        for i in range(k + 1, n):
            r = M[i][k] / M[k][k]
            M[i] = [a - r * b for a, b in zip(M[i], M[k])]
    x = [Fraction(0)] * n
    for i in reversed(range(n)):
        x[i] = (M[i][n] - sum(M[i][j] * x[j] for j in range(i + 1, n))) / M[i][i]
    return x


def _box(W):
    """The set's exact (lower, upper) caps as rationals (the floats it holds)."""
    if isinstance(W, dm.sets.Integrated):
        return _box(W.A)
    bb = W.box_bounds()
    if bb is None:                                    # chi-square, KL: the simplex
        return [Fraction(0)] * N, [Fraction(1)] * N
    return [Fraction(float(v)) for v in bb[0]], [Fraction(float(v)) for v in bb[1]]


def _repair(W, lam):
    """``lam`` moved exactly into the set: clipped to the caps, then the mass missing from (or in
    excess of) one added to (taken from) the coordinates with room, largest first."""
    lo, up = _box(W)
    x = [min(max(Fraction(float(v)), a), b) for v, a, b in zip(lam, lo, up)]
    miss = 1 - sum(x)
    for i in sorted(range(N), key=lambda i: -x[i]):
        step = min(miss, up[i] - x[i]) if miss > 0 else max(miss, lo[i] - x[i])
        x[i] += step
        miss -= step
    assert miss == 0 and sum(x) == 1
    return x


def _dec(q):
    return Decimal(q.numerator) / Decimal(q.denominator)


def _psi(W, lam):
    """psi(lam) exactly (Fraction) or to 60 digits (Decimal) at an exact point of the simplex."""
    if isinstance(W, dm.sets.ChiSquare):
        return Fraction(W.rho) / (2 * N) * sum((N * v - 1) ** 2 for v in lam)
    if isinstance(W, dm.sets.KLPenalty):
        return _dec(Fraction(W.tau)) * sum(_dec(v) * (N * _dec(v)).ln() for v in lam if v > 0)
    return Fraction(0)


def _worst(W, f):
    """max over the set of lam.f - psi(lam), exactly (Fraction) or to 60 digits (Decimal)."""
    if isinstance(W, dm.sets.KLPenalty):
        t = _dec(Fraction(W.tau))
        top = max(f)
        return _dec(top) + t * (sum((_dec(v - top) / t).exp() for v in f) / N).ln()
    if isinstance(W, dm.sets.ChiSquare):
        rho = Fraction(W.rho)
        v = [Fraction(1, N) + fi / (rho * N) for fi in f]       # projection of v onto the simplex
        u = sorted(v, reverse=True)
        for k in range(N, 0, -1):
            t = (sum(u[:k]) - 1) / k
            if u[k - 1] - t > 0:
                break
        lam = [max(vi - t, 0) for vi in v]
        return sum(a * b for a, b in zip(lam, f)) - _psi(W, lam)
    lo, up = _box(W)
    lam, left = lo[:], 1 - sum(lo)
    for i in sorted(range(N), key=lambda i: -f[i]):
        add = min(left, up[i] - lam[i])
        lam[i] += add
        left -= add
    return sum(a * b for a, b in zip(lam, f))


def _as_dec(x):
    return _dec(x) if isinstance(x, Fraction) else x


def _relative_worst(prob, f):
    """max over Lambda_phi(A, B) of lam.f = (max_a a.f - phi min_b b.f) / (1 - phi), exactly."""
    phi = Fraction(prob.phi)
    return (_worst(prob.A, f) + phi * _worst(prob.B, [-v for v in f])) / (1 - phi)


def _decompose(prob, lam):
    """``(a, b)`` in A x B with (a - phi b)/(1 - phi) = ``lam`` when ``lam`` is in the set, in
    rationals: a = (1 - phi) lam + phi b must lie in A's box [l, u], i.e. b_i in
    [((1 - phi) lam_i - u_i)/(-phi) .. ] -- b is filled greedily inside the box that this and B's
    own box leave (both box-capped simplices), and :func:`_repair` then moves a and b exactly into
    A and B (a few ulps when ``lam`` is off the set by round-off)."""
    phi = Fraction(prob.phi)
    (la, ua), (lb, ub) = _box(prob.A), _box(prob.B)
    x = [Fraction(float(v)) for v in lam]
    low = [max(b0, (la_i - (1 - phi) * xi) / phi) for b0, la_i, xi in zip(lb, la, x)]
    high = [min(b1, (ua_i - (1 - phi) * xi) / phi) for b1, ua_i, xi in zip(ub, ua, x)]
    b = [min(lo_i, hi_i) for lo_i, hi_i in zip(low, high)]
    left = 1 - sum(b)
    for i in sorted(range(N), key=lambda i: -(high[i] - b[i])):
        step = max(min(left, high[i] - b[i]), 0)
        b[i] += step
        left -= step
    a = [(1 - phi) * xi + phi * bi for xi, bi in zip(x, b)]
    return [float(v) for v in a], [float(v) for v in b]


def measure_relative(seed):
    """Relative fairness at phi in [0.05, 0.3] (A = CVaR, B = the simplex; ridge l2 in [1, 4]):
    routes R1 and R3, or ``None`` when some vertex's aggregate is not convex (outside both routes).
    ``lo`` = the larger exact dual value at (a - phi b)/(1 - phi) with a, b moved exactly into A and
    B (rationals): R3's a, b, and a, b decomposing R1's weights (:func:`_decompose`)."""
    rng = np.random.default_rng([seed, KINDS.index("relative")])
    fed = dm.datasets.synthetic_regression(n_clients=N, dim=DIM, samples=ROWS, heterogeneity=1.0, noise=0.5,
                                           seed=int(rng.integers(2 ** 31)))
    l2 = float(rng.uniform(1.0, 4.0))
    prob = dm.RelativeFairness(fed, dm.losses.Squared(), dm.sets.CVaR(N, float(rng.uniform(0.34, 0.95))),
                               dm.sets.Simplex(N), float(rng.uniform(0.05, 0.3)), l2=l2)
    try:
        sols = {m: prob.solve(method=m) for m in ROUTES_OF["relative"]}
    except dm.errors.NotConvexError:          # a vertex's aggregate is not convex: outside R1 / R3
        return None
    ex = Exact(fed, l2)
    phi = Fraction(prob.phi)
    pairs = [(sols["R3"].duals["a_dual"], sols["R3"].duals["b_dual"]),
             _decompose(prob, np.asarray(sols["R1"].duals["lambda_bar"], float))]
    lows = []
    for a_raw, b_raw in pairs:
        a, b = _repair(prob.A, a_raw), _repair(prob.B, b_raw)
        lows.append(ex.weighted_minimum([(x - phi * y) / (1 - phi) for x, y in zip(a, b)]))
    lo = max(lows)
    hi = min(_relative_worst(prob, ex.losses(s.theta)) for s in sols.values())
    assert lo <= hi, (seed, float(lo), float(hi))
    with localcontext() as ctx:
        ctx.prec = 60
        lo, hi = _dec(lo), _dec(hi)
        out = {r: (Decimal(s.lower_bound) - lo, Decimal(s.lower_bound) - hi, s.status) for r, s in sols.items()}
    return out, hi - lo


def instance(kind, seed):
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    fed = dm.datasets.synthetic_regression(n_clients=N, dim=DIM, samples=ROWS, heterogeneity=1.0, noise=0.5,
                                           seed=int(rng.integers(2 ** 31)))
    l2 = float(10 ** rng.uniform(-2, 0))
    W = _weight_set(kind, rng, np.full(N, 1.0 / N))
    return fed, l2, dm.FederatedDRO(fed, dm.losses.Squared(), W, l2=l2)


def measure(kind, seed):
    """Per route (L - lo, L - hi) as Decimals, and hi - lo."""
    if kind == "relative":
        return measure_relative(seed)
    fed, l2, prob = instance(kind, seed)
    W = prob.weight_set
    sols = {"default": prob.solve(), "conic": prob.solve(method="conic")}
    ex = Exact(fed, l2)
    with localcontext() as ctx:
        ctx.prec = 60
        lows, highs = [], []
        for s in sols.values():
            lam = _repair(W, s.weights)
            lows.append(_as_dec(ex.weighted_minimum(lam)) - _as_dec(_psi(W, lam)))
            highs.append(_as_dec(_worst(W, ex.losses(s.theta))))
        lo, hi = max(lows), min(highs)
        assert lo <= hi, (kind, seed, lo, hi)
        out = {r: (Decimal(s.lower_bound) - lo, Decimal(s.lower_bound) - hi, s.status) for r, s in sols.items()}
    return out, hi - lo


def main(count=200, kinds=KINDS):
    print(f"drflmodel from {dm.__file__}; {count} instances per set")
    print("| set | route | max(L - lo) | instances with L > lo | proven false (L > hi) | max(hi - lo) | statuses |")
    print("|---|---|---|---|---|---|---|")
    for kind in kinds:
        t = time.perf_counter()
        rows = [row for row in (measure(kind, seed) for seed in range(count)) if row is not None]
        if len(rows) < count:
            print(f"<!-- {kind}: {count - len(rows)} of {count} instances not convex, skipped -->")
        for r in ROUTES_OF.get(kind, ROUTES):
            excess = [row[0][r][0] for row in rows]
            false = sum(row[0][r][1] > 0 for row in rows)
            statuses = sorted({row[0][r][2] for row in rows})
            print(f"| {kind} | {r} | {float(max(excess)):+.2e} | {sum(e > 0 for e in excess)} | {false} | "
                  f"{float(max(row[1] for row in rows)):.1e} | {','.join(statuses)} |", flush=True)
        print(f"<!-- {kind}: {time.perf_counter() - t:.0f} s -->", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
