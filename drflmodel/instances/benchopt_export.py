r"""Export a certified instance as a `benchopt <https://benchopt.github.io>`_ benchmark.

:func:`export_benchopt` writes a benchmark folder whose objective carries the certified optimum, so
every solver's curve is measured against a value that is proved, not the best value some run
reached::

    <path>/objective.py           the objective in plain numpy (no drflmodel import), with the
                                  certified value: ``evaluate_result(theta)`` returns ``value`` and
                                  ``suboptimality`` = value - certified lower bound
    <path>/datasets/<name>.py     loads <path>/data/<name>.npz
    <path>/solvers/scipy_lbfgs.py a reference solver (scipy's L-BFGS-B on the same numpy objective)
    <path>/data/<name>.npz        the training rows, client of each row, classes, ridge, weights
    <path>/certified.json         drflmodel's certificate: value, bounds, theta, versions, recipe
    <path>/README.md

Families: ``"erm"`` (:math:`\sum_ip_if_i`, :math:`p_i=N_i/N`) and ``"qffl"``
(:math:`\frac1{q+1}\sum_if_i^{q+1}`), both smooth; with :math:`f_i` the client's mean loss
(softmax cross-entropy or logistic) plus :math:`\frac{\ell_2}2\|\theta\|^2`, :math:`\theta` in
drflmodel's class-major layout (``theta[k*d + j] = W[j, k]``). Agnostic FL (a maximum over client
mixtures, not smooth) is refused: a benchopt solver for it would need a min-max method.
benchopt is an optional dependency (the ``benchopt`` extra); writing the folder does not import it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InvalidParameterError
from ..solution import jsonable
from .certified import CertifiedInstance

__all__ = ["export_benchopt"]

#: the generated objective's docstring (plain text: written into the code as a Python literal, repr())
_OBJECTIVE_DOC = """{title}

