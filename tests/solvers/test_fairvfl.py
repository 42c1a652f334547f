"""FairVFL (spec fair-vfl-deo §1.4–§1.7, §3.6) and FedBCD against the DEOConstrained oracles.

Parameter recipes: the solver's presets only -- ``"lagrangian"`` (c = 0, eta = 10, beta = 0.5: the
spec §3.6 numerical check), ``"paper"`` (c = 1e-3, eta = 100, beta = 0.1, N9) and Theorem 2's
``c_t = beta/2 t^{-1/4}``. Instance: ``synthetic_vertical`` (n = 200, 6 features + intercept,
3 parties, party 0 active), logistic objective, linear (affine) fairness loss, eps = 0.02
(active constraint, lambda_1 ~ 0.25), l2 = 0.1.
Independent references: the oracle (CVXPY, certified), the oracle of P_c, a centralized
gradient-descent-ascent loop on the full design, and a spy on the party views.
"""

import json

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.problems.deo import DEOConstrained
from drflmodel.problems.minmax.fafl import FairnessAwareFL
from drflmodel.solvers.fairvfl import FairVFL, FedBCD, theory_eta, vfl_constants

EPS, L2 = 0.02, 0.1


@pytest.fixture(scope="module")
def vf():
    return dm.datasets.synthetic_vertical(n_samples=200, dim=6, n_parties=3, group_shift=1.5, seed=0)


@pytest.fixture(scope="module")
def problem(vf):
    return DEOConstrained(vf, dm.losses.Logistic(), eps=EPS, fairness_loss="linear", l2=L2)


@pytest.fixture(scope="module")
def oracle(problem):
    sol = problem.solve()
    assert sol.status == "optimal"
    assert sol.duals["lambda1"] > 0.1                     # the constraint is active
    return sol


def _lam(sol):
    return np.array([sol.duals["lambda1"], sol.duals["lambda2"]])


def test_lagrangian_gda_converges_to_kkt_pair(problem, oracle):
    """c = 0: lambda -> the oracle's (lambda1, lambda2), theta -> theta* (spec §3.6)."""
    tr = FairVFL(rounds=1000, preset="lagrangian").run(problem)
    theta, lam = tr.theta[-1], np.array(tr.info["lam_final"])
    assert np.linalg.norm(theta - oracle.theta) / max(1.0, np.linalg.norm(oracle.theta)) < 1e-4
    assert np.abs(lam - _lam(oracle)).max() < 1e-4
    assert abs(problem.loss_value(theta) - oracle.value) < 1e-5
    assert problem.constraint_violation(theta) < 1e-5
    assert tr.iterates["stationarity_gap"][-1] < 1e-5
    assert np.all(tr.iterates["lam"] >= 0)
    json.dumps(tr.to_dict())


def test_constant_c_fixed_point_is_the_penalty_problem(vf, problem):
    """constant c: theta -> theta_c of P_c, lambda -> lambda_c = ((D-eps)_+, (-D-eps)_+)/c."""
    c = 0.01
    pc = DEOConstrained(vf, dm.losses.Logistic(), eps=EPS, fairness_loss="linear", l2=L2, penalty_c=c)
    sol = pc.solve()
    assert sol.status == "optimal"
    tr = FairVFL(rounds=1000, preset="lagrangian", c=c).run(problem)
    theta, lam = tr.theta[-1], np.array(tr.info["lam_final"])
    assert np.linalg.norm(theta - sol.theta) < 1e-4
    assert np.abs(lam - _lam(sol)).max() < 1e-4
    assert np.abs(lam - pc.penalty_multipliers(theta)).max() < 1e-6
    # the realized DEO is eps + c * lambda_active (N8), not eps
    assert abs(problem.deo(theta) - (EPS + c * lam.max())) < 1e-6


def test_paper_preset_converges_to_its_penalty_problem(vf, problem):
    """The paper's experiment (c = 1e-3, eta = 100, beta = 0.1) solves P_{1e-3}."""
    pc = DEOConstrained(vf, dm.losses.Logistic(), eps=EPS, fairness_loss="linear", l2=L2, penalty_c=1e-3)
    sol = pc.solve()
    tr = FairVFL(rounds=3000, preset="paper").run(problem)
    assert np.linalg.norm(tr.theta[-1] - sol.theta) < 1e-4
    assert np.abs(np.array(tr.info["lam_final"]) - _lam(sol)).max() < 1e-3


