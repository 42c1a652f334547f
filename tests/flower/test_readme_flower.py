"""The README's Flower section runs as printed (its ``py`` code blocks, in order)."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_flower_blocks_run(capsys):
    text = README.read_text()
    section = text[text.index("## Flower:"):text.index("## Repository map")]
    blocks = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    ns: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), ns)
    out = capsys.readouterr().out
    gaps = ns["dmf"].compare_traces(ns["solver"].run(ns["prob"], seed=0), ns["trace"])
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10 and gaps["communication"]
    assert "'communication': True" in out
    assert out.splitlines()[-4].startswith("PASSED: FedAvg vs dro"), out
    assert np.isfinite(ns["trace"].theta).all()
