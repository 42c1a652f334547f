"""Server optimizers (FedAvgM, FedAdam, FedYogi, FedAdagrad with Flower's update formulas) and decaying local
steps: a correct run is never "elsewhere", its recorded client updates certify every round's distance, and
a client with the wrong step is caught (landing.servers, landing.schedules)."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.landing import conformance, fixed_point
from drflmodel.landing.contraction import local_iterates
from drflmodel.landing.schedules import split_schedule
from drflmodel.landing.servers import client_update_certificate

J = 5


@pytest.fixture(scope="module")
def setting():
    fed = dm.datasets.synthetic_classification(n_clients=5, dim=4, samples=[30, 50, 40, 60, 20], heterogeneity=1.5,
                                               add_intercept=True, seed=1)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)
    eta = 1.0 / float(np.max(prob.objectives.smoothness()))
    return prob, prob.solve(), np.asarray(fed.proportions, float), eta


def _run(prob, p, etas, server="plain", dtype=np.float64, client_eta=None):
    """``(models (R+1, P), client models (R+1, n, P))``; the server updates are Flower 1.41's (FedAvgM:
    momentum 0.9, server step 1; FedAdam with bias correction, FedYogi, FedAdagrad: eta 0.05, beta_1 0.9,
    beta_2 0.99, tau 1e-3), every model cast to ``dtype``."""
    theta, m, v = np.zeros(prob.dim), np.zeros(prob.dim), np.zeros(prob.dim)
    thetas, models = [theta], [np.full((prob.n_clients, prob.dim), np.nan)]
    for r, eta in enumerate(etas):
        U = np.asarray(local_iterates(prob.objectives, theta, J, eta if client_eta is None else client_eta).astype(dtype),
                       float)
        delta = p @ U - theta
        if server == "plain":
            theta = theta + delta
        elif server == "FedAvgM":
            m = delta if r == 0 else 0.9 * m + delta
            theta = theta + m
        else:
            m = 0.9 * m + 0.1 * delta
            if server == "FedAdam":
                v = 0.99 * v + 0.01 * delta ** 2
                step = 0.05 * np.sqrt(1 - 0.99 ** (r + 2)) / (1 - 0.9 ** (r + 2))
            elif server == "FedYogi":
                v, step = v - 0.01 * delta ** 2 * np.sign(v - delta ** 2), 0.05
            else:
                v, step = v + delta ** 2, 0.05
            theta = theta + step * m / (np.sqrt(v) + 1e-3)
        theta = np.asarray(np.asarray(theta, dtype), float)
        thetas.append(theta)
        models.append(U)
    return np.array(thetas), np.array(models)


def _plain_point(prob, p, eta, rounds=3000):
    """FedAvg's point by iterating its round map (an independent route to the landing point)."""
    theta = np.zeros(prob.dim)
    for _ in range(rounds):
        theta = p @ local_iterates(prob.objectives, theta, J, eta)
    return theta


