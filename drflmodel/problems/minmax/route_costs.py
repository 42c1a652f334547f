r"""What the routes of the client-weight min-max family cost, for ``method="auto"`` to rank them
(:meth:`~drflmodel.problems.engine.route.Route.cost`, :meth:`~drflmodel.problems.engine.route.Route.memory`;
the blocks and their calibration: :mod:`drflmodel.problems.engine.cost`).

The family tells the engine what its routes read (:meth:`~.dro.WeightedMinMax.structure_fields`):
the kind of its weight set -- ``"fixed"`` (one point: ERM, one client, HCVaR at level 1),
``"smooth"`` (:math:`\sigma_\Lambda` differentiable: :math:`\chi^2` with :math:`\rho>0`, q-FFL) or
``"polyhedral"`` (the simplex, CVaR, HCVaR, :math:`\ell_p` balls) -- and the size of its conic model.

Counts (measured on the calibration shapes of :mod:`~drflmodel.problems.engine.cost`):

Every count is that of the gap ``auto`` asks, the user's ``gap_tol`` (``structure.gap_tol``):

* Hessian-free (:mod:`.hessian_free`): L-BFGS for a fixed or smooth set, about :math:`15+P/11`
  iterations to a 1e-10 gap (14-19 at :math:`P\le50`, 64-71 on digits, :math:`P=650`) of 1.2
  passes, about 40 from 1,000 parameters at 1e-6 (15-39 measured at P = 2,010-51,300), each scaled
  to the asked gap by :func:`gap_digits_factor` (about 0.65 of the 1e-10 count at 1e-6); the
  quasi-Newton SQP for a polyhedral set, as many iterations (15-18 and 59), each about
  :data:`QN_PASSES_PER_ITERATION` passes and a weight solve;
* Lagrangian-Hessian SQP (:mod:`.lagrangian_sqp`): 7-8 steps (:data:`SQP_STEPS`, to 1e-10; one fewer
  at 1e-6: :func:`sqp_steps`) for every kind of set, each a pass with the weighted Hessian and its factor (:func:`sqp_pass_seconds`: its per-row
  work also runs on the padding of the clients' rows) and, unless the set is fixed, one weight
  solve; its certificate one more Hessian pass;
* conic (:class:`~drflmodel.problems.engine.conic.ConicRoute`): the model of every row.

The weight solve is priced by :func:`~drflmodel.problems.engine.cost.weight_step_seconds`: in numpy
(a fraction of a millisecond, nothing to compile) where the family says so
(``structure.numpy_weight_step``: box-simplex sets and the :math:`\chi^2` set up to
``box_simplex_step.NUMPY_STEP_MAX_CLIENTS`` clients), else a compiled conic model. With it the
constants above were refit (CPU-time medians of 51 calls, 240 x 15 to 100,000 x 20; the table in
``tests/problems/test_route_cost.py``): ``auto`` now takes ``sqp`` for the :math:`\chi^2` set up to
about 1,000 x 15 and the Hessian-free route for CVaR and the simplex at 10,000 x 50, as measured
faster.

Where the rows are not held (a federated server) the costs are ``None``: the family's order of
preference stands (what a federated solve costs is exchanges and bytes, not seconds).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._memory import dense_hessian_bytes
from ...sets import WeightSet
from ..engine.cost import (hessian_pass_seconds, pass_seconds, weight_model_seconds,
                           weight_step_seconds)
from ..engine.memory import matrix_free_route_bytes

#: the Hessian-free route asked for a ``tol`` far below ``gap_tol`` applies its stall rule at this many
#: times ``tol`` (and ``auto`` caps its iterations at 4x the cost model's estimate)
STALL_FACTOR = 100.0

#: the relative gap at which :func:`hessian_free_iterations`'s counts :math:`15+P/11` were measured
#: (``auto`` asked it of the route below 1,000 parameters until it asked the user's ``gap_tol``)
COUNTED_AT_GAP = 1e-10

__all__ = ["weights_kind", "conic_model_bytes", "sqp_bytes", "newton_bytes", "sqp_seconds", "federated_floats",
           "federated_fewer_exchanges", "hessian_free_seconds", "hessian_free_iterations", "hessian_free_memory", "gap_digits_factor", "sqp_steps",
           "padded_rows", "sqp_pass_seconds"]

#: rows per chunk of the weighted Hessian's products (``ClientObjectives._weighted_hessian_from_scores``)
HESSIAN_CHUNK_ROWS = 8192

#: L-BFGS evaluations per iteration (line search), measured 1.0-1.3
EVALUATIONS_PER_ITERATION = 1.2

#: the Hessian-free route's quasi-Newton SQP (a polyhedral set) solves a weight problem per iteration
#: that costs this many times one weight solve of the ``sqp`` route: measured on the grid of shapes
#: (``benchmarks/bench_grid.py``; CVaR and the simplex over 4-20 clients) the route took 3-5x the
#: ``sqp`` route's time below 10,000 rows at the same weight sets, which one weight solve per
#: iteration did not predict
QN_WEIGHT_STEP_FACTOR = 2.0

#: full steps of the ``sqp`` route after its warm start on a subsample (from
#: ``lagrangian_sqp.WARM_START_ROWS`` rows): measured 4 for a fixed or smooth set, 5 for a polyhedral
#: one at 100,000 and 200,000 x 21 (7-9 from zero below)
SQP_WARM_STEPS = {"fixed": 4, "smooth": 4, "polyhedral": 5}

#: seconds per entry of the padding of the ``sqp`` route's client rows (:func:`padded_rows` beyond
#: :math:`N`, times :math:`P`) per Hessian pass: the fused pass computes scores, loss derivatives and
#: curvature factors there too (fitted; below the 2.7e-9 of a row that is not padding)
PADDED_PER_ENTRY = 8e-10

#: steps of the ``sqp`` route from zero: 7-8 measured for every kind of set on the grid of shapes
#: (240 x 15 to 20,000 x 100; ERM, chi-square, CVaR, the simplex)
SQP_STEPS = 8

#: passes per iteration of the Hessian-free route's quasi-Newton SQP (a polyhedral set): it makes
#: 1.0-1.1 evaluations per iteration, but its iteration costs about 0.2 ms + 1.6 passes measured
#: (CPU time, CVaR and the simplex over 4-20 clients, 240 x 15 to 100,000 x 20: 0.5 ms an iteration
#: at 240 x 15, 4.5 ms at 100,000 x 20), the numpy weight steps included
QN_PASSES_PER_ITERATION = 1.65


def weights_kind(W: WeightSet) -> str:
    """``"fixed"``, ``"smooth"`` or ``"polyhedral"`` (module docstring)."""
    if W.single_point() is not None:
        return "fixed"
    return "smooth" if W.support_is_smooth() else "polyhedral"


def conic_model_bytes(rows: int, dim: int) -> int:
    """The conic model of every row: CVXPY's coefficients of the :math:`N` rows' scores (about 24
    bytes per entry of an :math:`N\\times P` block) plus the certificate's Newton solve (3 dense
    :math:`P\\times P` matrices)."""
    return 24 * int(rows) * int(dim) + dense_hessian_bytes(int(dim), 3)


def padded_rows(structure) -> int:
    """:math:`n\\,m_{\\max}`: the rows of the problem's zero-padded client arrays
    (:class:`~drflmodel.data.StackedData`, one block of :math:`m_{\\max}` rows per client), which
    every pass over :class:`~drflmodel.objectives.ClientObjectives` computes on. Read from the bytes
    of those arrays, :math:`8\\,n\\,m_{\\max}(d+2)` (``structure.data_bytes``: features, labels,
    mask); 0 where the rows are not held. With unequal clients (Dirichlet partitions) it is
    several times :math:`N`: 5.4x for 20 Dirichlet(0.3) clients. The objectives count them
    (``structure.padded_rows``); the bytes formula, which assumes float64 features (half the rows
    for float32), is the fallback."""
    if not structure.rows_local:
        return 0
    if getattr(structure, "padded_rows", 0):        # counted by the objectives (float32 features too)
        return int(structure.padded_rows)
    d = max(int(structure.dim) // max(int(structure.n_outputs), 1), 1)
    return int(structure.data_bytes) // (8 * (d + 2))


def sqp_bytes(structure) -> int:
    """The ``sqp`` route: the weighted :math:`P\\times P` Hessian, its deflated copy, its Cholesky
    factor and a damped copy (4 matrices), the clients' gradients and :math:`H^{-1}G^\\top`
    (:math:`nP` each) and the weight step's :math:`n\\times n` curvature and its factor; and, where
    the rows are held, each pass's per-row blocks on the padded rows (:func:`padded_rows`: scores,
    loss derivatives, curvature factors and row weights, about :math:`1+3.5K` floats per padded
    row, measured) and one chunk of the weighted Hessian's products (:data:`HESSIAN_CHUNK_ROWS`
    rows: the chunk's features and, scaled, :math:`K` times them)."""
    P, n, K = int(structure.dim), int(structure.n_clients), max(int(structure.n_outputs), 1)
    dense = dense_hessian_bytes(P, 4) + 8 * (3 * n * P + 3 * n * n)
    if not structure.rows_local:
        return dense + server_hessian_bytes(P, n)
    d = P // K
    chunk = min(HESSIAN_CHUNK_ROWS, int(structure.rows))
    return int(dense + 8 * (1 + 3.5 * K) * padded_rows(structure) + 8 * chunk * d * (1 + K))


