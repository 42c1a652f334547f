r"""The client side on Flower: what client *i* computes, on its own partition only.

:func:`client_app` builds the ``ClientApp`` of drflmodel's ported algorithms. A supernode holds
partition ``i = node_config["partition-id"]`` and computes only through
``problem.client_view(i)`` (:class:`~drflmodel.problems.engine.problem.ClientView`: the value, gradient
and seeded minibatch gradient of :math:`f_i`). Its private state lives in its ``Context.state``:

* its random generator -- ``client_generators(seed, n)[i]``, i.e.
  ``default_rng(SeedSequence(seed, spawn_key=(i,)))``, created at its first draw (every message
  carries the run's seed) and stored as exact text after every draw, so minibatches are the
  simulator's rows
  (:func:`drflmodel.objectives.minibatch_indices` inside ``ClientView.minibatch_gradient``);
* Scaff-PD's model :math:`x^r` and control variate :math:`c_i^r=g_i(x^r)`, kept between the two
  exchanges of a round (the server never sends :math:`c_i` back).

The operations (message types) and what they compute, with :math:`g_i` the exact gradient or a
fresh minibatch gradient (``config["batch-size"] > 0``):

``query.hello``
    check the partition; reply ``partition-id`` (no payload).
``train.losses_controls`` (Scaff-PD, Scaff-PD-IA; the Scaff-PD paper's Algorithm 1, line 4)
    :math:`x\mapsto(L_i=f_i(x),\ c_i=g_i(x))`.
``train.corrected_steps`` (Alg. 2)
    :math:`c\mapsto\Delta u_i=(x-u_J)/(\eta J)` after
    :math:`u_j=u_{j-1}-\eta(g_i(u_{j-1})-c_i+c)`, :math:`u_0=x`.
``train.local_sgd`` (FedAvg, FedProx, DRFA)
    :math:`J` steps :math:`u_j=u_{j-1}-\eta g_i(u_{j-1})` from the model -- with FedProx's
    ``config["mu"]`` :math:`\mu>0`, :math:`u_j=u_{j-1}-\eta(g_i(u_{j-1})+\mu(u_{j-1}-x))`; reply
    ``update`` :math:`x-u_J`, or with ``config["snapshot"] = t`` the pair ``models`` :math:`u_J`,
    ``snapshots`` :math:`u_t` (DRFA).
``train.controls`` (SCAFFOLD, option I)
    :math:`x\mapsto c_i=g_i(x)` (kept with :math:`x` for ``train.corrected_steps``).
``train.q_weighted_steps`` (q-FedAvg, Li et al. 2020 Algorithm 2)
    :math:`F_i=f_i(x)`, :math:`J` steps of size :math:`1/L` to :math:`\bar u`,
    :math:`\Delta w=L(x-\bar u)`; reply ``delta`` :math:`F_i^q\Delta w` and ``h``
    :math:`qF_i^{q-1}\|\Delta w\|^2+LF_i^q` (and :math:`F_i^q` as a record-only diagnostic: the
    weight the trace records).
``query.loss``
    :math:`x\mapsto f_i(x)` (DRFA's snapshot losses, rFedFair's :math:`\eta_0` setup).
``train.loss_gradient`` (Stochastic-AFL)
    :math:`x\mapsto(L_i=f_i(x),\ g_i(x))`, or only one of them (``config["want"]`` =
    ``"loss"`` / ``"gradient"``: a client sampled for the losses or for the gradients only).
``train.smoothed_steps`` (rFedFair; the FAFL paper's Algorithm 1)
    steps on :math:`\hat f^{\mu,i}(\omega,\eta)=\frac1{\alpha_i}\phi_\mu(f_i(\omega)-\eta)+\eta`:
    with :math:`s=\mathrm{sigmoid}((f_i(\omega)-\eta)/\mu)`, :math:`a=s/\alpha_i`,
    :math:`\omega\leftarrow\omega-\beta a\nabla f_i(\omega)`, :math:`\eta\leftarrow\eta-\beta(1-a)`.
``train.vfl_init``, ``train.vfl_step`` (fair VFL, FedBCD; the fair-VFL paper's Algorithms 1–3; party *k* of
    a vertical federation through its ``PartyView``)
    keep the block :math:`\theta_k`; a step: passive :math:`\theta_k-\eta_t^{-1}((X^k)^\top\nu+\ell_2\theta_k)`
    from the server's :math:`\nu`, active :math:`q` local steps on the inconsistent read
    :math:`z+X^k(\theta_k-\theta_k^{(t)})` with :math:`(z,\lambda)`; reply the new partial scores
    :math:`X^k\theta_k` (and the block, for the server's record only).

:func:`strategy_client_app` is a plain client for **Flower's own strategies** (``FedAvg``,
``FedProx``, ``QFedAvg``, ...): local gradient steps on :math:`f_i` (plus FedProx's proximal
term when the strategy sends ``proximal-mu``), replying the strategy's expected records.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .._validation import check_int, check_real
from ..errors import InvalidParameterError
from ..solvers import client_generators
from ._records import CONFIG, payload_arrays, rng_from_text, rng_to_text, up_content

__all__ = ["client_app", "strategy_client_app", "partition_of"]

PARTITION_ID, NUM_PARTITIONS = "partition-id", "num-partitions"


def partition_of(context: Context, n_clients: int | None = None) -> int:
    """Client index of this supernode: ``node_config["partition-id"]``, checked against the
    federation (``0 <= i < n`` and ``num-partitions == n``; with ``n_clients=None`` -- a site that
    holds only its own data -- against ``num-partitions`` when given)."""
    cfg = context.node_config
    n = n_clients if n_clients is not None else (int(cfg[NUM_PARTITIONS]) if NUM_PARTITIONS in cfg else None)
    hint = f"num-partitions={n}" if n is not None else "num-partitions=N"
    if PARTITION_ID not in cfg:
        raise InvalidParameterError(
            "this supernode has no node_config['partition-id']: start it with "
            f"--node-config 'partition-id=I {hint}' (one supernode per client)")
    i = int(cfg[PARTITION_ID])
    if i < 0 or (n is not None and i >= n):
        allowed = "[0, num-partitions - 1]" if n is None else f"[0, {n - 1}] (the federation has {n} clients)"
        raise InvalidParameterError(f"node_config['partition-id'] = {i} must lie in {allowed}")
    if n_clients is not None and NUM_PARTITIONS in cfg and int(cfg[NUM_PARTITIONS]) != n_clients:
        raise InvalidParameterError(
            f"node_config['num-partitions'] = {int(cfg[NUM_PARTITIONS])} but the federation has "
            f"{n_clients} clients: start one supernode per client")
    return i


# ---------------------------------------------------------------------------------- views
class _Views:
    """Where a client finds what it may compute on: from one problem, from ``{run key: problem}``,
    or from ``factory(context)`` called in the client's process (a deployment builds it from its
    run config). The factory returns the whole problem (the client then takes
    ``client_view(partition)``) or this site's own view only -- any object with ``value``,
    ``gradient``, ``minibatch_gradient`` and ``size`` for the partition, e.g. the
    ``client_view(0)`` of a one-client problem built from the site's own data.

    Only the views are kept (not the problems): they are what a client may use, and they pickle
    cheaply to Flower's simulation workers."""

    def __init__(self, problems):
        self._factory = None
        self._views: dict = {}
        if callable(problems) and not hasattr(problems, "client_view"):
            self._factory = problems
            self._cache: dict = {}
        elif isinstance(problems, dict):
            self._views = {k: self._all(p) for k, p in problems.items()}
        else:
            self._views = {None: self._all(problems)}

    @staticmethod
    def _all(problem):
        if not hasattr(problem, "client_view"):
            raise InvalidParameterError(
                f"client_app needs a drflmodel problem (with client_view); got {type(problem).__name__}")
        return [problem.client_view(i) for i in range(problem.n_clients)]

    def get(self, context: Context, run):
        """``(partition, view)`` of this supernode for ``run``."""
        if self._factory is not None:
            key = (context.run_id, context.node_id, run)        # per supernode: a factory may return
            if key not in self._cache:                          # the site's own view, and supernodes
                self._cache = {k: v for k, v in self._cache.items() if k[0] == context.run_id}
                self._cache[key] = self._factory(context)       # share a process in simulation
            made = self._cache[key]
            if not hasattr(made, "client_view"):                    # the site's own view
                return partition_of(context), made
            views = self._all(made)
        else:
            views = self._views.get(run, self._views.get(None))
            if views is None:
                raise InvalidParameterError(f"this ClientApp holds no problem for run {run!r}; "
                                            f"it holds {sorted(map(str, self._views))}")
        i = partition_of(context, len(views))
        return i, views[i]


