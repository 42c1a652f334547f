"""On Flower's simulation engine (Ray), in one session: the federated certified solve (clients in
Ray workers answering from their partitions) agrees with the centralized solve to 1e-8, and the
sampled participation of DRFA reproduces the simulator's trace. No Flower or Ray process is left."""

import numpy as np
import pytest
from flwr.serverapp import ServerApp

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.flower.client import client_app
from drflmodel.flower.engine import simulate
from drflmodel.flower.oracle import solve_on_grid, with_oracle
from drflmodel.solvers import DRFA

from .conftest import assert_no_flower_processes

pytestmark = pytest.mark.slow


def test_federated_oracle_and_sampled_drfa_on_ray():
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=3, samples=[30, 40, 50, 60], seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=0.01)
    solver = DRFA(rounds=4, local_steps=3, clients_per_round=2, step_size=0.1)
    run = dmf.FlowerRun(prob, solver, seed=5, key="run", timeout=120.0)
    out = {}
    app = ServerApp()

    @app.main()
    def main(grid, context):
        out["oracle"] = solve_on_grid(grid, prob, timeout=120.0)
        run.serve(grid)

    try:
        simulate(app, with_oracle(client_app({"run": prob}), {"oracle": prob}), 4)
    finally:
        assert_no_flower_processes()
    central = prob.solve(method="sqp")
    sol = out["oracle"]
    assert sol.status == central.status == "optimal"
    scale = abs(central.upper_bound)
    assert abs(sol.lower_bound - central.lower_bound) <= 1e-8 * scale
    assert abs(sol.upper_bound - central.upper_bound) <= 1e-8 * scale
    gaps = dmf.compare_traces(solver.run(prob, seed=5), run.trace)
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10 and gaps["communication"], gaps
    assert np.all(np.isfinite(run.trace.theta))
