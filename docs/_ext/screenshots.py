"""Screenshot the main pages of the built documentation in headless Chromium, so a person can look
at them (and so can a reviewer who has only a terminal and an image viewer).

    sphinx-build -W -b html docs docs/_build/html            # build the site first
    python docs/_ext/screenshots.py                          # -> docs/_build/screenshots/*.png

Options: ``--site`` (default ``docs/_build/html``), ``--out`` (default ``docs/_build/screenshots``),
``--width`` / ``--height`` of the window (default 1400 x 2200: a laptop's width, a long page),
``--browser`` (default: the first of chromium, chromium-browser, google-chrome on the PATH; on
Debian ``apt-get install chromium``), ``--pages`` (page paths relative to the site). Each page is
loaded from the file system (``file://``), with every network request of the browser switched off.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the pages a newcomer meets first, and one of each kind (formulation, tutorial, gallery, API)
PAGES = [
    "index.html",
    "getting-started.html",
    "formulations/federated-dro.html",
    "tutorials/your-data.html",
    "tutorials/flower.html",
    "verifying-fl-libraries.html",
    "configuration.html",
    "performance.html",
    "reproductions.html",
    "auto_examples/index.html",
    "auto_examples/scaffpd_synthetic.html",
    "auto_examples/scaffpd_figure5.html",
    "auto_examples/scaffpd_table1.html",
    "auto_examples/fafl_clients.html",
    "auto_examples/fair_vfl_adult.html",
    "auto_examples/flower_verify.html",
    "auto_examples/relative_fairness_penguins.html",
    "auto_examples/drfl_paper_figures.html",
    "api/generated/drflmodel.FederatedDRO.html",
    "api/generated/drflmodel.verify_iterates.html",
    "api/generated/drflmodel.Federation.html",
]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-default-apps", "--disable-extensions", "--disable-sync",
         "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
         "--disable-features=Translate,MediaRouter,OptimizationHints", "--metrics-recording-only",
         "--virtual-time-budget=4000"]


def browser(name: str | None = None) -> str:
    for candidate in ([name] if name else ["chromium", "chromium-browser", "google-chrome"]):
        found = shutil.which(candidate)
        if found:
            return found
    raise SystemExit("no Chromium found: apt-get install chromium (or pass --browser)")


def screenshot(chrome: str, page: Path, png: Path, width: int, height: int, profile: Path) -> bool:
    png.parent.mkdir(parents=True, exist_ok=True)
    cmd = [chrome, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
           f"--screenshot={png}", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return proc.returncode == 0 and png.is_file()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, default=ROOT / "docs" / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "_build" / "screenshots")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=2200)
    ap.add_argument("--browser")
    ap.add_argument("--pages", nargs="*", default=PAGES)
    args = ap.parse_args(argv)
    chrome = browser(args.browser)
    profile = args.out / ".profile"
    missing, failed = [], []
    for rel in args.pages:
        page = args.site / rel
        if not page.is_file():
            missing.append(rel)
            continue
        png = args.out / (rel.replace("/", "__").removesuffix(".html") + ".png")
        if screenshot(chrome, page, png, args.width, args.height, profile):
            print(f"{png.relative_to(args.out.parent) if args.out.parent in png.parents else png}")
        else:
            failed.append(rel)
    shutil.rmtree(profile, ignore_errors=True)
    for rel in missing:
        print(f"not built: {rel}", file=sys.stderr)
    for rel in failed:
        print(f"screenshot failed: {rel}", file=sys.stderr)
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
