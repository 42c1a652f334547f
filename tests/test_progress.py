"""Progress display (drflmodel._progress) and its hooks in Solver.run and Problem.sweep: shown on a
(fake) terminal, never when the output is not a terminal, when CI is set or with progress=False;
the runs and sweeps it decorates give bitwise the same results."""

from __future__ import annotations

import io

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import _progress
from drflmodel._frames import SweepResult
from drflmodel._progress import ErrorProbe, Progress, progress_enabled, progress_iter


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def fake_tty(monkeypatch):
    """Standard error is a terminal, CI is unset, and the display starts at once. Called in the
    test body: pytest's own capture re-installs ``sys.stderr`` between fixture setup and the call."""
    stream = FakeTTY()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    monkeypatch.setattr(_progress, "REFRESH", 0.0)
    return stream


@pytest.fixture(params=["tqdm", "plain"])
def backend(request, monkeypatch):
    if request.param == "tqdm":
        pytest.importorskip("tqdm")
    else:
        monkeypatch.setattr(_progress, "_tqdm_class", lambda: None)
    return request.param


@pytest.fixture(scope="module")
def dro():
    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(3, rho=0.5), l2=0.1)
    return prob, prob.solve()


def _run(prob, **kw):
    return dm.solvers.ScaffPD(rounds=60, local_steps=2).run(prob, seed=3, **kw)


