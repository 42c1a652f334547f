"""dmf.grade(path): a saved trace carries its oracle and the objectives measured during the run; what
the file claims is re-derived where the rows are at hand, and otherwise the verdict says that the
oracle was read from the file and not re-certified. Forged files: one internally consistent (only
re-certification can catch it) and one whose oracle contradicts the measured objectives."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.flower.recorder import NOT_RECERTIFIED
from drflmodel.solvers import Trace


@pytest.fixture()
def saved(erm, erm_solution, tmp_path):
    """FedAvg on FedAvg's objective, saved as a Flower deployment saves it: the oracle and the
    objective measured at every round in the trace, no rows."""
    tr = dm.solvers.FedAvg(rounds=40, local_steps=1, step_size=0.05).run(erm, seed=0)
    tr.iterates["objective"] = tr.objective_values(erm)
    tr.info.update(oracle=erm_solution.to_dict(), layout=erm.layout.to_dict(), family=erm.family)
    path = tmp_path / "run.npz"
    tr.save(path)
    return path


def _forge(path, edit):
    tr = Trace.load(path)
    edit(tr)
    tr.save(path)
    return path


def test_a_file_without_rows_says_its_oracle_was_not_recertified(saved, erm, erm_solution):
    rep = dmf.grade(saved, tol=1e-2)
    head = rep.summary().splitlines()[0]
    assert head.endswith(f"; {NOT_RECERTIFIED})"), head
    assert rep.extra["oracle_source"] == NOT_RECERTIFIED and rep.to_dict()["extra"]["oracle_source"] == NOT_RECERTIFIED
    # with the rows the oracle is solved again and the objectives recomputed: the same rows
    again = dmf.grade(saved, problem=erm, tol=1e-2)
    assert again.extra["oracle_source"] == "oracle re-certified from the rows" and again.passed == rep.passed
    np.testing.assert_allclose([r["objective"] for r in again.rows], [r["objective"] for r in rep.rows], rtol=1e-12)
    # a solution given by the caller is the caller's: nothing to say
    assert "oracle_source" not in dmf.grade(saved, solution=erm_solution, problem=erm).extra


def test_a_consistent_forgery_passes_only_as_not_recertified_and_fails_once_recertified(saved, erm):
    """The file's oracle replaced by the run's last model and its objective (bounds agreeing): without
    rows nothing can tell, and the verdict line says so; with the rows the forgery is named."""
    def forge(tr):
        last, value = tr.theta[-1], float(tr.iterates["objective"][-1])
        tr.info["oracle"].update(theta=last.tolist(), value=value, lower_bound=value, upper_bound=value)

    _forge(saved, forge)
    rep = dmf.grade(saved, tol=1e-8)
    assert rep.passed and rep.summary().splitlines()[0].startswith("PASSED") and NOT_RECERTIFIED in rep.summary().splitlines()[0]
    caught = dmf.grade(saved, problem=erm, tol=1e-8)
    assert not caught.passed
    assert any("the oracle in the file" in r and "disagrees with the oracle re-certified from the rows" in r
               for r in caught.reasons), caught.reasons


@pytest.mark.parametrize("edit, fault", [
    (lambda o: o.update(lower_bound=o["upper_bound"] + 1.0), "lower bound"),
    (lambda o: o.update(value=o["upper_bound"] + 1.0), "outside its bounds"),
    (lambda o: o.update(value=o["value"] + 0.5, lower_bound=o["lower_bound"] + 0.5, upper_bound=o["upper_bound"] + 0.5),
     "is below the oracle's certified lower bound"),
])
def test_an_inconsistent_file_fails_naming_the_inconsistency(saved, edit, fault):
    _forge(saved, lambda tr: edit(tr.info["oracle"]))
    rep = dmf.grade(saved, tol=10.0)
    assert not rep.passed
    assert any(r.startswith("the file's oracle is inconsistent:") and fault in r for r in rep.reasons), rep.reasons


def test_a_file_whose_oracle_has_another_shape_is_refused(saved):
    _forge(saved, lambda tr: tr.info["oracle"].update(theta=tr.info["oracle"]["theta"][:-1]))
    with pytest.raises(dm.InvalidDataError, match=r"the file's oracle is inconsistent: its theta has shape \(4,\)"):
        dmf.grade(saved)
