"""The ``drflmodel`` command.

* ``drflmodel tour`` -- the main job: every formulation family on built-in data, solved exactly
  with a certificate, its distributed solver and one baseline run and verified; one summary
  table, figures and a JSON report in an output directory.
* ``drflmodel solve CONFIG`` -- solve the problem described in a TOML file; JSON result. How it is
  solved comes from the ``[solve]`` table (``method``, ``solver``, ``gap_tol``, ``options``); the
  flags ``--method``, ``--solver``, ``--gap-tol`` override it (``verify`` takes them too).
* ``drflmodel verify CONFIG`` -- solve, run the configured distributed solver, verify: the
  readable verdict (with the theory's rate, the predicted rounds and the causes) on standard
  output, the full JSON report in a file (``--out``, default ``CONFIG-NAME.verify.json`` next to
  the configuration file; ``--json`` prints it on standard output instead).
  ``[solver] engine`` chooses where the solver runs: ``"simulator"`` (default), ``"flower"``
  (Flower's simulation engine) or ``"flower-inprocess"`` (the same Flower apps in process); the
  report names the engine.
* ``drflmodel --version``.

Bad configurations give one-line errors naming the key and the expected type (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("drflmodel")
    except PackageNotFoundError:       # pragma: no cover - running from a source tree
        return "unknown (not installed)"


def _write_json(obj: dict, out: str | None) -> None:
    text = json.dumps(obj, indent=2)
    if out is None:
        print(text)
    else:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")
        print(f"wrote {out}")


def _cmd_solve(args) -> int:
    from ._config import build_problem, describe, load_config

    cfg = load_config(args.config)
    problem = build_problem(cfg)
    sol = _solve(cfg, problem, args)
    _record_data(problem, sol)
    print(sol.summary(), file=sys.stderr)
    _write_json({"config": describe(cfg), "solution": sol.to_dict()}, args.out)
    return 0 if sol.status in ("optimal", "optimal_within_gap", "local") else 1


def _solve(cfg, problem, args, default_gap_tol=None):
    """The certified solve with the ``[solve]`` table and the command line's overrides
    (``default_gap_tol``: the gap asked when neither sets ``gap_tol``; else ``solve()``'s)."""
    from ._config import solve

    gap_tol = args.gap_tol
    if gap_tol is None and default_gap_tol is not None and "gap_tol" not in cfg.get("solve", {}):
        gap_tol = default_gap_tol
    return solve(cfg, problem, method=args.method, solver=args.solver, gap_tol=gap_tol)


def _record_data(problem, sol) -> None:
    """The table source's encodings (and, when standardized, theta in the file's units) in
    ``sol.info["data"]``."""
    from ._config import data_info, file_units

    info = data_info(problem)
    if info is not None:
        sol.info["data"] = info
        units = file_units(problem, sol.theta)
        if units is not None:
            sol.info["data"]["theta_file_units"] = units


def _cmd_verify(args) -> int:
    from ._config import build_problem, build_solver, describe, load_config
    from .verification import ORACLE_GAP_TOL, verify

    cfg = load_config(args.config, need_solver=True)
    problem = build_problem(cfg)
    solver = build_solver(cfg)
    sol = _solve(cfg, problem, args, ORACLE_GAP_TOL)     # the reference the iterates are measured against
    _record_data(problem, sol)
    summary = sys.stderr if args.json else sys.stdout
    print(sol.summary(), file=summary, flush=True)
    trace, engine = _run_solver(cfg, problem, solver)
    kwargs = {"tol": float(cfg["solver"].get("tol", 1e-6)), "verdict": cfg["solver"].get("verdict", "tol"),
              "rate_margin": float(cfg["solver"].get("rate_margin", 0.25))}
    if "expected_rate" in cfg["solver"]:
        kwargs["expected_rate"] = cfg["solver"]["expected_rate"]
    report = verify(trace, sol, **kwargs)
    print(report.summary(), file=summary, flush=True)
    result = {"config": describe(cfg), "engine": engine, "solution": sol.to_dict(), "report": report.to_dict()}
    if args.json:
        _write_json(result, None)
    else:
        out = args.out if args.out is not None else str(Path(args.config).with_suffix(".verify.json"))
        _write_json(result, out)
    return 0 if report.passed else 1


def _run_solver(cfg, problem, solver):
    """Run the [solver] on its ``engine``: the simulator, or Flower (``drflmodel.flower``)."""
    from ._config import ConfigError

    engine = cfg["solver"].get("engine", "simulator")
    seed = cfg["solver"].get("seed", 0)
    if engine == "simulator":
        return solver.run(problem, seed=seed), engine
    try:
        from .flower import run as run_on_flower
    except ImportError as exc:
        raise ConfigError(f"'solver.engine' = {engine!r}: {exc}") from None
    flower_engine = "ray" if engine == "flower" else "inprocess"
    return run_on_flower(problem, solver, seed=seed, engine=flower_engine), engine


def _cmd_tour(args) -> int:
    from ._tour import run_tour

    plots = args.plots or not (args.no_plots or args.quick)
    return run_tour(out_dir=args.out, quick=args.quick, plots=plots, wide=args.wide,
                    progress=False if args.no_progress else None)


class _EpilogAsWritten(argparse.HelpFormatter):
    """Help text wrapped as usual, except text already broken into lines (the epilog), kept as is."""

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _config_epilog() -> str:
    """Where the configuration vocabulary is documented, and its main names (from ``_config``)."""
    import textwrap

    from . import _config

    names = [("data.source", " | ".join(_config.DATA_SOURCES)),
             ("problem.family", " | ".join(_config.FAMILIES)),
             ("problem.weights", f"{{ name = {' | '.join(_config.WEIGHT_SETS)}, ... }}"),
             ("solver.engine", " | ".join(_config.ENGINES))]
    lines = ["configuration reference (every table and key, its type, default and allowed values, the",
             "options of each data source, loss, family, weight set and solver): docs/configuration.md,",
             "configuration.html of the documentation site (sphinx-build -b html docs docs/_build/html)", ""]
    for key, values in names:
        lines += textwrap.wrap(values, width=96, initial_indent=f"  {key:<17}", subsequent_indent=" " * 19,
                               break_on_hyphens=False)
    return "\n".join(lines)


def _solve_flags(parser) -> None:
    """``--method``, ``--solver``, ``--gap-tol``: the keys of the ``[solve]`` table, overriding it."""
    parser.add_argument("--method", default=None,
                        help="the route: auto or one of the family's routes (overrides solve.method)")
    parser.add_argument("--solver", default=None,
                        help="the CVXPY solver to try first, an installed one (overrides solve.solver)")
    parser.add_argument("--gap-tol", type=float, default=None, metavar="GAP",
                        help="relative certificate gap for \"optimal\", > 0 (overrides solve.gap_tol)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drflmodel",
        description="Exact, certified oracles and verified distributed solvers for fair and "
                    "distributionally robust federated learning.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    tour = sub.add_parser("tour", help="solve every formulation family exactly, run and verify its "
                                       "distributed solver and a baseline, print one table",
                          description="The main job: for each of the five formulation families on "
                                      "built-in data, solve exactly with a certificate, run the family's "
                                      "distributed solver and one baseline, verify, and print a summary "
                                      "table (100 columns; --wide for all); figures and a JSON "
                                      "report with every field go to the output directory.")
    tour.add_argument("--out", default="drflmodel-tour", help="output directory (default: %(default)s)")
    tour.add_argument("--quick", action="store_true",
                      help="smaller instances, one solver variant per oracle, no figures: under 20 s")
    tour.add_argument("--no-plots", action="store_true", help="do not draw figures")
    tour.add_argument("--plots", action="store_true", help="draw the figures also with --quick")
    tour.add_argument("--wide", action="store_true",
                      help="print every column (data, oracle value, tolerance; wider than 100 columns)")
    tour.add_argument("--no-progress", action="store_true",
                      help="no progress display (it appears only on a terminal, never when CI is set)")
    tour.set_defaults(func=_cmd_tour)

    solve = sub.add_parser("solve", help="solve the problem described in a TOML config; JSON result",
                           description="Solve the problem described in a TOML configuration file "
                                       "(tables [data], [loss], [problem], optionally [solve]) and print "
                                       "the certified solution as JSON.",
                           epilog=_config_epilog(), formatter_class=_EpilogAsWritten)
    solve.add_argument("config", help="path to the TOML configuration")
    solve.add_argument("--out", default=None, help="write the JSON here instead of stdout")
    _solve_flags(solve)
    solve.set_defaults(func=_cmd_solve)

    ver = sub.add_parser("verify", help="solve, run the configured distributed solver, verify; print the "
                                        "verdict, write the JSON report",
                         description="Solve the configured problem exactly, run the distributed solver of "
                                     "the [solver] table, and verify its iterates against the certified "
                                     "solution. The verdict, the theory's rate for the run and, when the "
                                     "tolerance is not met, the predicted rounds and the causes go to "
                                     "standard output; the JSON report (every round) to a file.",
                         epilog=_config_epilog(), formatter_class=_EpilogAsWritten)
    ver.add_argument("config", help="path to the TOML configuration (with a [solver] table)")
    ver.add_argument("--out", default=None,
                     help="write the JSON report here (default: CONFIG-NAME.verify.json next to the configuration)")
    ver.add_argument("--json", action="store_true",
                     help="print the JSON report on standard output (the verdict then goes to standard error)")
    _solve_flags(ver)
    ver.set_defaults(func=_cmd_verify)
    return parser


def main(argv=None) -> int:
    from .errors import DrflmodelError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except DrflmodelError as exc:
        print(f"drflmodel: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
