"""FedProx bugs that shipped, caught by a certified landing point (Flower's FedProx strategy).

FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, "Federated optimization in heterogeneous
networks", MLSys 2020, Algorithm 2) changes nothing on the server: each client adds the proximal
term (mu/2) ||w - w_t||^2 to its local loss, w_t being the model the server sent. Three client-side
bugs of that term shipped in federated-learning libraries, each fixed after users noticed:

* **the term evaluated to zero** -- Flower PR #1654, "The FedProx proximal term always evaluated to
  0, this fix builds detached copies of the parameters": the global parameters were taken as
  ``global_params = copy.deepcopy(net).parameters()``, a one-shot generator that the first
  ``zip(net.parameters(), global_params)`` exhausts, so from the second batch on the loop adds
  nothing (and at the first batch w = w_t). Flower 1.41's ``FedProx`` strategy docstring still
  shows this line;
* **the term not squared** -- Flower PR #2210, "Fix missing square in proximal term of FedProx
  baseline": ``proximal_term += (local_weights - global_weights).norm(2)``, i.e.
  (mu/2) sum_layers ||w - w_t||, whose gradient (mu/2)(w - w_t)/||w - w_t|| has constant length.
  Flower 1.41's ``FedProx`` docstring still shows the unsquared norm;
* **mu ignored** -- OpenFL report #823, "getting same model despite different mu values", fixed by
  OpenFL PR #1634: the tutorial called ``set_old_weights`` after the backward pass, right before
  ``optimizer.step()``, so the reference weights equal the current ones and the optimizer's
  ``mu * (p - w_old)`` is zero: every mu gives the same model.

Here each is a Flower ``ClientApp`` of ours (numpy, full-batch local gradient steps on a logistic
loss; the mechanism of each bug reproduced, no Flower code copied), trained by **Flower's own**
``FedProx`` strategy (``flwr.serverapp.strategy.FedProx``) on drflmodel's in-process grid; a
:class:`drflmodel.flower.Recorder` records the global models and the configuration the strategy sent
(``proximal-mu``, and the ``lr`` / ``local-steps`` passed in ``train_config``).
:func:`drflmodel.landing.conformance` then grades each run against the certified optimum of the
objective and against FedProx's certified landing point for that configuration:

* the correct client "landed on its fixed point" -- away from the optimum by the client drift
  FedProx keeps by design;
* each buggy client "landed elsewhere: not the strategy it claims to be", with a proof (a round of
  the run breaks Banach's bound that every round of FedProx obeys), and the point it matches when
  there is one (the zero term and mu ignored both land on FedAvg's fixed point with the same steps),
  and each client named: the Recorder keeps every client's returned model, and each is checked
  against FedProx's local steps from the model it received ("client 0 is not running FedProx ...;
  its updates ignore mu");
* a run whose clients used a step the server never sent cannot be graded: the verdict says which
  configuration it needs.

The figure shows each run's distance to FedProx's certified landing point per round, with the
optimum's (the client drift FedProx keeps) and the landing tolerance marked. Run: ``python
examples/fedprox_bugs.py`` (600 rounds per run: about 10 s of CPU -- 8.9 s with one BLAS thread,
9.6 s with the default threads, measured; 34 s and 65 s of wall time on a 2-core machine shared
by other jobs) or ``--quick`` (250 rounds: 4.6 s of CPU); ``--out DIR`` saves the figure.
``main()`` returns every number.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedProx

import drflmodel as dm
from drflmodel import flower as dmf

MU, LOCAL_STEPS, TOL = 1.0, 10, 1e-6
CLIENT_DEFAULT_LR = 0.05        # what a client uses when the server sends no "lr"


def problem():
    """Five heterogeneous clients of different sizes, logistic loss, ridge 0.1, weights N_i / N
    (Flower's ``num-examples`` weighting): ``FederatedDRO`` with the one-point set ``HCVaR(p, 1)``."""
    fed = dm.datasets.synthetic_classification(n_clients=5, dim=6, samples=[30, 60, 90, 45, 75],
                                               heterogeneity=1.5, add_intercept=True, seed=4)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)


# ------------------------------------------------------------------ the local training, per client
def _loss_gradient(view, layers):
    """The data loss's gradient, split like ``layers`` (drflmodel's model is one array here)."""
    g = view.gradient(np.concatenate([w.ravel() for w in layers]))
    out, k = [], 0
    for w in layers:
        out.append(g[k:k + w.size].reshape(w.shape))
        k += w.size
    return out


