"""Bring your own data: Federation.from_groups / from_dataframe, VerticalFederation.from_dataframe,
and the command line's csv / parquet sources, with their one-line errors naming the column."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm
from drflmodel._config import ConfigError, build_problem, load_config
from drflmodel.cli import main
from drflmodel.errors import InvalidDataError, InvalidParameterError

pd = pytest.importorskip("pandas")

README = Path(__file__).resolve().parents[1] / "README.md"


def _table(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.normal(50, 10, n).round(1),
        "bmi": rng.normal(25, 4, n).round(1),
        "smoker": rng.choice(["no", "yes"], n),
        "site": rng.choice(["south", "north", "east"], n),
        "sex": rng.choice(["F", "M"], n),
        "outcome": rng.choice(["healthy", "sick"], n),
        "cost": rng.normal(size=n),
    })


# ------------------------------------------------------------------------------ from_groups
def test_from_groups_orders_clients_by_sorted_label_and_keeps_rows():
    X = np.arange(12.0).reshape(6, 2)
    y = np.arange(6.0)
    fed = dm.Federation.from_groups(X, y, ["b", "a", "b", "c", "a", "b"])
    assert fed.names == ["a", "b", "c"] and fed.client_labels == ["a", "b", "c"]
    np.testing.assert_array_equal(fed.clients[0].y, [1.0, 4.0])
    np.testing.assert_array_equal(fed.clients[1].X, X[[0, 2, 5]])
    fed = dm.Federation.from_groups(X, y, [3, 1, 3, 2, 1, 3])
    assert fed.names == ["1", "2", "3"] and fed.client_labels == [1, 2, 3]
    fed = dm.Federation.from_groups(X, y, [3, 1, 3, 2, 1, 3], names=[3, 2, 1])
    assert fed.names == ["3", "2", "1"]


@pytest.mark.parametrize("clients, names, message", [
    (["a", "b", "a"], None, "clients has 3 labels but X has 4 rows"),
    (["a", None, "a", "b"], None, "missing label at row 1"),
    (["a", 1, "a", "b"], None, "all strings or all numbers"),
    (["a", "b", "a", "b"], ["a", "b", "c"], "client 'c' has no rows"),
    (["a", "b", "a", "d"], ["a", "b"], "label 'd' is not in names"),
])
def test_from_groups_errors(clients, names, message):
    with pytest.raises(InvalidDataError, match=re.escape(message)):
        dm.Federation.from_groups(np.ones((4, 1)), np.zeros(4), clients, names=names)


# ------------------------------------------------------------------------------ from_dataframe
def test_from_dataframe_encodes_strings_one_hot_and_maps_two_classes():
    df = _table()
    fed = dm.Federation.from_dataframe(df, target="outcome", client="site", features=["age", "smoker"],
                                       task="classification", add_intercept=True)
    assert fed.names == ["east", "north", "south"]
    assert fed.feature_names == ["intercept", "age", "smoker=no", "smoker=yes"]
    assert fed.table_info["one_hot"] == {"smoker": ["smoker=no", "smoker=yes"]}
    assert fed.table_info["label_map"] == {"-1": "healthy", "+1": "sick"}
    # independent: pandas' own one-hot encoding, rows of client "north" in file order
    rows = df[df.site == "north"]
    dummies = pd.get_dummies(rows[["age", "smoker"]], columns=["smoker"], dtype=float)
    np.testing.assert_array_equal(fed.clients[1].X, np.c_[np.ones(len(rows)), dummies.to_numpy()])
    np.testing.assert_array_equal(fed.clients[1].y, np.where(rows.outcome == "sick", 1.0, -1.0))
    flipped = dm.Federation.from_dataframe(df, target="outcome", client="site", features=["age"],
                                           task="classification", pos_label="healthy")
    np.testing.assert_array_equal(flipped.clients[1].y, -fed.clients[1].y)


def test_from_dataframe_without_pandas_objects_gives_the_same_federation():
    df = _table()
    a = dm.Federation.from_dataframe(df, target="cost", client="site")
    b = dm.Federation.from_dataframe({c: df[c].to_numpy() for c in df.columns}, target="cost", client="site")
    assert a.feature_names == b.feature_names
    assert a.feature_names == ["age", "bmi", "smoker=no", "smoker=yes", "sex=F", "sex=M", "outcome=healthy",
                               "outcome=sick"]
    for ca, cb in zip(a.clients, b.clients):
        np.testing.assert_array_equal(ca.X, cb.X)
        np.testing.assert_array_equal(ca.y, cb.y)


@pytest.mark.parametrize("change, kwargs, message", [
    (None, dict(target="income"), "target column 'income' is not in df"),
    (None, dict(client="hospital"), "client column 'hospital' is not in df"),
    (None, dict(features=["age", "weight"]), "feature column 'weight' is not in df"),
    (lambda d: d.assign(age=d.age.where(d.index != 7)), {}, "feature column 'age' has 1 missing or infinite value(s) (first at row 7)"),
    (lambda d: d.assign(smoker=d.smoker.where(d.index != 2)), {}, "feature column 'smoker' has 1 missing value(s) (first at row 2)"),
    (lambda d: d.assign(outcome=d.outcome.where(d.index != 4)), {}, "target column 'outcome' has 1 missing"),
    (lambda d: d.assign(site=d.site.where(d.index != 5)), {}, "client column 'site' has 1 missing"),
    (lambda d: d.assign(age=pd.Timestamp("2024-01-01")), {}, "feature column 'age' cannot be encoded"),
    (lambda d: d.assign(age=[1, "x"] * 30), {}, "feature column 'age' cannot be encoded: it must be numeric, boolean or string categories; it holds int, str values"),
    (lambda d: d.assign(outcome=np.resize(["a", "b", "c"], 60)), {}, "target column 'outcome' has 3 class(es) ['a', 'b', 'c']; a classifier needs exactly two"),
    (lambda d: d.assign(site=pd.Categorical(d.site, categories=["east", "north", "south", "west"])), {},
     "client column 'site': client 'west' has no rows"),
])
def test_from_dataframe_errors_name_the_column(change, kwargs, message):
    df = _table()
    if change is not None:
        df = change(df)
    args = dict(target="outcome", client="site", features=["age", "smoker"], task="classification")
    args.update(kwargs)
    with pytest.raises(InvalidDataError) as exc:
        dm.Federation.from_dataframe(df, **args)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_regression_target_must_be_numeric_and_features_exclude_target():
    df = _table()
    with pytest.raises(InvalidDataError, match="target column 'outcome' is not numeric"):
        dm.Federation.from_dataframe(df, target="outcome", client="site", features=["age"])
    with pytest.raises(InvalidParameterError, match="column 'site' is the target, client or group"):
        dm.Federation.from_dataframe(df, target="cost", client="site", features=["age", "site"])


# ------------------------------------------------------------------------------ vertical
def test_vertical_from_dataframe_blocks_groups_and_errors():
    df = _table()
    v = dm.VerticalFederation.from_dataframe(df, target="outcome", group="sex",
                                             parties=[["age", "smoker"], ["bmi"]], add_intercept=True)
    assert v.feature_names == [["intercept", "age", "smoker=no", "smoker=yes"], ["bmi"]]
    np.testing.assert_array_equal(v.group, np.where(df.sex == "F", 0, 1))
    assert v.table_info["group_map"] == {"a": "F", "b": "M"}
    np.testing.assert_array_equal(v.blocks[1][:, 0], df.bmi.to_numpy())
    with pytest.raises(InvalidDataError, match="group column 'site' has 3 value"):
        dm.VerticalFederation.from_dataframe(df, target="outcome", group="site", parties=[["age"]])
    with pytest.raises(InvalidParameterError, match="column 'age' is given to parties 0 and 1"):
        dm.VerticalFederation.from_dataframe(df, target="outcome", group="sex", parties=[["age"], ["age"]])
    with pytest.raises(InvalidParameterError, match="'outcome' is the target"):
        dm.VerticalFederation.from_dataframe(df, target="outcome", group="sex", parties=[["outcome"]])


# ------------------------------------------------------------------------------ command line
CSV_CONFIG = """
[data]
source = "{source}"
path = "{path}"
target = "outcome"
client = "site"
features = ["age", "smoker"]
add_intercept = true

