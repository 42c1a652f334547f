"""The ClientOracle protocol (drflmodel.client_oracle.protocol) is what every implementation of
``problem.objectives`` provides: the in-process ClientObjectives and the federated
FederatedObjectives / StatisticsObjectives have every member it names, and only the in-process one
holds rows (``stacked``, what the routes that need rows read)."""

from __future__ import annotations

import pytest

import drflmodel as dm
from drflmodel.client_oracle import FederatedObjectives, StatisticsObjectives
from drflmodel.client_oracle.protocol import ClientOracle


def _members(protocol) -> set[str]:
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {n for n, v in vars(protocol).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return names


def test_the_protocol_names_what_routes_ask():
    assert {"values", "gradients", "evaluate", "weighted_hessian", "hessian_vector_products", "loss", "layout",
            "n", "dim"} <= _members(ClientOracle)


def _implementations():
    """One instance of each implementation over the same data (the federated ones over a LocalChannel)."""
    from drflmodel.client_oracle import DeclaredFederation, LocalChannel

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=[5, 7, 6], seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), dm.sets.Simplex(3), l2=0.1)
    declared = DeclaredFederation(fed.sizes, fed.dim, fed.task, intercept_column=fed.intercept_column)
    template = dm.ClientObjectives(declared, prob.loss, prob.l2, prob.penalize_intercept)
    channel = LocalChannel.from_problem(prob)
    return [prob.objectives, FederatedObjectives(template, channel), StatisticsObjectives(template, channel)]


def test_every_implementation_has_every_member_of_the_protocol():
    for obj in _implementations():
        missing = sorted(name for name in _members(ClientOracle) if not hasattr(obj, name))
        assert not missing, (type(obj).__name__, missing)


def test_only_the_in_process_objectives_hold_rows():
    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=[5, 7, 6], seed=0)
    rows = dm.ClientObjectives(fed, dm.losses.Squared(), 0.1).stacked
    assert rows.X.shape == (3, 7, 3) and rows.sizes.tolist() == [5.0, 7.0, 6.0]
    assert rows.mask.sum() == 18 and not rows.X.flags.writeable
    assert not hasattr(FederatedObjectives, "stacked") and not hasattr(StatisticsObjectives, "stacked")


def test_problem_objectives_is_declared_a_client_oracle_and_a_supplied_one_is_checked():
    """``Problem.objectives`` is annotated with the protocol; objectives a federation supplies that
    miss a member of it are refused where they are set, naming what is missing."""
    from drflmodel.problems.engine.problem import Problem

    assert Problem.__annotations__["objectives"] == "ClientOracle"

    class _Partial:
        def __init__(self, objectives):
            self.loss, self.layout, self.l2 = objectives.loss, objectives.layout, objectives.l2

    class _Supplying(dm.Federation):
        def client_objectives(self, loss, l2, penalize_intercept=True):
            return _Partial(dm.ClientObjectives(self, loss, l2, penalize_intercept))

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=[5, 7, 6], seed=0)
    supplying = _Supplying(fed.clients)
    with pytest.raises(dm.InvalidDataError, match=r"_Supplying.client_objectives returned a _Partial, not a "
                                                  r"ClientOracle: it has no dim, evaluate, .*values, weighted_hessian"):
        dm.FederatedDRO(supplying, dm.losses.Squared(), dm.sets.Simplex(3), l2=0.1)