def _local_training(view, received, lr, steps, proximal_gradient):
    """``steps`` gradient steps from the received layers; ``proximal_gradient(net)`` yields, layer by
    layer, what the client adds for the proximal term (the only line the four client versions differ in)."""
    net = [w.copy() for w in received]
    for _ in range(steps):
        grads = _loss_gradient(view, net)
        for k, extra in enumerate(proximal_gradient(net)):
            grads[k] = grads[k] + extra
        net = [w - lr * g for w, g in zip(net, grads)]
    return net


def train_correct(view, received, mu, lr, steps):
    """FedProx as published: detached copies of the global layers, made before training; the
    gradient of (mu/2) ||w - w_t||^2 is mu (w - w_t)."""
    global_params = [w.copy() for w in received]
    return _local_training(view, received, lr, steps,
                           lambda net: (mu * (w - w_t) for w, w_t in zip(net, global_params)))


def train_term_zero(view, received, mu, lr, steps):
    """Flower PR #1654: the global parameters are a one-shot iterator (``copy.deepcopy(net).parameters()``);
    the first ``zip`` consumes it, every later step adds no proximal gradient."""
    global_params = iter([w.copy() for w in received])
    return _local_training(view, received, lr, steps,
                           lambda net: (mu * (w - w_t) for w, w_t in zip(net, global_params)))


def train_unsquared(view, received, mu, lr, steps):
    """Flower PR #2210: the term is (mu/2) sum_layers ||w - w_t|| (no square); its gradient is
    (mu/2)(w - w_t)/||w - w_t||, zero where w = w_t (autograd's choice at the kink)."""
    global_params = [w.copy() for w in received]

    def unsquared(w, w_t):
        norm = np.linalg.norm(w - w_t)
        return 0.5 * mu * (w - w_t) / norm if norm > 0 else np.zeros_like(w)

    return _local_training(view, received, lr, steps,
                           lambda net: (unsquared(w, w_t) for w, w_t in zip(net, global_params)))


def train_mu_ignored(view, received, mu, lr, steps):
    """OpenFL #823 / PR #1634: the optimizer's reference weights are set after the backward pass,
    right before each step (``set_old_weights``), so its ``mu * (p - w_old)`` is zero."""

    def reset_then_pull(net):
        w_old = [w.copy() for w in net]
        return (mu * (w - w_o) for w, w_o in zip(net, w_old))

    return _local_training(view, received, lr, steps, reset_then_pull)


CLIENTS = {"correct": train_correct, "term zero (Flower #1654)": train_term_zero,
           "unsquared (Flower #2210)": train_unsquared, "mu ignored (OpenFL #1634)": train_mu_ignored}


def client_app(prob, train) -> ClientApp:
    """A Flower ``ClientApp`` training with ``train`` on its partition (``partition-id``); it reads
    ``proximal-mu`` (sent by Flower's FedProx), ``lr`` and ``local-steps`` from the training config,
    and replies with ``num-examples`` (FedProx's weights)."""
    views = [prob.client_view(i) for i in range(prob.n_clients)]
    app = ClientApp()

    @app.train()
    def fit(msg: Message, context: Context) -> Message:
        i = int(context.node_config["partition-id"])
        config = msg.content["config"]
        received = msg.content["arrays"].to_numpy_ndarrays()
        lr = float(config["lr"]) if "lr" in config else CLIENT_DEFAULT_LR
        steps = int(config["local-steps"]) if "local-steps" in config else LOCAL_STEPS
        layers = train(views[i], received, float(config["proximal-mu"]), lr, steps)
        metrics = MetricRecord({"num-examples": views[i].size, "partition-id": i})
        return Message(RecordDict({"arrays": ArrayRecord(layers), "metrics": metrics}), reply_to=msg)

    return app


def run(prob, train, rounds: int, train_config: dict):
    """One Flower run of ``FedProx(proximal_mu=MU)`` with every client in every round; returns the
    recorded :class:`~drflmodel.solvers.Trace`."""
    n = prob.n_clients
    rec = dmf.Recorder(prob)
    strategy = rec.watch(FedProx(proximal_mu=MU, min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0))
    with dmf.LocalGrid(client_app(prob, train), n) as grid:
        strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(prob.dim)]), num_rounds=rounds,
                       evaluate_fn=rec, train_config=ConfigRecord(train_config))
    return rec.trace()


