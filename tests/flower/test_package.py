"""The optional extra: ``import drflmodel`` never imports Flower; ``drflmodel.flower`` without it
names the install command; importing it switches Flower's and Ray's network reporting off; the
command line's ``[solver] engine``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drflmodel._config import ConfigError, load_config
from drflmodel.cli import main

_BLOCK_FLWR = """
import sys
class _NoFlower:
    def find_spec(self, name, path=None, target=None):
        if name == "flwr" or name.startswith("flwr."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoFlower())
"""


def _python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLWR_", "RAY_"))}
    # the child ends by itself (an import and a print); 600 s only guards against a hang
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)


def test_import_drflmodel_does_not_import_flower():
    out = _python("import drflmodel, drflmodel.solvers, drflmodel.verification, drflmodel.cli, sys; "
                  "print(sorted({m.split('.')[0] for m in sys.modules} & {'flwr', 'ray', 'grpc'}))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_missing_flower_gives_the_install_command():
    out = _python(_BLOCK_FLWR + """
import drflmodel, drflmodel.solvers          # the rest of the package works without Flower
try:
    import drflmodel.flower
except ImportError as exc:
    print("ERROR:", exc)
""")
    assert out.returncode == 0, out.stderr
    root = Path(__file__).resolve().parents[2]          # drflmodel runs from this clone: the clone's command
    hint = (f'pip install -e ".[flower]" (in {root}, the clone drflmodel runs from)'
            if (root / "pyproject.toml").is_file() and (root / "drflmodel").is_dir() else 'pip install "drflmodel[flower]"')
    assert f"ERROR: drflmodel.flower needs Flower (flwr), which is not installed: {hint}" in out.stdout


def test_importing_drflmodel_flower_switches_network_reporting_off():
    out = _python("import os, drflmodel.flower, flwr.supercore.telemetry as t; "
                  "print(os.environ['FLWR_TELEMETRY_ENABLED'], os.environ['RAY_USAGE_STATS_ENABLED'], "
                  "os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'], t.FLWR_TELEMETRY_ENABLED)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "0", "0", "0"]
    # Flower imported first (telemetry read as on): importing drflmodel.flower still turns it off
    out = _python("import flwr.supercore.telemetry as t; before = t.FLWR_TELEMETRY_ENABLED; "
                  "import drflmodel.flower; print(before, t.FLWR_TELEMETRY_ENABLED)")
    assert out.stdout.split() == ["1", "0"], out.stderr


CONFIG = """
[data]
source = "synthetic_regression"
options = { n_clients = 3, dim = 4, samples = 30, seed = 0 }

[loss]
name = "squared"

[problem]
family = "dro"
options = { l2 = 0.1 }
weights = { name = "chi_square", rho = 0.1 }

[solver]
name = "ScaffPD"
options = { rounds = 40, local_steps = 3 }
seed = 2
tol = 10.0
"""


def _verify(tmp_path, engine_line):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG + engine_line)
    out = tmp_path / "report.json"
    code = main(["verify", str(cfg), "--out", str(out)])
    return code, json.loads(out.read_text())


def test_cli_engine_flower_inprocess_equals_the_simulator(tmp_path):
    code_s, sim = _verify(tmp_path, "")
    code_f, flw = _verify(tmp_path, 'engine = "flower-inprocess"\n')
    assert code_s == code_f == 0
    assert sim["engine"] == "simulator" and flw["engine"] == "flower-inprocess"
    rows_s, rows_f = sim["report"]["rows"], flw["report"]["rows"]
    assert len(rows_s) == len(rows_f) == 41
    assert max(abs(a["dist_theta"] - b["dist_theta"]) for a, b in zip(rows_s, rows_f)) <= 1e-10


@pytest.mark.slow
def test_cli_engine_flower_runs_on_flowers_simulation_engine(tmp_path):
    _, sim = _verify(tmp_path, "")
    code, flw = _verify(tmp_path, 'engine = "flower"\n')
    assert code == 0 and flw["engine"] == "flower"
    assert max(abs(a["dist_theta"] - b["dist_theta"])
               for a, b in zip(sim["report"]["rows"], flw["report"]["rows"])) <= 1e-10


def test_cli_engine_is_validated(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG + 'engine = "grpc"\n')
    with pytest.raises(ConfigError, match="'solver.engine' must be one of simulator, flower, flower-inprocess; got 'grpc'"):
        load_config(cfg, need_solver=True)
    cfg.write_text(CONFIG.replace('name = "ScaffPD"', 'name = "ADLPMM"').replace("options = { rounds = 40, local_steps = 3 }",
                                                                               "options = { rounds = 3 }")
                   + 'engine = "flower-inprocess"\n')
    assert main(["verify", str(cfg)]) == 2          # one-line error: ADLPMM is not ported to Flower
