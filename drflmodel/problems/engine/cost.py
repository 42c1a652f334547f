r"""The cost model ``method="auto"`` ranks routes by: estimated seconds from a problem's
:class:`~.structure.Structure` (rows :math:`N`, parameters :math:`P`, clients :math:`n`, the kind
of weight set, the loss), in terms of the few operations every route is made of.

Each route's :meth:`~.route.Route.cost` composes these blocks with its own count of them (a route
knows how many passes or steps it takes; this module names no route and no family):

* :func:`pass_seconds` -- one pass over the rows computing every client's value and gradient
  (two :math:`N\times P` products and the loss): :math:`a_0+a_1NP`;
* :func:`hessian_pass_seconds` -- the same pass with the weighted :math:`P\times P` Hessian: the
  per-row blocks it needs (curvature factors, the gathered and scaled copy of the rows,
  :math:`a_4NP`), the product itself (:math:`a_2NP^2`) and its Cholesky factor and solves
  (:math:`a_3P^3`);
* :func:`weight_step_seconds` -- one solve of a compiled :math:`n`-variable weight problem by a
  conic solver (:math:`b_0+b_1n`), and :func:`weight_model_seconds` (:data:`WEIGHT_MODEL_SECONDS`)
  to compile it once; where the structure says the weight step runs in numpy
  (``numpy_weight_step``: an active-set or KKT solve of the :math:`n`-variable quadratic program)
  :math:`b'_0+b'_1n+b'_3n^3` and nothing to compile;
* :func:`conic_seconds` -- building, compiling and solving the conic model of every row
  (:math:`c_0+c_1NP+c_2n`).

**Calibration** (the constants below): medians of 3 runs, one BLAS thread, on the shapes 240 x 15,
2,000 x 20, 10,000 x 50 (binary logistic), scikit-learn's digits (1,797 x 650, multinomial) and
20,000 x 2,000 (10 classes), with a fixed weight set (ERM), the :math:`\chi^2` ball and CVaR on 4-20
clients (``benchmarks/bench_certified.py --calibrate`` prints the measured and the modelled seconds
of each route side by side). The model is meant to *rank* routes -- it is right within a factor of
about 2 on those shapes, not a timing prediction; every answer is certified whatever route it
ranks first, and a route whose certificate stalls falls back to the next (:func:`~.route.dispatch`).

**Refit on the grid of shapes** (``benchmarks/bench_grid.py``'s shapes; the fastest of 3-7 runs of
the ``sqp`` and ``hessian_free`` routes, interleaved, one BLAS thread, on 38 shape x weight-set pairs
from 240 x 15 to 200,000 x 20 and digits: ERM, :math:`\chi^2`, CVaR and the simplex). A pass of the
Hessian-free route costs 0.15-0.2 ms plus about 1.2e-9 s per entry of the data (the earlier
1.2e-4 + 6e-10 NP was 2-4x low), and a Hessian pass a further 1.5e-9 s per entry of the data for its
per-row blocks (left out before, which made the dense route look 2-3x cheaper than it is from
about 5,000 rows: ``auto`` took it for ERM at 5,000 x 30, 20,000 x 20 and 50,000 x 20, where the
Hessian-free route is 1.7-2.8x faster). The constants are the set, on a grid of candidates, with
the least squared log error of the ratio of the two routes' estimates that ranks them as measured
on every pair but one tie (100,000 x 50 ERM, measured 1.02x); the ratio itself is still off by up
to 2-3x on some shapes, mostly the small polyhedral ones, where the ranking has a wide margin.
"""

from __future__ import annotations

__all__ = ["PASS_OVERHEAD", "PASS_PER_ENTRY", "HESSIAN_ROW_PER_ENTRY", "HESSIAN_PER_ENTRY", "FACTOR_PER_CUBE", "WEIGHT_STEP_BASE",
           "WEIGHT_STEP_PER_CLIENT", "WEIGHT_MODEL_SECONDS",
           "NUMPY_STEP_BASE", "NUMPY_STEP_PER_CLIENT", "NUMPY_STEP_PER_CUBE", "weight_model_seconds", "CONIC_BASE", "CONIC_PER_ENTRY", "CONIC_PER_CLIENT",
           "pass_seconds", "hessian_pass_seconds", "weight_step_seconds", "conic_seconds"]

