r"""Certified optima of benchmark instances, with accuracies, cached by version.

:func:`certify` solves every objective family of an :class:`~drflmodel.instances.generators.Instance`
with drflmodel's certified oracle (``FederatedDRO.solve``: lower and upper bounds) -- ERM weighted by
sample counts, agnostic FL (the worst mixture of clients) and q-FFL -- and reports, at each
certified optimum, the accuracy on the training and held-out rows: pooled over all rows, the mean
over clients and the **worst client**.

Results are cached as JSON files in a cache directory (``DRFLMODEL_CACHE``, else
``$XDG_CACHE_HOME/drflmodel``, else ``~/.cache/drflmodel``; never inside the repository), one file per
(instance, family), named by a hash of the instance's recipe and model, the family, and the versions
of drflmodel, numpy, scipy and cvxpy: a new version never reads an old result. A cached result is
not trusted blindly: its objective is re-evaluated at the stored :math:`\theta` (numpy, no solver)
and must equal the stored upper bound, else the family is solved again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._progress import progress_enabled
from .._validation import check_real
from ..errors import InvalidParameterError
from ..solution import jsonable
from .generators import FAMILIES, Instance

__all__ = ["certify", "CertifiedInstance", "FamilyResult", "cache_dir", "versions", "accuracies"]


def versions() -> dict:
    """The versions a cached result depends on."""
    import cvxpy
    import scipy

    import drflmodel

    return {"drflmodel": drflmodel.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "cvxpy": cvxpy.__version__}


def cache_dir(path=None) -> Path:
    """The cache directory: ``path``, else ``$DRFLMODEL_CACHE``, else ``$XDG_CACHE_HOME/drflmodel``,
    else ``~/.cache/drflmodel`` (created on first write)."""
    if path is not None:
        return Path(path)
    if os.environ.get("DRFLMODEL_CACHE"):
        return Path(os.environ["DRFLMODEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "drflmodel"


def _family(spec) -> tuple[str, float | None, str]:
    """``(family, q, label)`` of ``"erm"``, ``"afl"``, ``"qffl"`` (q = 1) or ``("qffl", q)``."""
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and spec[0] == "qffl":
        q = check_real(spec[1], "families: q of ('qffl', q)", low=0.0, low_open=True)
        return "qffl", q, f"qffl(q={q:g})"
    if isinstance(spec, str) and spec == "qffl":
        return "qffl", 1.0, "qffl(q=1)"
    if isinstance(spec, str) and spec in ("erm", "afl"):
        return spec, None, spec
    raise InvalidParameterError(f"families: each family must be one of {FAMILIES} or ('qffl', q); got {spec!r}")


def _predictions(federation, theta, loss: str):
    d = federation.dim
    for c in federation.clients:
        if loss == "multinomial":
            W = np.asarray(theta, float).reshape(-1, d).T              # class-major: theta[k*d + j] = W[j, k]
            yield np.argmax(c.X @ W, axis=1) == np.asarray(c.y).astype(int)
        else:
            yield np.where(c.X @ theta >= 0, 1.0, -1.0) == c.y


def accuracies(federation, theta, loss: str) -> dict:
    """Accuracy of the linear model ``theta`` on each client of ``federation``: ``per_client``,
    ``pooled`` (all rows), ``client_mean`` and ``worst`` (the worst client)."""
    hits = list(_predictions(federation, theta, loss))
    per = np.array([h.mean() for h in hits])
    return {"per_client": per, "pooled": float(np.concatenate(hits).mean()), "client_mean": float(per.mean()),
            "worst": float(per.min()), "worst_client": federation.clients[int(np.argmin(per))].name}


@dataclass
class FamilyResult:
    """One family's certified optimum on an instance, and the accuracies there."""

    family: str
    label: str
    q: float | None
    theta: np.ndarray
    value: float
    lower_bound: float
    upper_bound: float
    status: str
    certificate: str
    accuracy: dict
    seconds: float
    cached: bool = False

    def to_dict(self) -> dict:
        return jsonable({k: getattr(self, k) for k in ("family", "label", "q", "theta", "value", "lower_bound",
                                                        "upper_bound", "status", "certificate", "accuracy",
                                                        "seconds", "cached")})


