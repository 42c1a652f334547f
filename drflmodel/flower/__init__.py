"""drflmodel's distributed algorithms on Flower, and oracle verification of any Flower run.
Optional: ``pip install "drflmodel[flower]"``.

Two jobs:

**Our algorithms as Flower apps.** :class:`FlowerRun` turns a problem and a simulator solver
(``ScaffPD``, ``ScaffPDIA``, ``RFedFair``, ``DRFA``, ``StochasticAFL``, ``FedAvg``, ``FedProx``,
``Scaffold``, ``QFedAvg``; scalar-score or multi-class problems) into a Flower ``ServerApp`` and
``ClientApp`` that run the same algorithm over Flower's Message API and return the same
:class:`~drflmodel.solvers.Trace` as the simulator -- the same iterates to round-off from the same
seed, and the same message and float counts. The vertical ``FairVFL`` and ``FedBCD`` run with one
supernode per party (:mod:`drflmodel.flower.vertical`)::

    import drflmodel as dm
    from drflmodel import flower as dmf

    run   = dmf.FlowerRun(prob, dm.solvers.ScaffPD(rounds=50), seed=0)
    trace = run.run(engine="ray")          # Flower's simulation engine; or "inprocess"
    dm.verify(trace, prob.solve(gap_tol=1e-10))   # a reference closer than the tolerance verified

The server keeps the server state (λ, schedules, the global control variate) in the
``ServerApp``; each client keeps its own state (control variate, random generator) in its
``Context.state`` and computes only on its own partition (``node_config["partition-id"]``)
through ``problem.client_view(i)`` (:mod:`drflmodel.flower.client`).

**Any Flower run graded by the oracle.** :class:`Recorder` is an ``evaluate_fn`` for any Flower
strategy (``FedAvg``, ``FedProx``, ``QFedAvg``, ``FedAdam``, yours): it records the global model
every round, the clients that took part, and gives a ``Trace`` that :func:`drflmodel.verify`
grades against a certified :class:`~drflmodel.solution.Solution` (:mod:`drflmodel.flower.recorder`).

Engines (:mod:`drflmodel.flower.engine`): ``"inprocess"`` -- a synchronous in-process
:class:`LocalGrid` that calls the ``ClientApp`` directly (milliseconds per round; for tests and
sweeps); ``"ray"`` -- Flower's own simulation engine; and the real deployment
(``flower-superlink``, ``flower-supernode``, ``flwr run``; see ``examples/flower_app``).

Network hygiene: importing this package sets ``FLWR_TELEMETRY_ENABLED=0``,
``RAY_USAGE_STATS_ENABLED=0`` and ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (the last keeps every
Ray listener on 127.0.0.1) before Flower or Ray is imported: drflmodel sends nothing beyond the
machine. This is the one piece of logic run at import time, because Flower reads its telemetry
switch when it is first imported.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ._hygiene import network_hygiene


def _install_hint(extra: str = "flower") -> str:
    """The command that installs drflmodel's ``extra``: from a clone of the repository (drflmodel
    imported from a source tree with its ``pyproject.toml``), ``pip install -e ".[extra]"`` in that
    folder; otherwise ``pip install "drflmodel[extra]"`` (from PyPI)."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "drflmodel" / "__init__.py").is_file():
        return f'pip install -e ".[{extra}]" (in {root}, the clone drflmodel runs from)'
    return f'pip install "drflmodel[{extra}]"'


network_hygiene()          # before Flower is imported: it reads its telemetry switch at import

try:
    import flwr  # noqa: F401
except ImportError as exc:  # exercised in a subprocess test (tests/flower/test_package.py)
    raise ImportError(
        f"drflmodel.flower needs Flower (flwr), which is not installed: {_install_hint('flower')}") from exc

_LAZY = {
    "FlowerRun": ("drflmodel.flower.engine", "FlowerRun"),
    "run": ("drflmodel.flower.engine", "run"),
    "run_many": ("drflmodel.flower.engine", "run_many"),
    "simulate": ("drflmodel.flower.engine", "simulate"),
    "compare_traces": ("drflmodel.flower.engine", "compare_traces"),
    "LocalDeployment": ("drflmodel.flower.deploy", "LocalDeployment"),
    # a deployment locked with Flower's own TLS and SuperNode authentication
    "TLSFiles": ("drflmodel.flower.credentials", "TLSFiles"),
    "loopback_certificates": ("drflmodel.flower.credentials", "loopback_certificates"),
    "supernode_key_pair": ("drflmodel.flower.credentials", "supernode_key_pair"),
    "run_app": ("drflmodel.flower.deploy", "run_app"),
    "LocalGrid": ("drflmodel.flower.grid", "LocalGrid"),
    "client_app": ("drflmodel.flower.client", "client_app"),
    "strategy_client_app": ("drflmodel.flower.client", "strategy_client_app"),
    "server_app": ("drflmodel.flower.server", "server_app"),
    "run_on_grid": ("drflmodel.flower.server", "run_on_grid"),
    "PORTED": ("drflmodel.flower.algorithms", "PORTED"),
    "Recorder": ("drflmodel.flower.recorder", "Recorder"),
    "grade": ("drflmodel.flower.recorder", "grade"),
    # the certified oracle computed on Flower from the clients' answers
    "certified_solve": ("drflmodel.flower.oracle", "certified_solve"),
    "solve_on_grid": ("drflmodel.flower.oracle", "solve_on_grid"),
    "oracle_server_app": ("drflmodel.flower.oracle", "oracle_server_app"),
    "oracle_client_app": ("drflmodel.flower.oracle", "oracle_client_app"),
    "with_oracle": ("drflmodel.flower.oracle", "with_oracle"),
    "FlowerChannel": ("drflmodel.flower.oracle", "FlowerChannel"),
    # any Flower app graded without editing it
    "graded": ("drflmodel.flower.app_grading", "graded"),
    "answering": ("drflmodel.flower.app_grading", "answering"),
    # the rows a Flower app loads with Flower Datasets, for the oracle
    "FlowerDatasets": ("drflmodel.flower.partitions", "FlowerDatasets"),
}
__all__ = sorted([*_LAZY, "network_hygiene"])


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'drflmodel.flower' has no attribute {name!r}")


def __dir__():
    return __all__
