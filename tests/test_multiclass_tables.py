"""Multi-class tables: a wine table (scikit-learn's ``load_wine``: 178 rows, 13 features, 3 cultivars
named by strings) over 5 uneven sites, loaded from a DataFrame, a CSV file, a Parquet file and a
``drflmodel solve`` TOML configuration; the labels are mapped like scikit-learn's ``classes_``, the
four routes give the same federation and the same certified optimum, and that optimum is checked
against scipy on the same objective."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import drflmodel as dm
from drflmodel._config import ConfigError, build_problem, load_config
from drflmodel._tabular import TableError

pd = pytest.importorskip("pandas")
pytest.importorskip("sklearn")

CULTIVARS = np.array(["barolo", "grignolino", "barbera"])      # scikit-learn's classes 0, 1, 2
SITES = [f"site{i}" for i in range(5)]


@pytest.fixture(scope="module")
def wine() -> "pd.DataFrame":
    from sklearn.datasets import load_wine

    data = load_wine(as_frame=True)
    df = data.frame.drop(columns="target")
    df["cultivar"] = CULTIVARS[data.target.to_numpy()]
    rng = np.random.default_rng(0)
    df["site"] = rng.choice(SITES, size=len(df), p=[0.35, 0.25, 0.2, 0.12, 0.08])    # uneven sites
    return df


def _problem(fed):
    return dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=dm.sets.ChiSquare(fed.n_clients, rho=0.5),
                           l2=0.01, penalize_intercept=False)


TOML = """[data]
source = "{source}"
path = "{path}"
target = "cultivar"
client = "site"
add_intercept = true
standardize = true

[loss]
name = "{loss}"

[problem]
family = "dro"
options = {{ l2 = 0.01, penalize_intercept = false }}
weights = {{ name = "chi_square", rho = 0.5 }}
"""


def test_dataframe_infers_multiclass_and_maps_labels_like_sklearn(wine):
    from sklearn.preprocessing import LabelEncoder

    fed = dm.Federation.from_dataframe(wine, target="cultivar", client="site", add_intercept=True, standardize=True)
    assert fed.task == "multiclass" and fed.table_info["task_inferred"]
    encoder = LabelEncoder().fit(wine["cultivar"])
    assert fed.classes == list(encoder.classes_) == fed.table_info["classes"]
    assert fed.names == SITES and len(set(fed.sizes.tolist())) == 5          # five uneven sites
    for name, client in zip(fed.names, fed.clients):
        expected = encoder.transform(wine.loc[wine["site"] == name, "cultivar"])
        np.testing.assert_array_equal(client.y, expected)
    explicit = dm.Federation.from_dataframe(wine, target="cultivar", client="site", task="multiclass",
                                            add_intercept=True, standardize=True)
    assert not explicit.table_info["task_inferred"]
    np.testing.assert_array_equal(explicit.pooled()[0], fed.pooled()[0])


def test_dataframe_csv_parquet_and_toml_give_one_certified_optimum(wine, tmp_path):
    """The four routes load the same federation and certify the same optimum; the optimum is no
    worse than scipy's BFGS on the same objective (an independent solver)."""
    from scipy.optimize import minimize

    wine.to_csv(tmp_path / "wine.csv", index=False)
    wine.to_parquet(tmp_path / "wine.parquet")
    fed = dm.Federation.from_dataframe(wine, target="cultivar", client="site", add_intercept=True, standardize=True)
    feds = {"dataframe": fed}
    for source in ("csv", "parquet"):
        cfg = tmp_path / f"wine-{source}.toml"
        cfg.write_text(TOML.format(source=source, path=f"wine.{source}", loss="multinomial"))
        prob = build_problem(load_config(cfg))
        feds[source] = prob.federation
    for name, other in feds.items():
        assert other.classes == fed.classes and other.names == fed.names, name
        for a, b in zip(other.clients, fed.clients):
            np.testing.assert_allclose(a.X, b.X, rtol=0, atol=1e-12)
            np.testing.assert_array_equal(a.y, b.y)
    prob = _problem(fed)
    sol = prob.solve(gap_tol=1e-10)       # compared to scipy's optimum at 1e-9
    assert sol.status == "optimal"
    reference = minimize(prob.objective, np.zeros(prob.dim), method="BFGS", options={"gtol": 1e-9})
    assert sol.lower_bound <= reference.fun + 1e-9 and sol.upper_bound <= reference.fun + 1e-9
    # the command line, as a user runs it, on the CSV configuration
    out = tmp_path / "wine.json"
    subprocess.run([sys.executable, "-m", "drflmodel.cli", "solve", str(tmp_path / "wine-csv.toml"), "--out",
                    str(out), "--gap-tol", "1e-10"], check=True, capture_output=True, text=True)   # compared at 1e-7
    solved = json.loads(out.read_text())["solution"]
    assert solved["status"] == "optimal"
    assert abs(solved["upper_bound"] - sol.upper_bound) <= 1e-7 * abs(sol.upper_bound)
    data = solved["info"]["data"]
    assert data["task"] == "multiclass" and data["classes"] == fed.classes
    # theta in the file's units predicts the same classes from the raw columns
    K, d = fed.n_classes, fed.dim
    raw = np.hstack([np.ones((len(wine), 1)), wine.drop(columns=["cultivar", "site"]).to_numpy(float)])
    scaled = np.vstack([fed.clients[fed.names.index(s)].X[k]
                        for s, k in zip(wine["site"], wine.groupby("site").cumcount())])
    W_file = np.asarray(data["theta_file_units"]).reshape(K, d)
    W = np.asarray(solved["theta"]).reshape(K, d)
    np.testing.assert_allclose(raw @ W_file.T, scaled @ W.T, rtol=1e-9, atol=1e-9)


