r"""Certified benchmark instances: the federations FL papers compare on, seeded, with certified optima.

* generators (:mod:`drflmodel.instances.generators`), each following its published recipe:
  :func:`fedprox_synthetic` (FedProx's Synthetic(α, β) and Synthetic-IID: 30 devices, 60 features,
  10 classes, lognormal sizes; the published script is unseeded -- here seeded),
  :func:`leaf_synthetic` (LEAF's synthetic data, draw for draw: its default reproduces LEAF's
  107,553 samples, labelled as LEAF's code at HEAD, commit 54669fd; ``labels="15681b5"`` as its
  first commit) and :func:`adult_doctorate` (the agnostic-FL / q-FFL Adult protocol as the q-FFL
  code builds it: doctorate vs not, all of ``adult.data``, its 99 categorical features; or
  LIBSVM's ``a8a`` split), on the Adult copy shipped with drflmodel;
* :func:`certify` -- the certified optimum of every objective family that applies (ERM weighted by
  sample counts, agnostic FL, q-FFL) and the pooled, mean-client and worst-client accuracy there,
  cached by version outside the repository (:mod:`drflmodel.instances.certified`);
* :func:`export_benchopt` -- an instance as a benchopt benchmark whose objective knows its certified
  optimum (extra ``benchopt``).

The name is ``instances``: the repository's top-level ``benchmarks/`` folder holds timing scripts.
"""

from __future__ import annotations

from .benchopt_export import export_benchopt
from .certified import CertifiedInstance, FamilyResult, accuracies, cache_dir, certify
from .generators import (ADULT_DOCTORATE_COLUMN, FAMILIES, Instance, adult_doctorate, fedprox_synthetic,
                         leaf_synthetic)

__all__ = ["Instance", "fedprox_synthetic", "leaf_synthetic", "adult_doctorate", "ADULT_DOCTORATE_COLUMN",
           "FAMILIES", "certify", "CertifiedInstance", "FamilyResult", "accuracies", "cache_dir",
           "export_benchopt"]
