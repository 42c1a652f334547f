r"""Private mode (first cut): the server certifies the optimum from **secure sums over clients**,
never from one client's answer.

**Which certified bounds are functions of sums.** With client objectives
:math:`f_i(\theta)=\frac1{N_i}\sum_j\ell(W^\top x_{ij},y_{ij})+p(\theta)`, :math:`p(\theta)=\frac12\theta^\top
D\theta` (the same ridge at every client):

* *Fixed weights / ERM* (:mod:`.fixed_weight`). :math:`U=F(\hat\theta)=\sum_i\lambda_if_i(\hat\theta)` and
  :math:`\nabla F(\hat\theta)=\sum_i\lambda_i\nabla f_i(\hat\theta)` are sums, and so is every input of
  the Hessian-free fixed-weight bound of :mod:`drflmodel.problems.minmax.hessian_free_bound`:
  :math:`L=F(\hat\theta)-\|\nabla F(\hat\theta)\|^2/(2\mu)` (strong convexity of the ridge,
  :math:`\mu=\ell_2\sum_i\lambda_i`); with a free intercept the :math:`K`-dimensional intercept
  problem's value, gradient and Hessian, and :math:`\sum_i\lambda_i\,\mathrm{mean}_j\|\tilde x_{ij}\|`,
  are sums too (F. Bach 2010, "Self-concordant analysis for logistic regression", Electronic
  Journal of Statistics 4, Prop. 1). ERM's :math:`\lambda_i=N_i/N` needs :math:`N` only: a secure sum
  of the :math:`N_i`; each client applies its own :math:`\lambda_i`.
* *CVaR* (:mod:`.cvar`). :math:`\sup_{\lambda\in\Lambda}\sum_i\lambda_if_i=\min_\eta\eta+\frac1{\alpha n}
  \sum_i(f_i-\eta)_+` (R. T. Rockafellar and S. Uryasev 2000, "Optimization of conditional
  value-at-risk", Journal of Risk 2(3)): every :math:`\eta` gives an upper bound at :math:`\hat\theta`
  from one sum. The lower bound needs the min over :math:`\theta`: the weights
  :math:`\lambda^\star(\hat\theta)` would tell the server which clients are above :math:`\eta`, so
  instead the joint problem in :math:`(\theta,\eta)` is smoothed (softplus, a rigorous
  :math:`t\log2/\alpha` allowance) and certified by strong convexity in :math:`\theta` after an exact
  1-D minimization in :math:`\eta` -- every quantity a sum.
* *χ² penalty* (``dm.sets.ChiSquare``, :mod:`.cvar`): its exact dual
  :math:`\min_\eta\eta+\frac\rho2+\frac1{2n\rho}\sum_i(f_i-\eta)_+^2` is a sum once :math:`\eta` is
  public and :math:`C^1`: the CVaR construction without smoothing.
* *KL penalty* (``dm.sets.KLPenalty``, :mod:`.kl`): :math:`\sup_{\lambda\in\Delta}\sum_i\lambda_if_i-
  \tau\sum_i\lambda_i\log(n\lambda_i)=\tau\log\frac1n\sum_ie^{f_i/\tau}` (the tilted risk: T. Li, A.
  Beirami, M. Sanjabi and V. Smith 2021, "Tilted empirical risk minimization", ICLR): its value and
  gradient are one sum of each client's :math:`e^{(f_i-\eta)/\tau}(1,\nabla f_i)` with a public shift
  :math:`\eta`, no dual search; the server learns one symmetric number about the losses per model.
* *φ-divergence balls* (KL ball, χ² ball): :math:`\sup_\lambda\sum_i\lambda_if_i=\min_{\eta,\tau\ge0}\eta+\tau\rho+
  \frac\tau n\sum_i\varphi^*((f_i-\eta)/\tau)` (A. Ben-Tal, D. den Hertog, A. De Waegenaere, B.
  Melenberg and G. Rennen 2013, "Robust solutions of optimization problems affected by uncertain
  probabilities", Management Science 59(2)): each client computes its :math:`\varphi^*` term, but
  the search in :math:`\tau` would release the sums at many :math:`\tau` -- for KL the empirical
  moment generating function of the losses, which determines their distribution. **Not built.**

**Quantization** (:mod:`.secure_sum`): Flower's SecAgg+ quantization (clip to :math:`[-c,c]`,
stochastic rounding to :math:`T` levels) moves each client's entry by less than
:math:`\Delta=2c/T`; the sum's per-entry error :math:`n\Delta` (plus a floating-point allowance)
enters :math:`U` and :math:`L` as interval ends, a second secure sum of the clients' own residuals
divides it by :math:`c/\Delta`, and clipping is counted by one more summed entry and widened, never
silent.

**What the server learns** (``info["private"]["server_learns"]`` gives the route's full sentence):
the sums it asked for (``SumOnlyChannel.seen``), the total number of rows :math:`N`, the number of
clients that would clip, and, per entry of each sum, how many clients send a nonzero term -- **the
guard** (``min_contributors``, default 2, :meth:`.secure_sum.SumOnlyChannel.sum`) withholds every
sum with an entry of fewer than that many clients' terms, so no released entry is one client's. For
CVaR and χ² the server also learns the unlabeled empirical distribution of the client losses near
the dual's levels :math:`\eta`; those routes need ``reveal_loss_distribution=True``. ERM and fixed
weights reveal no client's loss.
**What is lost**: per-client answer checks (:mod:`drflmodel.client_oracle.checks`) cannot run on
sums; a lying client inside a sum shifts the sum by any amount its range allows (up to
:math:`c` times the scale per entry) and cannot be named.

**Differential privacy** (:mod:`.dp`, first cut): noised sums for ERM / public weights with the
logistic loss, client-level :math:`(\varepsilon,\delta)` by zCDP accounting, the bound holding with
probability :math:`\ge1-\beta`; on 4 clients no better than the public interval :math:`[0,\log2]`.

FAFL's HCVaR below level 1 with unequal caps :math:`c_i=p_i/\alpha_i` runs the guarded CVaR route
with per-client caps (:func:`~.cvar.private_hcvar_solve`: each client multiplies its own dual terms
and weight by its public :math:`c_i/\max_jc_j`).

**Refused by name (not in this cut)**: φ-divergence balls (the 2-D dual search above; :data:`~.solve.REFUSED`), the
SQP and Newton routes (they need per-client values :math:`f_i` to update :math:`\lambda`), the
Wasserstein, relative-fairness and DEO families (per-client or per-row quantities), non-smooth
losses (no gradients). The simulated channel reproduces SecAgg+'s arithmetic;
:class:`drflmodel.flower.secure.FlowerSecAggChannel` runs the same sums through Flower's real
SecAgg+ (same certificate, bit for bit).
"""

from .clients import PrivateClient, private_clients
from .cvar import private_chi_square_solve, private_cvar_solve, private_hcvar_solve
from .fixed_weight import PrivateCertificate, private_fixed_weight_solve
from .secure_sum import SecureSum, SumOnlyChannel, SumStillClips, SumWithheld, flower_dequantize_sum, flower_quantize
from .dp import dp_fixed_weight_solve, zcdp_rho
from .kl import KLClient, kl_clients, private_kl_solve
from .solve import REFUSED, private_route, private_solve, route_clients

__all__ = ["PrivateClient", "private_clients", "PrivateCertificate", "private_fixed_weight_solve",
           "private_cvar_solve", "private_hcvar_solve", "private_chi_square_solve", "private_solve", "private_route", "route_clients", "REFUSED", "private_kl_solve", "KLClient", "kl_clients", "dp_fixed_weight_solve", "zcdp_rho", "SecureSum", "SumOnlyChannel", "SumWithheld", "SumStillClips", "flower_quantize", "flower_dequantize_sum"]
