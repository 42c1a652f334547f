"""The numpy weight step of the SQP routes over box-simplex sets (problems/minmax/box_simplex_step.py,
issue 41 wave 2): its answer against Clarabel's on the same quadratic program, the greedy closed form
at S = 0, a CVaR solve by the sqp route that never imports CVXPY and ends at the conic route's
certified optimum, and the CVXPY fallback when the active-set method is cut short; the chi-square
step against the CVXPY step on random instances and by its KKT conditions; the CLI's solve of the
small clinics table (CVaR, chi-square) imports no CVXPY."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.problems.minmax import box_simplex_step
from drflmodel.problems.minmax.box_simplex_step import box_simplex_qp
from drflmodel.sets import CVaR, HCVaR, Simplex


def _weight_set(kind, n, rng):
    if kind == 0:
        return CVaR(n, rng.uniform(1 / n, 1))
    if kind == 1:
        return Simplex(n)
    return HCVaR(rng.dirichlet(np.ones(n)), rng.uniform(0.3, 1), clip_alpha=True)


def _q(lam, S, f):
    return float(f @ lam - 0.5 * lam @ S @ lam)


@pytest.mark.filterwarnings("ignore:HCVaR")          # clip_alpha's note on random alphas below p_i
def test_the_active_set_step_is_at_least_as_good_as_clarabel_projected():
    """Random PSD curvatures of every rank (1 to n + 2) over 15 decades, three set kinds: the numpy
    answer is feasible to 1e-12 and its model value is never below the value of Clarabel's answer
    made feasible (projected), beyond round-off."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(0)
    checked = 0
    for trial in range(60):
        n = int(rng.integers(2, 30))
        G = rng.standard_normal((n, int(rng.integers(1, n + 3)))) * 10 ** rng.uniform(-3, 3)
        S, f = G @ G.T, rng.standard_normal(n) * 10 ** rng.uniform(-2, 2)
        W = _weight_set(trial % 3, n, rng)
        lam = box_simplex_qp(S, f, *W.box_bounds(), start=W.project(W.worst_case(f)[1]))
        assert W.contains(lam, tol=1e-12)
        x = cp.Variable(n)
        prob = cp.Problem(cp.Maximize(f @ x - 0.5 * cp.sum_squares(G.T @ x)), W.constraints(x))
        try:
            prob.solve(solver="CLARABEL")
        except cp.error.SolverError:
            continue
        ref = _q(W.project(x.value), S, f)
        scale = max(1.0, abs(ref), np.abs(f).max(), np.abs(S).max())
        assert _q(lam, S, f) >= ref - 1e-13 * scale, (trial, _q(lam, S, f), ref)
        checked += 1
    assert checked >= 50


def test_with_no_curvature_the_step_is_the_greedy_worst_case():
    """S = 0: the step is the linear program max f^T lam over the set, whose value is the sorted
    top-alpha mean (the set's worst_case); the method reaches it along zero-curvature rays."""
    rng = np.random.default_rng(1)
    for n, alpha in ((5, 0.4), (12, 0.25), (7, 1 / 7)):
        W = CVaR(n, alpha)
        f = rng.standard_normal(n)
        lam = box_simplex_qp(np.zeros((n, n)), f, *W.box_bounds(), start=np.full(n, 1 / n))
        k = alpha * n
        top = np.sort(f)[::-1]
        expected = (top[:int(k)].sum() + (k - int(k)) * (top[int(k)] if int(k) < n else 0)) / k
        assert f @ lam == pytest.approx(expected, abs=1e-14)


@pytest.mark.parametrize("weights", ["CVaR(5, 0.4)", "ChiSquare(5, 0.2)"])
def test_a_solve_by_the_sqp_route_imports_no_cvxpy_and_is_the_conic_optimum(weights):
    code = ("import sys, json, drflmodel as dm\n"
            "fed = dm.datasets.gaussian_mixture(600, 6, 2, n_clients=5, alpha=0.5, seed=1)\n"
            f"sol = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.{weights}, l2=1e-2).solve(method='sqp')\n"
            "assert 'cvxpy' not in sys.modules\n"
            "print(json.dumps([sol.status, sol.lower_bound, sol.upper_bound, sol.info['step_solver']]))\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=root)
    import json
    status, lower, upper, step_solver = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "optimal" and step_solver == "numpy-active-set"
    fed = dm.datasets.gaussian_mixture(600, 6, 2, n_clients=5, alpha=0.5, seed=1)
    W = CVaR(5, 0.4) if weights.startswith("CVaR") else dm.sets.ChiSquare(5, 0.2)
    ref = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=1e-2).solve(method="conic")
    assert ref.status == "optimal"
    assert lower <= ref.upper_bound + 1e-12 and ref.lower_bound <= upper + 1e-12   # the intervals meet
    assert upper == pytest.approx(ref.value, rel=1e-8)


def test_the_step_falls_back_to_the_cvxpy_model_when_cut_short(monkeypatch):
    def cut_short(*args, **kwargs):
        raise box_simplex_step._NoConvergence("cut short by the test")

    monkeypatch.setattr(box_simplex_step, "box_simplex_qp", cut_short)
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=4, samples=80, seed=2)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    sol = prob.solve(method="sqp")
    ref = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2).solve(method="conic")
    model = prob.cache("sqp")
    steps = [m for m in model.values() if isinstance(m, box_simplex_step.BoxSimplexStep)]
    assert steps and steps[0].fell_back > 0
    assert sol.status == "optimal" and sol.value == pytest.approx(ref.value, rel=1e-8)


