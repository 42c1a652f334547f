"""Routes declare their memory and cost; ``method="auto"`` ranks by cost and falls back when a gap
stalls (issue 41; DESIGN.md section 8). No timing is asserted: what is checked is the ranking rule,
the record of it, the fallback, the memory hook and that a small certified solve imports no CVXPY."""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.problems.engine import memory
from drflmodel.problems.engine.conic import ConicRoute
from drflmodel.problems.minmax import hessian_free
from drflmodel.problems.minmax.dro import WeightedMinMax
from drflmodel.problems.minmax.lagrangian_sqp import LagrangianSQPRoute

ENGINE = pathlib.Path(dm.__file__).parent / "problems" / "engine"
ROOT = pathlib.Path(dm.__file__).parents[1]


def _fed(n_clients=4, samples=200, seed=3):
    return dm.datasets.synthetic_classification(n_clients=n_clients, dim=5, samples=samples, seed=seed)


def _pooled(fed):
    X, y, _ = fed.pooled()
    return dm.Federation.from_arrays([X], [y], task="classification")


def _string_constants(path):
    """The string constants of a module's code (docstrings left out: they may give examples)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_engine_names_no_family_and_no_other_route():
    """The engine's code reads route hooks and structure fields, never a family's or another route's
    name (DESIGN.md section 8): no such string constant, nor a message naming one as a method."""
    names = ["dro", "fafl", "wasserstein", "relative", "deo", "sqp", "newton", "hessian_free", "active_set",
             "bundle", "hessian_sqp", "trust_region_sqp", "level_bundle"]
    for path in ENGINE.glob("*.py"):
        for text in _string_constants(path):
            assert text not in names, (path.name, text)
            assert not any(f"method='{name}'" in text for name in names), (path.name, text)


def test_no_engine_identifier_is_named_after_a_family_or_a_route():
    """Nor does a function, class, variable or attribute of the engine carry such a name (e.g. a
    size threshold of one family's route, ``too_small_for_sqp``, lived there)."""
    words = {"dro", "fafl", "wasserstein", "deo", "sqp", "newton", "bundle"}
    compounds = ("hessian_free", "active_set", "hessian_sqp", "trust_region_sqp", "level_bundle")
    for path in ENGINE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = (getattr(node, "name", None) if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.alias))
                    else node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                    else None)
            if not name:
                continue
            lowered = name.lower()
            assert not (words & set(lowered.split("_"))) and not any(c in lowered for c in compounds), \
                (path.name, name)


class _Priced(ConicRoute):
    """The conic route with a given cost (the ranking is what is tested, not the estimate)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def cost(self, structure):
        return self.seconds


class _PricedSQP(LagrangianSQPRoute):
    def __init__(self, seconds):
        self.seconds = seconds

    def cost(self, structure):
        return self.seconds


class _TwoRoutes(dm.FederatedDRO):
    priced = ()

    def routes(self):
        return list(self.priced)


@pytest.mark.parametrize("sqp_seconds, conic_seconds, expected", [(1.0, 2.0, "sqp"), (3.0, 2.0, "conic")])
def test_auto_takes_the_cheapest_route_and_records_the_estimates(sqp_seconds, conic_seconds, expected):
    prob = _TwoRoutes(_fed(), dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    prob.priced = (_PricedSQP(sqp_seconds), _Priced(conic_seconds))
    sol = prob.solve()
    assert sol.info["method"] == expected and sol.status == "optimal"
    choice = sol.info["route_choice"]
    assert choice["estimated_seconds"] == {"sqp": sqp_seconds, "conic": conic_seconds}
    assert "cheapest" in choice["why"]
    json.dumps(sol.to_dict())


def test_a_route_without_an_estimate_keeps_the_family_order():
    """One route without a cost: no ranking, the family's order stands (the first that applies)."""
    prob = _TwoRoutes(_fed(), dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    prob.priced = (_PricedSQP(None), _Priced(0.001))
    sol = prob.solve()
    assert sol.info["method"] == "sqp" and sol.info["route_choice"]["why"] == "the first route that applies"


def test_the_family_ranks_by_its_estimates():
    """Where the rows are held the min-max family's routes declare costs; auto's first route is the
    cheapest estimate, and it certifies (whatever it is)."""
    fed = _fed()
    for W in (dm.sets.ChiSquare(4, 0.5), dm.sets.CVaR(4, 0.5)):
        sol = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=1e-2).solve()
        estimated = sol.info["route_choice"]["estimated_seconds"]
        assert set(estimated) == {"hessian_free", "sqp", "conic"}
        assert sol.info["method"] == min(estimated, key=estimated.get) and sol.status == "optimal"
        assert dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=1e-2).structure.weights == (
            "smooth" if isinstance(W, dm.sets.ChiSquare) else "polyhedral")