[loss]
name = "logistic"

[problem]
family = "dro"
options = {{ l2 = 0.1 }}
weights = {{ name = "cvar", alpha = 0.5 }}
"""


def _write_csv(tmp_path, df=None, name="clinics.csv"):
    (df if df is not None else _table()).to_csv(tmp_path / name, index=False)
    return name


def test_csv_source_solves_and_reports_the_encoding(tmp_path, capsys):
    name = _write_csv(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text(CSV_CONFIG.format(source="csv", path=name))
    assert main(["solve", str(cfg), "--out", str(tmp_path / "out.json")]) == 0
    sol = json.loads((tmp_path / "out.json").read_text())["solution"]
    assert sol["status"] == "optimal"
    info = sol["info"]["data"]
    assert info["one_hot"] == {"smoker": ["smoker=no", "smoker=yes"]}
    assert info["feature_names"] == ["intercept", "age", "smoker=no", "smoker=yes"]
    assert info["clients"] == ["east", "north", "south"] and info["label_map"]["+1"] == "sick"
    # the same model from the Python API on the same table
    fed = dm.Federation.from_dataframe(_table(), target="outcome", client="site", features=["age", "smoker"],
                                       task="classification", add_intercept=True)
    ref = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(3, 0.5), l2=0.1).solve()
    np.testing.assert_allclose(sol["theta"], ref.theta, atol=1e-7)


def test_parquet_source(tmp_path):
    pytest.importorskip("pyarrow")
    _table().to_parquet(tmp_path / "clinics.parquet")
    cfg = tmp_path / "p.toml"
    cfg.write_text(CSV_CONFIG.format(source="parquet", path="clinics.parquet"))
    csv_cfg = tmp_path / "c.toml"
    csv_cfg.write_text(CSV_CONFIG.format(source="csv", path=_write_csv(tmp_path)))
    a = build_problem(load_config(cfg)).federation
    b = build_problem(load_config(csv_cfg)).federation
    for ca, cb in zip(a.clients, b.clients):
        np.testing.assert_allclose(ca.X, cb.X)


def test_csv_source_for_deo(tmp_path):
    name = _write_csv(tmp_path)
    cfg = tmp_path / "d.toml"
    cfg.write_text(f"""
