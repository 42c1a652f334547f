"""benchmarks/bench_grid.py's harness on tiny shapes: the table has a row per shape x kind with both
gaps certified, a baseline planted outside [L, U] is flagged, the federated column is a real
``LocalChannel`` run whose counted answer matches the block route's size, the estimate stays for rows
not run, and ``--update-docs`` writes between its markers. No timing is asserted."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def grid():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_grid
        yield bench_grid
    finally:
        sys.path.remove(str(BENCHMARKS))


class _Args:
    smoothed_max = float("inf")
    newton_cg_max = float("inf")
    federated_max_entries = float("inf")
    federated_max_seconds = None


def test_placement_names_the_side_of_the_interval(grid):
    assert grid.placement(1.0, 0.9, 1.1) == "in"
    assert grid.placement(0.9 - 1e-6, 0.9, 1.1) == "below L"
    assert grid.placement(1.1 + 1e-6, 0.9, 1.1) == "above U"
    assert grid.placement(0.9 - 1e-14, 0.9, 1.1) == "in"          # round-off of the evaluation


def test_shapes_parse_and_the_default_grid_has_25(grid):
    assert grid.parse_shape("20kx200x10") == (20_000, 200, 10)
    assert grid.parse_shape("1Mx20") == (1_000_000, 20, 2)
    with pytest.raises(ValueError, match="rows x features"):
        grid.parse_shape("10k")
    assert len(set(grid.GRID)) == 25 and len(set(grid.GRID) | set(grid.LARGE) | set(grid.HEADS)) == 28


def test_a_table_of_two_tiny_shapes_certifies_both_gaps_and_flags_a_planted_baseline(grid):
    rows = []
    for shape in ("120x3", "200x4x3"):
        fed = grid.grid_federation(shape)
        pooled = grid._pooled(fed)
        for kind in ("erm", "afl"):
            row = grid.run_row(shape, kind, fed, pooled, 1, _Args())
            for gap in grid.GAPS:
                assert row["certified"][gap]["status"] == "optimal"
                assert row["certified"][gap]["gap"] <= gap
            assert row["baselines"] and all(b["place"][gap] != "below L" for b in row["baselines"].values()
                                            for gap in grid.GAPS)
            fed_col = row["federated"]           # measured: a federated auto solve over LocalChannel
            assert fed_col["run"] and fed_col["status"] == "optimal" and fed_col["meets_central"] is True
            assert fed_col["exchanges"] == fed_col["ledger_exchanges"] > 0 and fed_col["clients"] == fed.n_clients
            if kind == "erm":           # scikit-learn's three solvers and L-BFGS-B
                assert {"sklearn lbfgs", "sklearn newton-cg", "sklearn newton-cholesky", "L-BFGS-B"} <= set(row["baselines"])
            rows.append(row)
    table = grid.grid_markdown(rows)
    assert len(table.splitlines()) == 2 + 4 and "| 120x3 | 120 x 3 x 2 (4), 1 | erm |" in table
    assert "meets central |" in table and "not run" not in table

    # a baseline whose objective is below the certified L: flagged by name (it would falsify the certificate)
    fed = grid.grid_federation("120x3")
    prob, sol, seconds = grid.certified_once(fed, "chi2", 1e-8)
    runs = {gap: [(sol, seconds)] for gap in grid.GAPS}
    row = grid.summarize("120x3", "chi2", prob, runs, {"planted": [(1.0, sol.lower_bound - 1e-3)]})
    assert row["baselines"]["planted"]["place"] == {gap: "below L" for gap in grid.GAPS}
    assert "planted below L (1e-8)" in grid.grid_markdown([row])


def test_the_estimated_federated_answer_is_the_block_route_s_from_p_5(grid):
    fed = grid.grid_federation("120x3")            # P = 4: the dense route's triangle is 4P floats
    small = grid.federated_answer(grid.grid_problem(fed, "chi2").structure)
    assert small["route"] == "sqp" and small["floats"] == 4 * 5 // 2 + 4 + 1
    fed = grid.grid_federation("200x14")           # P = 15: (q + 1) P + 1 floats with q = 2 products,
    big = grid.federated_answer(grid.grid_problem(fed, "chi2").structure)   # + the bound terms riding on
    floats = 3 * 15 + 1 + (6 + 1 + 1)              # them (6 + K + K(K + 1)/2, K = 1): 54 <= 4P = 60
    assert big == {"route": "block_newton", "floats": floats, "bytes": 8 * floats, "exchanges": big["exchanges"]}


def test_payload_counts_floats_and_bytes_of_every_array(grid):
    import _grid_federated as gf

    message = {"a": np.zeros(3), "b": "xy", "c": np.zeros((2, 2), np.float32), "d": np.array(1.0)}
    assert gf.payload(message) == (3 + 4 + 1, 24 + 2 + 16 + 8)


def test_the_measured_federated_column_counts_the_block_route_s_answer(grid):
    import _grid_federated as gf

    fed = grid.grid_federation("200x14")           # P = 15, 4 clients
    central = grid.grid_problem(fed, "chi2").solve()
    col = grid.federated_column("200x14", "chi2", fed, None, {"L": central.lower_bound, "U": central.upper_bound},
                                float("inf"))
    # (q + 1) P + 1 floats with q = 2 products, + 6 + K + K(K + 1)/2 bound terms (K = 1): 54, float64
    assert col["run"] and col["route"] == "block_newton" and col["status"] == "optimal"
    assert col["largest_floats"] == col["ledger_largest_floats"] == 3 * 15 + 1 + 8 and col["largest_bytes"] == 8 * 54
    assert col["exchanges"] == col["ledger_exchanges"] and col["meets_central"] is True and col["flags"] == []
    # every exchange carries at least one answer from the busiest client, none larger than the largest
    assert col["exchanges"] * 8 <= col["bytes_per_client"] <= col["exchanges"] * col["largest_bytes"]
    cell = gf.cell(col)
    assert cell.startswith(f"block_newton (4 clients), {col['exchanges']} exch., 54 (432 B), ") and "meets central" in cell

    # P = 4: auto takes the dense route, whose largest answer is the Hessian triangle + gradient + value
    small_fed = grid.grid_federation("120x3")
    small = grid.federated_column("120x3", "chi2", small_fed, None, {"L": -np.inf, "U": np.inf}, float("inf"))
    assert small["route"] == "sqp" and small["largest_floats"] == 4 * 5 // 2 + 4 + 1 and small["largest_bytes"] == 120
    assert small["largest_answer_bytes"] >= small["largest_bytes"]

    # a centralized interval planted beside the federated one is flagged; so are the round's targets on digits
    far = gf.measure(grid.grid_problem(fed, "chi2"), central.upper_bound + 1.0, central.upper_bound + 2.0, "digits")
    assert far["meets_central"] is False and "misses the centralized [L, U]" in far["flags"]
    planted = {**col, "largest_floats": 4 * 15 + 1, "exchanges": 41}
    assert gf.flags(planted, 15, "digits") == ["answer 61 floats > 4P = 60", "41 exchanges > 40"]
    assert gf.flags(planted, 15, "2kx20") == ["answer 61 floats > 4P = 60"]


def test_above_the_entry_limit_the_column_keeps_the_estimate_labelled_not_run(grid):
    fed = grid.grid_federation("120x3")
    col = grid.federated_column("120x3", "erm", fed, grid._pooled(fed), {"L": 0.0, "U": 1.0}, 100)
    estimate = grid.federated_answer(grid.federated_problem(fed, "erm").structure)
    assert col == {"run": False, "reason": "N x P = 4.8e+02 > --federated-max-entries 1e+02", **estimate}
    assert grid._grid_federated.cell(col).startswith("not run (N x P = 4.8e+02 > --federated-max-entries 1e+02); estimate: ")


def test_a_run_past_its_time_budget_says_stopped_with_what_was_carried(grid):
    import _grid_federated as gf

    fed = grid.grid_federation("120x3")
    col = grid.federated_column("120x3", "chi2", fed, None, {"L": 0.0, "U": 1.0}, float("inf"), max_seconds=1e-9)
    assert col["status"] == "stopped" and col["exchanges"] == 0 and col["meets_central"] is None
    assert col["flags"] == ["stopped (time budget of 1e-09 s spent (--federated-max-seconds))"]
    assert "stopped inf, no interval; **stopped" in gf.cell(col)


def test_the_federated_erm_problem_has_the_pooled_objective(grid):
    fed = grid.grid_federation("200x4x3")
    pooled, federated = grid.grid_problem(fed, "erm", grid._pooled(fed)), grid.federated_problem(fed, "erm")
    theta = np.random.default_rng(0).normal(size=pooled.dim)
    assert federated.n_clients == fed.n_clients > 1
    assert federated.objective(theta) == pytest.approx(pooled.objective(theta), rel=1e-12)


def test_update_docs_writes_between_the_grid_markers(grid, tmp_path, monkeypatch):
    import bench_certified

    page = pathlib.Path(bench_certified.PERFORMANCE_PAGE)
    assert all(marker in page.read_text() for marker in grid.GRID_MARKERS)
    fake = tmp_path / "performance.md"
    fake.write_text(f"before\n{grid.GRID_MARKERS[0]}\nold\n{grid.GRID_MARKERS[1]}\nafter\n")
    monkeypatch.setattr(bench_certified, "PERFORMANCE_PAGE", fake)
    grid.update_docs("| a table |", "python benchmarks/bench_grid.py", grid.GRID_MARKERS)
    text = fake.read_text()
    assert "old" not in text and "| a table |" in text and text.startswith("before") and text.endswith("after\n")
