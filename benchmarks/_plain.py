"""The benchmarks' baseline: a hand-written CVXPY problem solved as a user would solve it."""

from __future__ import annotations

import numpy as np

from drflmodel._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported at the first CVXPY model: the scale and grid rows run none


def solve_as_a_user(prob: cp.Problem, solvers=("CLARABEL", "ECOS")) -> tuple[float, str]:
    """Try ``solvers`` in order with CVXPY's default settings until one reports an optimal (or
    optimal-inaccurate) status; ``(value, what ran)``, the value NaN when none gave one."""
    used = []
    for solver in solvers:
        try:
            prob.solve(solver=solver)
        except cp.error.SolverError:
            used.append(f"{solver} failed")
            continue
        used.append(f"{solver} {prob.status}")
        if prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            break
    return float(prob.value if prob.value is not None else np.nan), "; ".join(used)