def main(quick: bool = False, out=None) -> dict:
    """Run the five Flower runs (250 rounds each with ``quick``, else 600), grade them, print the
    table and the verdicts; with ``out`` write the figure ``fedprox_bugs.png`` there."""
    rounds = 250 if quick else 600
    prob = problem()
    sol = prob.solve(gap_tol=1e-10)      # the optimum the runs are graded against: its radius from this gap
    L = float(np.max(prob.objectives.smoothness()))
    lr = 1.0 / ((L + MU) * LOCAL_STEPS)
    sent = {"lr": lr, "local-steps": LOCAL_STEPS}
    runs = {name: (train, sent) for name, train in CLIENTS.items()}
    runs["correct, lr not sent"] = (train_correct, {})
    reports, finals = {}, {}
    for name, (train, config) in runs.items():
        trace = run(prob, train, rounds, config)
        reports[name] = dm.landing.conformance(trace, prob, solution=sol, tol=TOL)
        finals[name] = trace.theta[-1]
    landing = next(iter(reports.values())).fixed_point

    print(f"Flower's FedProx (proximal_mu={MU:g}) with {LOCAL_STEPS} local steps of lr={lr:.4g}, "
          f"{prob.n_clients} clients, {rounds} rounds, in-process grid")
    print(f"  certified optimum of the objective: {sol.status}, value {sol.value:.10f}")
    print(f"  FedProx's certified landing point: {landing.status}, radius {landing.radius:.1e}, "
          f"{np.linalg.norm(landing.theta - sol.theta):.3e} from the optimum (client drift)")
    head = f"{'client':<28}{'verdict':<12}{'evidence':<10}{'to landing':>12}{'to optimum':>12}  matches"
    print(head)
    print("-" * len(head))
    rows = {}
    for name, rep in reports.items():
        f = rep.final
        d_fp = f.get("dist_fixed_point")
        rows[name] = {"verdict": rep.verdict, "passed": rep.passed, "evidence": rep.evidence,
                      "dist_fixed_point": d_fp, "dist_optimum": f["dist_optimum"], "matches": rep.matches,
                      "missing": rep.missing, "text": rep.text, "report": rep, "theta": finals[name]}
        shown = "-" if d_fp is None else f"{d_fp:.2e}"
        print(f"{name:<28}{rep.verdict:<12}{rep.evidence or '-':<10}{shown:>12}{f['dist_optimum']:>12.2e}  "
              f"{(rep.matches or '-').split(':')[0]}")
    print()
    for name, rep in reports.items():
        print(f"{name}: {rep.text}")
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        figure(reports, Path(out) / "fedprox_bugs.png", prob.n_clients)
        print(f"figure: {Path(out) / 'fedprox_bugs.png'}")
    return {"rows": rows, "problem": prob, "solution": sol, "landing": landing, "rounds": rounds, "lr": lr}


def figure(reports, path, n_clients: int) -> None:
    """Each run's distance to FedProx's certified landing point per round; the two bugs that land on
    FedAvg's point give the same iterates (drawn solid and dashed on top of each other)."""
    from drflmodel.plots import panels, save_figure

    fig, (ax,) = panels(1, width=7.5, height=4.5)
    styles = {"correct": ("C0", "-", 2.0), "term zero (Flower #1654)": ("C1", "-", 3.0),
              "unsquared (Flower #2210)": ("C2", "-", 2.0), "mu ignored (OpenFL #1634)": ("C3", "--", 1.5)}
    drift = None
    for name, rep in reports.items():
        if rep.verdict == "incomplete":
            continue
        color, ls, lw = styles.get(name, ("C4", "-", 1.5))
        r = [row["round"] for row in rep.rows]
        d = [max(row["dist_fixed_point"], 1e-300) for row in rep.rows]
        ax.semilogy(r, d, ls, color=color, lw=lw, label=f"{name}: {rep.verdict}")
        drift = rep.drift
    if drift is not None:
        ax.axhline(drift, color="black", lw=0.8, ls="-.", label="the optimum (client drift of FedProx)")
    ax.axhline(TOL, color="grey", lw=0.8, ls=":", label=f"landing tolerance {TOL:g}")
    ax.set_xlabel("round")
    ax.set_ylabel("distance to FedProx's landing point")
    ax.legend(fontsize="small", loc="center right")
    save_figure(fig, path, title=f"Flower's FedProx strategy, {n_clients} clients, four client versions: "
                                 "where each run lands")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="250 rounds per run")
    parser.add_argument("--out", default=None, help="folder for the figure (PNG)")
    args = parser.parse_args()
    main(quick=args.quick, out=args.out)