def test_auto_asks_every_route_for_the_users_gap_and_a_forced_route_keeps_its_default():
    """No hidden finer gap: under auto the ``sqp`` route stops at ``gap_tol`` (its own default tol
    is 1e-10 when forced), the Hessian-free route gets no ``tol`` (it stops at ``gap_tol``), and
    the routes are priced at the asked gap; a user's explicit ``tol`` still wins."""
    from drflmodel.problems.minmax.route_costs import hessian_free_iterations

    prob = dm.FederatedDRO(_fed(), dm.losses.Logistic(), dm.sets.ChiSquare(4, 0.5), l2=1e-2)
    s = prob.structure
    sqp = next(r for r in s.routes if r.name == "sqp")
    free = next(r for r in s.routes if r.name == "hessian_free")
    for gap in (1e-4, 1e-8):
        at = dataclasses.replace(s, gap_tol=gap)
        assert sqp.auto_options(at) == {"tol": gap} and "tol" not in free.auto_options(at)
    assert hessian_free_iterations(dataclasses.replace(s, gap_tol=1e-10)) > hessian_free_iterations(s)
    coarse, fine = prob.solve(method="sqp"), prob.solve(gap_tol=1e-4)
    assert coarse.relative_gap <= 1e-10                                     # forced: its own 1e-10
    assert fine.info["method"] == "sqp" and 0 < fine.relative_gap <= 1e-4  # auto: stops at the asked gap
    assert fine.info["iterations"] < coarse.info["iterations"]
    asked = prob.solve(gap_tol=1e-4, tol=1e-12)                             # the user's tol wins
    assert asked.info["method"] == "sqp" and asked.relative_gap <= 1e-12
    close = prob.solve(gap_tol=1e-10)
    assert close.status == "optimal" and close.relative_gap <= 1e-10


def _stalling(monkeypatch):
    """The Hessian-free route capped at 2 iterations by default: its gap does not close."""
    monkeypatch.setattr(hessian_free.HessianFreeRoute, "options",
                        {**hessian_free.HessianFreeRoute.options, "max_iterations": 2})


def test_a_forced_route_whose_gap_stalls_falls_back_to_one_that_certifies(monkeypatch):
    _stalling(monkeypatch)
    fed = _fed()
    sol = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2).solve(method="hessian_free")
    assert sol.status == "optimal" and sol.info["method"] != "hessian_free"
    attempt, = sol.info["route_attempts"]
    assert attempt["method"] == "hessian_free" and attempt["status"] == "optimal_within_gap"
    assert sol.info["route_choice"]["fell_back"]["to"] == sol.info["method"]
    # fallback=False, or an option the user set: the route's own honest answer
    alone = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    kept = alone.solve(method="hessian_free", fallback=False)
    assert kept.info["method"] == "hessian_free" and kept.status == "optimal_within_gap"
    capped = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    capped = capped.solve(method="hessian_free", max_iterations=2)
    assert capped.info["method"] == "hessian_free" and "route_attempts" not in capped.info


def test_auto_falls_back_when_the_first_ranked_gap_stalls(monkeypatch):
    _stalling(monkeypatch)
    prob = dm.FederatedDRO(_pooled(_fed()), dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-2)
    ranked = type(next(r for r in prob.routes() if r.name == "hessian_free"))
    monkeypatch.setattr(ranked, "cost", lambda self, structure: 0.0)   # ranked first
    monkeypatch.setattr(ranked, "auto_options", lambda self, structure: {"tol": 1e-10, "max_iterations": 2})
    sol = prob.solve()
    assert sol.info["route_choice"]["method"] == "hessian_free"
    assert [a["method"] for a in sol.info["route_attempts"]] == ["hessian_free"]
    assert sol.status == "optimal" and sol.info["route_choice"]["fell_back"]["to"] == sol.info["method"]


