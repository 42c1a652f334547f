"""The one solve contract of every family (issue 15): ``solve(solver, gap_tol, method, seed,
verbose, fallback, **options)`` refuses bad input with the valid choices named, says when the
user's solver was replaced, and records the route that answered in ``info["method"]``.

The bad-input table (one row per family and input):

=================================  =========================================================
input                              behaviour
=================================  =========================================================
``solver="NOPE"``                  ``InvalidParameterError``: CVXPY's names + installed ones
``solver="MOSEK"`` (absent)        ``InvalidParameterError``: not installed + installed ones
``method="NOPE"``                  ``InvalidParameterError``: ``'auto'`` + the family's routes
``bogus=1``                        ``InvalidParameterError``: the valid options
another route's / solver's option  ``InvalidParameterError`` naming the valid ones
forced route that does not apply   its refusal (``InvalidParameterError`` / ``NotConvexError``)
named solver fails, fallback=True  ``SolverFallbackWarning``; answer from another solver;
                                   the attempt marked ``requested`` + ``fallback``
named solver fails, fallback=False that solver's honest answer (not ``"optimal"``), recorded
=================================  =========================================================
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError, NotConvexError, SolverFallbackWarning
from drflmodel.losses import Logistic, Squared
from drflmodel._solver_sequence import installed_solvers
from drflmodel.problems.engine.route import Route
from drflmodel.sets import Simplex
from drflmodel.solution import Solution

pytestmark = pytest.mark.skipif(not {"CLARABEL", "ECOS", "SCS", "OSQP"} <= set(installed_solvers()),
                                reason="needs Clarabel, ECOS, SCS and OSQP")


def _fed(task="regression", n=3, d=2, m=12, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.normal(size=(m, d)) for _ in range(n)]
    if task == "regression":
        ys = [X @ rng.normal(size=d) + 0.1 * rng.normal(size=m) for X in Xs]
    else:
        ys = [np.where(X @ rng.normal(size=d) + rng.normal(size=m) > 0, 1.0, -1.0) for X in Xs]
    return dm.Federation.from_arrays(Xs, ys, task=task)


def _vertical(n=60, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    X = rng.standard_normal((n, 3)) + g[:, None] * np.array([1.0, 0.6, 0.2])
    y = np.where(X @ np.array([1.0, -0.5, 0.3]) + 0.5 * rng.standard_normal(n) + 0.8 * g > 0, 1.0, -1.0)
    X = np.hstack([X, np.ones((n, 1))])
    return dm.VerticalFederation([X[:, :2], X[:, 2:]], y, g, active=[0])


# one small instance per family, its default route, and a route of it that cannot apply
FAMILIES = {
    "dro": lambda: dm.FederatedDRO(_fed(), Squared(), weights=Simplex(3), l2=0.1),
    "fafl": lambda: dm.FairnessAwareFL(_fed("classification"), Logistic(), alpha=0.5, l2=0.1),
    "wasserstein": lambda: dm.WassersteinDRFL(_fed("classification"), Logistic(), radius=0.1, kappa=1.0,
                                               norm=2, weights=Simplex(3)),
    "relative": lambda: dm.RelativeFairness(_fed(), Squared(), Simplex(3), Simplex(3), phi=0.1,
                                            box=(-3 * np.ones(2), 3 * np.ones(2))),
    "deo": lambda: dm.DEOConstrained(_vertical(), Logistic(), 0.02, fairness_loss="linear", l2=0.05),
}
# (issue 41: the fafl instance -- logistic, HCVaR -- takes the SQP steps, ranked before the conic model)
DEFAULT_METHOD = {"dro": "conic", "fafl": "sqp", "wasserstein": "conic", "relative": "R1", "deo": "newton"}


@pytest.fixture(scope="module")
def problems():
    return {k: make() for k, make in FAMILIES.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_default_solve_names_its_route(problems, family):
    sol = problems[family].solve()
    assert sol.status == "optimal"
    assert sol.info["method"] == DEFAULT_METHOD[family]
    assert sol.problem is problems[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_unknown_or_absent_solver_is_refused_with_the_valid_names(problems, family):
    with pytest.raises(InvalidParameterError, match=r"unknown solver 'NOPE'.*CLARABEL.*installed: .*SCS"):
        problems[family].solve(solver="NOPE")
    if "MOSEK" not in installed_solvers():
        with pytest.raises(InvalidParameterError, match=r"'MOSEK' is not installed.*CLARABEL"):
            problems[family].solve(solver="MOSEK")
    with pytest.raises(InvalidParameterError, match="solver"):
        problems[family].solve(solver=3)


@pytest.mark.parametrize("family", FAMILIES)
def test_unknown_method_lists_the_routes(problems, family):
    prob = problems[family]
    names = [r.name for r in prob.routes()]
    with pytest.raises(InvalidParameterError, match="unknown method 'NOPE'") as err:
        prob.solve(method="NOPE")
    assert all(repr(n) in str(err.value) for n in ["auto", *names])


@pytest.mark.parametrize("family", FAMILIES)
def test_unknown_option_is_an_error_listing_valid_ones(problems, family):
    with pytest.raises(InvalidParameterError, match=r"unknown option\(s\) 'bogus'.*tol_gap_abs"):
        problems[family].solve(bogus=1)
    # a setting of another solver: tol_gap_abs is Clarabel's, not SCS's (whose eps_abs is listed)
    with pytest.raises(InvalidParameterError, match=r"'tol_gap_abs'.*eps_abs"):
        problems[family].solve(solver="SCS", tol_gap_abs=1e-8)


def test_solver_settings_are_the_solvers_real_ones(problems):
    """Each accepted setting reaches the solver: too few iterations change the answer."""
    prob = problems["dro"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverFallbackWarning)                # no fallback: no warning
        assert prob.solve(tol_gap_abs=1e-10).status == "optimal"             # Clarabel's own name
        assert prob.solve(solver="ecos", feastol=1e-10).info["attempts"][0]["solver"] == "ECOS"
    with pytest.raises(InvalidParameterError, match="drflmodel checks solver settings for"):
        prob.solve(solver="OSQP", eps_abs=1e-8)                               # not checkable: refused
    with pytest.warns(SolverFallbackWarning):
        capped = prob.solve(solver="CLARABEL", max_iter=1)
    assert capped.info["attempts"][0]["cvxpy_status"] != "optimal"


@pytest.mark.parametrize("family,method,option", [
    ("relative", "R1", {"max_nodes": 5}),            # an R2 option
    ("relative", "local", {"tol_gap_abs": 1e-9}),    # a solver setting; local uses no user solver
    ("deo", "convex", {"n_starts": 2}),              # a constructor argument, not a solve option
])
def test_an_option_of_another_route_is_refused(problems, family, method, option):
    with pytest.raises(InvalidParameterError, match=f"unknown option.*{next(iter(option))}"):
        problems[family].solve(method=method, **option)


def test_fafl_smoothing_option_belongs_to_solve_smoothed(problems):
    prob = problems["fafl"]
    with pytest.raises(InvalidParameterError, match="'mu'"):
        prob.solve(mu=0.1)
    sol = prob.solve_smoothed(0.1)
    assert sol.status == "optimal" and sol.info["method"] == "smoothed"
    with pytest.raises(InvalidParameterError, match="unknown solver"):
        prob.solve_smoothed(0.1, solver="NOPE")
    with pytest.raises(InvalidParameterError, match="mu"):
        prob.solve_smoothed(0.0)


def test_auto_takes_the_route_that_accepts_the_options(problems):
    """R1 is preferred here, but only R2 takes ``max_nodes``: auto goes to R2 (and says so)."""
    prob = problems["relative"]
    assert prob.choose_method() == "R1"
    sol = prob.solve(max_nodes=0, n_starts=1)
    assert sol.info["method"] == "R2" and sol.status == "optimal"
    with pytest.raises(InvalidParameterError, match=r"unknown option\(s\) 'max_iters'.*method 'R2': .*max_nodes"):
        prob.solve(n_starts=2, max_iters=5)         # max_iters is SCS's / ECOS's, not Clarabel's
    with pytest.raises(InvalidParameterError, match=r"n_starts must be"):
        prob.solve(method="R2", n_starts=0)


@pytest.mark.parametrize("family,method,error,match", [
    ("relative", "R3", InvalidParameterError, "box"),
    ("relative", "FederatedDRO", InvalidParameterError, "FederatedDRO"),
    ("deo", "sdp", InvalidParameterError, "method 'newton' or 'convex'"),
    ("deo", "dc", InvalidParameterError, "affine_fair"),
])
def test_forced_route_that_does_not_apply_gives_its_reason(problems, family, method, error, match):
    with pytest.raises(error, match=match):
        problems[family].solve(method=method)


def test_forced_r1_on_a_non_convex_instance_is_not_convex():
    prob = dm.RelativeFairness(_fed(), Squared(), Simplex(3), Simplex(3), phi=0.0)
    prob.set_parameter("phi", min(0.95, prob.max_convex_phi("vertex") + 0.2))
    with pytest.raises(NotConvexError, match="R2"):
        prob.solve(method="R1")


def test_naming_a_solver_restricts_auto_to_routes_that_use_one():
    prob = dm.RelativeFairness(_fed(), dm.losses.Huber(1.0), Simplex(3), Simplex(3), phi=0.2)
    assert prob.choose_method() == "local"
    with pytest.raises(InvalidParameterError, match="uses a conic solver"):
        prob.solve(solver="CLARABEL")
    with pytest.raises(InvalidParameterError, match="does not use a conic solver"):
        prob.solve(method="local", solver="CLARABEL")


@pytest.mark.parametrize("family", FAMILIES)
def test_failing_named_solver_falls_back_with_a_warning_or_fails_honestly(problems, family):
    """OSQP cannot take these cones: with fallback=True the answer comes from another solver and
    says so; with fallback=False the honest answer is "failed", with the attempt recorded."""
    prob = problems[family]
    with pytest.warns(SolverFallbackWarning, match="'OSQP' \\(requested\\)"):
        sol = prob.solve(solver="OSQP")
    assert sol.status == "optimal"
    first = sol.info["attempts"][0]
    assert first["solver"] == "OSQP" and first["requested"] and first["fallback"] and "error" in first
    assert sol.info["attempts"][-1]["solver"] != "OSQP"
    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverFallbackWarning)
        honest = prob.solve(solver="OSQP", fallback=False)
    assert honest.status == "failed" and honest.theta is None
    assert [a["solver"] for a in honest.info["attempts"]] == ["OSQP"]
    assert honest.info["attempts"][0]["requested"] and "fallback" not in honest.info["attempts"][0]
    honest.to_json()


def test_scs_with_five_iterations_is_not_replaced_silently(problems):
    """The issue's example: SCS stopped after 5 iterations does not certify."""
    prob = problems["dro"]
    with pytest.warns(SolverFallbackWarning, match="'SCS' \\(requested\\)"):
        sol = prob.solve(solver="SCS", max_iters=5)
    assert sol.status == "optimal" and sol.info["attempts"][0]["fallback"]
    own = prob.solve(solver="SCS", max_iters=5, fallback=False)
    assert own.status != "optimal" and [a["solver"] for a in own.info["attempts"]] == ["SCS"]
    # the certificate stays honest: the open gap is real (U - L > tolerance), L below the optimum
    assert own.lower_bound <= sol.value + 1e-9