def test_decreasing_c_tracks_penalty_multipliers_towards_kkt(vf, problem, oracle):
    """c_t = beta/2 t^{-1/4} -> 0 (Theorem 2): lambda^(R) tracks the P_{c_R} multipliers, which
    approach (lambda1, lambda2) as c_R -> 0; the error to the oracle decreases with R."""
    errs = []
    for R in (300, 1000):
        tr = FairVFL(rounds=R, preset="lagrangian", c="decreasing").run(problem)
        cR = tr.iterates["c"][-1]
        assert cR == pytest.approx(0.25 * (R - 1) ** -0.25)     # c_{R-1}, used by the last step
        sc = DEOConstrained(vf, dm.losses.Logistic(), eps=EPS, fairness_loss="linear", l2=L2,
                            penalty_c=cR).solve()
        lam = np.array(tr.info["lam_final"])
        assert np.abs(lam - _lam(sc)).max() < 5e-4
        errs.append(np.abs(lam - _lam(oracle)).max())
    assert errs[1] < errs[0]


@pytest.mark.parametrize("fairness_loss,loss,eps", [("same", dm.losses.Logistic(), 0.02),
                                                     ("squared", dm.losses.Squared(), 0.05)])
def test_nonaffine_fairness_losses(vf, fairness_loss, loss, eps):
    """l_f = l (DC program, spec §3.5) and the squared l_f (Shor SDP, §3.3): the c = 0 limit is a
    KKT point; here both oracles certify a global optimum, and the simulator reaches it."""
    pb = DEOConstrained(vf, loss, eps=eps, fairness_loss=fairness_loss, l2=L2)
    sol = pb.solve()
    assert sol.status == "optimal"
    tr = FairVFL(rounds=1000, preset="lagrangian").run(pb)
    theta, lam = tr.theta[-1], np.array(tr.info["lam_final"])
    kkt = pb.kkt_residuals(theta, lam)
    assert kkt["stationarity"] < 1e-8 and kkt["complementarity"] < 1e-8
    assert kkt["primal_violation"] < 1e-8
    assert pb.loss_value(theta) >= sol.lower_bound - 1e-8
    assert np.linalg.norm(theta - sol.theta) < 1e-5
    assert np.abs(lam - _lam(sol)).max() < 1e-5


def reference_gda(problem, R, eta, beta, c, Q=1, P=1):
    """Centralized loop on the full design (synchronous reference schedule of spec §1.5); P > 1:
    passive blocks take P steps with the data gradient frozen at theta^(t) (N19)."""
    X, slices = problem.X, problem.federation.block_slices
    active = problem.federation.active
    theta, lam = np.zeros(problem.dim), np.zeros(2)
    out = [theta.copy()]
    for t in range(R):
        z = X @ theta
        if t >= 1:
            lam = np.maximum(lam + beta * problem.dual_gradient(z, lam, c=c), 0.0)
        new = theta.copy()
        for k, s in enumerate(slices):
            if k in active:
                th = theta.copy()
                for _ in range(Q):                     # own block fresh, other blocks stale
                    g = problem.lagrangian_gradient(th, lam)
                    th[s] = th[s] - g[s] / eta
                new[s] = th[s]
            elif P == 1:
                new[s] = theta[s] - problem.lagrangian_gradient(theta, lam)[s] / eta
            else:
                data = problem.lagrangian_gradient(theta, lam)[s] - problem.l2 * theta[s]
                th = theta[s].copy()
                for _ in range(P):
                    th = th - (data + problem.l2 * th) / eta
                new[s] = th
        theta = new
        out.append(theta.copy())
    return np.array(out)


@pytest.mark.parametrize("Q", [1, 3])
def test_matches_centralized_reference(problem, Q):
    tr = FairVFL(rounds=25, c=0.01, eta_inv=10.0, beta=0.5, preset=None, local_steps=Q).run(problem)
    ref = reference_gda(problem, 25, 10.0, 0.5, 0.01, Q=Q)
    assert np.allclose(tr.theta, ref, atol=1e-12, rtol=0)


def test_asynchronous_runs_are_seeded_and_converge(problem, oracle):
    s = FairVFL(rounds=1000, preset="lagrangian", update_prob=0.7, local_steps=3, local_schedule="random")
    a, b, c = s.run(problem, seed=1), s.run(problem, seed=1), s.run(problem, seed=2)
    assert np.array_equal(a.theta, b.theta) and not np.array_equal(a.theta, c.theta)
    upd = a.iterates["updated"]
    assert 0.6 < upd.mean() < 0.8 and upd.min() == 0
    assert np.linalg.norm(a.theta[-1] - oracle.theta) < 1e-4
    assert np.abs(np.array(a.info["lam_final"]) - _lam(oracle)).max() < 1e-4
    # delayed parties keep their block and receive nothing
    t = int(np.flatnonzero(upd[:, 1] == 0)[0])
    s1 = problem.federation.block_slices[1]
    assert np.array_equal(a.theta[t + 1][s1], a.theta[t][s1])


