"""The federated certified solve at scale: the clients answer values, gradients, a few
Hessian-vector products and the Hessian-free bound's per-client means -- O(P) floats -- instead of
Hessian triangles.

For each shape (20 Dirichlet clients unless the shape says, free intercept; the shapes of
``bench_certified.py --scale`` and ``breast_cancer`` (4 sites, P = 31) and ``10kx300x10``
(P = 3,010); the float32 heads ``20kx256x20`` (P = 5,140), ``20kx512x50`` (P = 25,650), ``10kx512x200`` and
``tinyimagenet`` (100k x 512 x 200, P = 102,600) of ``bench_largest_heads.py``) and each row (``erm``: the clients' sample shares as fixed weights; ``chi2``: the
chi^2 ball) and method: the centralized solve, then the federated one from the clients' answers
(``LocalChannel``, or Flower's in-process grid with ``--flower``), with the exchanges, the largest
answer of one client in floats (target: <= 4 P), the floats one client sent over the solve, and the
federated U against the centralized U.

    python benchmarks/bench_federated_scale.py --shapes digits,breast_cancer,10kx300x10 --rows erm,chi2 \
        --methods auto,hessian_free,sqp

``--no-central`` skips the centralized solve (the last columns then say ``-``): the float32 heads,
where only the exchanges are asked, ``--methods block_newton,hessian_free``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import drflmodel as dm
from bench_certified import L2, N_CLIENTS, RHO, SCALE_SHAPES, scale_federation
from drflmodel.client_oracle import LocalChannel, federated_solve


#: shapes of this benchmark beyond bench_certified's
EXTRA_SHAPES = {"breast_cancer": None, "10kx300x10": (10_000, 300, 10)}
#: float32 heads (``bench_largest_heads.py``'s generator: 20 Dirichlet(0.5) clients): N x d x K
HEAD_SHAPES = {"20kx256x20": (20_000, 256, 20), "20kx512x50": (20_000, 512, 50), "10kx512x200": (10_000, 512, 200),
               "7500x512x200": (7_500, 512, 200), "6kx512x200": (6_000, 512, 200), "5kx512x200": (5_000, 512, 200),
               "2kx512x200": (2_000, 512, 200), "tinyimagenet": (100_000, 512, 200)}


def federation(shape: str):
    if shape == "breast_cancer":
        return dm.datasets.breast_cancer(n_clients=4, seed=0)
    if shape in HEAD_SHAPES:
        N, d, K = HEAD_SHAPES[shape]
        fed = dm.datasets.gaussian_mixture(N, d, K, n_clients=N_CLIENTS, alpha=0.5, seed=0)
        return dm.Federation.from_arrays([c.X.astype(np.float32) for c in fed.clients], [c.y for c in fed.clients],
                                         task=fed.task, classes=fed.classes)
    if shape in EXTRA_SHAPES:
        N, d, K = EXTRA_SHAPES[shape]
        return dm.datasets.gaussian_mixture(N, d, K, n_clients=N_CLIENTS, alpha=0.5, seed=0)
    return scale_federation(shape)


def problem(shape: str, row: str = "chi2"):
    fed = federation(shape)
    loss = dm.losses.Multinomial() if fed.task == "multiclass" else dm.losses.Logistic()
    W = dm.sets.ChiSquare(fed.n_clients, RHO) if row == "chi2" else dm.sets.HCVaR(fed.proportions, 1.0)
    return dm.FederatedDRO(fed, loss, W, l2=L2, penalize_intercept=False)


def run(shape: str, method: str, flower: bool, row: str = "chi2", central: bool = True) -> dict:
    prob = problem(shape, row)
    t0 = time.perf_counter()
    reference = prob.solve(method="hessian_free") if central else None
    t_central = time.perf_counter() - t0
    t0 = time.perf_counter()
    if flower:
        from drflmodel.flower.oracle import certified_solve

        sol = certified_solve(prob, method=method)
    else:
        sol = federated_solve(prob, LocalChannel.from_problem(prob), method=method)
    t_fed = time.perf_counter() - t0
    info = sol.info["federated"]
    per_client = sum(r["floats_per_client"] for r in info["reveals"])
    return {"shape": shape, "row": row, "P": prob.dim, "method": info["method"], "status": sol.status, "gap": sol.relative_gap,
            "exchanges": info["exchanges"], "largest": info["largest_answer_floats"], "per_client": per_client,
            "rejections": len(info.get("rejections", [])), "U_diff": None if reference is None else
            abs(sol.upper_bound - reference.upper_bound) / max(1.0, abs(reference.upper_bound)),
            "central_s": t_central if central else None, "federated_s": t_fed}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="digits,20kx200x10,50kx512x100")
    ap.add_argument("--methods", default="auto", help="comma-separated federated routes (default auto)")
    ap.add_argument("--rows", default="chi2", help="comma-separated rows: erm, chi2 (default chi2)")
    ap.add_argument("--flower", action="store_true", help="Flower's in-process grid instead of LocalChannel")
    ap.add_argument("--no-central", action="store_true", help="skip the centralized solve (module docstring)")
    args = ap.parse_args()
    print(f"{N_CLIENTS} clients (breast_cancer: 4), chi^2 (rho = {RHO}) or ERM, l2 = {L2}, free intercept; transport: "
          f"{'Flower in-process grid' if args.flower else 'LocalChannel'}")
    print("| shape (P) | row | route | status | gap | exchanges | largest answer (floats; 4P) | floats per client "
          "(MB) | rejected answers | federated U - centralized U (rel.) | centralized / federated (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        if shape not in SCALE_SHAPES and shape not in EXTRA_SHAPES and shape not in HEAD_SHAPES:
            raise SystemExit(f"unknown shape {shape!r}; valid: {', '.join([*SCALE_SHAPES, *EXTRA_SHAPES, *HEAD_SHAPES])}")
        for row in args.rows.split(","):
            for method in args.methods.split(","):
                _row(run(shape, method, args.flower, row, central=not args.no_central))


def _row(r: dict) -> None:
    print(f"| {r['shape']} ({r['P']:,}) | {r['row']} | {r['method']} | {r['status']} | {max(r['gap'], 0):.0e} | {r['exchanges']} | "
          f"{r['largest']:,}; {4 * r['P']:,} | {r['per_client']:,} ({8 * r['per_client'] / 1e6:.2f}) | {r['rejections']} | "
          f"{'-' if r['U_diff'] is None else format(r['U_diff'], '.1e')} | "
          f"{'-' if r['central_s'] is None else format(r['central_s'], '.2f')} / {r['federated_s']:.2f} |", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
