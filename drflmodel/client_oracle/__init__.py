r"""The client-oracle interface: the one narrow door through which a solve route reaches the data.

The fast routes of the client-weight min-max family (:class:`~drflmodel.FederatedDRO`,
:class:`~drflmodel.FairnessAwareFL`) touch the data only through per-client quantities of

.. math::

    f_i(\theta)=h_i(\theta)+\tfrac{\ell_2}2\textstyle\sum_j\omega_j\|W_{j\cdot}\|^2,\qquad
    h_i(\theta)=\tfrac1{N_i}\textstyle\sum_{j}\ell(W^\top x_{ij},y_{ij})

(values, gradients, the Hessians weighted by the client weights, Hessian-vector products; for the
squared loss the sufficient statistics :math:`X_i^\top X_i`, :math:`X_i^\top y_i`,
:math:`y_i^\top y_i`, :math:`N_i`). :class:`ClientOracle` names that interface. It has two
implementations:

* **in process**: :class:`~drflmodel.objectives.ClientObjectives`, which holds every client's rows
  (the centralized solve);
* **federated**: :class:`FederatedObjectives` (and :class:`StatisticsObjectives` for quadratic
  losses), which holds **no row**: each call becomes a query to the clients over a
  :class:`Channel` -- :class:`LocalChannel` (direct calls, for tests) or the Flower channel of
  :mod:`drflmodel.flower.oracle` (one Flower message per client per query) -- and the server adds
  the ridge term, which is not data.

The **same route code** runs on both (``problem.objectives`` is the only thing that differs: a
problem built on a :class:`DeclaredFederation` that carries a channel gets the federated
objectives), and the **same dispatch** chooses the route -- among those whose declared query
needs (``Route.needs``: values, gradients, Hessians, ...) the clients answer -- so the federated
certificate is the centralized one by construction, and what a client reveals is exactly the
return values of the queries it answers (:class:`Site`, the client side):

.. list-table::
   :header-rows: 1
   :widths: 28 28 44

   * - quantity (client *i*)
     - floats per answer
     - asked
   * - ``rows`` :math:`N_i`
     - 1
     - once (setup)
   * - ``features`` :math:`d`
     - 1 (public: the model's)
     - once (setup)
   * - ``ones_columns``
     - the indices of its all-one columns
     - once (setup; finds the intercept)
   * - ``classes_present``
     - :math:`K` booleans
     - once (setup; multi-class only)
   * - ``max_row_norm``
     - 1: :math:`\max_j\|x_{ij}\|`
     - once, when the self-concordance bound needs it (logistic, softmax)
   * - ``value`` :math:`h_i(\theta)`
     - 1 per point
     - per value query (line searches); grading a run asks all its rounds' models at once
   * - ``gradient``
     - :math:`P` (:math:`P=Kd`)
     - per gradient query
   * - ``hessian``
     - :math:`P(P+1)/2` (upper triangle)
     - per Hessian query, only while :math:`\lambda_i>0`
   * - ``hvp``
     - :math:`P`
     - per Hessian-vector product. What a sequence of them reveals: :math:`\nabla^2h_i(\theta)v=
       X_i^\top D_i(\theta)X_iv/N_i` (:math:`D_i` the loss's curvature at the scores), so :math:`P`
       independent directions at one point reveal the whole Hessian :math:`X_i^\top D_iX_i/N_i`, as
       the ``hessian`` answer does: asking fewer floats saves volume, and reveals less only as long
       as fewer than :math:`P` directions are asked at a point. The ``block_newton`` route (``auto``'s on a
       server from :math:`P=5`) asks 2 with each ``evaluate`` (its ``directions``), 45-65 times on
       digits (:math:`P=650`): 2 directions at each point, far fewer than :math:`P`
   * - ``bound_terms``
     - :math:`6+K+K(K+1)/2`: four mean magnitudes (:math:`|\ell|`, :math:`\|x\|\|\nabla_s\ell\|`,
       :math:`\|x\|^2`, :math:`\|s\|_1`), the mean :math:`\|\tilde x_{ij}\|`, and in the :math:`K`
       intercepts the mean loss, its gradient and Hessian (the Hessian's :math:`K\times K` intercept
       block: :math:`K` Hessian-vector products' intercept entries)
     - per certificate of the ``hessian_free`` route (with ``value`` and ``gradient``: no answer
       larger than :math:`\max(P+1, 6+K+K(K+1)/2)` floats; ``info["federated"]["largest_answer_floats"]``)
   * - ``gram``, ``moment``, ``yy``
     - :math:`d(d+1)/2`, :math:`d`, 1
     - once (squared loss: then no more queries)

A solve records its own table (quantity, floats per answer, exchanges, answers per client) in
``solution.info["federated"]["reveals"]``, with the number of exchanges (rounds of messages).

**Trust nothing that crosses the wire.** Every answer is checked by the server before a route uses
it (:class:`CheckedChannel`, the default of :func:`federated_solve`; the checks, one function each,
in :mod:`.checks`): alone (finite, shape, the loss's range, PSD curvature, sizes the loss's
constants allow) and against the same client's earlier answers (first-order convexity, monotone
gradients, curvature against gradient differences, Hessian-vector products against each other and
the Hessian). A client answers only what its own :class:`QueryPolicy` allows (:mod:`.policy`).

**Faults never give a wrong claim.** A client whose answer fails a check, or that does not answer,
is asked again, up to ``retries`` times (the stated budget); a refused query is not asked again.
Then the query raises :class:`ClientFault` and :func:`federated_solve` ends ``"failed"``, with
``info["fault"]`` naming the partition, its node, the query, the kind of fault, the check and its
numbers. Only a client that stopped answering (no check failed, nothing refused) lets it return a
certificate completed over **every** client before the fault, with the status its gap gives. A
bound is never computed over part of the federation. A client that answers, every time and
consistently, for another convex function (other data) passes every check: the certificate holds
for the functions the clients answered for.

Only the families with routes that need no row, or with their own federated oracle, are supported
(:data:`SUPPORTED`); :func:`federated_solve` refuses the others with the family's reason. A family's
own oracle asks the client queries it declares in the family registry
(:class:`~drflmodel.problems.registry.ClientQuery`): this package serves, budgets, decodes and
checks them from that declaration and names no family.

Modules, one job each: :mod:`.protocol` (the queries, the :class:`ClientOracle` interface,
:class:`ClientFault`), :mod:`.site` (the client side), :mod:`.policy` (a client's allow-list and
budgets), :mod:`.channel` (transport, retries, the reveal ledger), :mod:`.checks` (one function per
check of an answer), :mod:`.validation` (the channel that checks every answer), :mod:`.server`
(the declared federation and the server-side objectives), :mod:`.solve` (the federated solve).
"""

from __future__ import annotations

from .channel import Channel, LocalChannel, RevealLedger
from .policy import POLICY_KINDS, PolicySite, QueryPolicy, QueryRefused
from .protocol import NEEDS_ROWS, QUERIES, ClientFault, ClientOracle
from .server import DeclaredFederation, FederatedObjectives, StatisticsObjectives
from .site import Site
from .validation import CheckedChannel, ClientBook
from .solve import SUPPORTED, federated_solve, server_problem
from .private import private_solve

__all__ = ["ClientOracle", "Site", "DeclaredFederation", "Channel", "LocalChannel", "ClientFault",
           "RevealLedger", "FederatedObjectives", "StatisticsObjectives", "federated_solve",
           "server_problem", "SUPPORTED", "QUERIES", "NEEDS_ROWS", "CheckedChannel", "ClientBook",
           "QueryPolicy", "PolicySite", "QueryRefused", "POLICY_KINDS", "private_solve"]
