"""examples/fedprox_bugs.py: Flower's FedProx strategy with the correct client and the three shipped
client bugs. The verdict passes the correct client and fails each bug; where each run ends is checked
independently against the repo's simulators (FedProx for the correct client, FedAvg for the two bugs
that drop the proximal term), and the unsquared term lands on neither point."""

import importlib.util
import io
import sys
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm

pytest.importorskip("flwr")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fedprox_bugs.py"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("_example_fedprox_bugs", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp("fedprox_bugs")
    buf = io.StringIO()
    with warnings.catch_warnings(), redirect_stdout(buf):
        warnings.simplefilter("ignore")
        res = mod.main(quick=True, out=out)
    res["png"] = out / "fedprox_bugs.png"
    return mod, res, buf.getvalue()


def test_the_correct_client_passes_and_every_bug_fails(result):
    mod, res, out = result
    rows = res["rows"]
    assert rows["correct"]["passed"] and rows["correct"]["verdict"] == "landed"
    for bug in ("term zero (Flower #1654)", "unsquared (Flower #2210)", "mu ignored (OpenFL #1634)"):
        assert rows[bug]["verdict"] == "elsewhere" and not rows[bug]["passed"], bug
        assert rows[bug]["evidence"] == "proved", bug
        assert "not the strategy it claims to be" in rows[bug]["text"]
    assert rows["correct, lr not sent"]["verdict"] == "incomplete"
    assert rows["correct, lr not sent"]["missing"] == ["local_steps", "step_size"]
    for name, row in rows.items():
        assert name in out and row["verdict"] in out


def test_where_each_run_ends_agrees_with_the_simulators(result):
    mod, res, _ = result
    prob, rows, R, lr = res["problem"], res["rows"], res["rounds"], res["lr"]
    fedprox = dm.solvers.FedProx(rounds=R, mu=mod.MU, local_steps=mod.LOCAL_STEPS, step_size=lr).run(prob)
    fedavg = dm.solvers.FedAvg(rounds=R, local_steps=mod.LOCAL_STEPS, step_size=lr).run(prob)
    assert np.allclose(rows["correct"]["theta"], fedprox.theta[-1], atol=1e-12)
    for bug in ("term zero (Flower #1654)", "mu ignored (OpenFL #1634)"):
        assert np.allclose(rows[bug]["theta"], fedavg.theta[-1], atol=1e-12)
        assert rows[bug]["matches"].startswith("FedAvg's fixed point")
    unsq = rows["unsquared (Flower #2210)"]["theta"]
    assert min(np.linalg.norm(unsq - fedprox.theta[-1]), np.linalg.norm(unsq - fedavg.theta[-1])) > 1e-2
    assert rows["unsquared (Flower #2210)"]["matches"] is None


def test_the_drift_is_expected_and_stated(result):
    _, res, _ = result
    sol, landing = res["solution"], res["landing"]
    drift = np.linalg.norm(landing.theta - sol.theta)
    assert drift > 1e-3 and landing.status == "certified"
    assert "drift from the optimum" in res["rows"]["correct"]["text"]


def test_the_figure_is_written(result):
    import matplotlib.image

    _, res, out = result
    image = matplotlib.image.imread(res["png"])
    assert image.shape[0] > 200 and image.shape[1] > 400 and image.std() > 0.01
    assert f"figure: {res['png']}" in out
