r"""Which federated strategies have a known landing point, what it is, and where it is proved.

Each characterized strategy maps to one :class:`Characterization`: the kind of point
(``"local_steps"`` -- the fixed point of :math:`J` local (proximal) gradient steps averaged,
:mod:`drflmodel.landing.contraction`; ``"moreau"`` -- the minimizer of the clients' Moreau
envelopes, :mod:`drflmodel.landing.moreau`; ``"optimum"`` -- the certified optimum of the problem
the strategy runs on, the existing oracle), the configuration it needs, the statement in words and
the published result it comes from. Strategies listed in :data:`REFUSED` have no characterization
of their landing point as a convex problem; they are refused by name, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidParameterError

__all__ = ["Characterization", "CHARACTERIZED", "REFUSED", "StrategyNotCharacterized",
           "characterize", "canonical_name"]


class StrategyNotCharacterized(InvalidParameterError):
    """A strategy (or a configuration of one) whose landing point has no known characterization;
    the message names it and says why."""


@dataclass(frozen=True)
class Characterization:
    """What a strategy's landing point is.

    Attributes
    ----------
    name : the strategy's usual name.
    kind : ``"local_steps"``, ``"moreau"`` or ``"optimum"`` (module docstring).
    statement : the point, in words and formulas.
    source : the published result it comes from (authors, title, venue, result).
    needs : the configuration keys the point depends on.
    """

    name: str
    kind: str
    statement: str
    source: str
    needs: tuple

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "statement": self.statement,
                "source": self.source, "needs": list(self.needs)}


_MALINOVSKY = ("Malinovsky, Kovalev, Gasanov, Condat & Richtárik, \"From local SGD to local fixed-point "
               "methods for federated learning\" (ICML 2020): the fixed point of an average of local "
               "operators; Charles & Konečný, \"Convergence and accuracy trade-offs in federated learning "
               "and meta-learning\" (AISTATS 2021): its exact form for quadratic losses; Pathak & "
               "Wainwright, \"FedSplit\" (NeurIPS 2020, Section 3): it is not the optimum in general")
_FEDAVG = ("the fixed point of T(theta) = sum_i p_i u_{i,J}(theta), J local gradient steps of size eta "
           "from the server model (client drift: not the minimizer of sum_i p_i f_i unless J = 1)")
_SERVER_OPT = ("the same point as FedAvg with the same client steps: a fixed point of the server "
               "optimizer has zero momentum and zero pseudo-gradient sum_i p_i (u_{i,J}(theta) - theta), "
               "so theta = T(theta); whether the run converges is not guaranteed")
_REDDI = ("Reddi, Charles, Zaheer, Garrett, Rush, Konečný, Kumar & McMahan, \"Adaptive federated "
          "optimization\" (ICLR 2021), Algorithm 2 (the server update); the fixed-point argument is the "
          "algebra of that update. " + _MALINOVSKY)

CHARACTERIZED: dict[str, Characterization] = {
    "fedavg": Characterization(
        "FedAvg", "local_steps", _FEDAVG,
        "McMahan, Moore, Ramage, Hampson & Agüera y Arcas, \"Communication-efficient learning of deep "
        "networks from decentralized data\" (AISTATS 2017), with full-batch local steps. " + _MALINOVSKY,
        ("local_steps", "step_size")),
    "fedprox": Characterization(
        "FedProx", "local_steps",
        "with J local steps u <- u - eta (grad f_i(u) + mu (u - theta)): the fixed point of their "
        "average; with exact local solves (local_steps='exact'): the minimizer of sum_i p_i M_i, M_i the "
        "Moreau envelope of f_i with parameter 1/mu",
        "Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, \"Federated optimization in heterogeneous "
        "networks\" (MLSys 2020), Algorithm 2; Malekmohammadi, Shaloudegi, Hu & Yu, \"An operator "
        "splitting view of federated learning\" (2021): FedProx as backward-backward splitting, whose "
        "fixed points minimize the sum of Moreau envelopes; Pathak & Wainwright, \"FedSplit\" "
        "(NeurIPS 2020, Section 3): not the optimum in general; with J local steps, the fixed point of an "
        "average of local operators (Malinovsky et al., ICML 2020)",
        ("mu", "local_steps", "step_size")),
    "fedadam": Characterization("FedAdam", "local_steps", _SERVER_OPT, _REDDI, ("local_steps", "step_size")),
    "fedyogi": Characterization("FedYogi", "local_steps", _SERVER_OPT, _REDDI, ("local_steps", "step_size")),
    "fedadagrad": Characterization("FedAdagrad", "local_steps", _SERVER_OPT, _REDDI,
                                   ("local_steps", "step_size")),
    "fedavgm": Characterization(
        "FedAvgM", "local_steps", _SERVER_OPT,
        "Hsu, Qi & Brown, \"Measuring the effects of non-identical data distribution for federated "
        "visual classification\" (2019): server momentum; the fixed-point argument is the algebra of the "
        "momentum update. " + _MALINOVSKY, ("local_steps", "step_size")),
    "scaffold": Characterization(
        "SCAFFOLD", "optimum",
        "the minimizer of sum_i p_i f_i: at the optimum the control variates cancel the drift (with "
        "exact gradients c_i = grad f_i(theta*), c = 0, and the local steps stay at theta*)",
        "Karimireddy, Kale, Mohri, Reddi, Stich & Suresh, \"SCAFFOLD: Stochastic controlled averaging "
        "for federated learning\" (ICML 2020), Theorem III (convergence to the optimum for strongly "
        "convex smooth f_i with small enough steps)", ()),
    "scaffpd": Characterization(
        "Scaff-PD", "optimum",
        "the saddle point of min_theta max_{lambda in Lambda} sum_i lambda_i f_i(theta) - psi(lambda), "
        "the certified optimum of the FederatedDRO problem it runs on",
        "Yu, Karimireddy, Ma & Jordan, \"Scaff-PD: Communication efficient fair and robust federated "
        "learning\" (2023), Theorems 3.1 and 3.5 (convergence to the saddle point under their step "
        "conditions)", ()),
    "scaffpdia": Characterization(
        "Scaff-PD-IA", "optimum",
        "the saddle point of the relative-fairness problem it runs on (its certified optimum)",
        "Nakakita, Kaneko, Takamaeda-Yamazaki & Imaizumi, \"Federated learning with relative fairness\" "
        "(2024), Theorem 3 (convergence under its Assumption 8)", ()),
    "qfedavg": Characterization(
        "q-FedAvg", "optimum",
        "with one local step and exact gradients: the minimizer of (1/(q+1)) sum_i f_i^{q+1} (its fixed "
        "points are the points where sum_i f_i(theta)^q grad f_i(theta) = 0, the stationary points of "
        "this convex objective); with J > 1 local steps no characterization is known",
        "Li, Sanjabi, Beirami & Smith, \"Fair resource allocation in federated learning\" (ICLR 2020), "
        "Algorithm 2; the fixed-point equation is the algebra of its update (the paper gives no "
        "convergence theorem for q-FedAvg)", ("local_steps",)),
}

_ROBUST = ("its update is an order statistic / selection of the client models, not an average of "
           "smooth local maps: its fixed points are not the solution of a convex problem we can certify")
REFUSED: dict[str, str] = {
    "fedmedian": "FedMedian: the coordinate-wise median of the client models; " + _ROBUST,
    "fedtrimmedavg": "FedTrimmedAvg: a trimmed mean of the client models; " + _ROBUST,
    "krum": "Krum: the client model closest to its neighbours; " + _ROBUST,
    "multikrum": "MultiKrum: an average of the models Krum selects; " + _ROBUST,
    "bulyan": "Bulyan: Krum selection then a trimmed mean; " + _ROBUST,
    "drfa": ("DRFA: constant local steps with a dual step on the client weights -- the pair "
             "(theta, lambda) has no characterized fixed point; with decaying steps its averages approach "
             "the saddle point (grade them with dm.verify against the oracle)"),
    "stochasticafl": ("Stochastic-AFL: a stochastic descent-ascent whose averaged iterates approach the saddle "
                      "point; its iterates have no fixed point (grade it with dm.verify against the oracle)"),
    "dpfedavgfixed": "differential privacy adds noise every round: the iterates have no fixed point",
    "dpfedavgadaptive": "differential privacy adds noise every round: the iterates have no fixed point",
    "differentialprivacyclientsidefixedclipping": "differential privacy adds noise every round: no fixed point",
    "differentialprivacyserversidefixedclipping": "differential privacy adds noise every round: no fixed point",
    "differentialprivacyclientsideadaptiveclipping": "differential privacy adds noise every round: no fixed point",
    "differentialprivacyserversideadaptiveclipping": "differential privacy adds noise every round: no fixed point",
    "fedxgbbagging": "FedXgbBagging trains tree ensembles, not a model of drflmodel's losses",
    "fedxgbcyclic": "FedXgbCyclic trains tree ensembles, not a model of drflmodel's losses",
}


def canonical_name(name: str) -> str:
    """``name`` lower-cased without separators: ``"Scaff-PD"`` -> ``"scaffpd"``, ``"q-FedAvg"`` ->
    ``"qfedavg"``, ``"SCAFFOLD"`` -> ``"scaffold"``."""
    if not isinstance(name, str):
        raise InvalidParameterError(f"strategy must be a name (str) or a drflmodel solver; got {type(name).__name__}")
    return re.sub(r"[^a-z0-9]", "", name.lower())


def characterize(name: str) -> Characterization:
    """The :class:`Characterization` of the strategy ``name`` (any spelling :func:`canonical_name`
    accepts), or :class:`StrategyNotCharacterized` naming it and the reason."""
    key = canonical_name(name)
    if key in CHARACTERIZED:
        return CHARACTERIZED[key]
    known = ", ".join(c.name for c in CHARACTERIZED.values())
    if key in REFUSED:
        raise StrategyNotCharacterized(
            f"strategy {name!r} has no certified landing point: {REFUSED[key]}. Characterized: {known}")
    raise StrategyNotCharacterized(
        f"strategy {name!r} has no known characterization of its landing point; characterized: {known}")
