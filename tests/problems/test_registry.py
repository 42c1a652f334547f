"""The family registry (``drflmodel.problems.registry``) is the one list of families: every consumer
-- the lazy names, the TOML configuration, the command line, the federated solve's ``SUPPORTED``,
the Flower deployment's light clients, the scikit-learn estimators -- reads it, and a family
registered in a test is seen by the configuration, the command line and the federated-solve
support without any other edit."""

from __future__ import annotations

import json

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.problems import registry
from drflmodel.problems.minmax.dro import FederatedDRO


class ToyDRO(FederatedDRO):
    """A family registered by this test only: federated DRO under another name."""

    family = "toy"


TOY = registry.Family("toy", "ToyDRO", __name__, weight_keys=("weights",), weight_sets=("simplex", "cvar"),
                      light_client=True, federated="the toy's text", summary="a test family")


@pytest.fixture
def toy():
    registry.register(TOY)
    try:
        yield TOY
    finally:
        registry.unregister("toy")


def test_every_family_class_is_exported_lazily_and_names_itself():
    import drflmodel.problems as P

    for name, entry in registry.FAMILIES.items():
        cls = entry.load()
        assert getattr(dm, entry.cls) is cls and getattr(P, entry.cls) is cls
        assert entry.cls in dm.__all__ and entry.cls in P.__all__
        assert cls.family == name, (cls, cls.family)      # the class's own name for itself is the entry's
        assert cls.__module__ == entry.module


def test_the_configuration_and_the_command_line_list_the_registry():
    from drflmodel import _config
    from drflmodel.cli import _config_epilog

    assert _config.FAMILY_CLASSES == {f.name: f.cls for f in registry.FAMILIES.values()}
    assert _config.FAMILIES == tuple(registry.FAMILIES)
    assert _config.WEIGHT_SETS == dm.sets.WEIGHT_SET_NAMES
    assert " | ".join(registry.FAMILIES) in _config_epilog()


def test_federated_support_and_light_clients_come_from_the_registry_and_the_classes():
    from drflmodel.client_oracle import SUPPORTED
    from drflmodel.flower.deploy import _light_families

    # the one answer, the routes' needs (problem.check_federated reads the same), or the family's
    # own federated oracle (Wasserstein: the generic path refuses it, federated_solve delegates)
    generic = {f.cls for f in registry.FAMILIES.values() if f.load().federated_routes()}
    own = {f.cls for f in registry.FAMILIES.values() if f.oracle() is not None}
    assert set(SUPPORTED) == generic | own and {"FederatedDRO", "FairnessAwareFL"} <= generic
    assert own == {"WassersteinDRFL"} and not own & generic
    assert SUPPORTED["FederatedDRO"] == registry.family("dro").federated
    assert SUPPORTED["WassersteinDRFL"] == registry.family("wasserstein").federated
    assert _light_families() == ("dro", "fafl", "relative")


def test_the_estimators_of_the_registry_are_those_of_drflmodel_sklearn():
    sk = pytest.importorskip("drflmodel.sklearn")
    from drflmodel.sklearn._horizontal import DRO_WEIGHTS

    listed = {e for f in registry.FAMILIES.values() for e in f.estimators}
    estimators = {n for n in sk.__all__ if n.endswith(("Classifier", "Regressor"))}
    assert listed == estimators
    assert tuple(DRO_WEIGHTS) == registry.family("dro").weight_set_names() == tuple(dm.sets.WEIGHT_SET_NAMES)


