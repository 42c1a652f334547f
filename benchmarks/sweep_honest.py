"""Random honest federated certified solves on awkward data: does the server ever name an honest client?

Each solve draws (from its own seed): a loss (squared, Huber, logistic, smooth hinge, hinge, softmax
with 3-9 classes), K = 1..10 clients, d features (P = d K up to ``--max-dim``), some sites of 1-3
rows, columns scaled by 10^U(-3, 3) (half the solves), nearly separable classes (a third of the
classification solves: labels from a large-margin model), l2 log-uniform in [1e-5, 1e-1], a weight
set (simplex, CVaR, chi-square, ERM) and a method (auto, sqp, hessian_free for the smooth losses;
bundle for the non-smooth ones; above P = 1,000 no forced sqp: its dense P x P Hessians on the wire would
dominate the machine, and auto takes the Hessian-free route there. The solves run as if the machine had
``--memory-gb`` (default 4) GiB available (``drflmodel._memory.available_memory`` capped): a route whose
memory estimate does not fit is refused by name before any data query (``MemoryLimitError``, counted
in its own column -- e.g. the level bundle route's CVXPY model, which asked 13 GiB at P = 2,717 before it
had an estimate). Any other exception (e.g. MemoryError under ``ulimit -v``) is counted as a status,
not a named client. Every client is an honest :class:`~drflmodel.client_oracle.Site`
under the default :class:`~drflmodel.client_oracle.QueryPolicy` (its budgets), every answer checked
(:class:`~drflmodel.client_oracle.CheckedChannel`). Counted: solves, statuses, honest clients
*named* (a fault or a rejected answer: the target is 0), refusals by budget, rejections by check.

Issue 39's "reveal floor" (a site of fewer than P + 1 rows refuses per-client gradient queries by
default) is not applied here: the tiny sites run under an explicit policy without it, so the answer
checks and budgets are exercised on them.

Run: ``python benchmarks/sweep_honest.py --solves 0 200`` (``--transport flower`` for the Flower
simulation grid, much slower; ``--max-dim`` bounds P). Prints one line per solve that named a client
and a table at the end.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import drflmodel as dm  # noqa: E402
from drflmodel.client_oracle import LocalChannel, PolicySite, QueryPolicy, Site, federated_solve  # noqa: E402

LOSSES = ("squared", "huber", "logistic", "smooth_hinge", "hinge", "multinomial")


def draw(seed: int, max_dim: int = 3000) -> tuple:
    """``(problem, method, description)`` of solve ``seed`` (module docstring)."""
    rng = np.random.default_rng(seed)
    loss_name = LOSSES[seed % len(LOSSES)]
    K = int(rng.integers(1, 11))
    classes = int(rng.integers(3, 10)) if loss_name == "multinomial" else 1
    big = rng.random() < 0.1
    cap = max_dim
    d_max = max(2, cap // classes) if big else max(2, min(40, cap // classes))
    d = int(rng.integers(2, d_max + 1))
    scaled = rng.random() < 0.5
    separable = loss_name in ("logistic", "smooth_hinge", "hinge", "multinomial") and rng.random() < 0.35
    scale = 10.0 ** rng.uniform(-3, 3, size=d - 1) if scaled else np.ones(d - 1)
    sizes = [int(rng.integers(1, 4)) if rng.random() < 0.3 else int(rng.integers(10, 80)) for _ in range(K)]
    if sum(sizes) < classes:                            # room for every class
        sizes[0] += classes
    W = rng.normal(size=(d - 1, max(classes, 1))) / scale[:, None] * (8.0 if separable else 1.0)
    Xs, ys = [], []
    for i, n in enumerate(sizes):
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, d - 1)) * scale])
        s = X[:, 1:] @ W
        if loss_name in ("squared", "huber"):
            y = s[:, 0] + rng.normal(size=n)
        elif loss_name == "multinomial":
            y = np.argmax(s + (0 if separable else rng.gumbel(size=s.shape)), axis=1)
        else:
            y = np.where(s[:, 0] + (0 if separable else rng.logistic(size=n)) > 0, 1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    if loss_name == "multinomial":                       # every class held by some client: relabel a row
        for k in range(classes):                         # whose class has another row
            if not any(np.any(y == k) for y in ys):
                counts = np.bincount(np.concatenate(ys).astype(int), minlength=classes)
                i, j = next((i, j) for i, y in enumerate(ys) for j in range(y.size) if counts[int(y[j])] > 1)
                ys[i][j] = k
        task = "multiclass"
    else:
        task = "regression" if loss_name in ("squared", "huber") else "classification"
    fed = dm.Federation.from_arrays(Xs, ys, task=task, classes=list(range(classes)) if task == "multiclass" else None)
    loss = {"squared": dm.losses.Squared(), "huber": dm.losses.Huber(1.0), "logistic": dm.losses.Logistic(),
            "smooth_hinge": dm.losses.SmoothHinge(), "hinge": dm.losses.Hinge(),
            "multinomial": dm.losses.Multinomial()}[loss_name]
    l2 = float(10.0 ** rng.uniform(-5, -1))
    wname = ["simplex", "cvar", "chi2", "erm"][int(rng.integers(4))] if K > 1 else "erm"
    sizes_ = np.asarray(sizes, float)
    weights = {"simplex": lambda: dm.sets.Simplex(K), "cvar": lambda: dm.sets.CVaR(K, 0.5),
               "chi2": lambda: dm.sets.ChiSquare(K, 0.1),
               "erm": lambda: dm.sets.HCVaR(sizes_ / sizes_.sum(), 1.0)}[wname]()
    prob = dm.FederatedDRO(fed, loss, weights=weights, l2=l2)
    smooth = np.isfinite(loss.smoothness)
    method = ["auto", "sqp", "hessian_free"][int(rng.integers(3))] if smooth else "auto"
    if loss_name == "squared" and method == "hessian_free":
        method = "auto"                                   # a federated quadratic is solved from its statistics
    if method == "sqp" and d * max(classes, 1) > 1000:
        method = "auto"                                   # dense P x P Hessians on the wire: auto's route instead
    desc = (f"{loss_name} K={K} P={d * max(classes, 1)} sizes={sizes} scaled={scaled} separable={separable} "
            f"l2={l2:.2g} {wname} {method}")
    return prob, method, desc


class _TimeLimit(BaseException):
    """A solve ran past the sweep's ``--timeout`` (a BaseException, so that no ``except Exception`` of the
    code under test -- a channel counting a failed answer -- takes it; raised by SIGALRM between Python bytecodes: a long
    solver call inside C finishes first)."""


def _alarm(signum, frame):
    raise _TimeLimit


def run_one(seed: int, max_dim: int, transport: str = "local", timeout: int = 0) -> dict:
    prob, method, desc = draw(seed, max_dim)
    started = time.perf_counter()
    if timeout:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(int(timeout))
    try:
        return _solve(prob, method, desc, seed, transport, started)
    except _TimeLimit:                          # the sweep's own limit: a slow route, nobody named
        return {"seed": seed, "desc": desc, "loss": desc.split()[0], "status": "stopped: sweep time limit",
                "fault": None, "rejections": [], "seconds": time.perf_counter() - started, "exchanges": None,
                "route": None, "evaluations": 0, "plan_exhausted": False}
    except dm.errors.MemoryLimitError:          # a route refused by its memory estimate, before any data query
        return {"seed": seed, "desc": desc, "loss": desc.split()[0], "status": "refused: memory estimate",
                "fault": None, "rejections": [], "seconds": time.perf_counter() - started, "exchanges": None,
                "route": None, "evaluations": 0, "plan_exhausted": False}
    except Exception as exc:  # noqa: BLE001 - a crash of the server's own code: reported as a status
        return {"seed": seed, "desc": desc, "loss": desc.split()[0], "status": f"error {type(exc).__name__}",
                "fault": None, "rejections": [], "seconds": time.perf_counter() - started, "exchanges": None,
                "route": None, "evaluations": 0, "plan_exhausted": False}
    finally:
        if timeout:
            signal.alarm(0)


def _solve(prob, method, desc, seed, transport, started) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if transport == "flower":
            from drflmodel import flower as dmf

            sol = dmf.certified_solve(prob, method=method)
        else:
            # an explicit policy: the default budgets, and no reveal floor for the 1-3-row sites
            sites = [PolicySite(Site.from_problem(prob, i), QueryPolicy(rows_above_parameters=False))
                     for i in range(prob.n_clients)]
            sol = federated_solve(prob, LocalChannel(sites), method=method)
    fed = sol.info.get("federated", {})
    return {"seed": seed, "desc": desc, "loss": desc.split()[0], "status": sol.status, "fault": sol.info.get("fault"),
            "rejections": fed.get("rejections", []), "seconds": time.perf_counter() - started,
            "exchanges": fed.get("exchanges"), "route": sol.info.get("method"),
            "evaluations": (fed.get("queries") or {}).get("evaluate", {}).get("exchanges", 0),
            "plan_exhausted": "exhausted" in (sol.info.get("plan") or {})}


def table(rows: dict, evaluations: list, checks_seen: Counter, header: str) -> None:
    """The sweep's Markdown table (per loss: solves, statuses, stops by the route's plan, clients named)."""
    from drflmodel.client_oracle import checks

    total = Counter()
    print(f"\n{header}\n")
    print("| loss | solves | optimal | optimal_within_gap | refused by a memory estimate | other | stopped by the "
          "route's plan | honest clients named |")
    print("|---|---|---|---|---|---|---|---|")
    memory = "refused: memory estimate"
    for loss in LOSSES:
        c = rows.get(loss, Counter())
        other = c["solves"] - c["optimal"] - c["optimal_within_gap"] - c[memory]
        total.update(c)
        print(f"| {loss} | {c['solves']} | {c['optimal']} | {c['optimal_within_gap']} | {c[memory]} | {other} | "
              f"{c['plan stop']} | {c['named']} |")
    other = total["solves"] - total["optimal"] - total["optimal_within_gap"] - total[memory]
    print(f"| all | {total['solves']} | {total['optimal']} | {total['optimal_within_gap']} | {total[memory]} | {other} | "
          f"{total['plan stop']} | {total['named']} |")
    statuses = Counter({k: v for k, v in total.items() if k not in ("solves", "named", "plan stop")})
    print(f"statuses: {dict(statuses)}")
    if evaluations:
        e = np.asarray(evaluations)
        print(f"\nhessian_free solves: {e.size}; evaluate exchanges median {np.median(e):.0f}, 95th percentile "
              f"{np.percentile(e, 95):.0f}, max {e.max()}")
    print(f"rejections by check: {dict(checks_seen)}; decisions on the fallback allowance: {dict(checks.FALLBACKS)}",
          flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solves", type=int, nargs=2, default=(0, 60), help="seed range [a, b)")
    ap.add_argument("--max-dim", type=int, default=3000)
    ap.add_argument("--transport", choices=("local", "flower"), default="local")
    ap.add_argument("--every", type=int, default=0, help="print the table every this many solves (0: at the end)")
    ap.add_argument("--timeout", type=int, default=0, help="seconds after which a solve is stopped (0: none); "
                                                           "counted as 'stopped: sweep time limit'")
    ap.add_argument("--memory-gb", type=float, default=4.0, help="the memory the routes' estimates see as available")
    args = ap.parse_args(argv)
    from drflmodel import _memory

    real, cap = _memory.available_memory, int(args.memory_gb * 2**30)
    _memory.available_memory = lambda: min(real() or cap, cap)
    rows, checks_seen, evaluations = {}, Counter(), []
    t0 = time.perf_counter()
    for n, seed in enumerate(range(*args.solves), start=1):
        r = run_one(seed, args.max_dim, args.transport, args.timeout)
        row = rows.setdefault(r["loss"], Counter())
        row["solves"] += 1
        row[r["status"]] += 1
        row["plan stop"] += int(r["plan_exhausted"])
        if r["route"] == "hessian_free":
            evaluations.append(r["evaluations"])
        for rej in r["rejections"]:
            checks_seen[rej["check"]] += 1
        if r["status"].startswith("error"):
            print(f"ERROR seed={seed} {r['desc']}: {r['status']}", flush=True)
        elif r["status"] not in ("optimal", "optimal_within_gap") and r["fault"] is None:
            print(f"STATUS seed={seed} {r['desc']}: {r['status']} (route {r['route']})", flush=True)
        if r["fault"] is not None or r["rejections"]:
            row["named"] += 1
            what = r["fault"]["message"] if r["fault"] else f"{len(r['rejections'])} rejected answer(s)"
            print(f"NAMED seed={seed} {r['desc']}: {what[:300]}", flush=True)
        if (args.every and n % args.every == 0) or seed == args.solves[1] - 1:
            table(rows, evaluations, checks_seen, f"{args.transport}: seeds {args.solves[0]}..{seed}, max P "
                                                  f"{args.max_dim}, {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
