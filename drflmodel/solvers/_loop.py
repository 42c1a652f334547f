"""A straightforward per-client-loop implementation of Scaff-PD (Algorithms 1–2), used as an
independent reference: by the tests (same iterates as the vectorized :class:`ScaffPD` to 1e-10)
and by ``benchmarks/bench_scaffpd.py`` (vectorized vs loop timing).

Each client is a :class:`~drflmodel.problems.engine.problem.ClientView` and every local step is a Python
loop over clients; no stacked arrays, no runtime, no accounting. Deterministic gradients only.
"""

from __future__ import annotations

import numpy as np


def scaffpd_loop(problem, solver, theta0=None):
    """Run ``solver.rounds`` rounds of Scaff-PD with ``solver``'s schedule, one client at a time.

    Returns ``(thetas, lambdas)`` of shapes ``(R+1, d)`` and ``(R+1, n)``.
    """
    n, d = problem.n_clients, problem.dim
    x = np.zeros(d) if theta0 is None else np.asarray(theta0, float).copy()
    schedule, _, _ = solver._make_schedule(problem, x)
    views = [problem.client_view(i) for i in range(n)]
    wset = problem.weights
    lam = np.asarray(wset.project(np.full(n, 1.0 / n)), float)
    J, eta_g = solver.local_steps, solver.global_step
    thetas, lambdas = [x.copy()], [lam.copy()]
    L_prev = None
    for r in range(solver.rounds):
        tau, sigma, ext = schedule(r)
        L = np.array([v.value(x) for v in views])
        C = [v.gradient(x) for v in views]
        if L_prev is None:
            L_prev = L
        s = (1 + ext) * L - ext * L_prev
        lam = np.asarray(wset.prox(lam + sigma * s, sigma), float)
        c = np.zeros(d)
        for i in range(n):
            c += lam[i] * C[i]
        eta = tau / (J * eta_g)
        agg = np.zeros(d)
        for i in range(n):
            u = x.copy()
            for _ in range(J):
                u = u - eta * (views[i].gradient(u) - C[i] + c)
            agg += lam[i] * (x - u) / (eta * J)
        x = x - tau * agg
        L_prev = L
        thetas.append(x.copy())
        lambdas.append(lam.copy())
    return np.array(thetas), np.array(lambdas)
