"""benchmarks/sweep_landing_runs.py on a small randomized subset (default) and a larger one (slow):
no correct run is graded "elsewhere" (the detection rates of the planted bugs are the benchmark's
table, docs/verifying-fl-libraries.md)."""

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "sweep_landing_runs.py"


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location("_sweep_landing_runs", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _check(out):
    assert out["false_elsewhere"] == 0 and out["false_proved"] == 0, [r for r in out["correct"]
                                                                       if r["verdict"] == "elsewhere"]
    for b in out["bugs"]:                 # a bug that moved the point is never "landed"
        if b["moved"]:
            assert b["verdict"] in ("elsewhere", "not_landed"), b


def test_a_small_randomized_sweep_has_no_false_verdict(sweep):
    out = sweep.main(runs=4, bug_runs=0, seed=7, rounds=80, quiet=True)
    _check(out)
    assert {r["verdict"] for r in out["correct"]} <= {"landed", "not_landed", "observed"}


@pytest.mark.slow
def test_a_larger_randomized_sweep_has_no_false_verdict(sweep):
    out = sweep.main(runs=120, bug_runs=5, seed=11, rounds=250, quiet=True)
    _check(out)


def test_planted_bugs_under_sampling_are_caught_by_the_replay(sweep):
    out = sweep.main(runs=0, bug_runs=0, noisy_bug_runs=1, seed=3, rounds=60, quiet=True)
    sampled = [b for b in out["noisy_bugs"] if b["bug"].startswith("sampled")]
    assert len(sampled) == 6 and all(b["verdict"] == "elsewhere" and b["round"] is not None for b in sampled), sampled
    for b in out["noisy_bugs"]:             # a bug whose own point is beyond the region is never "landed"
        if b["beyond"]:
            assert b["verdict"] != "landed", b