def test_memory_estimates_are_the_routes_own():
    prob = dm.FederatedDRO(_fed(), dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    s = prob.structure
    sqp = next(r for r in s.routes if r.name == "sqp")
    assert memory.dense_route_bytes(s, "sqp") == sqp.memory(s) == memory.route_bytes(sqp, s)
    P, n = prob.dim, 4
    n_pad, m_max, _ = prob.objectives._X.shape                 # the padded client rows (K = 1)
    chunk = min(8192, s.rows)                                  # one chunk of the Hessian's products
    assert sqp.memory(s) == int(4 * 8 * P * P + 8 * (3 * n * P + 3 * n * n) + 8 * 4.5 * n_pad * m_max
                                + 8 * chunk * P * 2)
    assert ConicRoute().memory(s) == s.conic_bytes == 24 * s.rows * P + 3 * 8 * P * P
    assert memory.dense_route_bytes(s, "no-such-route") is None


def test_a_family_without_a_conic_estimate_is_never_refused_for_memory(monkeypatch):
    import drflmodel._memory as low

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=6, seed=0)
    prob = dm.RelativeFairness(fed, dm.losses.Squared(), dm.sets.Simplex(3), dm.sets.Simplex(3), phi=0.1,
                               box=(-3 * np.ones(fed.dim), 3 * np.ones(fed.dim)))
    minmax = dm.FederatedDRO(_fed(), dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    structures = prob.structure, minmax.structure           # computed before the memory shrinks
    monkeypatch.setattr(low, "MIN_REFUSED_BYTES", 0)
    monkeypatch.setattr(low, "available_memory", lambda: 1)
    assert structures[0].conic_bytes is None and ConicRoute().applies(structures[0]) is None
    refused = ConicRoute().applies(structures[1])        # the min-max family gives one: refused, by name
    assert isinstance(refused, memory.MemoryReason) and f"dense {minmax.dim} x {minmax.dim}" in refused
    assert "method='hessian_free' needs no P x P array" in refused      # the route that offers itself


def test_a_small_certified_solve_imports_no_cvxpy():
    code = ("import sys\nimport drflmodel as dm\n"
            "fed = dm.datasets.gaussian_mixture(240, 14, 2, n_clients=1, alpha=0.5, seed=0)\n"
            "sol = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3, "
            "penalize_intercept=False).solve()\n"
            "print(sol.status, sol.info['method'], 'cvxpy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "PATH": ""}).stdout.split()
    assert out[0] == "optimal" and out[1] in ("sqp", "hessian_free") and out[2] == "False"


def test_routes_are_named_after_their_files_and_answer_to_their_old_names():
    """No two algorithms share a route name: each renamed route is its file's name, and the old
    name still forces it (``Route.aliases``) while ``info["method"]`` reports the new one."""
    from drflmodel.problems.engine.route import method_name

    renamed = {(dm.FederatedDRO, "newton"): ("hessian_sqp", "hessian_sqp"),
               (dm.FederatedDRO, "bundle"): ("level_bundle", "level_bundle"),
               (dm.WassersteinDRFL, "newton"): ("trust_region_sqp", "trust_region_sqp")}
    for (cls, old), (name, module) in renamed.items():
        route = next(r for r in cls.routes(cls.__new__(cls)) if r.name == name)
        assert type(route).__module__.rsplit(".", 1)[1] == module and old in route.aliases
        assert method_name(cls.routes(cls.__new__(cls)), old) == name
    assert method_name(dm.DEOConstrained.routes(dm.DEOConstrained.__new__(dm.DEOConstrained)), "newton") == "newton"
    prob = dm.FederatedDRO(_fed(samples=30), dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    sol = prob.solve(method="newton")
    assert sol.info["method"] == "hessian_sqp" and sol.status == "optimal"
    with pytest.raises(dm.InvalidParameterError, match="unknown method 'newtonn'.*'hessian_sqp'"):
        prob.solve(method="newtonn")


#: auto's first route on shapes of ``benchmarks/bench_grid.py`` against what was measured there: the
#: faster of the two routes -- ``(rows, features, weight set, the faster route, its ms, the other's ms)``
#: -- at the default gap auto now asks of both (1e-6): medians of the CPU time (``time.process_time``)
#: of 21 calls (11 from 10,000 rows, 5 from 100,000), construction included, of ``solve(method="sqp",
#: tol=1e-6)`` (what auto asks of it) and ``solve(method="hessian_free")``, interleaved, one BLAS
#: thread, loaded machine (/tmp script of the change's note). Measured at 1e-10 before, sqp was the
#: faster at 1,000 x 15 chi-square (4.48 / 5.41 ms) and 100,000 x 20 CVaR (60.2 / 71.3): at 1e-6 the
#: Hessian-free route needs about 0.65 of its iterations, sqp one step fewer.
GRID_MEASURED = [
    (240, 14, "erm", "sqp", 0.88, 1.26),
    (5_000, 30, "erm", "hessian_free", 2.17, 4.27),
    (20_000, 20, "erm", "hessian_free", 4.67, 9.63),
    # sqp's warm start on a 5% subsample, then 3 full steps: its estimate (96 ms) is about twice what
    # it measures; the estimate ranks hessian_free (79 ms estimated) first -- a known mis-rank
    pytest.param(200_000, 20, "erm", "sqp", 49.5, 65.3, marks=pytest.mark.xfail(
        strict=True, reason="sqp's per-pass estimate at 200k rows is about 2x its measured time")),
    (240, 14, "chi2", "sqp", 1.31, 1.90),
    (500, 15, "chi2", "sqp", 1.39, 1.91),
    (1_000, 15, "chi2", "hessian_free", 1.96, 3.06),       # 20 clients, 5.4x padded rows
    (2_000, 20, "chi2", "hessian_free", 2.21, 4.25),       # 4.6x padded rows (sqp's passes run on them)
    (240, 14, "cvar", "sqp", 2.17, 4.82),
    (240, 14, "afl", "sqp", 1.79, 3.95),
    (2_000, 20, "cvar", "sqp", 4.68, 6.35),
    (10_000, 50, "cvar", "hessian_free", 9.90, 19.66),
    (10_000, 50, "afl", "hessian_free", 8.88, 16.15),
    (100_000, 20, "cvar", "hessian_free", 38.8, 46.1),
    (20_000, 100, "cvar", "hessian_free", 19.7, 81.9),
]


@pytest.mark.parametrize("rows, features, kind, faster, ms, other_ms", GRID_MEASURED,
                         ids=[f"{r[0]}x{r[1]}-{r[2]}" for r in (getattr(c, "values", c) for c in GRID_MEASURED)])
def test_auto_ranks_first_the_route_measured_faster_on_the_grid(rows, features, kind, faster, ms, other_ms):
    from drflmodel.problems.engine.route import estimated_costs

    fed = dm.datasets.gaussian_mixture(rows, features, 2, n_clients=4 if rows < 1_000 else 20, alpha=0.5, seed=0)
    n = fed.n_clients
    if kind == "erm":
        fed, W = _pooled(fed), dm.sets.Simplex(1)
    else:
        W = {"chi2": dm.sets.ChiSquare(n, 0.1), "cvar": dm.sets.CVaR(n, 0.2 if n >= 10 else 0.5),
             "afl": dm.sets.Simplex(n)}[kind]
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=1e-3, penalize_intercept=False)
    costs = estimated_costs(prob.routes(), prob.structure)
    assert min(costs, key=costs.get) == faster, costs
    other = "sqp" if faster == "hessian_free" else "hessian_free"
    assert costs[faster] < costs[other] and ms < other_ms


def test_a_numpy_weight_step_is_priced_as_one():
    """The min-max family says when its weight step runs in numpy (box-simplex sets and the
    chi-square set up to ``NUMPY_STEP_MAX_CLIENTS`` clients); the estimate then charges no compile
    and a fraction of a millisecond a step (measured 0.02-0.4 ms up to 50 clients), not Clarabel's."""
    from drflmodel.problems.engine import cost
    from drflmodel.problems.minmax.box_simplex_step import NUMPY_STEP_MAX_CLIENTS

    fed = _fed()
    for W, numpy in ((dm.sets.ChiSquare(4, 0.5), True), (dm.sets.CVaR(4, 0.5), True), (dm.sets.Simplex(4), True),
                     (dm.sets.LpBall(np.full(4, 0.25), 0.1), False)):
        s = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=1e-2).structure
        assert s.numpy_weight_step is numpy and s.to_dict()["numpy_weight_step"] is numpy
        conic = dataclasses.replace(s, numpy_weight_step=False)
        assert cost.weight_model_seconds(s) == (0.0 if numpy else cost.WEIGHT_MODEL_SECONDS)
        assert cost.weight_model_seconds(conic) == cost.WEIGHT_MODEL_SECONDS
        assert (cost.weight_step_seconds(s) < 1e-4) is numpy and cost.weight_step_seconds(conic) > 1e-3
    many = dm.datasets.synthetic_classification(n_clients=NUMPY_STEP_MAX_CLIENTS + 1, dim=3, samples=12, seed=0)
    assert not dm.FederatedDRO(many, dm.losses.Logistic(), dm.sets.ChiSquare(NUMPY_STEP_MAX_CLIENTS + 1, 0.5),
                               l2=1e-2).structure.numpy_weight_step


def test_the_sqp_estimate_counts_its_warm_start_from_the_rows_it_starts_there():
    """From ``WARM_START_ROWS`` rows the ``sqp`` route warm-starts on a 5% subsample and takes fewer
    full steps: its estimate per row drops there (4 steps for ERM instead of 8)."""
    from drflmodel.problems.minmax.lagrangian_sqp import WARM_START_ROWS
    from drflmodel.problems.minmax.route_costs import sqp_seconds

    fed = dm.datasets.gaussian_mixture(2_000, 20, 2, n_clients=1, seed=0)
    s = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3).structure
    below = sqp_seconds(dataclasses.replace(s, rows=WARM_START_ROWS - 1), WARM_START_ROWS)
    above = sqp_seconds(dataclasses.replace(s, rows=WARM_START_ROWS), WARM_START_ROWS)
    assert 0.5 < above / below < 0.75         # (1/20 x 8 + 4 + 1) / (8 + 1) full passes, plus overheads


