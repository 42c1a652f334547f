"""Tests of `drflmodel tour` (one fast stop by default; the whole tour is marked slow) and of
`drflmodel solve` / `drflmodel verify` on real configurations."""

from __future__ import annotations

import io
import json

import pytest

from drflmodel._tour import STOPS, format_compact, format_table, run_tour
from drflmodel.cli import main

DRO_CONFIG = """
[data]
source = "synthetic_regression"
options = { n_clients = 3, dim = 3, samples = 20, seed = 0 }

[loss]
name = "squared"

[problem]
family = "dro"
options = { l2 = 0.1 }
weights = { name = "chi_square", rho = 0.5 }

[solver]
name = "ScaffPD"
options = { rounds = 1500, local_steps = 5 }
tol = 1e-8
"""


def test_tour_dro_stop_certifies_and_verifies(tmp_path):
    out = io.StringIO()
    code = run_tour(out_dir=tmp_path, quick=False, plots=False, stops=["federated DRO"], stream=out)
    text = out.getvalue()
    report = json.loads((tmp_path / "tour.json").read_text())
    assert code == 0, text
    rows = report["rows"]
    assert [r["solver"] for r in rows] == ["ScaffPD", "DRFA", "StochasticAFL m=3"]
    assert all(r["status"] == "optimal" and r["verdict"] == "passed" for r in rows)
    assert all(abs(r["certificate gap"]) <= 1e-6 for r in rows)
    # the printed table carries every column the issue asks for
    for col in ("family", "data", "oracle value", "status", "certificate gap", "solver", "rounds to tol",
                "verdict"):
        assert col in text


def test_tour_reports_a_failing_stop_instead_of_hiding_it(tmp_path, monkeypatch):
    def broken(dm, quick):
        raise RuntimeError("boom")

    monkeypatch.setattr("drflmodel._tour.STOPS", [("broken", broken)])
    out = io.StringIO()
    code = run_tour(out_dir=tmp_path, quick=True, plots=False, stream=out)
    assert code == 1
    assert "ERROR in broken: RuntimeError: boom" in out.getvalue()
    assert json.loads((tmp_path / "tour.json").read_text())["errors"][0]["stop"] == "broken"


def test_format_table_handles_no_rows():
    assert format_table([]).startswith("family")


def test_every_family_has_a_stop():
    assert [name for name, _ in STOPS] == ["federated DRO", "FAFL", "Wasserstein DRFL", "relative fairness",
                                           "DEO-constrained fair VFL", "multi-class DRO"]


def test_multiclass_stop_certifies_and_verifies():
    from drflmodel._tour import stop_multiclass

    import drflmodel as dm

    (leg,) = stop_multiclass(dm, quick=True)
    assert leg.solution.status == "optimal" and leg.solution.theta.shape == (15,)
    assert leg.report.passed, leg.report.summary()


@pytest.mark.slow
def test_full_tour_exits_zero(tmp_path):
    out = io.StringIO()
    code = run_tour(out_dir=tmp_path, quick=False, plots=True, stream=out)
    assert code == 0, out.getvalue()


def test_cli_solve_and_verify_write_json(tmp_path, capsys):
    cfg = tmp_path / "dro.toml"
    cfg.write_text(DRO_CONFIG)
    assert main(["solve", str(cfg), "--out", str(tmp_path / "sol.json")]) == 0
    sol = json.loads((tmp_path / "sol.json").read_text())["solution"]
    assert sol["status"] == "optimal" and abs(sol["relative_gap"]) <= 1e-6
    assert main(["verify", str(cfg), "--out", str(tmp_path / "ver.json")]) == 0
    rep = json.loads((tmp_path / "ver.json").read_text())["report"]
    assert rep["passed"] and rep["solver"] == "ScaffPD"