@pytest.mark.parametrize("server", ["FedAvgM", "FedAdam", "FedYogi", "FedAdagrad"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_correct_server_optimizer_run_is_certified_every_round_and_never_elsewhere(setting, server, dtype):
    prob, sol, p, eta = setting
    T, M = _run(prob, p, [eta] * 300, server, dtype)
    rep = conformance(T, prob, server, local_steps=J, step_size=eta, solution=sol, client_models=M)
    assert rep.verdict in ("landed", "not_landed"), rep.text
    assert rep.extra["faulty_clients"] == []
    cert = rep.extra["server_certificate"]
    point = _plain_point(prob, p, eta)
    d = np.linalg.norm(T[cert["rounds"]] - point, axis=1)     # distances to the independently computed point
    assert np.all(d <= np.array(cert["bound"])) and len(cert["rounds"]) == 300
    if server != "FedAdagrad":                                  # these converge here: on FedAvg's point
        assert rep.verdict == "landed" and np.linalg.norm(T[-1] - point) < 1e-6


def test_the_certificate_alone_catches_clients_running_another_step(setting):
    prob, sol, p, eta = setting
    T, M = _run(prob, p, [eta] * 200, "FedAdam", client_eta=0.5 * eta)
    fp = fixed_point(prob, "FedAdam", local_steps=J, step_size=eta)
    cert = client_update_certificate(prob, fp, T, M, 2.0 ** -53)
    d = np.linalg.norm(T - fp.theta, axis=1)
    assert np.any(d[cert["rounds"]] > cert["bound"])           # the averaged updates are not T's
    rep = conformance(T, prob, "FedAdam", local_steps=J, step_size=eta, solution=sol, client_models=M)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved" and len(rep.extra["faulty_clients"]) == 5


def test_sampled_rounds_take_the_subsets_pull(setting):
    prob, sol, p, eta = setting
    T, M = _run(prob, p, [eta] * 100, "FedAvgM")
    rng = np.random.default_rng(0)
    for r in range(1, len(M)):                                  # clients 2-3 of 5 "replied" each round
        M[r, rng.choice(5, size=int(rng.integers(2, 4)), replace=False)] = np.nan
    fp = fixed_point(prob, "FedAvgM", local_steps=J, step_size=eta)
    cert = client_update_certificate(prob, fp, T, M, 2.0 ** -53)
    assert np.all(cert["b"] > 0)
    assert np.all(np.linalg.norm(T[cert["rounds"]] - fp.theta, axis=1) <= cert["bound"])


def test_decaying_steps_are_graded_against_the_schedule(setting):
    prob, sol, p, eta = setting
    steps = [eta] * 100 + [eta / 2] * 100 + [eta / 4] * 200
    for dtype in (np.float64, np.float32):
        T, M = _run(prob, p, steps, dtype=dtype)
        rep = conformance(T, prob, "FedAvg", local_steps=J, step_size=steps, solution=sol, client_models=M)
        assert rep.verdict == "landed" and rep.extra["faulty_clients"] == [], rep.text
        final = fixed_point(prob, "FedAvg", local_steps=J, step_size=eta / 4)
        assert np.linalg.norm(rep.fixed_point.theta - final.theta) < 1e-9
    # a continuously decaying step (given as a function of the round): the point keeps moving, never elsewhere
    T, M = _run(prob, p, [eta / (1 + r / 50) for r in range(1, 401)])
    rep = conformance(T, prob, "FedAvg", local_steps=J, step_size=lambda r: eta / (1 + r / 50), solution=sol,
                      client_models=M)
    assert rep.verdict in ("landed", "not_landed") and rep.extra["schedule"]["distinct"] == 400, rep.text
    # graded as if the step were constant, the same correct run is (rightly) not FedAvg with that step
    assert conformance(T, prob, "FedAvg", local_steps=J, step_size=eta / (1 + 400 / 50), solution=sol).verdict \
        != "landed"
    # clients that ignore the schedule (keep the first step): proved elsewhere from the iterates alone
    T, _ = _run(prob, p, steps, client_eta=eta)
    rep = conformance(T, prob, "FedAvg", local_steps=J, step_size=steps, solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved", rep.text


def test_a_schedule_is_checked():
    assert split_schedule(0.1, 3) == (0.1, None)
    assert split_schedule([0.1, 0.1], 2) == (0.1, None)
    with pytest.raises(InvalidParameterError, match="step_size.*one step per round"):
        split_schedule([0.1, 0.2], 3)
    with pytest.raises(InvalidParameterError, match="step_size.*> 0"):
        split_schedule([0.1, -0.2], 2)


def test_fedavgm_is_certified_from_its_models_alone(setting):
    prob, sol, p, eta = setting
    for dtype in (np.float64, np.float32):
        T, _ = _run(prob, p, [eta] * 300, "FedAvgM", dtype)             # momentum 0.9, server step 1
        rep = conformance(T, prob, "FedAvgM", local_steps=J, step_size=eta, solution=sol, server_momentum=0.9)
        assert rep.verdict == "landed", rep.text
        cert = rep.extra["server_certificate"]
        d = np.linalg.norm(T[:-1] - _plain_point(prob, p, eta), axis=1)   # against the independent point
        assert np.all(d <= np.array(cert["bound"])) and len(cert["rounds"]) == 300
    # every client halves its step: the recovered pseudo-gradients break a bound (no client models needed)
    T, _ = _run(prob, p, [eta] * 300, "FedAvgM", client_eta=0.5 * eta)
    rep = conformance(T, prob, "FedAvgM", local_steps=J, step_size=eta, solution=sol, server_momentum=0.9)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved" and "pseudo-gradients" in rep.text, rep.text
    # the wrong momentum is not a proof of anything wrong with the clients, but it is not silently accepted
    with pytest.raises(InvalidParameterError, match="server_momentum"):
        conformance(T, prob, "FedAvgM", local_steps=J, step_size=eta, solution=sol, server_momentum=1.0)


@pytest.mark.parametrize("server", ["FedAdam", "FedAvgM"])
def test_a_server_optimizer_with_a_decaying_client_step(setting, server):
    prob, sol, p, eta = setting
    steps = [eta] * 60 + [eta / 2] * 60 + [eta / 4] * 180
    T, M = _run(prob, p, steps, server)
    kw = dict(local_steps=J, step_size=steps, solution=sol, server_momentum=0.9)
    rep = conformance(T, prob, server, client_models=M, **kw)
    assert rep.verdict in ("landed", "not_landed") and rep.extra["faulty_clients"] == [], rep.text
    point = fixed_point(prob, "FedAvg", local_steps=J, step_size=eta / 4).theta
    for r in (rep, conformance(T, prob, server, **kw)):          # from the client models; FedAvgM: from its models
        if "server_certificate" in r.extra:
            cert = r.extra["server_certificate"]
            assert np.all(np.linalg.norm(T[cert["rounds"]] - point, axis=1) <= np.array(cert["bound"]))
    T, M = _run(prob, p, steps, server, client_eta=eta)        # the clients keep the first step
    rep = conformance(T, prob, server, client_models=M, **kw)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved" and len(rep.extra["faulty_clients"]) == 5