Exported by drflmodel (drflmodel.instances.export_benchopt). The objective is
{formula}
with f_i the mean {loss} loss of client i plus l2/2 ||theta||^2, theta class-major
(theta[k*d + j] = W[j, k]). Its optimum is certified by drflmodel: value in
[{lower!r}, {upper!r}] (certified.json); ``suboptimality`` is measured against the lower bound.
Source of the instance: {source}
"""

_OBJECTIVE = '''{doc}

import json
from pathlib import Path

import numpy as np
from benchopt import BaseObjective

CERTIFIED = json.loads((Path(__file__).resolve().parent / "certified.json").read_text())


def client_losses(theta, X, y, client, n_clients, n_classes, l2):
    """f_i(theta) for every client: the mean loss of its rows plus l2/2 ||theta||^2."""
    theta = np.asarray(theta, float)
    d = X.shape[1]
    if n_classes > 2:
        scores = X @ theta.reshape(n_classes, d).T
        top = scores.max(axis=1)
        lse = top + np.log(np.exp(scores - top[:, None]).sum(axis=1))
        per_row = lse - scores[np.arange(len(y)), y.astype(int)]
    else:
        per_row = np.logaddexp(0.0, -y * (X @ theta))
    sums = np.bincount(client, weights=per_row, minlength=n_clients)
    counts = np.bincount(client, minlength=n_clients)
    return sums / counts + 0.5 * l2 * float(theta @ theta)


def value(theta, X, y, client, n_clients, n_classes, l2, family, q):
    f = client_losses(theta, X, y, client, n_clients, n_classes, l2)
    if family == "erm":
        counts = np.bincount(client, minlength=n_clients)
        return float(counts @ f / counts.sum())
    return float(np.sum(np.maximum(f, 0.0) ** (q + 1.0)) / (q + 1.0))


class Objective(BaseObjective):
    name = {name}
    min_benchopt_version = "1.5"
    requirements = ["numpy"]
    parameters = {{}}

    def set_data(self, X, y, client, n_clients, n_classes, l2, family, q):
        self.data = dict(X=X, y=y, client=client, n_clients=int(n_clients), n_classes=int(n_classes),
                         l2=float(l2), family=str(family), q=float(q))

    def get_objective(self):
        return dict(self.data)

    def evaluate_result(self, theta):
        v = value(theta, **self.data)
        return dict(value=v, suboptimality=v - CERTIFIED["lower_bound"])

    def get_one_result(self):
        return dict(theta=np.zeros(self.data["X"].shape[1] * (self.data["n_classes"]
                                                              if self.data["n_classes"] > 2 else 1)))
'''

_DATASET = '''from pathlib import Path

import numpy as np
from benchopt import BaseDataset


class Dataset(BaseDataset):
    name = {name}
    requirements = ["numpy"]
    parameters = {{}}

    def get_data(self):
        with np.load(Path(__file__).resolve().parents[1] / "data" / {npz}) as z:
            return dict(X=z["X"], y=z["y"], client=z["client"], n_clients=int(z["n_clients"]),
                        n_classes=int(z["n_classes"]), l2=float(z["l2"]), family=str(z["family"]),
                        q=float(z["q"]))
'''

_SOLVER = '''import sys
from pathlib import Path

import numpy as np
from benchopt import BaseSolver
from scipy.optimize import minimize


class Solver(BaseSolver):
    """scipy's L-BFGS-B on the objective (gradients by finite differences would be slow: the
    gradient is written out here for the softmax / logistic losses)."""

    name = "scipy-lbfgs"
    requirements = ["scipy"]
    sampling_strategy = "iteration"

    def set_objective(self, X, y, client, n_clients, n_classes, l2, family, q):
        self.args = (X, y, client, n_clients, n_classes, l2, family, q)
        self.P = X.shape[1] * (n_classes if n_classes > 2 else 1)

    def _value_and_gradient(self, theta):
        X, y, client, n, K, l2, family, q = self.args
        d = X.shape[1]
        counts = np.bincount(client, minlength=n).astype(float)
        if K > 2:
            S = X @ theta.reshape(K, d).T
            top = S.max(axis=1)
            E = np.exp(S - top[:, None])
            Z = E.sum(axis=1)
            per_row = top + np.log(Z) - S[np.arange(len(y)), y.astype(int)]
            G = E / Z[:, None]
            G[np.arange(len(y)), y.astype(int)] -= 1.0
        else:
            s = X @ theta
            per_row = np.logaddexp(0.0, -y * s)
            G = (-y / (1.0 + np.exp(y * s)))[:, None]
        f = np.bincount(client, weights=per_row, minlength=n) / counts + 0.5 * l2 * theta @ theta
        if family == "erm":
            w_client = counts / counts.sum()
            val = float(w_client @ f)
        else:
            fp = np.maximum(f, 0.0)
            w_client = fp ** q
            val = float(np.sum(fp ** (q + 1.0)) / (q + 1.0))
        row_w = (w_client / counts)[client]
        grad = ((G * row_w[:, None]).T @ X).reshape(-1) + w_client.sum() * l2 * theta
        return val, grad

    def run(self, n_iter):
        res = minimize(self._value_and_gradient, np.zeros(self.P), jac=True, method="L-BFGS-B",
                       options=dict(maxiter=max(int(n_iter), 1), gtol=0.0, ftol=0.0))
        self.theta = res.x

    def get_result(self):
        return dict(theta=self.theta)
'''


def objective_source(title: str, formula: str, loss: str, lower: float, upper: float, source: str, name: str) -> str:
    """The generated ``objective.py``: every string the instance supplies (its name, title, source)
    is written as a Python literal (``repr``), so no name can end a string and inject code."""
    doc = _OBJECTIVE_DOC.format(title=title, formula=formula, loss=loss, lower=lower, upper=upper, source=source)
    return _OBJECTIVE.format(doc=repr(doc), name=repr(str(name)))


def dataset_source(name: str) -> str:
    """The generated ``datasets/<name>.py`` (``name`` written as literals, like :func:`objective_source`)."""
    return _DATASET.format(name=repr(str(name)), npz=repr(f"{name}.npz"))


def export_benchopt(certified: CertifiedInstance, path, family: str = "erm") -> Path:
    """Write ``certified``'s instance and the certified optimum of ``family`` as a benchopt benchmark
    at ``path`` (module docstring). Returns the folder."""
    if not isinstance(certified, CertifiedInstance):
        raise InvalidParameterError(f"certified must come from drflmodel.instances.certify; got "
                                    f"{type(certified).__name__}")
    matches = [label for label in certified.results if label == family or label.startswith(f"{family}(")]
    if family == "afl":
        raise InvalidParameterError("family 'afl' cannot be exported: its objective (a maximum over client "
                                    "mixtures) is not smooth; export 'erm' or 'qffl'")
    if not matches:
        raise InvalidParameterError(f"family {family!r} was not certified for this instance; certified: "
                                    f"{sorted(certified.results)}")
    result = certified.results[matches[0]]
    inst = certified.instance
    fed = inst.train
    name = "".join(ch if ch.isalnum() else "_" for ch in inst.name).strip("_")
    root = Path(path)
    for sub in ("datasets", "solvers", "data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    X = np.vstack([c.X for c in fed.clients])
    y = np.concatenate([np.asarray(c.y, float) for c in fed.clients])
    client = np.repeat(np.arange(fed.n_clients), fed.sizes)
    n_classes = fed.n_classes if inst.loss == "multinomial" else 2
    q = result.q if result.q is not None else 1.0
    np.savez_compressed(root / "data" / f"{name}.npz", X=X, y=y, client=client, n_clients=fed.n_clients,
                        n_classes=n_classes, l2=inst.l2, family=result.family, q=q)
    (root / "certified.json").write_text(json.dumps(jsonable({
        "family": result.label, "value": result.value, "lower_bound": result.lower_bound,
        "upper_bound": result.upper_bound, "status": result.status, "certificate": result.certificate,
        "theta": result.theta, "accuracy": result.accuracy, "instance": inst.key(), "source": inst.source,
        "versions": certified.versions}), indent=1))
    formula = ("sum_i p_i f_i(theta), p_i = N_i / N" if result.family == "erm"
               else f"1/(q+1) sum_i f_i(theta)^(q+1), q = {q:g}")
    title = f"{inst.name}, {result.label}: a benchmark with a certified optimum"
    (root / "objective.py").write_text(objective_source(
        title=title, formula=formula, loss="softmax cross-entropy" if n_classes > 2 else "logistic",
        lower=result.lower_bound, upper=result.upper_bound, source=inst.source,
        name=f"{inst.name} {result.label} (certified)"))
    (root / "datasets" / f"{name}.py").write_text(dataset_source(name))
    (root / "solvers" / "scipy_lbfgs.py").write_text(_SOLVER)
    (root / "README.md").write_text(
        f"# {title}\n\nExported by `drflmodel.instances.export_benchopt`. Certified optimum "
        f"(drflmodel, {result.certificate}): value in [{result.lower_bound!r}, {result.upper_bound!r}], "
        f"status {result.status}.\n\nRun with benchopt: `benchopt run {root.name}`.\n\n"
        f"Instance: {inst.name} ({inst.source}); recipe {json.dumps(jsonable(inst.recipe))}.\n")
    return root
