"""graded(..., private=True): a FedAvg run graded against the private oracle, each round's objective
from one secure sum over the clients through Flower's SecAgg+ (an in-process grid per sum). The
measured objectives are checked against the exact objective recomputed from the rows (an
independent computation the grader never does), and the refusals are named."""


import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, RecordDict
from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import FedAvg

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.client_oracle import private_solve
from drflmodel.flower.client import strategy_client_app
from drflmodel.flower.grid import LocalGrid


@pytest.fixture(autouse=True)
def _quiet(flower_logs_at_warning):
    """Flower's logs at WARNING in every test of this file (the conftest's fixture)."""


@pytest.fixture(scope="module")
def bc():
    return dm.datasets.breast_cancer(n_clients=4, seed=0)


def _fedavg(dim, rounds=3):
    app = ServerApp()

    @app.main()
    def main(grid, context):
        FedAvg(min_available_nodes=4, min_train_nodes=4).start(grid=grid, initial_arrays=ArrayRecord([np.zeros(dim)]),
                                                               num_rounds=rounds)

    return app


def _serve(server, prob):
    with LocalGrid(strategy_client_app(prob, step_size=0.5, local_steps=5), 4) as grid:
        server(grid, Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config={}))


@pytest.mark.parametrize("weights", ["erm", "kl"])
def test_a_fedavg_run_is_graded_from_secure_sums_only(bc, weights):
    W = dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0) if weights == "erm" else dm.sets.KLPenalty(4, 0.5)
    prob = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=W, l2=0.01)
    oracle = private_solve(prob)
    server = dmf.graded(_fedavg(prob.dim), oracle=prob, solution=oracle, private=True, progress=False)
    _serve(server, prob)
    trace, reveals = server.trace, server.trace.info["private_grading"]
    measured = np.asarray(trace.iterates["objective"], float)
    exact = np.array([prob.objective(theta) for theta in trace.theta])
    assert measured.size == 4 and np.all(np.abs(measured - exact) <= reveals["quantization_error_max"] + 1e-12)
    assert reveals["quantization_error_max"] < 1e-9 and reveals["graded_models"] == 4
    query = "value_gradient" if weights == "erm" else "kl_terms"
    assert set(reveals["grading_sums_by_query"]) == {"size", "size (holders)", query, f"{query} (holders)"}
    assert reveals["route"] == ("fixed_weight" if weights == "erm" else "kl") and reveals["min_contributors"] == 2
    # the report's distances are to the private oracle's model, measured without the clients
    final = np.linalg.norm(prob.identifiable(trace.theta[-1]) - prob.identifiable(oracle.theta)) ** 2
    assert server.report.final["dist_theta_sq"] == pytest.approx(final, rel=1e-9)


def test_what_private_grading_refuses(bc):
    erm = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0), l2=0.01)
    app = _fedavg(erm.dim)
    with pytest.raises(dm.InvalidParameterError, match="problem holding the clients' rows"):
        dmf.graded(app, oracle=lambda fed: erm, private=True)
    with pytest.raises(dm.InvalidParameterError, match="per-client answers"):
        dmf.graded(app, oracle=erm, solution=erm.solve(), private=True)
    cvar = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    with pytest.raises(dm.InvalidParameterError, match="cvar route's objective at a model is a minimum over"):
        dmf.graded(app, oracle=cvar, private=True)
    with pytest.raises(dm.InvalidParameterError, match="private must be True or False"):
        dmf.graded(app, oracle=erm, private="yes")


@pytest.mark.slow
def test_the_kl_certificate_through_flowers_secagg_equals_the_simulated_one(bc):
    """The KL route's clients (KLClient, from route_clients) as supernodes under Flower's real SecAgg+:
    the same certificate, bit for bit, as the simulated channel's (the grid values pass Flower's
    quantization exactly)."""
    prob = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.KLPenalty(4, 0.5), l2=0.01)
    simulated = private_solve(prob)
    flower = dmf.certified_solve(prob, private=True)
    assert flower.info["private"]["route"] == "kl" and flower.status == "optimal"
    assert (flower.lower_bound, flower.upper_bound) == (simulated.lower_bound, simulated.upper_bound)
    assert np.array_equal(flower.theta, simulated.theta)
