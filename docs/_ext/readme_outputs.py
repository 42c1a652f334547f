"""Regenerate the printed outputs shown in README.md, so that they cannot go stale.

Each output sits between markers in the README (the documentation's pages include the same text)::

    <!-- output: NAME -->
    ```text
    ...what the command printed...
    ```
    <!-- /output: NAME -->

and is produced here by running what the README says as a reader would: each block in a fresh
Python interpreter started in the repository's root, with no seed set for it (a block that draws
random numbers seeds itself) and no network (:data:`NO_NETWORK`: Hugging Face offline and every
HTTP(S) proxy pointed at a closed local port, so a block that needs the network fails at once):

* ``quickstart`` -- the README's quickstart block (the ``python`` block);
* ``clinics`` -- ``drflmodel verify examples/data/clinics.toml`` from a copy of the repository's
  ``examples/data`` (the shipped ``clinics.csv``);
* ``graded`` -- the README's ``python run-graded`` block: Flower's scikit-learn quickstart
  (``examples/flower_sklearn``, its iris a local copy of scikit-learn's:
  ``examples/flower_sklearn/offline_iris.py``) graded in process; the block passes ``seed=0`` to
  ``run_app`` (the app's SAGA epochs and Flower's node sampling draw from the global generators).

Usage::

    python docs/_ext/readme_outputs.py              # rewrite every output in README.md
    python docs/_ext/readme_outputs.py --check      # exit 1 naming the outputs that are stale

``tests/test_readme_outputs.py`` runs the check: numbers are compared to 6 significant digits (and
differences below 1e-9 ignored, e.g. a certificate gap of 1e-15 against 2e-15), every other
character exactly.
"""

from __future__ import annotations

import argparse
import os
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


#: the environment of every run: Hugging Face offline, HTTP(S) through a closed local port
NO_NETWORK = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
              **{k: "http://127.0.0.1:9" for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                                    "all_proxy", "ALL_PROXY")},
              "no_proxy": "", "NO_PROXY": ""}


def run(argv: list[str], cwd=ROOT, timeout: float = 900) -> str:
    """``python argv`` in a fresh interpreter, in ``cwd``, with this repository's package first on
    the path and :data:`NO_NETWORK`; its standard output (its error output too if it fails)."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, **NO_NETWORK, "HF_HOME": str(Path(home) / "hf-home"),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        for key in ("PYTHONHASHSEED", "PYTHONSTARTUP"):
            env.pop(key, None)
        proc = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv)[:80]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def run_block(tag: str) -> str:
    """The README's block ```` ```tag ```` run as a script from the repository's root."""
    return run(["-c", block(tag)])


def quickstart() -> str:
    return run_block("python")


def clinics() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(ROOT / "examples" / "data", Path(tmp) / "examples" / "data",
                        ignore=shutil.ignore_patterns("*.json", "__pycache__"))
        return run(["-m", "drflmodel.cli", "verify", "examples/data/clinics.toml"], cwd=tmp)


def graded() -> str:
    return run_block("python run-graded")


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
