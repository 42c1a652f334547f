"""What a newcomer tripped on (issue 43), each checked as the user meets it: Scaff-PD on the README's
multi-class setting (an unpenalized intercept) refused once with advice that then works; the text
"n/a" in a CSV named where pandas reads it as missing; a constant feature column warned about."""

from __future__ import annotations

import re

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError


def test_scaffpd_without_strong_convexity_is_refused_once_with_advice_that_works():
    """penalize_intercept=False (scikit-learn's convention) leaves mu_x = 0: one refusal, before any
    constant is computed, whose suggested call converges to the certified optimum (checked by
    dm.verify against the oracle, 1e-8 on the squared distance)."""
    pytest.importorskip("palmerpenguins")
    fed = dm.datasets.penguin_species()
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=dm.sets.ChiSquare(3, rho=1.0), l2=0.5,
                           penalize_intercept=False)
    with pytest.raises(InvalidParameterError) as err:
        dm.solvers.ScaffPD(rounds=1500, local_steps=10).run(prob, seed=0)
    msg = str(err.value)
    assert "penalize_intercept=False" in msg and "radius" not in msg
    advice = re.search(r"ScaffPD\((schedule='constant', step_size=([\d.e-]+), dual_step=([\d.]+))\)", msg)
    assert advice, msg
    L = float(np.max(prob.objectives.smoothness()))
    assert np.isclose(float(advice.group(2)), 1.0 / L, rtol=1e-2)
    trace = dm.solvers.ScaffPD(rounds=1500, local_steps=10, schedule="constant", step_size=float(advice.group(2)),
                               dual_step=float(advice.group(3))).run(prob, seed=0)
    report = dm.verify(trace, prob.solve(), tol=1e-8)
    assert report.passed, report.summary()


def test_na_text_in_a_csv_is_named_where_pandas_reads_it_as_missing(tmp_path):
    pytest.importorskip("pandas")
    from drflmodel._tabular import TableError, read_table

    path = tmp_path / "t.csv"
    path.write_text("y,site,age,smoker\n1,a,30,yes\n-1,a,n/a,no\n1,b,40,\n-1,b,50,yes\n1,a,20,no\n-1,b,33,yes\n")
    df = read_table(path, "csv")
    with pytest.raises(TableError, match=r"column 'age' has 1 missing .* \(first at line 3 of t.csv, the text "
                                         r"'n/a', which pandas reads as missing; to keep such text"):
        dm.Federation.from_dataframe(df, "y", "site", features=["age"])
    with pytest.raises(TableError) as err:              # an empty field is missing as written
        dm.Federation.from_dataframe(df, "y", "site", features=["smoker"])
    assert "line 4 of t.csv)" in str(err.value) and "pandas reads" not in str(err.value)
    assert isinstance(err.value, InvalidDataError)


@pytest.mark.parametrize("add_intercept", [True, False])
def test_a_constant_feature_column_is_warned_about(add_intercept):
    table = {"y": np.array([1, -1, 1, -1, 1, -1]), "site": np.array(list("aabbab")),
             "age": np.array([30.0, 31, 40, 50, 20, 33]), "const": np.ones(6)}
    with pytest.warns(UserWarning, match=r"feature column\(s\) 'const' \(= 1\) hold one value in every row: each is "
                                         + ("a second intercept" if add_intercept else "an intercept")):
        fed = dm.Federation.from_dataframe(table, "y", "site", add_intercept=add_intercept, standardize=True)
    assert "const" in fed.feature_names                  # kept (the user's choice), not dropped
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # no warning without the constant column
        dm.Federation.from_dataframe(table, "y", "site", features=["age"], add_intercept=add_intercept)