def test_communication_counts(problem):
    n, K = problem.n, problem.n_clients
    tr = FairVFL(rounds=4, preset="paper").run(problem)
    assert tr.info["comm_schedule"] == [
        {"direction": "up", "name": "partial_scores", "messages": K, "floats": K * n},
        {"direction": "down", "name": "scores+lambda", "messages": 1, "floats": n + 2},
        {"direction": "down", "name": "nu", "messages": K - 1, "floats": (K - 1) * n}]
    assert tr.messages_up.tolist() == [K] * 4 and tr.messages_down.tolist() == [K] * 4
    assert tr.floats_down.tolist() == [(n + 2) + (K - 1) * n] * 4
    # asynchrony: only the parties that update receive a message
    tr = FairVFL(rounds=30, preset="paper", update_prob=0.5).run(problem, seed=4)
    assert tr.messages_down.tolist() == tr.iterates["updated"].sum(axis=1).astype(int).tolist()


class _Spy:
    """Records every attribute a solver reads on a party view."""

    def __init__(self, view, log):
        self._view, self._log = view, log

    def __getattr__(self, name):
        self._log.append(name)
        return getattr(self._view, name)


def test_passive_parties_never_see_labels_or_groups(vf):
    calls = {}

    class Spied(DEOConstrained):
        def client_view(self, k):
            return _Spy(super().client_view(k), calls.setdefault(k, []))

    pb = Spied(vf, dm.losses.Logistic(), eps=EPS, fairness_loss="linear", l2=L2)
    tr = FairVFL(rounds=5, preset="paper", local_steps=2).run(pb)
    passive = [k for k in range(vf.n_parties) if k not in vf.active]
    for k in passive:
        # a passive view holds only X^k; the solver only asks for scores and nu-gradients
        assert set(calls[k]) <= {"is_active", "partial_scores", "block_gradient"}
        assert "block_gradient" in calls[k]
    assert {"local_gradient", "local_scores"} <= set(calls[vf.active[0]])
    # what reaches passive parties: only "nu" messages of n floats each
    down = [e for e in tr.info["comm_schedule"] if e["direction"] == "down"]
    assert [e["name"] for e in down] == ["scores+lambda", "nu"]
    assert down[1]["floats"] == len(passive) * vf.n_samples


def test_fedbcd_converges_to_unconstrained_erm(vf, problem, oracle):
    free = DEOConstrained(vf, dm.losses.Logistic(), eps=10.0, fairness_loss="linear", l2=L2).solve()
    assert free.status == "optimal" and max(free.duals["lambda1"], free.duals["lambda2"]) < 1e-9
    tr = FedBCD(rounds=1000, eta_inv=10.0, local_steps=3).run(problem)
    assert np.linalg.norm(tr.theta[-1] - free.theta) < 1e-4
    # ERM violates the DEO constraint that FairVFL enforces (the constraint is active)
    assert problem.deo(tr.theta[-1]) > EPS + 0.01 > problem.deo(oracle.theta)
    names = {e["name"] for e in tr.info["comm_schedule"]}
    assert names == {"partial_scores", "scores", "nu"}
    assert "lam" not in tr.iterates


def test_theory_preset(problem):
    k = vfl_constants(problem)
    X = problem.X
    assert k["L"] == pytest.approx(0.25 * np.linalg.eigvalsh(X.T @ X / problem.n)[-1] + L2)
    assert k["L12"] == pytest.approx(np.sqrt(2) * np.linalg.norm(problem.u_a - problem.u_b) / 2)
    tr = FairVFL(rounds=5, preset="theory").run(problem)
    K = problem.n_clients
    for t in range(5):
        L, L12 = k["L"], k["L12"]
        want = (L**2 * (K + 2) * (K - 1) + 2 * (L + 1)) / 4 + L12**2 * K * (1 + 32 * 9 * np.sqrt(max(t, 1))) / (2 * 0.1)
        assert tr.iterates["eta_inv"][t] == pytest.approx(want)
        assert tr.iterates["c"][t] == pytest.approx(0.05 * max(t, 1) ** -0.25)
    assert theory_eta(4, 1.0, 0.0, 2, 1, 0.1, 9.0) == pytest.approx((1 * 4 * 1 + 4) / 4)