def test_bad_flags_are_refused(problems):
    prob = problems["dro"]
    for kwargs, name in (({"fallback": "yes"}, "fallback"), ({"verbose": 1}, "verbose"),
                         ({"seed": -1}, "seed"), ({"gap_tol": -1.0}, "gap_tol")):
        with pytest.raises(InvalidParameterError, match=name):
            prob.solve(**kwargs)


# ---------------------------------------------------------------------------------------------
# a family with an extra route (as issue 13's numpy routes register themselves)
# ---------------------------------------------------------------------------------------------
class _TriedFirst(Route):
    """A fast route that never certifies: auto must go on to the conic route."""

    name = "fast"
    options = {"iters": 3}
    uses_solver = False
    may_fall_back = True

    def __init__(self, reason=None):
        self.reason = reason
        self.calls = []

    def applies(self, structure):
        return self.reason

    def solve(self, problem, request):
        self.calls.append(dict(request.options))
        self.seeds = getattr(self, "seeds", []) + [request.seed]
        return Solution(theta=None, weights=None, client_losses=None, value=float("nan"),
                        lower_bound=float("-inf"), upper_bound=float("inf"), status="failed",
                        certificate="none", info={})


class _WithFastRoute(dm.FederatedDRO):
    route = None

    def routes(self):
        return [self.route, *super().routes()]


