r"""The private certified solve's one entry point: :func:`private_solve` picks the private route from
the problem's weight set, refuses the others by name with the reason, and returns a normal
:class:`~drflmodel.solution.Solution` whose ``info["private"]`` says what the server saw.

Routes (the math is in the package docstring, :mod:`drflmodel.client_oracle.private`):

* ``HCVaR(p, 1)`` -- the singleton :math:`\{p\}`, the :math:`p`-weighted average (ERM when
  :math:`p_i=N_i/N`): :func:`~.fixed_weight.private_fixed_weight_solve`. ERM's weights are applied
  by each client from the secure sum :math:`N=\sum_iN_i` (the server learns :math:`N` only); other
  :math:`p` are public weights (at least two positive).
* ``CVaR(n, alpha)``, :math:`\alpha<1`: :func:`~.cvar.private_cvar_solve` (R. T. Rockafellar and S.
  Uryasev 2000, "Optimization of conditional value-at-risk", Journal of Risk 2(3), the dual in
  :math:`\eta`).
* ``ChiSquare(n, rho)``, :math:`\rho>0`: :func:`~.cvar.private_chi_square_solve` (its exact dual).
* ``KLPenalty(n, tau)``: :func:`~.kl.private_kl_solve` (the tilted risk, a log-sum-exp of the
  clients' terms; no dual search, no opt-in).
* FAFL (``FairnessAwareFL``, or ``HCVaR(p, alpha)``) at a fixed level: at level 1 the
  ``HCVaR(p, 1)`` route; with equal caps :math:`p_i/\alpha_i` (equal client sizes, one level) the
  set *is* ``CVaR(n, alpha)`` and takes the CVaR route; unequal caps :math:`c_i` take the guarded
  CVaR route with per-client caps (:func:`~.cvar.private_hcvar_solve`: dual
  :math:`\min_\eta\eta+\sum_ic_i(f_i-\eta)_+`, each client weighting its own terms by its public cap).

Everything else is refused (:data:`REFUSED` gives the reason per weight set), as are other problem
families and non-smooth losses. The returned solution carries **no** worst-case weights and **no**
client losses (``weights`` and ``client_losses`` are ``None``): the server never learnt them.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidParameterError
from ...problems.minmax.dro import FederatedDRO
from ...sets import CVaR, ChiSquare, HCVaR, KLPenalty
from .clients import private_clients
from .cvar import private_chi_square_solve, private_cvar_solve, private_hcvar_solve
from .fixed_weight import private_fixed_weight_solve
from .kl import kl_clients, private_kl_solve

__all__ = ["private_solve", "private_route", "route_clients", "REFUSED"]

#: weight sets without a private route in this version, and why
REFUSED = {
    "Simplex": "its value is the largest client loss, one client's own value (AFL's max)",
    "LpBall": "its dual needs the norm of the centred loss vector; not built",
    "QFFL": "q-FFL's weights are powers of each client's loss, so the server would need per-client values",
    "Integrated": "the integrated set mixes two sets' duals; not built",
}


def _as_dro(problem):
    """``problem`` as a :class:`~drflmodel.problems.minmax.dro.FederatedDRO`: FAFL's
    :class:`~drflmodel.problems.minmax.fafl.FairnessAwareFL` at its levels is the DRO problem over
    its HCVaR set (the same :math:`\\min_\\theta\\max_{\\lambda\\in Q_\\alpha}\\lambda^\\top f(\\theta)`);
    other families are refused by name."""
    from ...problems.minmax.dro import FederatedDRO
    from ...problems.minmax.fafl import FairnessAwareFL

    if type(problem) is FairnessAwareFL:
        return FederatedDRO(problem.federation, problem.loss, weights=problem.weights, l2=problem.l2,
                            penalize_intercept=problem.penalize_intercept)
    if type(problem) is not FederatedDRO:
        raise InvalidParameterError(
            f"private mode runs drflmodel.FederatedDRO (and FAFL's FairnessAwareFL) problems only; got "
            f"{type(problem).__name__} (the Wasserstein, relative-fairness, DEO and vertical families need "
            f"per-client or per-row quantities the server would see alone)")
    return problem


def private_route(problem) -> tuple[str, object]:
    """``(name, argument)`` of the private route for ``problem``: ``("fixed_weight", "size" | p)``,
    ``("cvar", None | equivalent problem)``, ``("hcvar", caps)``, ``("chi_square", None)`` or
    ``("kl", None)``; otherwise
    :class:`~drflmodel.errors.InvalidParameterError` naming the family or weight set and the reason.

    FAFL (``FairnessAwareFL``, or ``HCVaR(p, alpha)`` weights) at a fixed level: caps
    :math:`c_i=p_i/\\alpha_i`; every :math:`\\alpha_i=1` is the :math:`p`-weighted average (the
    fixed-weight route; ERM when :math:`p_i=N_i/N`); equal caps :math:`c_i=1/(\\alpha n)` (equal
    client sizes and one level) are exactly ``CVaR(n, alpha)``, routed to the CVaR route with that
    problem as the argument; other caps (every :math:`\alpha_i<1`) go to the guarded CVaR route with
    per-client caps, ``("hcvar", caps)``; levels mixing 1 and :math:`<1` are refused."""
    dro = _as_dro(problem)
    loss = dro.objectives.loss
    if not np.isfinite(loss.smoothness):
        raise InvalidParameterError(f"private mode needs a smooth loss (gradients as sums); the loss "
                                    f"{loss.name!r} is not smooth")
    w = dro.weights
    if isinstance(w, HCVaR):
        alpha = np.broadcast_to(np.asarray(w.alpha, float), (w.n,))
        if np.all(alpha == 1.0):
            sizes = np.asarray(dro.federation.sizes, float)
            erm = np.allclose(w.p, sizes / sizes.sum(), rtol=1e-12, atol=0.0)
            return "fixed_weight", ("size" if erm else np.asarray(w.p, float))
        caps = np.asarray(w.p, float) / alpha
        if np.allclose(caps, caps[0], rtol=1e-12, atol=0.0) and caps[0] * w.n > 1.0:
            level = 1.0 / (caps[0] * w.n)         # the same set as CVaR(n, level)
            return "cvar", FederatedDRO(dro.federation, dro.loss, weights=CVaR(w.n, level), l2=dro.l2,
                                        penalize_intercept=dro.penalize_intercept)
        if not np.all(alpha < 1.0):
            what = "FairnessAwareFL" if problem is not dro else "weights HCVaR"
            raise InvalidParameterError(f"{what} with levels mixing alpha_i = 1 and alpha_i < 1: private mode runs "
                                        f"every alpha_i = 1 (fixed weights) or every alpha_i < 1 (per-client caps)")
        return "hcvar", caps
    if problem is not dro:                        # FAFL's weights are HCVaR
        raise InvalidParameterError("private mode: FairnessAwareFL without HCVaR weights")
    if isinstance(w, CVaR):
        return "cvar", None
    if isinstance(w, ChiSquare):
        return "chi_square", None
    if isinstance(w, KLPenalty):
        return "kl", None
    name = type(w).__name__
    reason = REFUSED.get(name, "no private route is known for it")
    raise InvalidParameterError(f"weights {name}: private mode refuses it -- {reason}. Private routes: "
                                f"HCVaR(p, 1) (ERM / fixed weights), CVaR(n, alpha < 1), ChiSquare(n, rho > 0), "
                                f"KLPenalty(n, tau), and HCVaR / FAFL (caps p_i / alpha_i)")


def route_clients(problem) -> list:
    """The client side of ``problem``'s private route, one per client, each holding its own rows
    only: :func:`~.kl.kl_clients` for the KL route (they also answer ``"kl_terms"``), else
    :func:`~.clients.private_clients`. A transport that runs the clients elsewhere (Flower's
    SecAgg+) builds them with this."""
    route, arg = private_route(problem)
    if route == "kl":
        return kl_clients(problem)
    return private_clients(problem, caps=arg if route == "hcvar" else None)


def private_solve(problem, channel=None, gap_tol: float = 1e-6, seed: int = 0, **options):
    """Certify ``problem`` from secure sums over its clients only and return a
    :class:`~drflmodel.solution.Solution` (module docstring for the routes and refusals).

    ``channel``: a :class:`~.secure_sum.SumOnlyChannel` over the clients (default: the simulated one
    with Flower's SecAgg+ arithmetic, seeded by ``seed``), e.g.
    :class:`drflmodel.flower.secure.FlowerSecAggChannel` for Flower's real SecAgg+ (or use
    ``drflmodel.flower.certified_solve(problem, private=True)``). ``options`` go to the route
    (``max_iter``; CVaR's ``t_start``, ``t_min``) or, without a channel, to the channel
    (``stages``, ``clipping_range``, ...).

    ``reveal_loss_distribution=True`` is required for CVaR and χ² (their dual sums tell the server
    the unlabeled distribution of the client losses near the dual's level; see
    ``info["private"]["server_learns"]``); ``min_contributors`` (default 2) is the channel's guard:
    no entry of a released sum holds fewer than that many clients' nonzero terms.

    ``info["private"]`` (what the server saw): ``route``, ``server_learns`` (exactly what the server
    learns on this route), ``secure_sums`` (how many secure-aggregation rounds), ``sums_by_query``
    (the guard's holders rounds listed as ``"<query> (holders)"``), ``total_rows`` (:math:`N`,
    itself a sum), ``min_contributors``, ``withheld_sums`` (CVaR/χ² probes whose sums the guard
    withheld), ``isolating_sums`` (released sums in which one client alone was above or below the
    public :math:`\\eta`; 0 under the guard), ``quantization`` (the quantum, the refinement stages
    and -- fixed weights -- the value's and gradient's carried error, already inside
    ``lower_bound`` and ``upper_bound``), ``bytes_per_client`` and ``per_client_values``.
    ``info["private_certificate"]`` is the route's full record."""
    from ...solution import Solution, status_from_gap

    route, arg = private_route(problem)
    if route == "fixed_weight":
        options.pop("reveal_loss_distribution", None)       # ERM / fixed weights reveal no client's loss
        cert = private_fixed_weight_solve(problem, weights=arg, gap_tol=gap_tol, seed=seed, channel=channel,
                                          **options)
    elif route == "kl":
        options.pop("reveal_loss_distribution", None)       # one symmetric number about the losses per model
        cert = private_kl_solve(problem, gap_tol=gap_tol, seed=seed, channel=channel, **options)
    elif route == "cvar":
        cert = private_cvar_solve(problem if arg is None else arg, gap_tol=gap_tol, seed=seed, channel=channel, **options)
    elif route == "hcvar":
        cert = private_hcvar_solve(_as_dro(problem), gap_tol=gap_tol, seed=seed, channel=channel, **options)
    else:
        cert = private_chi_square_solve(problem, gap_tol=gap_tol, seed=seed, channel=channel, **options)
    status = status_from_gap(cert.lower_bound, cert.upper_bound, gap_tol)
    if status == "optimal" and cert.status != "optimal":     # the route's own (stricter) relative test
        status = "optimal_within_gap"
    if route == "fixed_weight":
        weights = "size (N only)" if isinstance(arg, str) else "public"
    elif route == "hcvar":
        weights = f"HCVaR caps p_i/alpha_i (public): {np.asarray(arg).tolist()}"
    else:
        weights = repr(arg.weights) if arg is not None else type(problem.weights).__name__
    private = {"route": route, "weights": weights,
               "secure_sums": cert.secure_sums, "sums_by_query": dict(cert.server_saw["sums_by_query"]),
               "total_rows": cert.server_saw["total_rows"],
               "isolating_sums": int(cert.details.get("isolating_sums", 0)),
               "quantization": dict(cert.quantization), "bytes_per_client": cert.bytes_per_client,
               "per_client_values": cert.server_saw["per_client_values"],
               "server_learns": cert.server_saw["server_learns"],
               "min_contributors": int(cert.details.get("min_contributors", options.get("min_contributors", 2))),
               "withheld_sums": int(cert.details.get("withheld_probes", 0)),
               "transport": type(channel).__name__ if channel is not None else "SumOnlyChannel (simulated SecAgg+)"}
    return Solution(theta=np.asarray(cert.theta, float), weights=None, client_losses=None,
                    value=float(cert.upper_bound), lower_bound=float(cert.lower_bound),
                    upper_bound=float(cert.upper_bound), status=status, certificate=cert.kind,
                    info={"method": f"private_{route}", "private": private,
                          "private_certificate": {k: v for k, v in cert.to_dict().items() if k != "theta"},
                          "time": cert.seconds},
                    problem=problem)