@dataclass
class CertifiedInstance:
    """An instance with the certified optimum of each family (:func:`certify`)."""

    instance: Instance
    results: dict
    versions: dict
    cache_files: dict = field(default_factory=dict)

    def table(self) -> list[dict]:
        """One row per family: status, certified value and gap, accuracies (train / held out)."""
        rows = []
        for label, r in self.results.items():
            row = {"instance": self.instance.name, "family": label, "status": r.status, "value": r.value,
                   "gap": r.upper_bound - r.lower_bound,
                   "train_pooled": r.accuracy["train"]["pooled"], "train_worst": r.accuracy["train"]["worst"]}
            if "test" in r.accuracy:
                row.update(test_pooled=r.accuracy["test"]["pooled"], test_mean=r.accuracy["test"]["client_mean"],
                           test_worst=r.accuracy["test"]["worst"])
            rows.append(row)
        return rows

    def summary(self) -> str:
        st = self.instance.statistics()
        lines = [f"{self.instance.name}: {st['devices']} devices, {st['samples']} samples "
                 f"({st['mean']:.2f} per device, std {st['std']:.2f}); {self.instance.source}"]
        for row in self.table():
            test = (f", held out {row['test_pooled']:.4f} (worst client {row['test_worst']:.4f})"
                    if "test_pooled" in row else "")
            lines.append(f"  {row['family']:<12} {row['status']:<10} value {row['value']:.10f} (gap {row['gap']:.1e}); "
                         f"train accuracy {row['train_pooled']:.4f} (worst client {row['train_worst']:.4f}){test}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return jsonable({"instance": self.instance.key(), "statistics": self.instance.statistics(),
                         "source": self.instance.source, "versions": self.versions,
                         "results": {k: r.to_dict() for k, r in self.results.items()}})


def _cache_key(instance: Instance, label: str, vers: dict, gap_tol: float) -> tuple[str, dict]:
    key = {"instance": instance.key(), "family": label, "versions": vers, "gap_tol": gap_tol}
    digest = hashlib.sha256(json.dumps(jsonable(key), sort_keys=True).encode()).hexdigest()[:16]
    slug = "".join(ch if ch.isalnum() else "_" for ch in instance.name).strip("_")
    return f"{slug}-{label.replace('(', '_').replace(')', '').replace('=', '')}-{digest}.json", key


def _load(path: Path, key: dict, problem) -> FamilyResult | None:
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if stored.get("key") != jsonable(key):
        return None
    r = stored["result"]
    theta = np.asarray(r["theta"], float)
    if theta.shape != (problem.dim,) or not np.all(np.isfinite(theta)):
        return None
    value = float(problem.objective(theta))            # re-evaluated, not trusted
    if not np.isclose(value, r["upper_bound"], rtol=1e-10, atol=1e-12):
        return None
    acc = {part: {**a, "per_client": np.asarray(a["per_client"], float)} for part, a in r["accuracy"].items()}
    return FamilyResult(family=r["family"], label=r["label"], q=r["q"], theta=theta, value=value,
                        lower_bound=float(r["lower_bound"]), upper_bound=float(r["upper_bound"]), status=r["status"],
                        certificate=r["certificate"], accuracy=acc, seconds=float(r["seconds"]), cached=True)


#: the range of ``certify``'s ``gap_tol``: below 1e-10 a relative gap is at the level of the objective's
#: rounding and the oracle may work for minutes without meeting it; above 0.1 nothing is certified
GAP_TOL_RANGE = (1e-10, 0.1)


