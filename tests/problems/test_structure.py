"""The structure summary routes decide on, the route caches, and the rule that no route reads a
problem's private attributes."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import MemoryLimitError
from drflmodel.problems.engine.memory import check_memory, format_bytes
from drflmodel.problems.engine.queries import EVERY_KIND, ROWS
from drflmodel.problems.engine.structure import Structure

PACKAGE = Path(dm.__file__).parent
#: the names under which a module holds a problem it does not own
PROBLEM_NAMES = {"problem", "dro", "server", "built"}      # ("prob" is a cvxpy.Problem here)


def _private_reads(path: Path):
    """``problem._x`` / ``self.problem._x`` / ``getattr(problem, "_x")`` in ``path`` (line, text)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in PROBLEM_NAMES:
                yield node.lineno, f"{owner.id}.{node.attr}"
            elif (isinstance(owner, ast.Attribute) and owner.attr == "problem"
                  and isinstance(owner.value, ast.Name) and owner.value.id == "self"):
                yield node.lineno, f"self.problem.{node.attr}"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in PROBLEM_NAMES
              and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")):
            yield node.lineno, f"{node.func.id}({node.args[0].id}, {node.args[1].value!r})"


def test_no_route_module_reads_a_private_attribute_of_a_problem():
    """Every module of drflmodel.problems (routes and their helpers), the client oracle and the
    Flower integration reach a problem through its public names only."""
    modules = sorted((PACKAGE / "problems").rglob("*.py")) + sorted(PACKAGE.glob("client_oracle*.py")) \
        + sorted((PACKAGE / "client_oracle").rglob("*.py")) + sorted((PACKAGE / "flower").rglob("*.py"))
    found = [f"{p.relative_to(PACKAGE)}:{line} {text}" for p in modules for line, text in _private_reads(p)]
    assert not found, found


