"""The README's Flower section runs as printed (its ``py`` code blocks, in order)."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_flower_blocks_run(capfd):
    text = README.read_text()
    section = text[text.index("## Flower\n"):text.index("## Citing")]
    blocks = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    ns: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})          # each block runs alone, as pasted
        exec(compile(code, "README.md", "exec"), ns)
    out, err = capfd.readouterr()
    gaps = ns["dmf"].compare_traces(ns["solver"].run(ns["prob"], seed=0), ns["trace"])
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10 and gaps["communication"]
    assert "'communication': True" in out
    verdict = out[out.index("PASSED: FedAvg vs dro"):]
    assert "error: converged" in verdict and "not predicted: a run of FedAvg recorded by" in verdict, out
    assert np.isfinite(ns["trace"].theta).all()
    # Flower's per-round INFO log stays off stderr by default (it was 4,500 lines)
    assert len(err.splitlines()) < 20, err[:2000]