# ---------------------------------------------------------------------------------- client state
class _Client:
    """Client *i* during one message: its view and its private state in ``context.state``."""

    def __init__(self, index: int, view, context: Context, config):
        self.index, self.view = index, view
        self.config = config
        self.run = str(config["run"])
        self._state = context.state
        self._key = f"drflmodel.{self.run}"
        self.gradient_evaluations = 0
        self.diagnostics: dict = {}
        self._rng = None

    @property
    def batch_size(self) -> int:
        return int(self.config.get("batch-size", 0))

    def _save_rng(self) -> None:
        self._state[self._key] = ConfigRecord({"rng": rng_to_text(self._rng)})

    @property
    def rng(self) -> np.random.Generator:
        """Client *i*'s generator: ``client_generators(seed, n)[i]`` at its first draw of the run
        (seed and n come with every message), then restored from ``context.state``."""
        if self._rng is None:
            if self._key in self._state:
                self._rng = rng_from_text(str(self._state[self._key]["rng"]))
            else:
                self._rng = client_generators(int(self.config["seed"]), int(self.config["n-clients"]))[self.index]
        return self._rng

    def gradient(self, theta) -> np.ndarray:
        """:math:`g_i(\\theta)`: exact, or a fresh minibatch from the client's own generator."""
        self.gradient_evaluations += 1
        if self.batch_size <= 0:
            return self.view.gradient(theta)
        g = self.view.minibatch_gradient(theta, self.batch_size, seed=self.rng)
        self._save_rng()
        return g

    def keep(self, **arrays) -> None:
        self._state[self._key + ".arrays"] = ArrayRecord(
            {k: Array(np.asarray(v, float)) for k, v in arrays.items()})

    def kept(self) -> dict:
        return {k: np.array(v.numpy(), float) for k, v in self._state[self._key + ".arrays"].items()}

    def reply(self, msg: Message, **arrays) -> Message:
        metrics = {"partition-id": self.index, "gradient-evaluations": self.gradient_evaluations}
        return Message(up_content(arrays, metrics, self.diagnostics), reply_to=msg)