def server_hessian_bytes(P: int, n: int) -> int:
    """A federated server's client Hessians (:math:`P\times P` each): those of the latest points its
    objectives keep (``HESSIAN_POINTS`` per client), those its answer checks keep (at least one
    per client, up to ``HESSIAN_BYTES``; both in :mod:`drflmodel._memory`), and one being unpacked."""
    from ..._memory import HESSIAN_BYTES, HESSIAN_POINTS

    book = max(1, HESSIAN_BYTES // max(8 * P * P, 1))
    return dense_hessian_bytes(P, n * (HESSIAN_POINTS + book) + 1)


def newton_bytes(structure) -> int:
    """The ``newton`` route: one :math:`P\\times P` Cholesky factor per client, held twice (the
    CVXPY parameter and its canonicalized copy), plus the certificate's Newton solve (3 matrices)."""
    return dense_hessian_bytes(int(structure.dim), 2 * int(structure.n_clients) + 3)


def gap_digits_factor(gap_tol: float) -> float:
    r"""The Hessian-free route's iterations to a relative gap ``gap_tol`` as a fraction of those to
    1e-10: :math:`0.1+0.09\log_{10}(1/\text{gap})` (clipped to [0.2, 1.5]): a linear convergence,
    fitted on the route's forced runs at 1e-4 / 1e-6 / 1e-8 / 1e-10 (ERM and :math:`\chi^2`, 240 x 15
    to 10k x 50 x 10 and digits, ``benchmarks/bench_grid.py``'s problems): 0.34-0.65 / 0.55-0.76 /
    0.75-0.82 / 1 of the 1e-10 count (e.g. digits ERM 38 / 61 / 83 / 111, 10k x 50 x 10 14 / 21 / 25 / 33,
    1k x 50 9 / 11 / 15 / 19)."""
    digits = np.log10(1.0 / max(float(gap_tol), 1e-16))
    return float(np.clip(0.1 + 0.09 * digits, 0.2, 1.5))


def hessian_free_iterations(structure) -> float:
    """The Hessian-free route's iterations to the asked gap (``structure.gap_tol``): below 1,000
    parameters :math:`15+P/11` at 1e-10 (module docstring), from there 40 at 1e-6 (15-39 measured
    at P = 2,010-51,300), each scaled by :func:`gap_digits_factor`."""
    factor = gap_digits_factor(structure.gap_tol)
    if structure.dim < 1000:
        return (15.0 + structure.dim / 11.0) * factor / gap_digits_factor(COUNTED_AT_GAP)
    return 40.0 * factor / gap_digits_factor(1e-6)


def sqp_steps(structure, steps: float) -> float:
    r"""The ``sqp`` route's ``steps`` (counted to 1e-10: :data:`SQP_STEPS`, :data:`SQP_WARM_STEPS`) at
    the asked gap: Newton's quadratic convergence doubles the correct digits per step, so
    :math:`\log_2(\log_{10}(1/\text{gap})/10)` steps fewer (or more), at least 2: measured 7 instead
    of 8 at 1e-6 (240 x 15, 1k x 50 ERM)."""
    digits = np.log10(1.0 / max(float(structure.gap_tol), 1e-16))
    return max(2.0, steps + float(np.log2(max(digits, 1.0) / 10.0)))


def hessian_free_seconds(structure, sqp_min_size: float) -> float | None:
    """Seconds of the Hessian-free route (``None`` where the rows are not held): iterations x
    1.2 passes; when its quasi-Newton SQP runs (a polyhedral set, or a smooth one from
    ``sqp_min_size`` rows x parameters), iterations x (:data:`QN_PASSES_PER_ITERATION` passes and
    :data:`QN_WEIGHT_STEP_FACTOR` weight solves) plus the compile of that weight problem (none in
    numpy)."""
    if not structure.rows_local:
        return None
    iterations = hessian_free_iterations(structure)
    qn_sqp = structure.weights == "polyhedral" or (structure.weights == "smooth" and structure.size >= sqp_min_size)
    if qn_sqp:
        per = QN_PASSES_PER_ITERATION * pass_seconds(structure)
        return iterations * (per + QN_WEIGHT_STEP_FACTOR * weight_step_seconds(structure)) + weight_model_seconds(structure)
    return iterations * EVALUATIONS_PER_ITERATION * pass_seconds(structure) + 2 * pass_seconds(structure)


def sqp_seconds(structure, warm_start_rows: int) -> float | None:
    """Seconds of the Lagrangian-Hessian SQP route (``None`` where the rows are not held): steps x
    (a Hessian pass, plus a weight solve unless the set is fixed) plus its certificate; from
    ``warm_start_rows`` rows (the route's ``lagrangian_sqp.WARM_START_ROWS``), the warm start on a 5%
    subsample (as many steps on :math:`\\max(N/20, 4P)` rows) and then :data:`SQP_WARM_STEPS` full steps."""
    if not structure.rows_local:
        return None
    fixed = structure.weights == "fixed"
    steps = sqp_steps(structure, SQP_STEPS)
    weight = 0.0 if fixed else weight_step_seconds(structure)
    warm = 0.0
    if structure.rows >= warm_start_rows:
        sub = dataclasses.replace(structure, rows=max(int(structure.rows) // 20, 4 * int(structure.dim)), padded_rows=0)
        warm = steps * (sqp_pass_seconds(sub) + weight)
        steps = sqp_steps(structure, SQP_WARM_STEPS[structure.weights])
    per = sqp_pass_seconds(structure) + weight
    return warm + steps * per + sqp_pass_seconds(structure) + (0.0 if fixed else weight_model_seconds(structure))


def sqp_pass_seconds(structure) -> float:
    """Seconds of one Hessian pass of the ``sqp`` route: :func:`~..engine.cost.hessian_pass_seconds`
    with the value, gradient and per-row blocks computed on the padded client rows
    (:func:`padded_rows`, :math:`n\\,m_{\\max}\\ge N`: the route's objectives hold one block of
    :math:`m_{\\max}` rows per client; the Hessian product skips the padding)."""
    extra = max(int(getattr(structure, "padded_rows", 0) or 0) - int(structure.rows), 0)
    return hessian_pass_seconds(structure) + PADDED_PER_ENTRY * extra * int(structure.dim)


def hessian_free_memory(structure) -> int:
    """The Hessian-free route: the matrix-free objectives (:func:`~drflmodel.matrix_free.matrix_free_bytes`:
    the compact copy of the rows -- a view, not counted, when no client is padded -- and its
    :math:`N\\times K` blocks) and the values the route and its certificate compute on the padded
    rows (:func:`padded_rows`; 4 floats per padded row for :math:`K=1`, :math:`4+5.5(K-1)`
    above, measured with tracemalloc)."""
    total = matrix_free_route_bytes(structure)
    if not structure.rows_local:
        return total
    K = max(int(structure.n_outputs), 1)
    d = int(structure.dim) // K
    padded = padded_rows(structure)
    if padded <= int(structure.rows):                  # nothing padded: the compact rows are a view
        total -= 8 * int(structure.rows) * (d + 2)
    return int(total + 8 * (4 + 5.5 * (K - 1)) * padded)


#: exchanges to a certificate at ``gap_tol = 1e-6`` on a federated server (``LocalChannel``, 20
#: clients, ``benchmarks/bench_federated_scale.py``): the dense ``sqp`` route 11-13 (digits, breast
#: cancer); the ``hessian_free`` route 37-41 at P = 31, 83 on digits (P = 650), 34-53 at P = 3,010, 29 at
#: P = 51,300; the ``block_newton`` route with two products and the bound terms per exchange 0.4-0.8x the
#: Hessian-free count: 24-25, 36-38, 22-24; on the float32 heads (ERM / chi^2) 21 / 23 against 36 / 37 at
#: P = 5,140 (20k rows), 28 / 28 against 43 / 55 at P = 25,650 (20k rows), 29 / 29 against 37 / 40 at
#: P = 102,600 on 10k rows, and on all 100k rows of that head 17 / 19 against 27 / 28
FEDERATED_EXCHANGES = {"sqp": 12, "hessian_free_small": 85, "hessian_free_large": 40, "block_newton_factor": 0.55}

#: below this many rows per parameter the ``block_newton`` route would be estimated to need more exchanges than
#: the ``hessian_free`` route (which then also uploads a third of the floats per answer). None measured since its
#: model keeps only accepted points' products, restarts after a shortened step and floors the intercept block
#: (:mod:`.block_newton_steps`): on the 100k x 512 x 200 head (P = 102,600), ERM, ``gap_tol = 1e-6``, 2,000 rows
#: (0.019 per parameter) 50 exchanges against hessian_free's 83 (before: stopped uncertified after 333), 5,000
#: (0.049) 41 against 42 (before: 89), 10,000 (0.097) 29 against 37 (unchanged). So 0: ``auto`` keeps the block
#: route at every measured number of rows
FEDERATED_FEW_ROWS_PER_PARAMETER = 0.0


def federated_floats(structure, directions: int = 2) -> dict:
    """What a federated solve of ``structure`` uploads per client, by route: ``{route: {"exchanges",
    "largest" (floats of the largest answer), "total" (exchanges x largest, an upper bound)}}`` for
    ``block_newton`` (:math:`(q+1)P+1` floats per answer, plus the bound terms' :math:`6+K+K(K+1)/2` where
    they fit in :math:`4P`), ``hessian_free`` (:math:`P+1`) and the dense
    ``sqp`` route (a Hessian triangle, :math:`P(P+1)/2`, with the value and gradient), from the measured
    exchange counts :data:`FEDERATED_EXCHANGES`. The communication cost ``method="auto"`` weighs on a
    federated server (bytes x exchanges): answers of at most :math:`4P` floats rule the dense route
    out from :math:`P=6`; among the other two the block route needs fewer exchanges (measured
    0.4-1.0x, 0.45x on 2,000 rows of a 512 x 200 head; it uploads 1.4-2.6x the floats in all) except with
    fewer than :data:`FEDERATED_FEW_ROWS_PER_PARAMETER` rows per parameter (0: none measured), where it
    would be estimated to need more (then ``auto`` leaves it to the ``hessian_free`` route:
    :func:`federated_fewer_exchanges`)."""
    P = int(structure.dim)
    hf = FEDERATED_EXCHANGES["hessian_free_small" if P < 1000 else "hessian_free_large"]
    factor = FEDERATED_EXCHANGES["block_newton_factor"]
    if int(structure.rows) < FEDERATED_FEW_ROWS_PER_PARAMETER * P:
        factor = 1.0 / factor                           # measured: far fewer rows than parameters
    block = (directions + 1) * P + 1
    terms = 6 + int(structure.n_outputs) + int(structure.n_outputs) * (int(structure.n_outputs) + 1) // 2
    if block + terms <= 4 * P:                       # the bound terms ride on the evaluations (with an intercept)
        block += terms
    rows = {"block_newton": (int(round(factor * hf)), block),
            "hessian_free": (hf, P + 1),
            "sqp": (FEDERATED_EXCHANGES["sqp"], P * (P + 1) // 2 + P + 1)}
    return {name: {"exchanges": e, "largest": f, "total": e * f} for name, (e, f) in rows.items()}


def federated_fewer_exchanges(structure, hessian_free_min_dim: int) -> str | None:
    """On a federated server: why ``method="auto"`` leaves the ``block_newton`` route to the
    ``hessian_free`` route -- where that route is estimated to need at most as many exchanges
    (:func:`federated_floats`; with answers of :math:`P+1` floats instead of :math:`(q+1)P+1` it then
    uploads fewer floats too) -- else ``None``. Below ``hessian_free_min_dim`` parameters (the route's
    :data:`~.hessian_free.HESSIAN_FREE_MIN_DIM`) auto does not take the ``hessian_free`` route, so ``None`` there."""
    if int(structure.dim) < hessian_free_min_dim:
        return None
    est = federated_floats(structure)
    free, block = est["hessian_free"], est["block_newton"]
    if free["exchanges"] <= block["exchanges"]:
        return (f"{structure.rows:,} rows for P = {structure.dim:,} parameters (fewer than "
                f"{FEDERATED_FEW_ROWS_PER_PARAMETER} per parameter): the hessian_free route is estimated to need "
                f"fewer exchanges (about {free['exchanges']} against {block['exchanges']}) with answers of P + 1 floats; "
                f"force with method='block_newton'")
    return None
