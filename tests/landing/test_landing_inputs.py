"""Bad inputs refused by name before any work, and the smaller verdict defects of issue 38."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.landing import conformance, fixed_point


@pytest.mark.parametrize("g", [0, -1, 0.0, float("nan")])
def test_a_nonpositive_server_step_is_refused(logistic, g):
    prob, sol = logistic
    with pytest.raises(InvalidParameterError, match="global_step"):
        fixed_point(prob, "FedAvg", local_steps=3, global_step=g)
    with pytest.raises(InvalidParameterError, match="global_step"):
        conformance(np.zeros((3, prob.dim)), prob, "FedAvg", local_steps=3, global_step=g, solution=sol)


def test_a_solution_or_problem_of_the_wrong_type_is_refused_by_name(logistic):
    prob, sol = logistic
    with pytest.raises(InvalidParameterError, match="solution must be a drflmodel Solution"):
        fixed_point(prob, "SCAFFOLD", solution="abc")
    with pytest.raises(InvalidParameterError, match="solution must be"):
        conformance(np.zeros((3, prob.dim)), prob, "FedAvg", local_steps=3, solution="abc")
    with pytest.raises(InvalidParameterError, match="problem must be a drflmodel problem"):
        conformance(np.zeros((3, prob.dim)), "logistic", "FedAvg", local_steps=3)
    with pytest.raises(InvalidParameterError, match="problem must be"):
        fixed_point("logistic", "FedAvg", local_steps=3)


@pytest.mark.parametrize("iterates", [np.zeros((0, 6)), np.zeros((1, 6)), np.zeros(6), [[0.0, 1.0], [1.0]]])
def test_empty_or_ragged_iterates_are_refused(logistic, iterates):
    prob, sol = logistic
    with pytest.raises(InvalidDataError, match="iterates must"):
        conformance(iterates, prob, "FedAvg", local_steps=3, solution=sol)


def test_grading_a_fedprox_trace_as_fedavg_does_not_inherit_mu(logistic):
    prob, sol = logistic
    tr = dm.solvers.FedProx(rounds=200, mu=1.0, local_steps=5).run(prob)
    rep = conformance(tr, prob, "FedAvg", solution=sol)      # main: "mu is FedProx's proximal weight ..."
    assert "mu" not in rep.config_source and rep.strategy == "FedAvg"
    assert rep.config["local_steps"] == 5 and rep.verdict == "elsewhere" and rep.evidence == "proved"
    as_fedprox = conformance(tr, prob, solution=sol)
    assert as_fedprox.config_source["mu"] == "recorded" and as_fedprox.verdict == "landed"


def test_fedprox_reports_mention_the_exact_local_solve(logistic):
    prob, sol = logistic
    tr = dm.solvers.FedProx(rounds=3, mu=1.0, local_steps=5).run(prob)
    rep = conformance(tr, prob, solution=sol)
    assert rep.verdict == "not_landed" and any("local_steps='exact'" in r for r in rep.reasons)


def test_a_linearly_converging_run_is_reported_linear(logistic):
    prob, sol = logistic
    tr = dm.solvers.FedAvg(rounds=150, local_steps=1).run(prob)
    text = dm.verify_iterates(prob, sol, tr.theta, tol=1e-6).summary()
    line = next(x for x in text.splitlines() if "empirical rate" in x)
    assert "empirical rate: linear, factor" in line and "fits better than O(r^" in line


def test_client_models_of_the_wrong_shape_are_refused_and_a_short_record_is_checked(logistic):
    from drflmodel.landing.contraction import local_iterates

    prob, sol = logistic
    p = np.asarray(prob.federation.proportions, float)
    T, models = [np.zeros(prob.dim)], [np.full((prob.n_clients, prob.dim), np.nan)]
    for _ in range(30):
        U = local_iterates(prob.objectives, T[-1], 5, 0.1, 1.0)
        if len(T) == 2:
            U[3] = local_iterates(prob.objectives, T[-1], 5, 0.1, 0.0)[3]   # client 3 ignores mu in round 2
        models.append(U)
        T.append(p @ U)
    kw = dict(local_steps=5, step_size=0.1, mu=1.0, solution=sol)
    with pytest.raises(InvalidDataError, match="client_models must have shape"):
        conformance(np.array(T), prob, "FedProx", client_models=np.zeros((31, 2, prob.dim)), **kw)
    rep = conformance(np.array(T), prob, "FedProx", client_models=np.array(models[:4]), **kw)   # rounds 0-3 kept
    assert [f["client"] for f in rep.extra["faulty_clients"]] == [3] and rep.extra["faulty_clients"][0]["round"] == 2
    assert rep.verdict == "elsewhere" and "ignore mu" in rep.text
