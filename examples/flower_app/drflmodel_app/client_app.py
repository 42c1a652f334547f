"""The ClientApp: client i (node_config partition-id) computes on its own partition only."""

from pathlib import Path

from drflmodel.flower.deploy import config_client_app

app = config_client_app(Path(__file__).resolve().parent.parent)