def test_building_a_weight_set_imports_no_cvxpy_and_its_parameter_follows_the_setter():
    code = ("import sys, drflmodel as dm\n"
            "sets = [dm.sets.CVaR(4, 0.5), dm.sets.HCVaR([0.1, 0.2, 0.3, 0.4], 0.6), dm.sets.ChiSquare(4, 0.5),\n"
            "        dm.sets.LpBall([0.25] * 4, 0.1)]\n"
            "assert 'cvxpy' not in sys.modules\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=root)
    W = CVaR(4, 0.5)
    param = W.cap_param
    W.set_alpha(0.25)                                   # a compiled problem holds `param` itself
    assert W.cap_param is param and param.value == pytest.approx(1.0)
    chi = dm.sets.ChiSquare(4, 0.5)
    rho, inv = chi.rho_param, chi.inv_rho_param
    chi.set_rho(2.0)
    assert (rho.value, inv.value) == (2.0, 0.5) and chi.rho_param is rho


def _chi2_kkt_residual(lam, S, f, rho):
    r"""The optimality residual of :math:`\max_{\lambda\in\Delta}f^\top\lambda-\frac12\lambda^\top S\lambda-
    \frac{\rho n}2\|\lambda-\mathbf 1/n\|^2` at ``lam`` (an independent check, not the solver's):
    with :math:`g=f-S\lambda-\rho n(\lambda-\mathbf 1/n)`, :math:`\lambda` is optimal iff
    :math:`g_i=\max_jg_j` wherever :math:`\lambda_i>0`; returns the largest violation, weighted by
    :math:`\lambda_i`, relative to the scale of :math:`g`."""
    n = lam.size
    g = f - S @ lam - rho * n * (lam - 1.0 / n)
    return float(np.max(lam * (g.max() - g))) / max(1.0, float(np.abs(g).max()))


def test_the_chi_square_step_matches_the_cvxpy_step_on_random_instances():
    """The numpy chi-square weight step (box-simplex QP with S + rho n I: one KKT solve when no weight
    is zero, else the active-set method; both occur) against the CVXPY step model the route used
    before (Clarabel at 1e-13): 60 random PSD curvatures of every rank over 12 decades, rho over 6
    decades. The problem is strongly concave (modulus rho n), so the weights are
    unique: equal to CVXPY's to 1e-6 (the interior-point answer's own accuracy), model values to 1e-8
    relative, and the numpy answer satisfies the KKT conditions to 1e-11 (CVXPY's to looser)."""
    pytest.importorskip("cvxpy")
    from drflmodel.problems.minmax.box_simplex_step import ChiSquareStep, numpy_weight_step
    from drflmodel.problems.minmax.lagrangian_sqp import WeightStepModel

    rng = np.random.default_rng(3)
    faces = {"interior": 0, "boundary": 0}        # the KKT solve answers / the active-set method runs
    for trial in range(60):
        n = int(rng.integers(2, 25))
        G = rng.standard_normal((n, int(rng.integers(1, n + 3)))) * 10 ** rng.uniform(-3, 3)
        S, f = G @ G.T, rng.standard_normal(n) * 10 ** rng.uniform(-2, 2)
        W = dm.sets.ChiSquare(n, 10 ** rng.uniform(-3, 3))
        step = numpy_weight_step(W, lambda: None)
        assert isinstance(step, ChiSquareStep)
        lam, value = step.solve(f, S)
        ref_lam, ref_value = WeightStepModel(W, "CLARABEL").solve(f, S)
        assert W.contains(lam, tol=1e-12)
        scale = max(1.0, abs(ref_value), np.abs(f).max(), np.abs(S).max())
        assert value == pytest.approx(ref_value, abs=1e-8 * scale), trial
        assert np.max(np.abs(lam - ref_lam)) <= 1e-6, trial
        assert _chi2_kkt_residual(lam, S, f, W.rho) <= 1e-11, trial
        faces["boundary" if np.any(lam == 0.0) else "interior"] += 1
        ref_lam = W.project(ref_lam)                        # CVXPY's answer, made feasible: never better
        assert value >= float(ref_lam @ f - 0.5 * ref_lam @ S @ ref_lam - W.psi(ref_lam)) - 1e-13 * scale
    assert min(faces.values()) >= 10, faces


@pytest.mark.parametrize("weights", ['{ name = "cvar", alpha = 0.5 }', '{ name = "chi_square", rho = 0.1 }'])
def test_the_cli_solve_of_the_small_table_imports_no_cvxpy(tmp_path, weights):
    """``drflmodel solve`` on the clinics table (4 sites, logistic; its CVaR set and the chi-square
    ball) answers ``optimal`` and never imports CVXPY (a fresh interpreter)."""
    import json
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    text = (root / "examples" / "data" / "clinics.toml").read_text()
    text = text.replace('path = "clinics.csv"', f'path = {json.dumps(str(root / "examples" / "data" / "clinics.csv"))}')
    text = text.replace('weights = { name = "cvar", alpha = 0.5 }', f"weights = {weights}")
    assert f"weights = {weights}" in text
    config, out = tmp_path / "clinics.toml", tmp_path / "solution.json"
    config.write_text(text)
    code = ("import sys\nfrom drflmodel.cli import main\n"
            f"assert main(['solve', {str(config)!r}, '--out', {str(out)!r}]) == 0\n"
            "assert 'cvxpy' not in sys.modules, 'the CLI solve imported CVXPY'\n")
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=str(root))
    assert json.loads(out.read_text())["solution"]["status"] == "optimal"
