r"""Seeded generators of the benchmark federations people compare on, following their published recipes.

* :func:`fedprox_synthetic` -- **Synthetic(α, β)** of Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith,
  "Federated optimization in heterogeneous networks" (MLSys 2020, Section 5.1 and the generator
  ``data/synthetic_*/generate_synthetic.py`` of their repository): 30 devices, 60 features,
  10 classes, :math:`N_k=\lfloor\mathrm{LogNormal}(4,2)\rfloor+50` samples; device :math:`k` draws
  :math:`u_k\sim N(0,\alpha^2)`, :math:`B_k\sim N(0,\beta^2)`, :math:`W_k\sim N(u_k,1)^{60\times10}`,
  :math:`b_k\sim N(u_k,1)^{10}`, :math:`v_k\sim N(B_k,1)^{60}`, :math:`x\sim N(v_k,\Sigma)` with
  :math:`\Sigma=\mathrm{diag}(j^{-1.2})`, :math:`y=\arg\max(W_k^\top x+b_k)`; ``iid=True`` is their
  Synthetic-IID (one :math:`W, b\sim N(0,1)`, :math:`v_k=0`). The published script is unseeded
  (``numpy.random`` without a seed), so the published instances cannot be reproduced; here the
  draws are made **in the script's order from** ``numpy.random.RandomState(seed)`` -- running the
  published script after ``numpy.random.seed(seed)`` gives the same arrays.
* :func:`leaf_synthetic` -- LEAF's synthetic data set (Caldas, Duddu, Wu, Li, Konečný, McMahan,
  Smith & Talwalkar, "LEAF: A benchmark for federated settings", 2018; ``data/synthetic/main.py``
  and ``data_generator.py`` of the LEAF repository): :math:`N_k=\min(\lfloor\mathrm{LogNormal}(3,2)
  \rfloor+5,1000)`; a shared :math:`Q\sim N(0,1)^{(d+1)\times K\times C}`, cluster means, per task
  :math:`B\sim N(0,1)`, :math:`v\sim N(B,1)^d`, :math:`x\sim N(v,\Sigma)` with a leading 1,
  :math:`w=Q\,m` with :math:`m\sim N(\text{cluster mean},0.1^2)`, and
  :math:`y=\arg\max_k\mathrm{softmax}(xw+N(0,0.1^2))`. LEAF's script **is** seeded (default
  931231) and the draws here follow it exactly, so ``leaf_synthetic()`` (1000 tasks, 5 classes, 60
  features, seed 931231, the README's command) reproduces LEAF's data: 107,553 samples, 107.55 per
  device on average (standard deviation 213.22), LEAF paper Table 1. The labels follow LEAF's code
  at HEAD by default (``labels="54669fd"``: commit 54669fd, "fixes softmax bug", 2019:
  ``scipy.special.softmax(..., axis=1)``, a softmax over each row's classes, so
  :math:`y_j=\arg\max_ks_{jk}`); ``labels="15681b5"`` gives the labels of LEAF's first commit
  15681b5, whose softmax divided by ``sum(np.exp(x))`` over the **samples** of a task (a column
  sum), :math:`y_j=\arg\max_k(s_{jk}-\log\sum_{j'}e^{s_{j'k}})`: on the default instance 77,844
  of the 107,553 labels (72.4%) differ between the two. X and the sizes are the same in both.
* :func:`adult_doctorate` -- the Adult protocol of agnostic federated learning (Mohri, Sivek &
  Suresh, "Agnostic federated learning", ICML 2019) and of q-FFL (Li, Sanjabi, Beirami & Smith,
  "Fair resource allocation in federated learning", ICLR 2020): two clients, **doctorate** and
  **non-doctorate**. ``protocol="qffl"`` (default) builds it as the q-FFL code does
  (``data/adult/create_dataset.py`` of ``litian96/fair_flearn``, which says it follows the AFL
  paper): training on **every** row of UCI's ``adult.data`` (32,561 rows, 413 doctorates) with
  only the **99 one-hot categorical features** (workclass, education, marital status, occupation,
  relationship, race, sex, native country; a missing value is an all-zero block; the continuous
  attributes are dropped), labels +1 = income > 50K. The rows and columns come from the Adult copy
  shipped with drflmodel (LIBSVM's ``a8a`` and ``a8a.t`` together are ``adult.data``; their
  categorical columns are the same one-hot blocks in another column order, which does not change
  the objective). Their held-out rows are UCI's ``adult.test``, which drflmodel does not ship:
  ``test`` is ``None``. ``protocol="a8a"`` is LIBSVM's split instead -- train on ``a8a`` (22,696
  rows, 300 doctorates), hold out ``a8a.t`` (9,865 rows, 113), all 123 binary features (the
  continuous attributes quantized) -- a different data set from the papers'. Education column 32 of
  ``a8a`` is Doctorate (:data:`ADULT_DOCTORATE_COLUMN`).

Each returns an :class:`Instance`: the training federation, a held-out federation (the recipe's
split), the model (loss, ridge) and the objective families that apply, with a stable ``key`` for
the cache of certified results (:mod:`drflmodel.instances.certified`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_choice, check_int, check_real
from ..data import Federation
from ..errors import InvalidParameterError

__all__ = ["Instance", "fedprox_synthetic", "leaf_synthetic", "adult_doctorate", "ADULT_DOCTORATE_COLUMN",
           "ADULT_PROTOCOLS", "LEAF_LABELS", "FAMILIES"]

#: the 1-based a8a column of education = Doctorate (UCI Adult): 413 of the 32,561 rows of a8a + a8a.t,
#: the UCI count, all in the highest education-num bin, 74.1% with income > 50K (checked in the tests)
ADULT_DOCTORATE_COLUMN = 32

#: the Adult protocols of :func:`adult_doctorate` (``protocol=``)
ADULT_PROTOCOLS = {"qffl": "the q-FFL code's: all of adult.data, the 99 one-hot categorical features",
                   "a8a": "LIBSVM's: train a8a, hold out a8a.t, all 123 binary features"}
#: the categorical attributes the q-FFL code one-hot encodes (its continuous ones are dropped)
_ADULT_CATEGORICAL = ("workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
                      "native-country")

#: the LEAF commits whose synthetic labels :func:`leaf_synthetic` reproduces (``labels=``)
LEAF_LABELS = {"54669fd": "LEAF at HEAD ('fixes softmax bug', 2019): a softmax over each row's classes",
               "15681b5": "LEAF's first commit: exp(s) divided by its sum over a task's samples"}

#: the objective families a certified instance may carry: ERM weighted by sample counts (FedAvg's and
#: FedProx's objective), agnostic FL (the worst mixture of clients, Simplex) and q-FFL
FAMILIES = ("erm", "afl", "qffl")


@dataclass
class Instance:
    """A benchmark federation and the model trained on it.

    Attributes
    ----------
    name : e.g. ``"fedprox_synthetic(1, 1)"``.
    recipe : the generator's arguments (seed included): with the package version, the cache key.
    train, test : the training and held-out :class:`~drflmodel.data.Federation` (same clients).
    loss : ``"multinomial"`` or ``"logistic"``.
    l2 : the ridge weight of the model (on every coefficient, intercept included).
    families : the objective families certified by default (:data:`FAMILIES`, ``"qffl"`` with its q).
    source : the recipe's publication.
    """

    name: str
    recipe: dict
    train: Federation
    test: Federation | None
    loss: str
    l2: float
    families: tuple
    source: str
    notes: list = field(default_factory=list)

    def loss_object(self):
        from .. import losses

        return losses.Multinomial() if self.loss == "multinomial" else losses.Logistic()

    def weight_set(self, family: str, q: float = 1.0):
        """The client-weight set of a family: ERM ``HCVaR(p, 1)`` with :math:`p_i=N_i/N`; AFL
        ``Simplex(n)``; q-FFL ``QFFL(n, q)``."""
        from .. import sets

        n = self.train.n_clients
        if family == "erm":
            return sets.HCVaR(self.train.proportions, 1.0)
        if family == "afl":
            return sets.Simplex(n)
        if family == "qffl":
            return sets.QFFL(n, check_real(q, "q", low=0.0, low_open=True))
        raise InvalidParameterError(f"family must be one of {FAMILIES}; got {family!r}")

    def problem(self, family: str = "erm", q: float = 1.0):
        """The :class:`~drflmodel.problems.dro.FederatedDRO` of ``family`` on the training federation."""
        from ..problems import FederatedDRO

        return FederatedDRO(self.train, self.loss_object(), weights=self.weight_set(family, q), l2=self.l2)

    def key(self) -> dict:
        return {"name": self.name, "recipe": self.recipe, "loss": self.loss, "l2": self.l2}

    def statistics(self) -> dict:
        """Devices, samples, and samples per device (mean, standard deviation as LEAF reports it:
        the population one), of the training and held-out rows together."""
        sizes = self.train.sizes + (self.test.sizes if self.test is not None else 0)
        return {"devices": int(sizes.size), "samples": int(sizes.sum()), "mean": float(sizes.mean()),
                "std": float(sizes.std())}


def _split(rng, Xs, ys, train_fraction):
    """Per client: a seeded permutation, the first ``int(train_fraction * N_i)`` rows for training
    (the published recipes' 90/10 split, which they shuffle unseeded)."""
    tr_X, tr_y, te_X, te_y = [], [], [], []
    for X, y in zip(Xs, ys):
        perm = rng.permutation(len(y))
        k = int(train_fraction * len(y))
        tr_X.append(X[perm[:k]]), tr_y.append(y[perm[:k]])
        te_X.append(X[perm[k:]]), te_y.append(y[perm[k:]])
    return tr_X, tr_y, te_X, te_y


def _with_intercept(X):
    return np.hstack([np.ones((X.shape[0], 1)), X])


def _federations(Xs, ys, names, n_classes, train_fraction, seed):
    absent = sorted(set(range(n_classes)) - set(np.concatenate(ys).tolist()))
    if absent:
        raise InvalidParameterError(
            f"with seed={seed} the recipe labels no row with class(es) {absent} of n_classes={n_classes}; "
            "a softmax model needs every class: choose another seed, fewer classes or more rows")
    Xs = [_with_intercept(X) for X in Xs]
    classes = list(range(n_classes))
    if train_fraction >= 1.0:
        return Federation.from_arrays(Xs, ys, names=names, task="multiclass", classes=classes), None
    tr_X, tr_y, te_X, te_y = _split(np.random.default_rng(seed), Xs, ys, train_fraction)
    keep = [i for i, y in enumerate(tr_y) if len(y) > 0]
    if len(keep) < len(Xs):
        raise InvalidParameterError(f"train_fraction={train_fraction} leaves client(s) "
                                    f"{[i for i in range(len(Xs)) if i not in keep]} without training rows")
    train = Federation.from_arrays(tr_X, tr_y, names=names, task="multiclass", classes=classes)
    has_test = all(len(y) > 0 for y in te_y)
    test = Federation.from_arrays(te_X, te_y, names=names, task="multiclass", classes=classes) if has_test else None
    return train, test


def _check_fraction(train_fraction):
    return check_real(train_fraction, "train_fraction", low=0.0, high=1.0, low_open=True)


def fedprox_synthetic(alpha: float = 1.0, beta: float = 1.0, iid: bool = False, seed: int = 0,
                      n_devices: int = 30, dim: int = 60, n_classes: int = 10, train_fraction: float = 0.9,
                      l2: float = 1e-3) -> Instance:
    r"""FedProx's Synthetic(α, β) / Synthetic-IID, seeded (module docstring).

    ``alpha`` and ``beta`` are the standard deviations of the published code (``np.random.normal(0,
    alpha)``). The model is multinomial logistic regression with an intercept (the recipe's
    :math:`Wx+b`) and a small ridge ``l2`` on every coefficient (ours: it makes the optimum unique
    and certifiable; the paper trains without one). ``train_fraction`` of each device's rows (a seeded
    permutation) are training rows, the rest held out (the published 90/10).
    """
    alpha = check_real(alpha, "alpha", low=0.0)
    beta = check_real(beta, "beta", low=0.0)
    if not isinstance(iid, (bool, np.bool_)):
        raise InvalidParameterError(f"iid must be True or False; got {iid!r}")
    seed = check_int(seed, "seed", low=0, high=2 ** 32 - 1)
    n_devices = check_int(n_devices, "n_devices", low=1)
    dim = check_int(dim, "dim", low=1)
    n_classes = check_int(n_classes, "n_classes", low=2)
    train_fraction = _check_fraction(train_fraction)
    l2 = check_real(l2, "l2", low=0.0)
    rs = np.random.RandomState(seed)
    sizes = rs.lognormal(4, 2, n_devices).astype(int) + 50
    cov = np.diag(np.power(np.arange(1, dim + 1, dtype=float), -1.2))
    Xs, ys = [], []
    if iid:
        W = rs.normal(0, 1, (dim, n_classes))
        b = rs.normal(0, 1, n_classes)
        for k in range(n_devices):
            X = rs.multivariate_normal(np.zeros(dim), cov, sizes[k])
            Xs.append(X), ys.append(np.argmax(X @ W + b, axis=1))
    else:
        mean_W = rs.normal(0, alpha, n_devices)
        B = rs.normal(0, beta, n_devices)
        mean_x = np.array([rs.normal(B[k], 1, dim) for k in range(n_devices)])
        for k in range(n_devices):
            W = rs.normal(mean_W[k], 1, (dim, n_classes))
            b = rs.normal(mean_W[k], 1, n_classes)
            X = rs.multivariate_normal(mean_x[k], cov, sizes[k])
            Xs.append(X), ys.append(np.argmax(X @ W + b, axis=1))
    names = [f"f_{k:05d}" for k in range(n_devices)]
    train, test = _federations(Xs, ys, names, n_classes, train_fraction, seed)
    recipe = {"alpha": alpha, "beta": beta, "iid": bool(iid), "seed": seed, "n_devices": n_devices, "dim": dim,
              "n_classes": n_classes, "train_fraction": train_fraction}
    name = "fedprox_synthetic_iid" if iid else f"fedprox_synthetic({alpha:g}, {beta:g})"
    return Instance(name=name, recipe=recipe, train=train, test=test, loss="multinomial", l2=l2,
                    families=("erm", "afl", ("qffl", 1.0)),
                    source="Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, \"Federated optimization in "
                           "heterogeneous networks\" (MLSys 2020), Section 5.1 and its generate_synthetic.py",
                    notes=["ridge l2 on every coefficient added (the paper trains without one)",
                           "train/test split by a seeded permutation (the script shuffles unseeded)"])


def leaf_synthetic(n_tasks: int = 1000, n_classes: int = 5, dim: int = 60, seed: int = 931231,
                   prob_clusters=(1.0,), train_fraction: float = 0.9, l2: float = 1e-3,
                   labels: str = "54669fd") -> Instance:
    r"""LEAF's synthetic data, draw for draw (module docstring). Defaults: the LEAF README's command
    (``-num-tasks 1000 -num-classes 5 -num-dim 60``, seed 931231, one cluster); ``train_fraction``
    of each task's rows for training (LEAF's ``--tf`` default 0.9, a seeded permutation here);
    ``labels`` the LEAF commit whose softmax labels the rows: ``"54669fd"`` (LEAF at HEAD, a softmax
    over each row) or ``"15681b5"`` (LEAF's first commit, normalized over a task's samples)."""
    labels = check_choice(labels, "labels", tuple(LEAF_LABELS))
    n_tasks = check_int(n_tasks, "n_tasks", low=1)
    n_classes = check_int(n_classes, "n_classes", low=2)
    dim = check_int(dim, "dim", low=1)
    seed = check_int(seed, "seed", low=0, high=2 ** 32 - 1)
    probs = np.asarray(prob_clusters, float)
    if probs.ndim != 1 or probs.size < 1 or np.any(probs < 0) or abs(probs.sum() - 1.0) > 1e-12:
        raise InvalidParameterError(f"prob_clusters must be a probability vector; got {prob_clusters!r}")
    train_fraction = _check_fraction(train_fraction)
    l2 = check_real(l2, "l2", low=0.0)
    from scipy.special import softmax

    rs = np.random.RandomState(seed)                        # main.py: np.random.seed(seed)
    sizes = [min(s + 5, 1000) for s in rs.lognormal(3, 2, n_tasks).astype(int)]
    rs = np.random.RandomState(seed)                        # SyntheticDataset.__init__ seeds again
    C = probs.size
    Q = rs.normal(loc=0.0, scale=1.0, size=(dim + 1, n_classes, C))
    Sigma = np.diag(np.power(np.arange(1, dim + 1, dtype=float), -1.2))
    means = []
    for _ in range(C):
        loc = rs.normal(loc=0, scale=1.0, size=None)
        means.append(rs.normal(loc=loc, scale=1.0, size=C))
    Xs, ys = [], []
    for n in sizes:
        cluster = rs.choice(range(C), size=None, replace=True, p=probs)
        B = rs.normal(loc=0.0, scale=1.0, size=None)
        loc = rs.normal(loc=B, scale=1.0, size=dim)
        X = np.ones((n, dim + 1))
        X[:, 1:] = rs.multivariate_normal(mean=loc, cov=Sigma, size=n)
        info = rs.normal(loc=means[cluster], scale=0.1, size=means[cluster].shape)
        w = np.matmul(Q, info)
        scores = np.matmul(X, w) + rs.normal(loc=0.0, scale=0.1, size=(n, n_classes))
        if labels == "54669fd":
            prob = softmax(scores, axis=1)                  # LEAF at HEAD: over each row's classes
        else:
            e = np.exp(scores)
            prob = e / np.cumsum(e, axis=0)[-1]             # LEAF's first commit: Python's sum over samples
        Xs.append(X[:, 1:]), ys.append(np.argmax(prob, axis=1))
    names = [str(k) for k in range(n_tasks)]
    train, test = _federations(Xs, ys, names, n_classes, train_fraction, seed)
    recipe = {"n_tasks": n_tasks, "n_classes": n_classes, "dim": dim, "seed": seed,
              "prob_clusters": probs.tolist(), "train_fraction": train_fraction, "labels": labels}
    return Instance(name="leaf_synthetic", recipe=recipe, train=train, test=test, loss="multinomial", l2=l2,
                    families=("erm", ("qffl", 1.0)),
                    source="Caldas, Duddu, Wu, Li, Konečný, McMahan, Smith & Talwalkar, \"LEAF: A benchmark for "
                           "federated settings\" (2018), Table 1 and data/synthetic of its repository",
                    notes=[f"labels as LEAF's commit {labels} computes them: {LEAF_LABELS[labels]}",
                           "ridge l2 on every coefficient added", "train/test split by a seeded permutation"])


def adult_doctorate(l2: float = 1e-3, protocol: str = "qffl") -> Instance:
    """The Adult doctorate / non-doctorate protocol (module docstring): ``protocol="qffl"`` as the
    q-FFL code builds it (all 32,561 rows of ``adult.data``, the 99 one-hot categorical features and
    an intercept; no held-out rows shipped), ``"a8a"`` LIBSVM's split (train ``a8a``, hold out
    ``a8a.t``, 123 binary features and an intercept). Labels +1 = income > 50K, logistic regression
    with ridge ``l2`` (ours: the q-FFL code's ``l2_regularizer`` is not added to its loss)."""
    from ..datasets import ADULT_ATTRIBUTES, adult_arrays

    l2 = check_real(l2, "l2", low=0.0)
    protocol = check_choice(protocol, "protocol", tuple(ADULT_PROTOCOLS))
    if protocol == "qffl":
        columns = np.concatenate([np.arange(a - 1, b) for name, a, b in ADULT_ATTRIBUTES
                                  if name in _ADULT_CATEGORICAL])
    else:
        columns = np.arange(123)

    def split(parts):
        X = np.vstack([adult_arrays(part)[0] for part in parts])
        y = np.concatenate([adult_arrays(part)[1] for part in parts])
        doc = X[:, ADULT_DOCTORATE_COLUMN - 1] == 1
        Xf = _with_intercept(X[:, columns].astype(float))
        return Federation.from_arrays([Xf[doc], Xf[~doc]], [y[doc].copy(), y[~doc].copy()],
                                      names=["doctorate", "non-doctorate"], task="classification")

    if protocol == "qffl":
        train, test = split(["train", "test"]), None
        recipe = {"data": "a8a+a8a.t (adult.data)", "features": "99 categorical one-hot",
                  "column": ADULT_DOCTORATE_COLUMN, "protocol": protocol}
        notes = ["the q-FFL code's rows and features (data/adult/create_dataset.py of litian96/fair_flearn); "
                 "its held-out rows (UCI adult.test) are not shipped: test is None",
                 "logistic loss on labels -1/+1 (the code's two-output softmax has the same optimum "
                 "predictions); ridge l2 on every coefficient (ours)"]
    else:
        train, test = split(["train"]), split(["test"])
        recipe = {"data": "a8a/a8a.t", "column": ADULT_DOCTORATE_COLUMN, "protocol": protocol}
        notes = ["LIBSVM's a8a / a8a.t split and its 123 binary features: not the papers' split",
                 "ridge l2 on every coefficient (ours)"]
    return Instance(name="adult_doctorate", recipe=recipe, train=train, test=test, loss="logistic", l2=l2,
                    families=("erm", "afl", ("qffl", 1.0)),
                    source="Mohri, Sivek & Suresh, \"Agnostic federated learning\" (ICML 2019), the Adult "
                           "experiment; Li, Sanjabi, Beirami & Smith, \"Fair resource allocation in federated "
                           "learning\" (ICLR 2020), data/adult/create_dataset.py of its code",
                    notes=notes)