def test_cli_bad_option_value_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(DRO_CONFIG.replace("rho = 0.5", "rho = -1.0"))
    assert main(["solve", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("drflmodel: error:") and "rho" in err and err.count("\n") == 1


# ------------------------------------------------------------------------ readable output (issue 15)
@pytest.fixture(scope="module")
def fafl_relative_tour(tmp_path_factory):
    """The real FAFL and relative-fairness stops with figures, recording the curves of each
    Lorenz figure as drawn."""
    from drflmodel import plots

    out_dir = tmp_path_factory.mktemp("tour")
    drawn = {}
    real = plots.plot_lorenz_panels

    def recording(panels, path=None, **kw):
        axes = real(panels, path=None, **kw)
        drawn[path.name] = [[ln.get_label() for ln in ax.get_lines() if ln.get_label() != "equality"]
                            for ax in axes]
        axes[0].figure.savefig(path)
        return axes

    mp = pytest.MonkeyPatch()
    mp.setattr(plots, "plot_lorenz_panels", recording)
    try:
        out = io.StringIO()
        code = run_tour(out_dir=out_dir, quick=True, plots=True, stops=["FAFL", "relative fairness"],
                        stream=out)
    finally:
        mp.undo()
    return code, out.getvalue(), out_dir, drawn


def test_printed_tour_fits_in_100_columns(fafl_relative_tour):
    code, text, out_dir, _ = fafl_relative_tour
    assert code == 0, text
    lines = text.replace(str(out_dir), "OUT").splitlines()
    too_wide = [ln for ln in lines if len(ln) > 100]
    assert not too_wide, too_wide
    header = next(ln for ln in lines if ln.startswith("family"))
    assert header.split() == ["family", "solver", "status", "gap", "rounds", "verdict"]
    # every leg has its row, with the family name whole (46 characters fit in the column)
    rows = json.loads((out_dir / "tour.json").read_text())["rows"]
    for r in rows:
        assert any(ln.startswith(r["family"]) and (r["solver"] in ln) for ln in lines), r["family"]
    # the long notes are wrapped, not cut: every word of each note is printed
    printed_words = set(text.split())
    for leg in json.loads((out_dir / "tour.json").read_text())["legs"]:
        assert set(leg["note"].split()) <= printed_words


def test_one_lorenz_figure_per_family_with_the_models_that_belong_together(fafl_relative_tour):
    _, _, out_dir, drawn = fafl_relative_tour
    assert sorted(drawn) == ["lorenz_fafl.png", "lorenz_relative_fairness.png"]
    for name in drawn:
        data = (out_dir / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    # FAFL: the three models on its one data set in one panel
    assert drawn["lorenz_fafl.png"] == [["FAFL / HCVaR (exact)", "FAFL smoothed (mu=0.05)", "ERM (p-weighted)"]]
    # relative fairness: penguins alone; the convex instance with its phi = 0 baseline on their data
    assert drawn["lorenz_relative_fairness.png"] == [
        ["relative fairness (phi=0.05, non-convex)"],
        ["relative fairness (phi=0.1, CVaR 0.4, convex)", "phi = 0: federated DRO (CVaR 0.4)"]]
    assert not (out_dir / "lorenz_client_losses.png").exists()


def test_compact_table_wraps_a_long_family_and_keeps_100_columns():
    rows = [{"family": "a family name " * 8, "solver": "ScaffPDIA", "status": "optimal_within_gap",
             "certificate gap": -1.5e-9, "rounds": 3000, "rounds to tol": None, "verdict": "FAILED"},
            {"family": "oracle", "solver": "-", "status": "local", "certificate gap": 2.0e-3,
             "rounds": None, "rounds to tol": None, "verdict": "-"}]
    text = format_compact(rows)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100
    assert "optimal_within_gap" in lines[2] and " 0 " in lines[2] and "-/3000" in lines[2]   # -1.5e-9: rounding
    col = lines[0].index("solver")                 # the family column, wrapped within its width
    assert " ".join(ln[:col] for ln in lines[2:-1]).split() == rows[0]["family"].split()
    assert all(not ln[col:].strip() for ln in lines[3:-1])   # continuation lines: family only
    assert lines[-1].split() == ["oracle", "-", "local", "2.0e-03", "-", "-"]


def _tiny_stop(dm, quick):
    """A fast stand-in stop (used to test the command-line plumbing, not the math)."""
    from drflmodel._tour import _run_leg

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(3, rho=0.5), l2=0.1)
    sol = prob.solve()
    return [_run_leg(dm, "tiny DRO", "synthetic 3x20x3 " + "with a long description " * 4, prob, sol,
                     dm.solvers.ScaffPD(rounds=1500, local_steps=5), 1e-8, "dist_theta_sq")]


def test_cli_tour_wide_prints_every_column(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("drflmodel._tour.STOPS", [("tiny", _tiny_stop)])
    assert main(["tour", "--out", str(tmp_path / "narrow"), "--no-plots"]) == 0
    narrow = capsys.readouterr().out
    assert main(["tour", "--out", str(tmp_path / "wide"), "--no-plots", "--wide"]) == 0
    wide = capsys.readouterr().out
    rows = json.loads((tmp_path / "wide" / "tour.json").read_text())["rows"]
    assert format_table(rows) in wide                     # today's wide table, as it was
    assert max(map(len, wide.splitlines())) > 100
    assert format_compact(rows) in narrow
    assert max(len(ln) for ln in narrow.replace(str(tmp_path), "OUT").splitlines()) <= 100
    # the JSON report is the same whichever table is printed (timings aside)
    other = json.loads((tmp_path / "narrow" / "tour.json").read_text())["rows"]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in other] == \
        [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


# ------------------------------------------------------------------------ gaps and bounded rows (issue 25)
def test_negative_gaps_within_tolerance_are_shown_as_zero_and_kept_raw_in_json(fafl_relative_tour):
    from drflmodel._tour import gap_cell

    assert [gap_cell(g) for g in (-2.2e-16, -7.0e-10, -1e-6, 0.0, 3.1e-8, -2e-6, None)] == \
        ["0", "0", "0", "0.0e+00", "3.1e-08", "-2.0e-06", "-"]
    _, text, out_dir, _ = fafl_relative_tour
    rows = json.loads((out_dir / "tour.json").read_text())["rows"]
    negative = [r for r in rows if r["certificate gap"] is not None and r["certificate gap"] < 0]
    assert negative, "the FAFL/relative stops have rounding-negative gaps (-2.2e-16, -7e-10)"
    table = text[text.index("family"):]
    for r in negative:
        line = next(ln for ln in table.splitlines() if ln.startswith(r["family"]) and r["solver"] in ln)
        assert line.split()[-3] == "0", line
        assert f"{r['certificate gap']:.1e}" not in line
    assert "is shown as 0, its raw value in tour.json" in text


def test_summary_line_names_the_rows_that_are_only_bounded():
    from drflmodel._tour import summary_line

    rows = [{"family": "A", "status": "optimal", "verdict": "passed"},
            {"family": "relative (phi=0.3)", "status": "local", "verdict": "-"},
            {"family": "DEO (squared)", "status": "optimal_within_gap", "verdict": "FAILED"},
            {"family": "B", "status": "failed", "verdict": "-"}]
    line = summary_line(rows, 0, 12.4)
    assert line == ("4 rows: 1 oracles certified optimal, 2 only bounded (relative (phi=0.3): local; "
                    "DEO (squared): optimal_within_gap), 1 without a certificate (B: failed), 1/2 distributed "
                    "runs verified, 0 errors, 12s")
    assert summary_line(rows[:1], 0, 1.0).startswith("1 rows: 1 oracles certified optimal, 0 only bounded, 1/1")


def test_quick_tour_is_smaller_than_the_full_one():
    """--quick drops the solver variants (minibatch, sampling, passive steps) and the vertical
    baseline, and shrinks the slowest instances; every family keeps its oracle and its distributed
    solver."""
    import drflmodel as dm
    from drflmodel import _tour

    calls = []
    real = _tour._run_leg

    class Trace:                       # what the stops read from a run: its last model, its iterates
        def __init__(self, sol):
            self.final_theta, self.iterates = sol.theta, {}

    def record(dm_, family, data, problem, sol, solver, *a, **k):
        calls.append((family, type(solver).__name__, k.get("variant", ""), data, solver.params["rounds"]))
        return _tour.Leg(family, data, problem, sol, solver=type(solver).__name__, extra={"trace": Trace(sol)})

    try:
        _tour._run_leg = record
        for _, stop in _tour.STOPS:
            stop(dm, True)
    finally:
        _tour._run_leg = real
    assert [c[1] for c in calls] == ["ScaffPD", "DRFA", "RFedFair", "FedAvg", "ADLPMM", "DRFA", "ScaffPDIA",
                                     "ScaffPD", "FairVFL", "ScaffPD"]
    assert not any(c[2] for c in calls)
    assert "3 clients x 20" in calls[4][3] and "600 rows" in calls[8][3]
