"""The Hessian-free route's own cost on ERM: ``solve(method="hessian_free", gap_tol=g)`` (the route's
``tol`` is then ``g``) against the ERM baselines of ``bench_grid.py`` (scikit-learn's lbfgs,
newton-cg, newton-cholesky at ``tol=1e-8`` and SciPy's L-BFGS-B, ``_scale_baselines``), with the
data passes each certified solve made.

**Passes** are counted by wrapping the product helpers the matrix-free objectives call
(``drflmodel._float64_products`` and ``drflmodel._float32_products``: ``times`` is a forward pass
:math:`XW`, ``t_times`` a backward pass :math:`X^\\top R`) on blocks of more than 500 rows; the route's
``info`` gives its iterations, evaluations and certificate attempts.

**Timing.** After one untimed solve per shape (the federation's stacked arrays are built on the
first), each repeat times, in turn in this one process, the certified solve at each ``--gaps``
value (building ``FederatedDRO(...)`` and ``solve()``) and each baseline; the ratios are of medians,
certified / the fastest baseline. Set ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``. ``--clock cpu``
times with ``time.thread_time`` (the CPU time of this thread, all of it: one BLAS thread) instead of
the wall clock -- on a machine shared with other jobs it leaves out the time the process waits for a
core. To compare two trees, run this script with each on ``PYTHONPATH`` in turn (alternating) and
compare the ratios.

Run: ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_hessian_free_passes.py
--shapes 10kx50,2kx100,10kx50x10,5kx30x5 --gaps 1e-6,1e-8 --repeats 5 [--clock cpu]``. Not collected by
pytest. ``--kernels 2000x4,10000x10,10000x1`` times the row kernels instead (:func:`kernel_table`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import drflmodel._float32_products as fp32
import drflmodel._float64_products as fp64
from bench_certified import _pooled
from bench_grid import baselines_once, grid_federation, grid_problem

#: passes counted per product helper in the current solve
PASSES: dict = {}
#: the clock (``--clock``): ``time.perf_counter`` or ``time.thread_time``
CLOCK = [time.perf_counter]


def _counting(module, name: str) -> None:
    product = getattr(module, name)
    key = ("forward" if name == "times" else "backward") + ("32" if module is fp32 else "")

    def counted(X, *args, **kwargs):
        if X.shape[0] > 500:
            PASSES[key] = PASSES.get(key, 0) + 1
        return product(X, *args, **kwargs)

    setattr(module, name, counted)


for _module in (fp64, fp32):
    _counting(_module, "times")
    _counting(_module, "t_times")


def certified(fed, pooled, gap: float):
    """``(seconds, solution, passes)`` of one certified ERM solve as a user calls it."""
    PASSES.clear()
    t0 = CLOCK[0]()
    prob = grid_problem(fed, "erm", pooled)
    sol = prob.solve(method="hessian_free", gap_tol=gap)
    return CLOCK[0]() - t0, sol, dict(PASSES)


def baselines(fed, prob, pooled, newton_cg_max: float) -> dict:
    """``{name: seconds}`` of ``bench_grid``'s ERM baselines, on :data:`CLOCK`."""
    out = {}
    clock = time.perf_counter
    time.perf_counter = CLOCK[0]                 # the baselines time themselves with perf_counter
    try:
        for name, (seconds, _) in baselines_once(fed, "erm", prob, pooled, 0.0, newton_cg_max).items():
            out[name] = seconds
    finally:
        time.perf_counter = clock
    return out