#: federated exchanges measured at ``gap_tol = 1e-6`` (``benchmarks/bench_federated_scale.py``, LocalChannel, 20
#: clients, ERM): (rows, features, classes, block_newton's exchanges, hessian_free's)
FEDERATED_MEASURED = [
    (1_797, 64, 10, 38, 83),                   # digits, P = 650
    (10_000, 300, 10, 24, 34),                 # P = 3,010
    (10_000, 512, 200, 29, 37),                # 10k rows of the 100k x 512 x 200 head, P = 102,600
    (100_000, 512, 200, 17, 27),               # the whole head (hessian_free: Flower's grid, the same counts)
    (2_000, 512, 200, 50, 83),                 # 2k rows of that head (block_newton stopped uncertified at 333 before
    (5_000, 512, 200, 41, 42),                 # 5k rows (0.049 per parameter; 89 before)   its model's fixes)
    (6_000, 512, 200, 32, 47),                 # 6k rows (0.058)
    (7_500, 512, 200, 29, 41),                 # 7.5k rows (0.073)
]


@pytest.mark.parametrize("rows, features, classes, block, free", FEDERATED_MEASURED,
                         ids=[f"{r}x{d}x{k}" for r, d, k, *_ in FEDERATED_MEASURED])
def test_federated_auto_takes_the_route_measured_with_fewer_exchanges(rows, features, classes, block, free):
    """On a federated server (the structure only: no rows held, nothing solved) ``auto`` takes
    ``block_newton`` where it was measured to certify in fewer exchanges than ``hessian_free``, and the
    ``hessian_free`` route where that needs no more (it then also uploads a third of the floats); the
    reason is recorded."""
    from drflmodel.problems.engine.route import _candidates
    from drflmodel.problems.engine.structure import ROWS

    fed = dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=200, seed=3)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.ChiSquare(4, 0.1), l2=1e-3)
    s = prob.structure
    P = (features + 1) * classes
    remote = dataclasses.replace(s, rows_local=False, queries=s.queries - {ROWS}, dim=P, n_outputs=classes,
                                 rows=rows, n_clients=20)
    first = _candidates(prob, remote, remote.queries, prob.routes(), None, {})[0]
    assert first.name == ("block_newton" if block < free else "hessian_free")
    skip = next(r for r in prob.routes() if r.name == "block_newton").auto_skip(remote)
    assert (skip is None) == (block < free)
    if skip is not None:
        assert "fewer exchanges" in skip and "method='block_newton'" in skip
