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

Everything else is refused (:data:`REFUSED` gives the reason per weight set), as are other problem
families and non-smooth losses. The returned solution carries **no** worst-case weights and **no**
client losses (``weights`` and ``client_losses`` are ``None``): the server never learnt them.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidParameterError
from ...sets import CVaR, ChiSquare, HCVaR
from .cvar import private_chi_square_solve, private_cvar_solve
from .fixed_weight import private_fixed_weight_solve

__all__ = ["private_solve", "private_route", "REFUSED"]

#: weight sets without a private route in this version, and why
REFUSED = {
    "Simplex": "its value is the largest client loss, one client's own value (AFL's max)",
    "HCVaR": "FAFL's HCVaR below level 1 needs the capped dual's eta search with per-client caps "
             "p_i/alpha_i (not built; only HCVaR(p, 1), the p-weighted average, runs privately)",
    "LpBall": "its dual needs the norm of the centred loss vector; not built",
    "QFFL": "q-FFL's weights are powers of each client's loss, so the server would need per-client values",
    "Integrated": "the integrated set mixes two sets' duals; not built",
}


def private_route(problem) -> tuple[str, object]:
    """``(name, argument)`` of the private route for ``problem``: ``("fixed_weight", "size" | p)``,
    ``("cvar", None)`` or ``("chi_square", None)``; otherwise :class:`~drflmodel.errors.InvalidParameterError`
    naming the family or weight set and the reason."""
    from ...problems.minmax.dro import FederatedDRO

    if type(problem) is not FederatedDRO:
        raise InvalidParameterError(
            f"private mode runs drflmodel.FederatedDRO problems only; got {type(problem).__name__} (the "
            f"Wasserstein, relative-fairness, DEO and vertical families need per-client or per-row quantities "
            f"the server would see alone)")
    loss = problem.objectives.loss
    if not np.isfinite(loss.smoothness):
        raise InvalidParameterError(f"private mode needs a smooth loss (gradients as sums); the loss "
                                    f"{loss.name!r} is not smooth")
    w = problem.weights
    if isinstance(w, HCVaR):
        if not np.all(np.asarray(w.alpha, float) == 1.0):
            raise InvalidParameterError(f"weights HCVaR with alpha < 1: {REFUSED['HCVaR']}")
        sizes = np.asarray(problem.federation.sizes, float)
        erm = np.allclose(w.p, sizes / sizes.sum(), rtol=1e-12, atol=0.0)
        return "fixed_weight", ("size" if erm else np.asarray(w.p, float))
    if isinstance(w, CVaR):
        return "cvar", None
    if isinstance(w, ChiSquare):
        return "chi_square", None
    name = type(w).__name__
    reason = REFUSED.get(name, "no private route is known for it")
    raise InvalidParameterError(f"weights {name}: private mode refuses it -- {reason}. Private routes: "
                                f"HCVaR(p, 1) (ERM / fixed weights), CVaR(n, alpha < 1), ChiSquare(n, rho > 0)")


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
    elif route == "cvar":
        cert = private_cvar_solve(problem, gap_tol=gap_tol, seed=seed, channel=channel, **options)
    else:
        cert = private_chi_square_solve(problem, gap_tol=gap_tol, seed=seed, channel=channel, **options)
    status = status_from_gap(cert.lower_bound, cert.upper_bound, gap_tol)
    if status == "optimal" and cert.status != "optimal":     # the route's own (stricter) relative test
        status = "optimal_within_gap"
    private = {"route": route, "weights": "size (N only)" if isinstance(arg, str) else
               ("public" if arg is not None else type(problem.weights).__name__),
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