def kernel_table(shapes: str, repeats: int) -> None:
    """The softmax and logistic row kernels of :mod:`drflmodel.matrix_free` (values and gradients,
    the softmax's probabilities too) against scikit-learn's ``_loss`` module
    (``HalfMultinomialLoss`` / ``HalfBinomialLoss``'s ``loss_gradient`` into preallocated arrays, its
    per-sample Cython loop) on random scores, CPU time of this thread, medians."""
    from sklearn._loss.loss import HalfBinomialLoss, HalfMultinomialLoss

    import drflmodel.matrix_free as mfm

    def median(f, n):
        runs = []
        for _ in range(repeats):
            t0 = time.thread_time()
            for _ in range(n):
                f()
            runs.append((time.thread_time() - t0) / n)
        return 1e6 * float(np.median(runs))

    print("| rows x classes | drflmodel kernel us | scikit-learn loss_gradient us |")
    print("|---|---|---|")
    for shape in shapes.split(","):
        N, K = (int(float(v)) for v in shape.split("x"))
        rng = np.random.default_rng(0)
        n = max(1, 2_000_000 // (N * K))
        if K == 1:
            s, y = rng.standard_normal(N), np.where(rng.random(N) < 0.5, 1.0, -1.0)
            loss, out, grad = HalfBinomialLoss(), np.empty(N), np.empty(N)
            ours = median(lambda: mfm._logistic_rows(s, y), n)
            theirs = median(lambda: loss.loss_gradient((y > 0).astype(float), s, loss_out=out, gradient_out=grad), n)
        else:
            S, labels = rng.standard_normal((N, K)), rng.integers(0, K, N)
            positions = np.arange(N) * K + labels
            # the kernel takes the labels' flat positions since it reads them by ``take`` (earlier: the labels)
            given = positions if hasattr(mfm, "COLUMNWISE_MAX_CLASSES") else labels
            kernel = lambda: mfm._softmax_rows(S, given)                       # noqa: E731
            loss, out, grad = HalfMultinomialLoss(n_classes=K), np.empty(N), np.empty((N, K))
            ours = median(kernel, n)
            theirs = median(lambda: loss.loss_gradient(labels.astype(float), S, loss_out=out, gradient_out=grad), n)
        print(f"| {N} x {K} | {ours:.1f} | {theirs:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="10kx50,2kx100,10kx50x10,5kx30x5")
    ap.add_argument("--gaps", default="1e-6,1e-8")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--kernels", default=None, help="instead: the row kernels at these N x K (K = 1: logistic), "
                    "e.g. 2000x4,10000x10,10000x1")
    ap.add_argument("--newton-cg-max", type=float, default=2e7, help="largest N x P newton-cg runs on")
    args = ap.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    CLOCK[0] = time.thread_time if args.clock == "cpu" else time.perf_counter
    if args.kernels:
        kernel_table(args.kernels, max(args.repeats, 3))
        return
    print("| shape | gap | hessian_free ms | fastest baseline (ms) | ratio | it / ev / cert. attempts | passes fwd+bwd | status |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        fed = grid_federation(shape)
        pooled = _pooled(fed)
        certified(fed, pooled, gaps[0])             # untimed: the federation's first solve builds its caches
        times = {g: [] for g in gaps}
        base: dict = {}
        last = {}
        for _ in range(args.repeats):
            for g in gaps:
                seconds, sol, passes = certified(fed, pooled, g)
                times[g].append(seconds)
                last[g] = (sol, passes)
            prob = grid_problem(fed, "erm", pooled)
            for name, seconds in baselines(fed, prob, pooled, args.newton_cg_max).items():
                base.setdefault(name, []).append(seconds)
        name, fastest = min(((k, float(np.median(v))) for k, v in base.items()), key=lambda kv: kv[1])
        for g in gaps:
            sol, passes = last[g]
            info = sol.info
            mine = float(np.median(times[g]))
            fwd = passes.get("forward", 0) + passes.get("forward32", 0)
            bwd = passes.get("backward", 0) + passes.get("backward32", 0)
            print(f"| {shape} | {g:g} | {1e3 * mine:.2f} | {name} ({1e3 * fastest:.2f}) | {mine / fastest:.2f} | "
                  f"{info['iterations']} / {info['evaluations']} / {info['certificate_attempts']} | {fwd}+{bwd} | "
                  f"{sol.status} |", flush=True)


if __name__ == "__main__":
    main()