def test_a_registered_family_is_configured_built_solved_and_federated_without_other_edits(toy, tmp_path, capsys):
    from drflmodel import _config
    from drflmodel.cli import _config_epilog, main
    from drflmodel.client_oracle import SUPPORTED
    from drflmodel.flower.deploy import _light_families

    path = tmp_path / "toy.toml"
    path.write_text('[data]\nsource = "synthetic_regression"\noptions = { n_clients = 3, dim = 3, samples = 20, '
                    'seed = 0 }\n[loss]\nname = "squared"\n[problem]\nfamily = "toy"\noptions = { l2 = 0.1 }\n'
                    'weights = { name = "cvar", alpha = 0.5 }\n[solve]\nmethod = "conic"\n')
    cfg = _config.load_config(path)
    problem = _config.build_problem(cfg)
    assert type(problem) is ToyDRO and isinstance(problem.weight_set, dm.sets.CVaR)
    assert "toy" in _config.FAMILIES and "toy" in _config_epilog()
    assert SUPPORTED["ToyDRO"] == "the toy's text" and "toy" in _light_families()
    # the same problem written directly, solved by the independent conic route: the CLI's answer
    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=0)
    direct = FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.CVaR(3, 0.5), l2=0.1).solve(method="conic")
    assert main(["solve", str(path), "--out", str(tmp_path / "toy.json")]) == 0
    got = json.loads((tmp_path / "toy.json").read_text())["solution"]
    assert got["info"]["method"] == "conic" and got["status"] == "optimal"
    assert np.isclose(got["value"], direct.value, rtol=1e-7)
    # a weight set the family does not accept, and a key it does not declare, are refused by name
    path.write_text(path.read_text().replace('name = "cvar", alpha = 0.5', 'name = "qffl", q = 1'))
    assert main(["solve", str(path)]) == 2
    assert "'problem.weights.name' must be one of simplex, cvar; got 'qffl'" in capsys.readouterr().err
    path.write_text(path.read_text().replace('weights =', 'A ='))
    assert main(["solve", str(path)]) == 2
    assert "'problem.A' is not used with family = \"toy\" (its weight-set keys are weights)" in capsys.readouterr().err


def test_register_refuses_a_taken_name_or_class():
    with pytest.raises(dm.InvalidParameterError, match="is registered"):
        registry.register(registry.Family("dro", "Other", __name__))
    with pytest.raises(dm.InvalidParameterError, match="is registered"):
        registry.register(registry.Family("other", "FederatedDRO", __name__))
    with pytest.raises(dm.InvalidParameterError, match="family must be one of dro, fafl"):
        registry.family("nope")


def test_best_certificate_is_a_copy_of_the_smallest_gap_and_is_forgotten():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=30, seed=1)
    prob = FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(3, 0.5), l2=0.1)
    assert prob.best_certificate() is None
    sol = prob.solve(method="sqp")
    best = prob.best_certificate()
    assert best is not None and best is not prob.best_certificate()
    assert best.relative_gap <= sol.relative_gap + 1e-15
    # a valid interval: it brackets the independent conic route's value
    conic = prob.solve(method="conic")
    assert best.lower_bound <= conic.upper_bound + 1e-9 and conic.lower_bound <= best.upper_bound + 1e-9
    prob.forget_certificates()
    assert prob.best_certificate() is None


def test_federated_support_is_the_routes_needs():
    """A family's federated routes are its routes (the same list an instance gives) whose needs
    hold no row; one without them is refused by check_federated naming why."""
    from drflmodel.problems.engine.queries import ROWS

    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[20, 25, 30], seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.1)
    built = [r.name for r in prob.routes() if ROWS not in r.needs]
    assert dm.FederatedDRO.federated_routes() == built == ["block_newton", "hessian_free", "sqp", "level_bundle"]
    prob.check_federated()

    class _RowsOnly(dm.FederatedDRO):
        def routes(self):
            return [r for r in super().routes() if ROWS in r.needs]

    rows_only = _RowsOnly(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.1)
    assert _RowsOnly.federated_routes() == []
    with pytest.raises(dm.InvalidParameterError, match=r"_RowsOnly has no federated certified solve: every route "
                                                       r"needs the clients' rows \('hessian_sqp', 'active_set', 'conic'\)"):
        rows_only.check_federated()
