"""A correct FedAvgM run whose bfloat16 updates are rounded away stalls far from its point: the
sweep found it graded "elsewhere (observed)" -- now "not landed: stalled ... consistent", never
elsewhere (issue 38)."""

import numpy as np

import drflmodel as dm
from drflmodel.landing import conformance
from drflmodel.landing.arithmetic import bfloat16_round
from drflmodel.landing.contraction import local_iterates


def test_a_stalled_bfloat16_fedavgm_run_is_not_called_elsewhere():
    fed = dm.datasets.synthetic_multiclass(n_clients=30, dim=4, n_classes=3, samples=30, seed=4)
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.05)
    sol, p = prob.solve(), np.asarray(fed.proportions, float)
    eta = 1.0 / float(np.max(prob.objectives.smoothness()))
    theta, momentum, T = np.zeros(prob.dim), np.zeros(prob.dim), [np.zeros(prob.dim)]
    for _ in range(250):                            # FedAvgM (momentum 0.5), every model rounded to bfloat16
        avg = np.asarray(bfloat16_round(p @ local_iterates(prob.objectives, theta, 1, eta)), float)
        momentum = 0.5 * momentum + (theta - avg)
        theta = np.asarray(bfloat16_round(theta - momentum), float)
        T.append(theta)
    T = np.array(T)
    assert np.all(T[-20:] == T[-1])                 # stalled: the updates are rounded away
    rep = conformance(T, prob, "FedAvgM", local_steps=1, step_size=eta, solution=sol)
    assert rep.verdict in ("landed", "not_landed") and rep.extra["precision"] == "bfloat16", rep.text
    assert rep.rows[-1]["dist_fixed_point"] > 0.1                  # far: sqrt(u) alone said elsewhere
    # within the round map's bfloat16 rounding region eps / (1 - q) (landing.servers), else stalled
    region = rep.extra["rounding_allowance"] / (1.0 - rep.fixed_point.contraction)
    assert ("rounding region" in rep.text) == (rep.rows[-1]["dist_fixed_point"] <= region), rep.text
    assert "stalled" in rep.text or "rounding region" in rep.text
