"""``method="auto"``'s per-call work (problems/engine/route.py, memory.py): each route is asked once
why it cannot be taken, only the route that runs builds its request, and a memory estimate that
fits builds no refusal message -- with the same choice, record and answer as the full computation."""

from __future__ import annotations

import drflmodel as dm
from drflmodel.problems.engine import memory, route as route_mod
from drflmodel.problems.engine.route import Route, _route_choice, estimated_costs


def _erm():
    fed = dm.datasets.gaussian_mixture(240, 14, 2, n_clients=1, alpha=0.5, seed=0)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3, penalize_intercept=False)


def test_auto_asks_each_route_once_and_records_the_same_choice(monkeypatch):
    asked, built = [], []
    why_not, request = route_mod._why_not, Route.request

    def counted_why_not(r, structure, available):
        asked.append(r.name)
        return why_not(r, structure, available)

    def counted_request(self, problem, given, **choices):
        built.append(self.name)
        return request(self, problem, given, **choices)

    monkeypatch.setattr(route_mod, "_why_not", counted_why_not)
    monkeypatch.setattr(Route, "request", counted_request)
    prob = _erm()
    sol = prob.solve()
    routes = list(prob.structure.routes)
    assert sol.status == "optimal" and sol.info["method"] == "sqp"
    assert sorted(asked) == sorted(r.name for r in routes)          # once each
    assert built == ["sqp"]                                          # the fallbacks' requests: not needed
    # the record equals the one computed from scratch (every reason asked again)
    first = next(r for r in routes if r.name == "sqp")
    structure = prob.structure
    assert sol.info["route_choice"] == _route_choice(first, structure, structure.queries, routes,
                                                     estimated_costs(routes, structure))


def test_a_fitting_estimate_builds_no_message_and_a_refusal_names_the_alternative(monkeypatch):
    prob = _erm()
    structure = prob.structure
    sqp = next(r for r in structure.routes if r.name == "sqp")
    offers = []
    instead = type(sqp).instead

    def counted_instead(self, s):
        offers.append(self.name)
        return instead(self, s)

    monkeypatch.setattr(type(sqp), "instead", counted_instead)
    assert memory.route_refusal(sqp, structure) is None and offers == []
    monkeypatch.setattr(memory._memory, "exceeds", lambda nbytes, available, fraction: 1000)
    reason = memory.route_refusal(sqp, structure)
    assert isinstance(reason, memory.MemoryReason) and offers == ["sqp"]
    assert "route 'sqp'" in reason and reason.available == 1000
