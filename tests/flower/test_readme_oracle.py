"""The README's federated-oracle and grading blocks, and the Flower tutorial's deployment block, work as
printed."""

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drflmodel.flower._net import free_port

from .conftest import assert_no_flower_processes

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _block(tag: str) -> str:
    (code,) = re.findall(rf"```{tag}\n(.*?)```", README, flags=re.S)
    return code


def test_the_federated_oracle_block_runs(capsys):
    exec(compile(_block("python oracle"), "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("optimal:") and "exchanges;" in out[1] and "Hessian" in out[1]


def test_the_grading_recipe_is_the_example_apps_file():
    """The seven lines shown are the code of examples/flower_sklearn/graded.py (which
    tests/flower/test_graded.py and test_flower_datasets.py run), line for line."""
    shown = [line for line in _block("python graded").splitlines() if line.strip()]
    code = (ROOT / "examples" / "flower_sklearn" / "graded.py").read_text()
    lines = [line for line in code.split('"""', 2)[2].splitlines() if line.strip()]
    assert shown == lines and len(shown) == 7


@pytest.mark.slow
def test_the_deployment_block_works_on_first_paste(tmp_path):
    """The bash block as printed (free ports instead of 9093/910x, the app's absolute path), run by
    bash in an empty directory: the server streams its rounds, the trace is saved and graded, and
    no process is left. Bounded by the run's end (an hour's hang guard)."""
    port, nodes = free_port(), [free_port() for _ in range(3)]
    tutorial = (ROOT / "docs" / "tutorials" / "flower.md").read_text()
    (script,) = [b for b in re.findall(r"```bash\n(.*?)```", tutorial, flags=re.S) if "flower-superlink" in b]
    script = script.replace("9093", str(port))
    script = script.replace("--port 910$i", '--port "${NODE_PORTS[$i]}"')
    script = script.replace("examples/flower_app", str(ROOT / "examples" / "flower_app"))
    script = f"set -e\nNODE_PORTS=({' '.join(map(str, nodes))})\n" + script
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=3600, start_new_session=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "[drflmodel] federated oracle: optimal" in out and "[drflmodel] round 3/3" in out, out[-4000:]
    assert (tmp_path / "scaffpd.npz").exists()
    assert re.search(r"^(PASSED|FAILED): ScaffPD vs dro", proc.stdout, flags=re.M), proc.stdout[-2000:]
    # the oracle computed across processes is the centralized one (1e-8)
    import drflmodel as dm
    from drflmodel._config import build_problem, load_config

    oracle = dm.solvers.Trace.load(tmp_path / "scaffpd.npz").info["oracle"]
    central = build_problem(load_config(ROOT / "examples" / "flower_app" / "problem.toml")).solve()
    scale = abs(central.upper_bound)
    assert oracle["status"] == "optimal"
    assert abs(oracle["lower_bound"] - central.lower_bound) <= 1e-8 * scale
    assert abs(oracle["upper_bound"] - central.upper_bound) <= 1e-8 * scale
    assert _wait_until_gone(tmp_path / ".flwr") == [], "processes of the block still running"
    with socket.socket() as s:                     # nothing listens on the SuperLink's port any more
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)       # (its closed connections may
        s.bind(("127.0.0.1", port))                                    # linger in TIME_WAIT)
        s.listen()
    assert_no_flower_processes()


def _wait_until_gone(flwr_home: Path, grace: float = 30.0) -> list[int]:
    """The processes started by the block (they carry its FLWR_HOME in their environment; killed
    ones may be reparented away from this test): wait for them to exit, return the survivors."""
    needle = f"FLWR_HOME={flwr_home}".encode()
    deadline = time.monotonic() + grace
    while True:
        alive = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if needle in (entry / "environ").read_bytes():
                        state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                        if state != "Z":
                            alive.append(int(entry.name))
                except OSError:
                    continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)
