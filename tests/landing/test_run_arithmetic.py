"""Never a false proof: runs in float32 / bfloat16 and runs with sampled clients (issue 38).

The two reproductions below were "landed elsewhere ... proved" on main f6507d1: a correct FedProx
run iterating the exact round map and rounding each round's model to float32 (resp. bfloat16), and a
correct FedProx run sampling 2 of 5 clients per round. The runs are built here from the exact round
map (``landing.contraction.local_iterates``, the solvers' own local steps) -- independent of the
verdict's bounds.
"""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.landing.arithmetic import bfloat16_round, rounding_allowance, run_precision, unit_roundoff
from drflmodel.landing.contraction import local_iterates

J, MU = 10, 1.0


def _run(prob, p, rounds, eta, rounding=None, subsets=None, mu=MU):
    theta, out = np.zeros(prob.dim), [np.zeros(prob.dim)]
    for r in range(rounds):
        U = local_iterates(prob.objectives, theta, J, eta, mu)
        if subsets is None:
            theta = p @ U
        else:
            S = subsets[r]
            theta = (p[S] / p[S].sum()) @ U[S]
        if rounding is not None:
            theta = np.asarray(rounding(theta), float)
        out.append(theta)
    return np.array(out)


@pytest.fixture(scope="module")
def breast_cancer():
    fed = dm.datasets.breast_cancer(n_clients=4, seed=2)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.01)
    return prob, prob.solve(), np.asarray(fed.proportions, float)


def test_a_correct_float32_fedprox_run_is_not_proved_wrong(breast_cancer):
    prob, sol, p = breast_cancer
    T = _run(prob, p, 3000, 0.1, rounding=lambda t: t.astype(np.float32))
    rep = dm.landing.conformance(T, prob, "FedProx", local_steps=J, step_size=0.1, mu=MU, solution=sol)
    # main f6507d1: "elsewhere", proved at round 1160 with the float64 allowance
    assert rep.verdict == "landed", rep.text
    assert rep.extra["precision"] == "float32" and rep.extra["precision_source"] == "inferred from the models"
    assert "float32 rounding region" in rep.text
    # the same iterates declared float64 still break the float64 bound: the allowance is what changed
    strict = dm.landing.conformance(T, prob, "FedProx", local_steps=J, step_size=0.1, mu=MU, solution=sol,
                                    precision="float64")
    assert strict.verdict == "elsewhere" and strict.evidence == "proved"


def test_a_correct_bfloat16_run_is_not_proved_wrong_and_a_wrong_one_still_is(logistic):
    prob, sol = logistic
    p = np.asarray(prob.federation.proportions, float)
    T = _run(prob, p, 300, 0.1, rounding=bfloat16_round)
    rep = dm.landing.conformance(T.astype(np.float32), prob, "FedProx", local_steps=J, step_size=0.1, mu=MU,
                                 solution=sol)
    assert rep.extra["precision"] == "bfloat16" and rep.verdict == "landed", rep.text
    # FedAvg's steps (mu ignored) graded as FedProx with mu = 1 in float32: still proved wrong
    T = _run(prob, p, 300, 0.1, rounding=lambda t: t.astype(np.float32), mu=0.0)
    rep = dm.landing.conformance(T, prob, "FedProx", local_steps=J, step_size=0.1, mu=MU, solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved" and rep.extra["precision"] == "float32"


def test_sampled_clients_are_graded_against_the_sampled_region():
    # examples/fedprox_bugs.py's problem
    fed = dm.datasets.synthetic_classification(n_clients=5, dim=6, samples=[30, 60, 90, 45, 75],
                                               heterogeneity=1.5, add_intercept=True, seed=4)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)
    sol = prob.solve()
    p = np.asarray(prob.federation.proportions, float)
    rng = np.random.default_rng(0)
    subsets = [np.sort(rng.choice(5, 2, replace=False)) for _ in range(400)]
    T = _run(prob, p, 400, 0.05, subsets=subsets)
    kw = dict(local_steps=J, step_size=0.05, mu=MU, solution=sol)
    for participation in (subsets, "sampled"):
        rep = dm.landing.conformance(T, prob, "FedProx", participation=participation, **kw)
        # main f6507d1: "elsewhere ... proved" (the full-participation bound kappa^R d_0)
        assert rep.verdict == "landed" and rep.evidence == "", rep.text
        assert rep.extra["sampled_rounds"] == 400 and "sampled clients" in rep.text
    # without a record the iterates are assumed to have full participation, and the proof says so
    rep = dm.landing.conformance(T, prob, "FedProx", **kw)
    assert rep.verdict == "elsewhere" and "assuming every client took part" in rep.text


def test_the_precision_is_declared_recorded_or_inferred():
    T = np.cumsum(np.full((5, 3), 0.1), axis=0)
    assert run_precision(T)[:1] == ("float64",)
    assert run_precision(T.astype(np.float32).astype(float))[0] == "float32"
    assert run_precision(bfloat16_round(T).astype(float))[0] == "bfloat16"
    assert run_precision(T, recorded=["float32"])[0] == "float32"
    assert run_precision(T.astype(np.float32), declared="bfloat16")[:3] == ("bfloat16", 2.0 ** -8, "declared")
    assert unit_roundoff(1e-3)[1] == 1e-3 and unit_roundoff("fp16")[0] == "float16"
    for bad in ("int8", "float128x", 0.7, -1.0):
        with pytest.raises(InvalidParameterError, match="precision"):
            unit_roundoff(bad)
    # float64 floor, float32: c u max(1, ||theta||) with c = 4 (J + 2) + 2 ceil(log2 n)
    eps = rounding_allowance(2.0 ** -24, 10, 5, [0.5, 3.0])
    assert eps == pytest.approx([(48 + 6) * 2.0 ** -24, (48 + 6) * 2.0 ** -24 * 3.0])


def test_bad_participation_is_refused_by_name(logistic):
    prob, sol = logistic
    T = np.zeros((4, prob.dim))
    kw = dict(local_steps=J, step_size=0.1, mu=MU, solution=sol)
    with pytest.raises(InvalidParameterError, match="participation"):
        dm.landing.conformance(T, prob, "FedProx", participation="some", **kw)
    with pytest.raises(InvalidDataError, match="participation"):
        dm.landing.conformance(T, prob, "FedProx", participation=[[0, 1]] * 2, **kw)
    with pytest.raises(InvalidDataError, match="round 2"):
        dm.landing.conformance(T, prob, "FedProx", participation=[[0], [7], [1]], **kw)


def test_verify_checks_no_theorem_bound_on_rounded_models():
    """dm.verify's explicit theorem bound holds for exact arithmetic: a Scaff-PD trace whose models
    are rounded to float32 is said not to be covered, instead of being checked against it."""
    from drflmodel._bounds import theorem_bound

    fed = dm.datasets.synthetic_regression(n_clients=5, dim=4, samples=40, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.CVaR(5, 0.4), l2=0.1)
    sol = prob.solve()
    tr = dm.solvers.ScaffPD(rounds=20, local_steps=2).run(prob, seed=0)
    assert theorem_bound(tr, prob, sol).applies
    tr.theta = tr.theta.astype(np.float32).astype(float)
    b = theorem_bound(tr, prob, sol)
    assert not b.applies and "rounded to float32" in b.why_not