# ---------------------------------------------------------------------------------- operations
def _hello(c: _Client, down: dict) -> dict:
    return {}


def _losses_controls(c: _Client, down: dict) -> dict:
    x = down["model"]
    ci = c.gradient(x)
    c.keep(model=x, control=ci)
    return {"losses": [c.view.value(x)], "controls": ci}


def _corrected_steps(c: _Client, down: dict) -> dict:
    kept, cg = c.kept(), down["control"]
    x, ci = kept["model"], kept["control"]
    eta, J = float(c.config["eta"]), int(c.config["steps"])
    u = x.copy()
    for _ in range(J):
        u = u - eta * (c.gradient(u) - ci + cg)
    return {"update": (x - u) / (eta * J)}


def _local_sgd(c: _Client, down: dict) -> dict:
    x = down["model"]
    eta, J, t = float(c.config["eta"]), int(c.config["steps"]), int(c.config.get("snapshot", -1))
    mu = float(c.config.get("mu", 0.0))              # FedProx's proximal weight (0: plain steps)
    u, snap = x.copy(), None
    for j in range(1, J + 1):
        u = u - eta * (c.gradient(u) if mu == 0 else c.gradient(u) + mu * (u - x))
        if j == t:
            snap = u.copy()
    return {"update": x - u} if t < 0 else {"models": u, "snapshots": snap}


