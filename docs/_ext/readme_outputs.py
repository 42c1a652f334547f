"""Regenerate the printed outputs shown in README.md, so that they cannot go stale.

Each output sits between markers in the README (the documentation's pages include the same text)::

    <!-- output: NAME -->
    ```text
    ...what the command printed...
    ```
    <!-- /output: NAME -->

and is produced here by running what the README says, as a user would:

* ``quickstart`` -- the README's quickstart block (the ``python`` block), executed;
* ``clinics`` -- ``drflmodel verify examples/data/clinics.toml`` from a copy of the repository's
  ``examples/data`` (the shipped ``clinics.csv``);
* ``graded`` -- the README's ``python run-graded`` block: Flower's scikit-learn quickstart
  (``examples/flower_sklearn``) graded in process, on the offline copy of its data set
  (``examples/flower_sklearn/offline_iris.py``), with Python's and NumPy's global generators seeded
  with 0 (the app's SAGA epochs and Flower's client sampling draw from them).

Usage::

    python docs/_ext/readme_outputs.py              # rewrite every output in README.md
    python docs/_ext/readme_outputs.py --check      # exit 1 naming the outputs that are stale

``tests/test_readme_outputs.py`` runs the check: numbers are compared to 6 significant digits (and
differences below 1e-9 ignored, e.g. a certificate gap of 1e-15 against 2e-15), every other
character exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def block(tag: str, text: str | None = None) -> str:
    """The README's code block opened by ```` ```tag ```` (exactly one)."""
    text = README.read_text() if text is None else text
    (code,) = re.findall(rf"```{re.escape(tag)}\n(.*?)```", text, flags=re.S)
    return code


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- output: {name} -->\n```text\n", f"```\n<!-- /output: {name} -->"


def shown(name: str, text: str | None = None) -> str:
    """The output ``name`` as the README shows it."""
    text = README.read_text() if text is None else text
    start, end = _markers(name)
    a = text.index(start) + len(start)
    return text[a:text.index(end, a)]


def _seeded():
    random.seed(0)
    import numpy as np

    np.random.seed(0)


def quickstart() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block("python"), "README.md", "exec"), {})
    return out.getvalue()


def clinics() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(ROOT / "examples" / "data", Path(tmp) / "examples" / "data",
                        ignore=shutil.ignore_patterns("*.json", "__pycache__"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, "-m", "drflmodel.cli", "verify", "examples/data/clinics.toml"],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    return proc.stdout


def graded() -> str:
    """The ``run-graded`` block in a temporary directory holding the offline data set."""
    sys.path.insert(0, str(ROOT / "examples" / "flower_sklearn"))
    try:
        from offline_iris import write_offline_iris
    finally:
        sys.path.pop(0)
    code = block("python run-graded").replace('"examples/flower_sklearn"', repr(str(ROOT / "examples" / "flower_sklearn")))
    with tempfile.TemporaryDirectory() as tmp:
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        os.environ.update(write_offline_iris(tmp))
        os.chdir(tmp)
        out = io.StringIO()
        try:
            _seeded()
            with contextlib.redirect_stdout(out):
                exec(compile(code, "README.md", "exec"), {})
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            for name in [m for m in sys.modules if m == "graded" or m.startswith("sklearnexample")]:
                del sys.modules[name]
    return out.getvalue()


OUTPUTS = {"quickstart": quickstart, "clinics": clinics, "graded": graded}


def same(a: str, b: str, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """``a`` and ``b`` equal up to their numbers, which may differ by ``rtol`` (relative) or ``atol``."""
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
        if x == y:
            continue
        try:
            u, v = float(x.replace(",", "")), float(y.replace(",", ""))
        except ValueError:
            return False
        if abs(u - v) > max(atol, rtol * max(abs(u), abs(v))):
            return False
    return True


def update(names) -> list[str]:
    """Rewrite the outputs ``names`` in the README; return the names that changed."""
    text, changed = README.read_text(), []
    for name in names:
        fresh = OUTPUTS[name]()
        old = shown(name, text)
        if fresh != old:
            start, _ = _markers(name)
            a = text.index(start) + len(start)
            text = text[:a] + fresh + text[a + len(old):]
            changed.append(name)
    README.write_text(text)
    return changed


def stale(names) -> list[str]:
    return [name for name in names if not same(OUTPUTS[name](), shown(name))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"outputs to regenerate, of {', '.join(OUTPUTS)} (default: all)")
    ap.add_argument("--check", action="store_true", help="exit 1 if an output in README.md is stale")
    args = ap.parse_args(argv)
    names = args.names or list(OUTPUTS)
    unknown = [n for n in names if n not in OUTPUTS]
    if unknown:
        ap.error(f"unknown output {unknown[0]!r}; choose from {', '.join(OUTPUTS)}")
    if args.check:
        bad = stale(names)
        print("stale: " + ", ".join(bad) if bad else "current: " + ", ".join(names))
        return 1 if bad else 0
    changed = update(names)
    print("rewrote: " + ", ".join(changed) if changed else "unchanged: " + ", ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