[data]
source = "csv"
path = "{name}"
target = "outcome"
group = "sex"
parties = [["age", "smoker"], ["bmi"]]
add_intercept = true

[loss]
name = "logistic"

[problem]
family = "deo"
options = {{ eps = 0.01, l2 = 0.1 }}
""")
    prob = build_problem(load_config(cfg))
    assert isinstance(prob, dm.DEOConstrained) and prob.federation.block_sizes == [4, 1]
    assert prob.solve().status == "optimal"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('target = "outcome"\n', ""), "missing key 'data.target'"),
    (lambda t: t.replace('client = "site"', 'client = "hospital"'), "client column 'hospital' is not in"),
    (lambda t: t.replace('"smoker"]', '"smoker", "dose"]'),
     "feature column 'dose' cannot be encoded: it mixes numbers and text (e.g. '?' at row 2)"),
    (lambda t: t.replace('target = "outcome"', 'target = "site"'), "target column 'site' has 3 class(es)"),
    (lambda t: t.replace('client = "site"', 'client = "site"\ngroup = "sex"'), "'data.group' is used only with family = \"deo\""),
    (lambda t: t.replace('add_intercept = true', 'add_intercept = "yes"'), "'data.add_intercept' must be a boolean"),
    (lambda t: t.replace('source = "csv"', 'source = "penguins"'), "'data.target' is used only with data.source"),
    (lambda t: t.replace('path = "clinics.csv"', 'path = "absent.csv"'), "'data.path': file not found"),
])
def test_csv_config_errors_are_one_line(tmp_path, edit, message):
    df = _table().assign(dose=np.resize(["1.5", "2", "?"], 60))
    name = _write_csv(tmp_path, df)
    cfg = tmp_path / "c.toml"
    cfg.write_text(edit(CSV_CONFIG.format(source="csv", path=name)))
    with pytest.raises(ConfigError) as exc:
        build_problem(load_config(cfg))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_csv_nan_is_reported_through_the_command(tmp_path, capsys):
    df = _table()
    df.loc[11, "age"] = np.nan
    cfg = tmp_path / "c.toml"
    cfg.write_text(CSV_CONFIG.format(source="csv", path=_write_csv(tmp_path, df)))
    assert main(["solve", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "feature column 'age' has 1 missing or infinite value(s) (first at row 11)" in err


def test_readme_csv_config_solves(tmp_path):
    (toml,) = re.findall(r"```toml csv\n(.*?)```", README.read_text(), flags=re.S)
    _write_csv(tmp_path)
    (tmp_path / "readme.toml").write_text(toml)
    prob = build_problem(load_config(tmp_path / "readme.toml"))
    assert prob.solve().status == "optimal"
    assert prob.federation.feature_names == ["intercept", "age", "bmi", "smoker=no", "smoker=yes"]