def _controls(c: _Client, down: dict) -> dict:
    x = down["model"]
    ci = c.gradient(x)
    c.keep(model=x, control=ci)
    return {"controls": ci}


def _q_weighted_steps(c: _Client, down: dict) -> dict:
    x, L, q = down["model"], float(c.config["lipschitz"]), float(c.config["q"])
    F = max(c.view.value(x), 0.0)                    # the client's own loss
    u = x.copy()
    for _ in range(int(c.config["steps"])):
        u = u - (1.0 / L) * c.gradient(u)
    dW = L * (x - u)
    Fq = F ** q
    Fq1 = (F ** (q - 1.0) if F > 0 else 0.0) if q != 1.0 else 1.0
    c.diagnostics = {"weight": [Fq]}
    return {"delta": Fq * dW, "h": [q * Fq1 * float(dW @ dW) + L * Fq]}


def _loss(c: _Client, down: dict) -> dict:
    (x,) = down.values()
    return {str(c.config["reply"]): [c.view.value(x)]}


def _loss_gradient(c: _Client, down: dict) -> dict:
    x, want = down["model"], str(c.config.get("want", "both"))
    out = {}
    if want in ("both", "loss"):
        out["losses"] = [c.view.value(x)]
    if want in ("both", "gradient"):
        out["gradients"] = c.gradient(x)
    return out


def _smoothed_steps(c: _Client, down: dict) -> dict:
    from scipy.special import expit

    w = down["model+eta"]
    u, e = w[:-1].copy(), float(w[-1])
    beta, mu, alpha = float(c.config["beta"]), float(c.config["mu"]), float(c.config["alpha"])
    for _ in range(int(c.config["steps"])):
        a = expit((c.view.value(u) - e) / mu) / alpha
        u, e = u - beta * a * c.gradient(u), e - beta * (1.0 - a)
    return {"update": np.append(u, e)}


def _vfl_init(c: _Client, down: dict) -> dict:
    block = down["block"]
    c.keep(block=block)
    c.diagnostics = {"block": block}
    return {"partial_scores": c.view.partial_scores(block)}


def _vfl_step(c: _Client, down: dict) -> dict:
    v, old = c.view, c.kept()["block"]
    eta = float(c.config["eta"])
    if "nu" in down:                                   # passive party: P steps from the round's nu
        new = old.copy()
        for _ in range(int(c.config.get("steps", 1))):
            new = new - v.block_gradient(down["nu"], new) / eta
    else:                                              # active party: q steps, other blocks stale
        if "scores+lambda" in down:
            z, lam = down["scores+lambda"][:-2], down["scores+lambda"][-2:]
        else:
            z, lam = down["scores"], np.zeros(2)
        new = old.copy()
        for _ in range(int(c.config["steps"])):
            new = new - v.local_gradient(v.local_scores(z, new, old), new, lam) / eta
    c.keep(block=new)
    c.diagnostics = {"block": new}
    return {"partial_scores": v.partial_scores(new)}


#: message type -> client computation ``(client, payload) -> reply payload``
OPERATIONS: dict[str, Callable] = {
    "query.hello": _hello,
    "train.losses_controls": _losses_controls,
    "train.corrected_steps": _corrected_steps,
    "train.local_sgd": _local_sgd,
    "train.controls": _controls,
    "train.q_weighted_steps": _q_weighted_steps,
    "query.loss": _loss,
    "train.loss_gradient": _loss_gradient,
    "train.smoothed_steps": _smoothed_steps,
    "train.vfl_init": _vfl_init,
    "train.vfl_step": _vfl_step,
}


