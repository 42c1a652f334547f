"""examples/flower_verify.py in quick mode: Flower's FedAvg / FedProx / QFedAvg graded by the
oracles, with the verdicts checked independently of CVXPY -- the weighted-ERM optimum in closed
form from the quadratic forms, and q-FFL's stationarity sum_i f_i^q grad f_i = 0 by hand."""

import importlib.util
import io
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_verify.py"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("_example_flower_verify", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    buf = io.StringIO()
    figures = tmp_path_factory.mktemp("flower_verify")
    with redirect_stdout(buf):
        rows = mod.main(quick=True, out=figures)
    assert [p.name for p in figures.glob("*.png")] == ["flower_verify.png"]      # the gallery's figure
    return mod, {(r["strategy"], r["local_steps"]): r for r in rows}, buf.getvalue()


def test_table_is_printed(example):
    _, rows, out = example
    assert "strategy        J  objective" in out and len(rows) == 6
    assert all(r["partial_participation"] == [] for r in rows.values())


def test_fedavg_verdicts_against_the_closed_form_optimum(example):
    mod, rows, _ = example
    fed = mod.federation()
    erm, _ = mod.oracles(fed)["weighted ERM"]
    Q, r, _ = erm.objectives.quadratic_forms()          # f_i = t'Q_i t - 2 r_i't + c_i
    p = fed.proportions
    theta_star = np.linalg.solve(np.tensordot(p, Q, axes=1), p @ r)
    one, ten = rows[("FedAvg", 1)], rows[("FedAvg", 10)]
    assert one["passed"] and np.linalg.norm(one["theta"] - theta_star) <= 1e-6
    # client drift: J = 10 stops (last step ~ round-off) far from the optimum
    assert not ten["passed"] and ten["last_step"] <= 1e-9
    assert np.linalg.norm(ten["theta"] - theta_star) > 1e-2
    assert ten["diagnosis"].startswith("converges elsewhere")
    for mu in (1, 10):
        prox = rows[(f"FedProx mu={mu}", 10)]
        assert not prox["passed"] and np.linalg.norm(prox["theta"] - theta_star) > 1e-2


def test_qfedavg_verdicts_against_qffl_stationarity(example):
    mod, rows, _ = example
    fed = mod.federation()
    prob, _ = mod.oracles(fed)[f"q-FFL (q={mod.Q:g})"]
    views = [prob.client_view(i) for i in range(fed.n_clients)]

    def stationarity(theta):         # gradient of (1/(q+1)) sum_i f_i^(q+1)
        return np.linalg.norm(sum(v.value(theta) ** mod.Q * v.gradient(theta) for v in views))

    one, ten = rows[("QFedAvg", 1)], rows[("QFedAvg", 10)]
    assert one["passed"] and stationarity(one["theta"]) <= 1e-5
    assert not ten["passed"] and stationarity(ten["theta"]) > 1e-2


def test_the_printed_reading_follows_the_rows(example):
    """Each statement of the printed reading is decided from the table's own numbers."""
    mod, rows, out = example
    fedavg10 = rows[("FedAvg", 10)]["dist_theta"]
    prox = [rows[(f"FedProx mu={mu}", 10)] for mu in (1, 10)]
    assert all(rows[(s, 1)]["passed"] for s in ("FedAvg", "QFedAvg"))
    assert "iteration: both reach their objective's optimum" in out
    assert not any(rows[(s, 10)]["passed"] for s in ("FedAvg", "QFedAvg"))
    assert "FedAvg and QFedAvg stop at another point" in out
    assert all(p["dist_theta"] < fedavg10 for p in prox) and not any(p["passed"] for p in prox)
    assert f"proximal term shrinks\nFedAvg's distance {fedavg10:.2e}" in out and "without removing it" in out
    assert mod.reading(list(rows.values())) in out