def test_a_text_target_error_names_the_tasks_that_accept_it(wine, tmp_path):
    with pytest.raises(TableError, match="task='classification'.*task='multiclass'"):
        dm.Federation.from_dataframe(wine, target="cultivar", client="site", task="regression")
    with pytest.raises(TableError, match="task='multiclass'"):
        dm.Federation.from_dataframe(wine, target="cultivar", client="site", task="classification")
    with pytest.raises(dm.errors.InvalidParameterError, match="pos_label"):
        dm.Federation.from_dataframe(wine, target="cultivar", client="site", task="multiclass", pos_label="barolo")
    wine.to_csv(tmp_path / "wine.csv", index=False)
    cfg = tmp_path / "logistic.toml"
    cfg.write_text(TOML.format(source="csv", path="wine.csv", loss="logistic"))
    with pytest.raises(ConfigError, match=r"'data.target'.*3 class.*multiclass"):
        build_problem(load_config(cfg))


def test_numeric_class_codes_and_a_chosen_class_order(wine):
    codes = wine.assign(cultivar=wine["cultivar"].map({"barolo": 0, "grignolino": 1, "barbera": 2}))
    assert dm.Federation.from_dataframe(codes, target="cultivar", client="site").task == "regression"
    fed = dm.Federation.from_dataframe(codes, target="cultivar", client="site", task="multiclass")
    assert fed.classes == [0, 1, 2] and all(isinstance(c, int) for c in fed.classes)
    ordered = dm.Federation.from_dataframe(wine, target="cultivar", client="site",
                                           classes=["barolo", "grignolino", "barbera"])
    assert ordered.classes == ["barolo", "grignolino", "barbera"]
    for a, b in zip(ordered.clients, fed.clients):
        np.testing.assert_array_equal(a.y, b.y)          # the same indices as scikit-learn's codes
    with pytest.raises(TableError, match="'cultivar'.*not one of the classes"):
        dm.Federation.from_dataframe(wine, target="cultivar", client="site", classes=["barolo", "barbera"])


WASSERSTEIN_TOML = """[data]
source = "csv"
path = "wine.csv"
target = "cultivar"
client = "site"
add_intercept = true
standardize = true

[loss]
name = "multinomial"

[problem]
family = "wasserstein"
options = { radius = 0.05, kappa = 1.0, norm = 2, l2 = 0.01, penalize_intercept = false }
weights = { name = "simplex" }
"""


def test_a_multiclass_wasserstein_toml_is_solved_by_the_cli(wine, tmp_path):
    """family = "wasserstein" with loss = "multinomial" and penalize_intercept = false in
    [problem.options]: `drflmodel solve` certifies the optimum of the direct WassersteinDRFL on the
    DataFrame's federation (softmax, free intercept); the option is not dropped on the way (the
    transported intercept has another optimum)."""
    wine.to_csv(tmp_path / "wine.csv", index=False)
    (tmp_path / "w.toml").write_text(WASSERSTEIN_TOML)
    out = tmp_path / "w.json"
    from drflmodel.cli import main

    assert main(["solve", str(tmp_path / "w.toml"), "--out", str(out)]) == 0     # in-process: no import time
    solved = json.loads(out.read_text())["solution"]
    assert solved["status"] == "optimal"
    fed = dm.Federation.from_dataframe(wine, target="cultivar", client="site", add_intercept=True, standardize=True)
    kw = dict(radius=0.05, kappa=1.0, norm=2, weights=dm.sets.Simplex(fed.n_clients), l2=0.01)
    free = dm.WassersteinDRFL(fed, dm.losses.Multinomial(), penalize_intercept=False, **kw)
    assert solved["upper_bound"] == pytest.approx(free.objective(np.array(solved["theta"])), rel=1e-9)
    assert solved["upper_bound"] == pytest.approx(free.solve().value, rel=1e-6)
    moved = dm.WassersteinDRFL(fed, dm.losses.Multinomial(), **kw).solve().value
    assert abs(moved - solved["upper_bound"]) > 1e-4 * moved