def client_app(problems) -> ClientApp:
    """The ``ClientApp`` of drflmodel's ported algorithms (see the module docstring).

    ``problems``: a drflmodel problem; a dict ``{run key: problem}`` (several runs in one Flower
    session, all with the same number of clients); or ``factory(context) -> problem``, called in
    the client's process (a deployment builds its problem from ``context.run_config``).
    An exception in an operation becomes Flower's error reply; the server records the client as
    not taking part in that round.
    """
    views = _Views(problems)
    app = ClientApp()

    def register(op: str, compute: Callable):
        category, action = op.split(".")

        def handler(msg: Message, context: Context) -> Message:
            config = msg.content.config_records[CONFIG]
            client = _Client(*views.get(context, str(config["run"])), context, config)
            arrays = compute(client, payload_arrays(msg.content))
            return client.reply(msg, **arrays)

        getattr(app, category)(action)(handler)

    for op, compute in OPERATIONS.items():
        register(op, compute)
    return app


# ---------------------------------------------------------------------------------- Flower strategies
def _flat(record: ArrayRecord) -> tuple[np.ndarray, list]:
    arrays = [(k, v.numpy()) for k, v in record.items()]
    return (np.concatenate([np.asarray(a, float).ravel() for _, a in arrays]),
            [(k, a.shape, a.dtype) for k, a in arrays])


def _unflat(theta: np.ndarray, layout: list) -> ArrayRecord:
    out, k0 = {}, 0
    for key, shape, dtype in layout:
        size = int(np.prod(shape))
        out[key] = Array(np.asarray(theta[k0:k0 + size].reshape(shape), dtype))
        k0 += size
    return ArrayRecord(out)


def strategy_client_app(problem, step_size: float, local_steps: int = 1) -> ClientApp:
    r"""A ``ClientApp`` for Flower's built-in strategies on a drflmodel problem.

    ``train``: from the received global model :math:`w` (the concatenation of the strategy's
    arrays), client *i* reports ``train_loss`` :math:`=f_i(w)` (what ``QFedAvg`` needs) and runs
    ``local_steps`` gradient steps :math:`u\leftarrow u-\eta(\nabla f_i(u)+\mu_{\rm prox}(u-w))`
    (:math:`\mu_{\rm prox}` = the ``proximal-mu`` ``FedProx`` sends, else 0), replying :math:`u`
    in the received layout with ``num-examples`` :math:`=N_i` (the strategies' weights) and its
    ``partition-id``. The strategy's ``train_config`` may override the step (``"lr"``) and the
    number of local steps (``"local-steps"``). ``evaluate``: ``loss`` :math:`=f_i(w)`.
    """
    eta = check_real(step_size, "step_size", low=0.0, low_open=True)
    J = check_int(local_steps, "local_steps", low=1)
    views = _Views(problem)
    app = ClientApp()

    def _model(msg):
        (record,) = msg.content.array_records.values()
        return _flat(record)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        i, view = views.get(context, None)
        w, layout = _model(msg)
        config = next(iter(msg.content.config_records.values()), {})
        mu = float(config.get("proximal-mu", 0.0))
        lr, steps = float(config.get("lr", eta)), int(config.get("local-steps", J))
        u = w.copy()
        for _ in range(steps):
            u = u - lr * (view.gradient(u) + mu * (u - w))
        metrics = MetricRecord({"num-examples": view.size, "train_loss": view.value(w),
                                "partition-id": i})
        return Message(RecordDict({"arrays": _unflat(u, layout), "metrics": metrics}), reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        i, view = views.get(context, None)
        w, _ = _model(msg)
        metrics = MetricRecord({"num-examples": view.size, "loss": view.value(w), "partition-id": i})
        return Message(RecordDict({"metrics": metrics}), reply_to=msg)

    return app