# ----------------------------------------------------------------------------- the rule
def test_enabled_rule(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert progress_enabled(None, FakeTTY()) is True
    assert progress_enabled(None, io.StringIO()) is False           # not a terminal
    assert progress_enabled(False, FakeTTY()) is False
    assert progress_enabled(True, io.StringIO()) is True            # forced on
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        assert progress_enabled(None, FakeTTY()) is False
    for value in ("", "0", "false"):
        monkeypatch.setenv("CI", value)
        assert progress_enabled(None, FakeTTY()) is True


def test_bad_progress_value_is_refused(dro):
    prob, _ = dro
    with pytest.raises(dm.InvalidParameterError, match="progress must be True, False or None"):
        _run(prob, progress="yes")
    with pytest.raises(dm.InvalidParameterError, match="progress"):
        prob.sweep("rho", [0.1], progress=1)


# ----------------------------------------------------------------------------- Solver.run
def test_run_shows_rounds_and_verifier_error_on_a_terminal(dro, backend, monkeypatch):
    tty = fake_tty(monkeypatch)
    prob, sol = dro
    with pytest.warns(dm.errors.OracleGapWarning):   # no certificate resolves 1e-30: said, not refused
        verifier = dm.Verifier(sol, tol=1e-30)      # never met: records, never stops
    trace = _run(prob, callback=verifier)
    text = tty.getvalue()
    assert "ScaffPD" in text and "60/60" in text
    assert "error" in text and f"{verifier.history[-1][1]:.3e}" in text
    assert trace.info["rounds_run"] == 60 and not trace.info["stopped_by_callback"]


def test_run_with_progress_is_bitwise_the_run_without(dro, monkeypatch):
    tty = fake_tty(monkeypatch)
    prob, sol = dro
    shown = _run(prob, callback=ErrorProbe(dm.Verifier(sol).error, interval=0.0))
    assert "ScaffPD" in tty.getvalue()
    plain = _run(prob, progress=False)
    np.testing.assert_array_equal(shown.theta, plain.theta)
    np.testing.assert_array_equal(shown.weights, plain.weights)
    assert shown.info["gradient_evaluations"] == plain.info["gradient_evaluations"]


def test_run_silent_when_not_a_terminal(dro, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    _run(dro[0])
    assert stream.getvalue() == ""


def test_run_silent_when_ci_is_set(dro, monkeypatch):
    tty = fake_tty(monkeypatch)
    monkeypatch.setenv("CI", "true")
    _run(dro[0])
    assert tty.getvalue() == ""


def test_run_silent_with_progress_false(dro, monkeypatch):
    tty = fake_tty(monkeypatch)
    _run(dro[0], progress=False)
    assert tty.getvalue() == ""


def test_short_run_stays_silent_before_the_delay(dro, monkeypatch, backend):
    tty = fake_tty(monkeypatch)
    monkeypatch.setattr(_progress, "DELAY", 3600.0)
    _run(dro[0])
    assert "60/60" not in tty.getvalue()


def test_display_closes_when_the_callback_stops_the_run(dro, backend, monkeypatch):
    tty = fake_tty(monkeypatch)
    prob, sol = dro
    verifier = dm.Verifier(sol, tol=0.02)         # met after about 30 of the 60 rounds
    trace = _run(prob, callback=verifier)
    assert trace.info["stopped_by_callback"] and verifier.stopped_at < 60
    text = tty.getvalue()
    assert f"{verifier.stopped_at - 1}/60" in text
    assert text.rstrip(" ").endswith("\r")          # the line was erased (transient display)


def test_adlpmm_forwards_progress():
    fed = dm.datasets.synthetic_classification(n_clients=2, dim=2, samples=10, seed=0)
    prob = dm.WassersteinDRFL(fed, dm.losses.SmoothHinge(), radius=0.05, kappa=1.0, norm=1,
                              weights=dm.sets.Simplex(2))
    trace = dm.solvers.ADLPMM(rounds=2, proximal="tight").run(prob, progress=False)
    assert trace.info["rounds_run"] == 2


# ----------------------------------------------------------------------------- Problem.sweep
def test_sweep_progress_and_identical_solutions(dro, backend, monkeypatch):
    tty = fake_tty(monkeypatch)
    prob, _ = dro
    values = [0.1, 0.5]
    shown = prob.sweep("rho", values)
    assert "sweep rho" in tty.getvalue() and "2/2" in tty.getvalue()
    quiet = prob.sweep("rho", values, progress=False)
    for a, b in zip(shown, quiet):
        np.testing.assert_array_equal(a.theta, b.theta)
        assert a.value == b.value


def test_sweep_result_is_a_list_with_a_table(dro):
    prob, _ = dro
    res = prob.sweep("rho", np.array([0.0, 0.5]))
    assert isinstance(res, list) and isinstance(res, SweepResult) and len(res) == 2
    s0, s1 = res                                   # unpacks like the list it always was
    assert s0.info["rho"] == 0.0 and s1.info["rho"] == 0.5
    rows = res.rows()
    assert [r["rho"] for r in rows] == [0.0, 0.5]
    assert [r["value"] for r in rows] == [s0.value, s1.value]
    assert rows[1]["relative_gap"] == s1.relative_gap and rows[1]["status"] == s1.status
    d = res.to_dict()
    assert d["param"] == "rho" and len(d["solutions"]) == 2
    pd = pytest.importorskip("pandas")
    frame = res.table
    assert isinstance(frame, pd.DataFrame) and list(frame["rho"]) == [0.0, 0.5]
    assert frame["value"].tolist() == [s0.value, s1.value]
    assert res.to_frame().equals(frame)


def test_tables_without_pandas(dro, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_pandas(name, *args, **kw):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("no pandas here")
        return real_import(name, *args, **kw)

    prob, sol = dro
    res = prob.sweep("rho", [0.5])
    rep = dm.verify(_run(prob), sol, tol=1e-3)
    monkeypatch.setattr(builtins, "__import__", no_pandas)
    assert res.table == res.rows() and rep.table is rep.rows
    for obj in (res, rep):
        with pytest.raises(ImportError, match=r"drflmodel\[pandas\]"):
            obj.to_frame()


def test_report_to_frame(dro):
    pd = pytest.importorskip("pandas")
    prob, sol = dro
    rep = dm.verify(_run(prob), sol, tol=1e-3)
    frame = rep.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(rep.rows) == 61
    assert frame["dist_theta_sq"].tolist() == [r["dist_theta_sq"] for r in rep.rows]


# ----------------------------------------------------------------------------- the display itself
def test_plain_display_write_keeps_program_output_whole(monkeypatch, capsys):
    tty = fake_tty(monkeypatch)
    monkeypatch.setattr(_progress, "_tqdm_class", lambda: None)
    with Progress(3, "work", unit="step") as bar:
        bar.update(1)
        bar.write("a line of results")
        bar.update(3, error=0.5)
    assert capsys.readouterr().out == "a line of results\n"
    text = tty.getvalue()
    assert "work: 1/3 steps" in text and "work: 3/3 steps, error 5.000e-01" in text
    assert text.endswith("\r")


def test_progress_iter_counts_unsized_iterables(monkeypatch):
    tty = fake_tty(monkeypatch)
    monkeypatch.setattr(_progress, "_tqdm_class", lambda: None)
    assert list(progress_iter((k for k in range(4)), "gen")) == [0, 1, 2, 3]
    assert "gen: 4 steps" in tty.getvalue()


def test_error_probe_is_throttled():
    calls = []

    class Result:
        theta = np.zeros(1)

    probe = ErrorProbe(lambda th: calls.append(1) or 0.25, interval=3600.0)
    r1, r2 = Result(), Result()
    probe(r1)
    probe(r2)
    assert len(calls) == 1 and r1.error == r2.error == 0.25