def _families(instance: Instance, families) -> list[tuple[str, float | None, str]]:
    """Every family of ``families`` (one name, a ``("qffl", q)`` pair or a sequence of them) parsed
    before any is solved, so that a misspelt one is refused at once."""
    if families is None:
        families = instance.families
    elif isinstance(families, str) or (isinstance(families, tuple) and len(families) == 2
                                       and families[0] == "qffl" and not isinstance(families[1], (str, tuple))):
        families = (families,)                           # one family, not a sequence of characters
    try:
        chosen = list(families)
    except TypeError:
        raise InvalidParameterError(f"families must be one of {FAMILIES}, ('qffl', q) or a sequence of them; "
                                    f"got {families!r}") from None
    if not chosen:
        raise InvalidParameterError(f"families must name at least one of {FAMILIES}; got {families!r}")
    return [_family(spec) for spec in chosen]


def certify(instance: Instance, families=None, cache: bool = True, cache_path=None,
            gap_tol: float = 1e-6, progress: bool | None = None) -> CertifiedInstance:
    """The certified optimum of each family of ``instance`` (module docstring).

    Parameters
    ----------
    instance : Instance
        From :func:`~drflmodel.instances.fedprox_synthetic`, :func:`~drflmodel.instances.leaf_synthetic`
        or :func:`~drflmodel.instances.adult_doctorate`.
    families : ``"erm"``, ``"afl"``, ``"qffl"`` or ``("qffl", q)`` (default: ``instance.families``).
    cache : read and write the cache (module docstring).
    cache_path : the cache directory (default :func:`cache_dir`).
    gap_tol : the oracle's relative gap tolerance, in [1e-10, 0.1] (:data:`GAP_TOL_RANGE`).
    progress : one line on standard error as each family starts and ends (``None``: when standard
        error is a terminal outside CI, as :mod:`drflmodel._progress` decides; a large instance's
        family takes minutes).

    Every argument is checked before the first solve (a misspelt family, a gap tolerance out of
    range).

    Returns
    -------
    CertifiedInstance
        Each family's certified result; ``table()`` and ``summary()`` present them.
    """
    if not isinstance(instance, Instance):
        raise InvalidParameterError(f"instance must be a drflmodel.instances.Instance; got {type(instance).__name__}")
    parsed = _families(instance, families)
    gap_tol = check_real(gap_tol, "gap_tol", low=GAP_TOL_RANGE[0], high=GAP_TOL_RANGE[1])
    if not isinstance(cache, bool):
        raise InvalidParameterError(f"cache must be True or False; got {cache!r}")
    show = progress_enabled(progress)
    vers = versions()
    folder = cache_dir(cache_path)
    results, files = {}, {}
    for k, (family, q, label) in enumerate(parsed):
        problem = instance.problem(family, q if q is not None else 1.0)
        name, key = _cache_key(instance, label, vers, gap_tol)
        path = folder / name
        found = _load(path, key, problem) if cache and path.exists() else None
        if found is None:
            if show:
                print(f"certify {instance.name}: {label} ({k + 1} of {len(parsed)}; {instance.train.n_clients} "
                      f"clients, {problem.dim} parameters) ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            sol = problem.solve(gap_tol=gap_tol)
            seconds = time.perf_counter() - t0
            if show:
                print(f"certify {instance.name}: {label} {sol.status} in {seconds:.1f} s", file=sys.stderr, flush=True)
            if sol.theta is None:
                raise InvalidParameterError(f"{instance.name}, {label}: the oracle ended {sol.status!r}")
            acc = {"train": accuracies(instance.train, sol.theta, instance.loss)}
            if instance.test is not None:
                acc["test"] = accuracies(instance.test, sol.theta, instance.loss)
            found = FamilyResult(family=family, label=label, q=q, theta=np.asarray(sol.theta, float),
                                 value=float(sol.value), lower_bound=float(sol.lower_bound),
                                 upper_bound=float(sol.upper_bound), status=sol.status,
                                 certificate=str(sol.certificate), accuracy=acc, seconds=seconds)
            if cache:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(jsonable({"key": key, "result": found.to_dict()})))
        results[label] = found
        files[label] = str(path)
    return CertifiedInstance(instance=instance, results=results, versions=vers, cache_files=files if cache else {})