def _with_fast(reason=None):
    prob = _WithFastRoute(_fed(), Squared(), weights=Simplex(3), l2=0.1)
    prob.route = _TriedFirst(reason)
    return prob


def test_may_fall_back_route_is_tried_first_and_recorded():
    prob = _with_fast()
    sol = prob.solve()
    assert prob.route.calls == [{"iters": 3}]
    assert sol.info["method"] == "conic" and sol.status == "optimal"
    assert sol.info["route_attempts"] == [{"method": "fast", "status": "failed", "relative_gap": float("inf")}]
    # forced, its own (non-certified) answer is returned as it is
    forced = prob.solve(method="fast", iters=7)
    assert forced.info["method"] == "fast" and forced.status == "failed" and prob.route.calls[-1] == {"iters": 7}
    # a named solver, or a solver setting, skips the route that uses none
    n_calls = len(prob.route.calls)
    assert prob.solve(solver="ECOS").info["method"] == "conic"
    assert prob.solve(tol_gap_abs=1e-9).info["method"] == "conic"
    assert len(prob.route.calls) == n_calls
    with pytest.raises(InvalidParameterError, match="does not use a conic solver"):
        prob.solve(method="fast", solver="ECOS")
    with pytest.raises(InvalidParameterError, match="no single method accepts all of 'iters', 'tol_gap_abs'"):
        prob.solve(iters=2, tol_gap_abs=1e-9)


def test_seed_defaults_to_the_problems_own_seed_else_zero():
    prob = _with_fast()
    prob.solve(method="fast")
    prob.solve(method="fast", seed=7)
    prob.seed = 5                       # a family with a constructor seed (DEOConstrained)
    prob.solve(method="fast")
    prob.solve(method="fast", seed=0)
    assert prob.route.seeds == [0, 7, 5, 0]


def test_forced_route_that_does_not_apply_names_the_reason():
    prob = _with_fast(reason="needs a smooth loss")
    with pytest.raises(InvalidParameterError, match="method 'fast' does not apply.*needs a smooth loss"):
        prob.solve(method="fast")
    assert prob.solve().info["method"] == "conic" and prob.route.calls == []
