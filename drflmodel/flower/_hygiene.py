"""Keep every Flower and Ray process of a drflmodel run on the machine (notes/flower-1.41.md).

* ``FLWR_TELEMETRY_ENABLED=0`` -- Flower reports usage events over the network by default; it
  reads the switch when ``flwr.supercore.telemetry`` is first imported, so the variable is set
  before that, and the module's copy is switched off if Flower was imported earlier.
* ``RAY_USAGE_STATS_ENABLED=0`` -- Ray's usage reporting.
* ``HF_HUB_DISABLE_TELEMETRY=1`` -- Hugging Face's usage reporting (Flower Datasets loads data
  through Hugging Face ``datasets``); Flower Datasets' own telemetry reads ``FLWR_TELEMETRY_ENABLED``
  like Flower, and its module's copy is switched off too when it was imported earlier.
* ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` -- with it, every Ray listener (GCS, raylet, workers)
  binds 127.0.0.1 only; without it Ray listens on the machine's network address and on wildcard
  addresses, and ``init_args={"_node_ip_address": "127.0.0.1"}`` does not change that (checked on
  Ray 2.55 by listing the listening sockets during a run; ``tests/flower`` checks it every run).

Child processes (Ray workers, ``flower-superlink``, ``flower-supernode``) inherit the environment.
"""

from __future__ import annotations

import os
import sys

__all__ = ["HYGIENE_ENV", "network_hygiene"]

#: the environment every Flower/Ray process started by drflmodel runs with
HYGIENE_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


def network_hygiene(environ=None) -> dict:
    """Set :data:`HYGIENE_ENV` in ``environ`` (default ``os.environ``) and return it.

    If Flower's telemetry module was already imported with telemetry on, its module-level
    switch is turned off too (Flower 1.41 reads ``FLWR_TELEMETRY_ENABLED`` once, at import).
    """
    env = os.environ if environ is None else environ
    env.update(HYGIENE_ENV)
    for name in ("flwr.supercore.telemetry", "flwr_datasets.common.telemetry"):
        telemetry = sys.modules.get(name)
        if environ is None and telemetry is not None:
            telemetry.FLWR_TELEMETRY_ENABLED = "0"
    return env
