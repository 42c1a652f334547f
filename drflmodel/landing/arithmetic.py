r"""The run's arithmetic: which precision its models were computed in, and the rounding allowance.

A run's rounds are not computed exactly. A client that computes its :math:`J` local steps in a
floating-point format of unit roundoff :math:`u` (float64 :math:`2^{-53}`, float32 :math:`2^{-24}`,
float16 :math:`2^{-11}`, bfloat16 :math:`2^{-8}`) and ships its model in that format, and a server
that averages the models, produce

.. math:: \tilde\theta^{r+1}=\theta^r+\eta_g\big(T(\theta^r)-\theta^r\big)+e_r,

a perturbed round. **The allowance.** In the standard model of floating-point arithmetic
(:math:`\mathrm{fl}(a\circ b)=(a\circ b)(1+\delta)`, :math:`|\delta|\le u`; Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., Section 2.2 and Lemma 3.1) a local step
:math:`u\leftarrow u-\eta(g+\mu(u-\theta))` adds four rounded terms (the gradient, the proximal
pull, their scaling, the subtraction), each perturbed by at most :math:`u` times its own size; along
a contracting local run these vectors are at most :math:`\max(1,\|\theta\|)` in norm, so one step
errs by at most :math:`4u\max(1,\|\theta\|)`; the :math:`J` steps of a client contract (each step's
Lipschitz factor :math:`a_i\le1`), so their errors add at most :math:`J` times; casting the model to
the shipped format and the server's cast add :math:`2u` each (:math:`4u`\ ·\ 2 below); averaging
:math:`n` models by pairwise summation adds :math:`\lceil\log_2n\rceil u` twice (the weights and the
sum; Higham, Section 4.2). So

.. math:: \|e_r\|\le\varepsilon_r:=c\,u\max(1,\|\theta^r\|,\|\theta^{r+1}\|),\qquad c=4(J+2)+2\lceil\log_2n\rceil .

This is an allowance under the model above, not interval arithmetic: a client whose gradient sums
lose more than that (huge features, catastrophic cancellation) can exceed it. Measured: numpy
clients computing end to end in float32 (logistic loss, :math:`P` up to 100, :math:`J` up to 20) err by
about :math:`1\cdot u\|\theta\|` per round, far below :math:`c\,u\|\theta\|`; the sweep
``benchmarks/sweep_landing_runs.py`` runs such clients, and clients rounded to bfloat16, against it.
For float64 the allowance is at least :data:`FLOAT64_FLOOR` :math:`\max(1,\|\theta\|)` (different
summation orders of the simulator and of the landing computation).

**What it does to the bounds.** With :math:`T` a :math:`q`-contraction and
:math:`\kappa=|1-\eta_g|+\eta_gq`, a perturbed run obeys
:math:`\|\theta^{r+1}-\theta^\star\|\le\kappa\|\theta^r-\theta^\star\|+\varepsilon_r`, hence
:math:`\|\theta^R-\theta^\star\|\le\kappa^Rd_0+\sum_{r<R}\kappa^{R-1-r}\varepsilon_r
\le\kappa^Rd_0+\max_r\varepsilon_r/(1-\kappa)`, and Banach's a-posteriori bound becomes
:math:`\|\theta^r-\theta^\star\|\le(\|\theta^{r+1}-\theta^r\|+\varepsilon_r)/(\eta_g(1-q))`. A correct
rounded run lands within :math:`\varepsilon/(1-\kappa)` of the point (its *rounding region*), not on it.

**Which precision.** Declared (``precision=``: a format name or a unit roundoff) over recorded (the
dtype of the arrays the clients returned, as :class:`drflmodel.flower.Recorder` keeps it, or of the
iterates given) over inferred: the coarsest format in which every recorded model after round 0 is
exactly representable (a float32 model stored as float64 is still float32). bfloat16-rounded models
stored as float32 are found that way too; a client that computes in bfloat16 but ships float32
arrays it did not round cannot be detected -- declare ``precision="bfloat16"``.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["UNIT_ROUNDOFF", "FLOAT64_FLOOR", "unit_roundoff", "run_precision", "rounding_allowance",
           "bfloat16_round"]

#: unit roundoff of each format (half the distance from 1 to the next float)
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
#: the float64 allowance floor, relative to max(1, ||theta||)
FLOAT64_FLOOR = 1e-10
_ALIASES = {"double": "float64", "single": "float32", "half": "float16", "f8": "float64", "f4": "float32",
            "f2": "float16", "bf16": "bfloat16", "fp64": "float64", "fp32": "float32", "fp16": "float16"}


def unit_roundoff(precision) -> tuple[str, float]:
    """``(name, u)`` of a precision given as a format name (``"float32"``, ``"bfloat16"``, a numpy
    dtype) or as a unit roundoff in ``(0, 0.5)``."""
    if isinstance(precision, (float, np.floating)) and not isinstance(precision, bool):
        u = float(precision)
        if not (0.0 < u < 0.5):
            raise InvalidParameterError(f"precision: a unit roundoff must lie in (0, 0.5); got {u!r}")
        return f"unit roundoff {u:.3g}", u
    try:
        name = str(np.dtype(precision)) if not isinstance(precision, str) else precision.strip().lower()
    except TypeError:
        name = None
    name = _ALIASES.get(name, name)
    if name not in UNIT_ROUNDOFF:
        raise InvalidParameterError(f"precision must be one of {sorted(UNIT_ROUNDOFF)} or a unit roundoff in "
                                    f"(0, 0.5); got {precision!r}")
    return name, UNIT_ROUNDOFF[name]


def bfloat16_round(x) -> np.ndarray:
    """``x`` rounded to bfloat16 (round to nearest even), returned as float32."""
    x = np.array(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def _representable(models: np.ndarray) -> str:
    """The coarsest format in which every model is exactly representable (``"float64"`` when the
    models are all zero: nothing to infer)."""
    finite = models[np.isfinite(models)]
    if finite.size == 0 or not np.any(finite):
        return "float64"
    f32 = finite.astype(np.float32)
    if not np.array_equal(f32.astype(np.float64), finite):
        return "float64"
    if np.array_equal(bfloat16_round(f32), f32):
        return "bfloat16"
    with np.errstate(over="ignore"):
        if np.array_equal(f32.astype(np.float16).astype(np.float32), f32):
            return "float16"
    return "float32"


def run_precision(models, recorded=None, declared=None) -> tuple[str, float, str]:
    """``(name, u, source)``: the precision a run's ``models`` (``(R+1, P)``) were computed in
    (module docstring); ``recorded`` is a dtype (or list of dtypes) the run records."""
    if declared is not None:
        name, u = unit_roundoff(declared)
        return name, u, "declared"
    candidates = []
    if recorded is not None:
        for dtype in (recorded if isinstance(recorded, (list, tuple, set)) else [recorded]):
            try:
                candidates.append((unit_roundoff(dtype), "recorded"))
            except InvalidParameterError:
                continue
    models = np.asarray(models)
    if models.dtype != np.float64:
        try:
            candidates.append((unit_roundoff(models.dtype), "the iterates' dtype"))
        except InvalidParameterError:
            pass
    later = np.asarray(models[1:], float) if models.ndim == 2 and len(models) > 1 else np.asarray(models, float)
    candidates.append((unit_roundoff(_representable(later)), "inferred from the models"))
    (name, u), source = max(candidates, key=lambda c: c[0][1])
    return name, u, source


def rounding_allowance(u: float, steps: int, n_clients: int, norms) -> np.ndarray:
    r""":math:`\varepsilon_r=c\,u\max(1,\|\theta\|)` per round (module docstring), with
    :math:`c=4(J+2)+2\lceil\log_2n\rceil`; ``norms`` are :math:`\max(\|\theta^r\|,\|\theta^{r+1}\|)`."""
    c = 4.0 * (int(steps) + 2) + 2.0 * np.ceil(np.log2(max(int(n_clients), 1)))
    scale = np.maximum(1.0, np.asarray(norms, float))
    eps = c * float(u) * scale
    return np.maximum(eps, FLOAT64_FLOOR * scale)