def test_the_scan_finds_a_private_read():
    """The scan above fails when it should (a module written here, not one of the package's)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "route.py"
        path.write_text("def solve(self, problem):\n    a = problem._weight_set()\n    b = self.problem._cache\n"
                        "    c = getattr(problem, '_sqp_previous', None)\n    return problem.public\n")
        assert sorted(t for _, t in _private_reads(path)) == ["getattr(problem, '_sqp_previous')",
                                                               "problem._weight_set", "self.problem._cache"]


def _dro(loss=None, l2=0.1, penalize_intercept=True, **kw):
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=4, samples=[20, 30, 40], seed=0,
                                               add_intercept=True)
    return dm.FederatedDRO(fed, loss or dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=l2,
                           penalize_intercept=penalize_intercept, **kw)


def test_the_structure_of_a_horizontal_problem_is_read_from_its_data():
    prob = _dro(penalize_intercept=False)
    s = prob.structure
    assert isinstance(s, Structure) and s is prob.structure          # computed once
    assert (s.family, s.loss, s.n_clients, s.rows, s.dim, s.n_outputs) == ("dro", "logistic", 3, 90, 5, 1)
    assert s.size == 90 * 5 and s.hessian_bytes == 8 * 25
    assert s.smooth and not s.piecewise_linear and s.self_concordant and not s.quadratic
    intercept = prob.federation.intercept_column
    assert s.unpenalized == (intercept,) and not s.ridge_covers_all and not s.strongly_convex
    assert s.rows_local and s.queries == EVERY_KIND and ROWS in s.queries
    X = np.concatenate([c.X for c in prob.federation.clients])
    assert s.data_bytes >= X.nbytes
    json.dumps(s.to_dict())                                          # JSON-serializable


def test_a_piecewise_linear_loss_and_a_quadratic_one():
    s = _dro(dm.losses.Hinge()).structure
    assert s.piecewise_linear and s.pieces == 2 and not s.smooth and not s.twice_differentiable
    assert s.ridge_covers_all and s.strong_convexity == pytest.approx(0.1)
    fed = dm.datasets.synthetic_regression(n_clients=3, dim=2, samples=30, seed=0)
    q = dm.FederatedDRO(fed, dm.losses.Squared(), dm.sets.Simplex(3)).structure
    assert q.quadratic and q.smooth and q.self_concordance == 0.0
    # l2 = 0 but a full-rank Gram matrix: the squared loss is strongly convex on its own
    eig = min(np.linalg.eigvalsh(2 * c.X.T @ c.X / c.X.shape[0])[0] for c in fed.clients)
    assert q.strong_convexity == pytest.approx(eig, rel=1e-9)


def test_the_families_state_their_facts():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=30, seed=0)
    wass = dm.WassersteinDRFL(fed, dm.losses.Hinge(), radius=0.05, kappa=1.0, norm=2, weights=dm.sets.Simplex(3))
    assert wass.structure.facts == {"shared_multiplier": False, "support_bounded": False, "fixed_columns": (),
                                    "labels_move": True, "transport_norm": 2.0}
    wafl = dm.WassersteinDRFL.wafl(fed, dm.losses.Hinge(), radius=0.05, kappa=1.0, norm=2)
    assert wafl.structure.facts["shared_multiplier"] is True
    reg = dm.datasets.synthetic_regression(n_clients=3, dim=2, samples=30, seed=0)
    rel = dm.RelativeFairness(reg, dm.losses.Squared(), dm.sets.Simplex(3), dm.sets.Simplex(3), phi=0.1)
    facts = rel.structure.facts
    assert facts["phi"] == 0.1 and facts["box"] is False and facts["vertices_listable"]
    assert facts["vertex_psd"] == rel.vertex_psd_test()["holds"]
    rel.set_parameter("phi", 0.0)                                    # a structure-changing parameter
    assert rel.structure.facts["phi"] == 0.0


def test_routes_decide_on_the_structure():
    prob = _dro(dm.losses.Hinge())
    names = {r.name: r for r in prob.routes()}
    s = prob.structure
    assert names["active_set"].applies(s) is None and names["sqp"].applies(s) is not None
    assert names["level_bundle"].auto_skip(s) is not None                  # rows local: the conic route is exact
    remote = Structure(**{**{k: getattr(s, k) for k in s.__dataclass_fields__},
                          "rows_local": False, "queries": EVERY_KIND - {ROWS}})
    assert names["level_bundle"].auto_skip(remote) is None                 # a federated server takes it
    assert names["active_set"].missing(remote.queries) is not None   # it reads rows
    assert prob.solve(method="active_set").info["method"] == "active_set"


def test_the_route_caches_live_on_the_problem_and_go_with_the_structure():
    prob = _dro()
    prob.solve(method="newton")
    from drflmodel.problems.engine.steps import warm_start
    from drflmodel.problems.minmax.hessian_sqp import step_model
    from drflmodel._solver_sequence import default_solver

    model = step_model(prob, default_solver())
    assert warm_start(prob) is not None and prob.cache("newton")["value"] is model
    prob.set_parameter("alpha", 0.4)             # CVaR's alpha is a DPP parameter: same structure
    assert prob.cache("newton")["value"] is model
    chi = dm.FederatedDRO(prob.federation, dm.losses.Logistic(), dm.sets.ChiSquare(3, 0.2), l2=0.1)
    chi.solve(method="newton")
    before = chi.structure
    chi.set_parameter("rho", 0.0)                # the chi^2 support changes form at rho = 0
    assert chi.cache("newton") == {} and warm_start(chi) is None and chi.structure is not before


def test_a_memory_check_refuses_by_name_before_allocating():
    check_memory(10, "a small array", available=1000)
    with pytest.raises(MemoryLimitError, match=r"a dense 100000 x 100000 Hessian needs about 74.5 GiB but 8 GiB"):
        check_memory(8 * 10 ** 10, "a dense 100000 x 100000 Hessian", available=8 * 1024 ** 3)
    assert format_bytes(1536) == "1.5 KiB"
    with pytest.raises(dm.InvalidParameterError, match="fraction"):
        check_memory(1, "x", available=10, fraction=0.0)
