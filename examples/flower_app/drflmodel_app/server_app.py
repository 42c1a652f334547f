"""The ServerApp: runs the [solver] of the drflmodel configuration (run config problem-config)."""

from pathlib import Path

from drflmodel.flower.deploy import config_server_app

app = config_server_app(Path(__file__).resolve().parent.parent)