def test_bad_inputs(vf, problem):
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=2, samples=20, seed=0)
    with pytest.raises(InvalidParameterError, match="DEOConstrained"):
        FairVFL(rounds=2).run(FairnessAwareFL(fed, dm.losses.Logistic(), alpha=0.6))
    with pytest.raises(InvalidParameterError, match="rounds"):
        FairVFL(rounds=0)
    with pytest.raises(InvalidParameterError, match="eta_inv"):
        FairVFL(eta_inv=0.0)
    with pytest.raises(InvalidParameterError, match="beta"):
        FairVFL(beta=-1.0)
    with pytest.raises(InvalidParameterError, match="c"):
        FairVFL(c=-0.1)
    with pytest.raises(InvalidParameterError, match="c"):
        FairVFL(c="increasing")
    with pytest.raises(InvalidParameterError, match="local_steps"):
        FairVFL(local_steps=0)
    with pytest.raises(InvalidParameterError, match="update_prob"):
        FairVFL(update_prob=0.0)
    with pytest.raises(InvalidParameterError, match="tau_const"):
        FairVFL(tau_const=8.0)
    with pytest.raises(InvalidParameterError, match="preset"):
        FairVFL(preset="fast")
    with pytest.raises(InvalidParameterError, match="required"):
        FairVFL(preset=None, eta_inv=10.0)
    with pytest.raises(InvalidParameterError, match="eta_inv"):
        FedBCD(eta_inv=-2.0)
    same = DEOConstrained(vf, dm.losses.Logistic(), eps=EPS, fairness_loss="same", l2=L2)
    with pytest.raises(InvalidParameterError, match="affine"):
        FairVFL(rounds=2, preset="theory").run(same)


# ------------------------------------------------------------------ passive parties, P > 1 steps (N19)
@pytest.mark.parametrize("cls, kw", [(FairVFL, {"preset": "paper", "local_steps": 2}),
                                     (FairVFL, {"preset": "lagrangian", "update_prob": 0.6,
                                                "local_schedule": "random", "local_steps": 3}),
                                     (FedBCD, {"local_steps": 2})])
def test_passive_steps_default_is_one_step_bitwise(problem, cls, kw):
    a = cls(rounds=40, **kw).run(problem, seed=2)
    b = cls(rounds=40, passive_steps=1, **kw).run(problem, seed=2)
    assert np.array_equal(a.theta, b.theta)
    for k in a.iterates:
        assert np.array_equal(a.iterates[k], b.iterates[k])
    assert a.info == b.info


@pytest.mark.parametrize("Q, P", [(1, 3), (2, 4)])
def test_passive_steps_match_centralized_reference(problem, Q, P):
    tr = FairVFL(rounds=25, c=0.01, eta_inv=10.0, beta=0.5, preset=None, local_steps=Q,
                 passive_steps=P).run(problem)
    ref = reference_gda(problem, 25, 10.0, 0.5, 0.01, Q=Q, P=P)
    assert np.allclose(tr.theta, ref, atol=1e-12, rtol=0)
    one = FairVFL(rounds=25, c=0.01, eta_inv=10.0, beta=0.5, preset=None, local_steps=Q).run(problem)
    assert np.abs(one.theta - tr.theta).max() > 1e-4        # the extra steps do move the blocks
    # passive parties still receive only nu, once per round: same messages as with one step
    assert tr.info["comm_schedule"] == one.info["comm_schedule"]


def test_passive_steps_keep_the_kkt_limit(problem, oracle):
    """c = 0 with P = 3 passive steps: the same limit as one step, the oracle's KKT pair."""
    tr = FairVFL(rounds=1000, preset="lagrangian", local_steps=2, passive_steps=3).run(problem)
    theta, lam = tr.theta[-1], np.array(tr.info["lam_final"])
    assert np.linalg.norm(theta - oracle.theta) / max(1.0, np.linalg.norm(oracle.theta)) < 1e-4
    assert np.abs(lam - _lam(oracle)).max() < 1e-4
    assert problem.constraint_violation(theta) < 1e-5
    assert tr.iterates["stationarity_gap"][-1] < 1e-5


def test_passive_steps_fedbcd_and_theory_step(vf, problem):
    free = DEOConstrained(vf, dm.losses.Logistic(), eps=10.0, fairness_loss="linear", l2=L2).solve()
    tr = FedBCD(rounds=1000, eta_inv=10.0, passive_steps=2).run(problem)
    assert np.linalg.norm(tr.theta[-1] - free.theta) < 1e-4
    # Theorem 2's eta_t counts the most updates a party makes per round: Q = max(local, passive)
    a = FairVFL(rounds=3, preset="theory", local_steps=1, passive_steps=3).run(problem)
    b = FairVFL(rounds=3, preset="theory", local_steps=3).run(problem)
    assert np.array_equal(a.iterates["eta_inv"], b.iterates["eta_inv"])
    with pytest.raises(InvalidParameterError, match="passive_steps"):
        FairVFL(passive_steps=0)
    with pytest.raises(InvalidParameterError, match="passive_steps"):
        FedBCD(passive_steps=1.5)