#: seconds of Python overhead per pass (the loss, the certificate's cheap test, L-BFGS's bookkeeping;
#: measured 0.15-0.18 ms per evaluation of the Hessian-free route at 240-2,000 rows; fitted 2e-4)
PASS_OVERHEAD = 2e-4
#: seconds per entry of the N x P data per pass (value and gradient; fitted 1.2e-9 from 5,000 x 30
#: to 200,000 x 20)
PASS_PER_ENTRY = 1.2e-9
#: seconds per entry of the N x P data of a Hessian pass beyond :data:`PASS_PER_ENTRY`: the per-row
#: curvature factors and the gathered, scaled copy of the rows the product reads (fitted 1.5e-9)
HESSIAN_ROW_PER_ENTRY = 1.5e-9
#: seconds per N P^2 of forming the weighted Hessian (a BLAS product on one thread; fitted 1e-10)
HESSIAN_PER_ENTRY = 1e-10
#: seconds per P^3 of factoring and solving with the P x P Hessian
FACTOR_PER_CUBE = 3e-11
#: seconds of one solve of a compiled n-variable weight problem (Clarabel through CVXPY): base and
#: per client (measured 1.3 ms at n = 4, 3.5 ms at n = 20)
WEIGHT_STEP_BASE = 1e-3
WEIGHT_STEP_PER_CLIENT = 1.2e-4
#: seconds to build and compile a weight problem once (DPP)
WEIGHT_MODEL_SECONDS = 5e-3
#: seconds of one weight step in numpy (``structure.numpy_weight_step``): base, per client and per
#: cube of the clients (each face step of the active-set method factors a matrix of at most n x n).
#: Measured (CPU time, 8 warm-started steps on a random PSD curvature of rank 16, 60-300 repeats):
#: 0.02-0.12 ms at n = 4, 0.16-0.18 ms at n = 20, 0.18-0.39 ms at n = 50, 0.25-1.6 ms at n = 100,
#: 0.4-10.5 ms at n = 200 (the simplex, CVaR; the chi-square set the dearest)
NUMPY_STEP_BASE = 5e-5
NUMPY_STEP_PER_CLIENT = 4e-6
NUMPY_STEP_PER_CUBE = 1e-9
#: the conic model of every row: build, compile (CVXPY) and solve (Clarabel); measured 20-50 ms at
#: 240 x 15 and 0.15-0.4 s at 2,000 x 20 (1-20 clients)
CONIC_BASE = 1.5e-2
CONIC_PER_ENTRY = 4e-6
CONIC_PER_CLIENT = 5e-3


def _sizes(structure) -> tuple[int, int, int]:
    return int(structure.rows), int(structure.dim), max(int(structure.n_clients), 1)


def pass_seconds(structure) -> float:
    """Seconds of one value-and-gradient pass over the rows: :math:`a_0+a_1NP`."""
    N, P, _ = _sizes(structure)
    return PASS_OVERHEAD + PASS_PER_ENTRY * N * P


def hessian_pass_seconds(structure) -> float:
    """Seconds of one pass with the weighted Hessian, its factor and solves:
    :func:`pass_seconds` :math:`+\\,a_4NP+a_2NP^2+a_3P^3`."""
    N, P, _ = _sizes(structure)
    return (pass_seconds(structure) + HESSIAN_ROW_PER_ENTRY * N * P + HESSIAN_PER_ENTRY * N * P * P
            + FACTOR_PER_CUBE * float(P) ** 3)


def weight_step_seconds(structure) -> float:
    """Seconds of one solve of the :math:`n`-variable weight problem: compiled, :math:`b_0+b_1n`; in
    numpy (``structure.numpy_weight_step``), :math:`b'_0+b'_1n+b'_3n^3`."""
    n = _sizes(structure)[2]
    if getattr(structure, "numpy_weight_step", False):
        return NUMPY_STEP_BASE + NUMPY_STEP_PER_CLIENT * n + NUMPY_STEP_PER_CUBE * float(n) ** 3
    return WEIGHT_STEP_BASE + WEIGHT_STEP_PER_CLIENT * n


def weight_model_seconds(structure) -> float:
    """Seconds to build and compile the weight problem once: :data:`WEIGHT_MODEL_SECONDS`, none
    where the weight step runs in numpy (``structure.numpy_weight_step``)."""
    return 0.0 if getattr(structure, "numpy_weight_step", False) else WEIGHT_MODEL_SECONDS


def conic_seconds(structure) -> float:
    """Seconds of building, compiling and solving the conic model of every row:
    :math:`c_0+c_1NP+c_2n`."""
    N, P, n = _sizes(structure)
    return CONIC_BASE + CONIC_PER_ENTRY * N * P + CONIC_PER_CLIENT * n
