"""The real deployment: separate Flower processes (``flower-superlink``, one ``flower-supernode``
per client, ``flwr run``), on one machine or several.

**Apps from a drflmodel configuration.** :func:`config_server_app` and :func:`config_client_app`
build the ``ServerApp`` and ``ClientApp`` of a Flower App directory from a drflmodel TOML file
(the format of ``drflmodel verify``, see :mod:`drflmodel._config`) named by the run config key
``problem-config`` (relative to the app directory). The server computes the federated certified
oracle from the clients' answers, runs the ``[solver]`` table's algorithm with its ``seed``
(pulling replies every ``poll-interval`` seconds, default 0.1: each pull is a request to the
SuperLink) logging each round, grades the trace against the oracle and, when the run config sets
``trace-out``, saves the :class:`~drflmodel.solvers.Trace` there (``Trace.save``, ``.npz``).
``examples/flower_app`` is such an app. Each client process builds only its own partition's
objective from the same file (with synthetic or shared data; a site holding only its own data
passes its own factories to :func:`~drflmodel.flower.client.client_app` and
:func:`~drflmodel.flower.oracle.with_oracle`).

**All processes on this machine.** :class:`LocalDeployment` starts the SuperLink and the
supernodes on 127.0.0.1 with free ports, each in its own session with
:data:`~drflmodel.flower._hygiene.HYGIENE_ENV`, submits runs with ``flwr run``, and stops every
process (Flower's ``flower-superexec``, ``flwr-serverapp`` and ``flwr-clientapp`` children
included) on :meth:`LocalDeployment.stop` -- also when used as a context
manager that exits with an error. Flower's ``flower-superexec`` starts a session of its own, so
:meth:`LocalDeployment.stop` also kills what is left in the sessions of every descendant.

**Locked with Flower's own mechanisms.** ``LocalDeployment(n, tls=True, supernode_auth=True)``
serves the SuperLink over HTTPS (``--ssl-ca-certfile``, ``--ssl-certfile``, ``--ssl-keyfile``; a
throwaway CA from :mod:`drflmodel.flower.credentials`), makes every supernode and the ``flwr``
command verify it (``--root-certificates``; ``root-certificates`` in the CLI's ``config.toml``) and
admits registered supernodes only (``--enable-supernode-auth``, ``flwr supernode register``,
``--auth-supernode-private-key``). Flower 1.41 serves supernodes, key registration and run
submission on one port with no account authentication in the open-source SuperLink: restrict who
reaches that port (the documentation's "Locking a Flower deployment" says how).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .._validation import check_int
from . import _install_hint
from ..errors import InvalidParameterError
from ._hygiene import HYGIENE_ENV
from ._net import descendants, free_port

__all__ = ["config_server_app", "config_client_app", "grade_against_oracle", "run_app", "LocalDeployment"]


def _config_path(app_dir, context) -> Path:
    name = context.run_config.get("problem-config", "problem.toml")
    path = Path(app_dir) / str(name)
    if not path.is_file():
        raise InvalidParameterError(f"run config 'problem-config' = {name!r}: no such file {path}")
    return path


def config_server_app(app_dir):
    """The ``ServerApp`` of a Flower App directory ``app_dir`` driven by a drflmodel TOML file.

    In the deployment it (1) computes the **federated certified oracle** of the configured problem
    from the clients' answers (run config ``oracle = "federated"``, the default, for the families
    of :data:`drflmodel.client_oracle.SUPPORTED`, asked for a 1e-10 gap; ``"none"`` skips it), (2) runs the ``[solver]``
    algorithm, logging one line per round (``flwr run --stream`` shows them: round, distance to
    the oracle's :math:`\\theta^\\star`, elapsed seconds), (3) grades the trace against the oracle
    -- the objective at every round from **one** exchange in which each client returns its values
    at all the rounds' models -- and logs the verdict, (4) saves the trace (``trace-out``) with the
    oracle and the measured objectives, so ``drflmodel.flower.grade(path)`` regrades it offline,
    and the report as JSON (``report-out``). When the oracle fails (a client's answers rejected by
    the server's checks, a refused query, a silent client), the run still trains and is saved with
    the fault (``info["oracle_fault"]``), and the report says ``NOT GRADED`` and why
    (:func:`~drflmodel.flower.recorder.not_graded`)."""
    from logging import INFO, WARNING

    from flwr.common.logger import log
    from flwr.serverapp import ServerApp

    from .recorder import not_graded

    from .._config import build_problem, build_solver, load_config
    from ..client_oracle import SUPPORTED
    from ..client_oracle import ClientFault
    from .oracle import oracle_or_fault
    from .server import run_on_grid

    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        rc = context.run_config
        cfg = load_config(_config_path(app_dir, context), need_solver=True)
        problem, solver = build_problem(cfg), build_solver(cfg)
        timing = {"connect_timeout": float(rc.get("connect-timeout", 60.0)),
                  "poll_interval": float(rc.get("poll-interval", 0.1))}
        oracle = None
        if str(rc.get("oracle", "federated")) == "federated" and type(problem).__name__ in SUPPORTED:
            from ..verification import ORACLE_GAP_TOL      # the run is graded against it: a close reference

            oracle = oracle_or_fault(grid, problem, gap_tol=ORACLE_GAP_TOL, **timing)   # a reply never crashes the app
            log(INFO, "[drflmodel] federated oracle: %s (%d exchanges)", oracle.summary(),
                oracle.info["federated"]["exchanges"])
        started = time.perf_counter()

        def progress(res):
            dist = ("" if oracle is None or oracle.theta is None else
                    f" |theta - theta*| = {np.linalg.norm(res.theta - oracle.theta):.3e}")
            log(INFO, "[drflmodel] round %d/%d%s (%.1f s)", res.round, solver.rounds, dist,
                time.perf_counter() - started)

        trace = run_on_grid(grid, problem, solver, seed=cfg["solver"].get("seed", 0), callback=progress,
                            **timing)
        report = None
        if oracle is not None and oracle.theta is not None:
            try:
                report = grade_against_oracle(trace, oracle)
                log(INFO, "[drflmodel] %s", report.summary().replace("\n", " | "))
            except ClientFault as fault:         # a client faulted on the grading's value queries
                oracle.theta = None
                oracle.info["fault"] = {**fault.to_dict(), "message": f"after the oracle was certified, {fault}"}
        if oracle is not None and oracle.theta is None:                 # the oracle failed (a named fault): the run is kept, not graded
            trace.info["oracle_fault"] = dict(oracle.info.get("fault")
                                              or {"message": f"the oracle's status is {oracle.status!r}"})
            report = not_graded(trace)
            log(WARNING, "[drflmodel] %s", report.summary().replace("\n", " | "))
        out = str(rc.get("trace-out", ""))
        if out:
            trace.save(out)
        report_out = str(rc.get("report-out", ""))
        if report_out and report is not None:
            Path(report_out).write_text(report.to_json())

    return app


def grade_against_oracle(trace, oracle):
    """Grade a trace against a federated oracle of the same deployment: the clients' values at
    every round's model in **one** exchange, then :func:`drflmodel.verify`; the measured objectives
    and the oracle go into the trace (``iterates["objective"]``, ``info["oracle"]``)."""
    from ..verification import verify

    server = oracle.problem
    server.objectives.prefetch_values(trace.theta)
    report = verify(trace, oracle, problem=server, expected_rate=None)
    trace.iterates["objective"] = np.array([row["objective"] for row in report.rows])
    trace.info.update(oracle=oracle.to_dict(), layout=server.layout.to_dict(), family=server.family)
    return report


def _light_families() -> tuple[str, ...]:
    """Families whose clients compute the plain f_i of drflmodel.objectives (the light client path):
    the registry entries marked ``light_client``."""
    from ..problems.registry import FAMILIES

    return tuple(f.name for f in FAMILIES.values() if f.light_client)


class _RowsView:
    """Client *i*'s :math:`f_i` built from a configuration without the oracle (no CVXPY import):
    what the ported algorithms' client operations call (``value``, ``gradient``,
    ``minibatch_gradient``, ``size``), from ``ClientObjectives.restricted(i)``."""

    def __init__(self, objectives, index: int):
        self._objective = objectives.restricted(index)
        self.size = int(objectives.federation.sizes[index])

    def value(self, theta) -> float:
        return float(self._objective.values(theta)[0])

    def gradient(self, theta):
        return self._objective.gradients(theta)[0]

    def minibatch_gradient(self, theta, batch_size: int, seed=None):
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return self._objective.minibatch_gradients(theta, batch_size, [rng])[0]


def config_client_app(app_dir):
    """The ``ClientApp`` of a Flower App directory ``app_dir`` driven by a drflmodel TOML file:
    the ported algorithms' operations and the client-oracle queries
    (:func:`~drflmodel.flower.oracle.with_oracle`), each answered from this supernode's own rows.

    Per message (Flower 1.41 starts a process for each) it reads the configuration and builds only
    what a client computes -- the federation's rows of its partition, the loss and
    :class:`~drflmodel.objectives.ClientObjectives` -- not the oracle (no CVXPY, no weight set); the
    families whose clients compute something else (Wasserstein, DEO) build the whole problem."""
    from .. import losses
    from .._config import build_federation, build_problem, load_config
    from ..client_oracle import Site
    from ..objectives import ClientObjectives
    from .client import client_app, partition_of
    from .oracle import with_oracle

    def parts(context):
        cfg = load_config(_config_path(app_dir, context))
        family = cfg["problem"]["family"]
        if family not in _light_families():
            return build_problem(cfg), None
        fed = build_federation(cfg)
        loss = losses.get(cfg["loss"]["name"], **cfg["loss"].get("options", {}))
        opts = cfg["problem"].get("options", {})
        return fed, ClientObjectives(fed, loss, float(opts.get("l2", 0.0)), opts.get("penalize_intercept", True))

    def view(context):
        made, objectives = parts(context)
        return made if objectives is None else _RowsView(objectives, partition_of(context, made.n_clients))

    def site(context):
        made, objectives = parts(context)
        if objectives is None:
            return made
        i = partition_of(context, made.n_clients)
        client = made.clients[i]
        return Site(client.X, client.y, objectives.loss, objectives.n_outputs, name=client.name)

    # the client's policy is the site's own file (node config "query-policy"), else the default --
    # never read from the submitted configuration or run config: a site
    # that lets the server grade every round in one exchange allows points_per_values = rounds + 1
    # there; otherwise the server asks one point at a time (FederatedObjectives.prefetch_values)
    return with_oracle(client_app(view), site)


@contextmanager
def _warnings_only(verbose):
    """Within the block Flower's logger passes only warnings and errors (:func:`run_app`), unless
    ``verbose`` is ``True`` or is ``None`` and the user configured Flower's logger."""
    import logging

    from ._logs import user_configured

    logger = logging.getLogger("flwr")
    if verbose or (verbose is None and user_configured(logger)):
        yield
        return
    quiet = logging.Filter()
    quiet.filter = lambda record: record.levelno >= logging.WARNING
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def run_app(app_dir, num_supernodes: int, run_config: dict | None = None, verbose: bool | None = None,
            seed: int | None = None):
    """Run a Flower App directory in this process, like ``flwr run`` but on the in-process grid:
    its ``ServerApp`` and ``ClientApp`` from the ``[tool.flwr.app.components]`` of its
    ``pyproject.toml`` (imported with ``app_dir`` on ``sys.path``), its run config from
    ``[tool.flwr.app.config]`` updated with ``run_config``, supernode *i* with ``partition-id = i``.
    Returns the ``ServerApp`` (e.g. a :func:`~drflmodel.flower.app_grading.graded` app, whose
    ``report`` then holds the verdict). The run is quiet: only warnings and errors reach the
    terminal -- not Flower's per-round INFO log, nor drflmodel's INFO lines (the oracle, one line per
    graded round, the verdict: the returned app's ``solution`` and ``report`` hold them) -- unless you
    configured Flower's logger or pass ``verbose=True`` (everything, as ``flwr run`` shows it).

    ``seed`` seeds Python's ``random`` and NumPy's global generator before the run: an app that
    draws from them (scikit-learn estimators with ``random_state=None``, e.g. a SAGA epoch's order;
    a strategy's choice of nodes) then gives the same numbers on every run; ``None`` leaves them as
    they are."""
    import importlib
    import random

    from flwr.app import Context, RecordDict
    from flwr.cli.config_utils import load_and_validate

    from .grid import LocalGrid

    if not isinstance(app_dir, (str, os.PathLike)) or not (Path(app_dir) / "pyproject.toml").is_file():
        raise InvalidParameterError(f"app_dir must be a Flower App directory (holding a pyproject.toml); got {app_dir!r}")
    num_supernodes = check_int(num_supernodes, "num_supernodes", low=1)
    if seed is not None:
        seed = check_int(seed, "seed", low=0)
    app_dir = Path(app_dir).resolve()
    config, _warnings = load_and_validate(app_dir / "pyproject.toml", check_module=False)
    app_table = config["tool"]["flwr"]["app"]
    fused = {**app_table.get("config", {}), **(run_config or {})}
    unknown = sorted(set(run_config or {}) - set(app_table.get("config", {})))
    if unknown:
        raise InvalidParameterError(f"run_config keys {unknown} are not in {app_dir.name}'s [tool.flwr.app.config]")

    def component(ref: str):
        module, attr = ref.split(":")
        if str(app_dir) not in sys.path:
            sys.path.insert(0, str(app_dir))
        return getattr(importlib.import_module(module), attr)

    server = component(app_table["components"]["serverapp"])
    client = component(app_table["components"]["clientapp"])
    with _warnings_only(verbose), LocalGrid(client, num_supernodes, run_config=fused, verbose=verbose) as grid:
        if seed is not None:
            random.seed(seed)
            np.random.seed(seed)
        server(grid, Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(),
                             run_config=fused))
    return server


def _signal_group(pgid: int, sig) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


class LocalDeployment:
    """A SuperLink and ``num_supernodes`` supernodes on 127.0.0.1 (module docstring), plain or
    locked with Flower's own mechanisms.

    Parameters
    ----------
    num_supernodes : supernode *i* gets ``--node-config "partition-id=i num-partitions=N"``.
    workdir : directory for ``FLWR_HOME`` and the process logs (default: a new temporary one).
    start_timeout : seconds to wait for the SuperLink to accept connections.
    tls : ``None`` (plain HTTP, ``--insecure`` everywhere), ``True`` (a throwaway CA and a server
        certificate for 127.0.0.1 made in ``workdir/tls``: :func:`~drflmodel.flower.credentials.loopback_certificates`)
        or a :class:`~drflmodel.flower.credentials.TLSFiles`. With TLS the SuperLink serves HTTPS
        (``--ssl-ca-certfile``, ``--ssl-certfile``, ``--ssl-keyfile``), every supernode verifies it
        (``--root-certificates``) and so does the ``flwr`` command (``root-certificates`` in the
        connection of ``FLWR_HOME/config.toml``).
    supernode_auth : start the SuperLink with ``--enable-supernode-auth``: only supernodes whose
        public key was registered (``flwr supernode register``) are admitted. Each supernode gets its
        own EC key pair in ``workdir/keys`` (registered before it starts; it signs with
        ``--auth-supernode-private-key``). Needs ``tls``.

    :meth:`start_supernode` starts one more supernode with its own root certificate and key (a
    site joining, or a test that a wrong certificate or an unregistered key is refused);
    :meth:`register` and :meth:`nodes` are ``flwr supernode register`` / ``list``.
    """

    CONNECTION = "drflmodel-local"

    def __init__(self, num_supernodes: int, workdir=None, start_timeout: float = 30.0, tls=None,
                 supernode_auth: bool = False):
        from .credentials import TLSFiles

        self.n = check_int(num_supernodes, "num_supernodes", low=1)
        if not (tls is None or tls is True or isinstance(tls, TLSFiles)):
            raise InvalidParameterError(f"tls must be None, True or a TLSFiles; got {tls!r}")
        if not isinstance(supernode_auth, bool):
            raise InvalidParameterError(f"supernode_auth must be True or False; got {supernode_auth!r}")
        if supernode_auth and tls is None:
            raise InvalidParameterError("supernode_auth=True needs tls (Flower authenticates SuperNodes over "
                                        "TLS connections only): pass tls=True or a TLSFiles")
        if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float, np.integer, np.floating)) \
                or not 0 < float(start_timeout) <= 3600:
            raise InvalidParameterError(f"start_timeout must be a number of seconds in (0, 3600]; got {start_timeout!r}")
        if workdir is not None:
            if not isinstance(workdir, (str, os.PathLike)):
                raise InvalidParameterError(f"workdir must be a directory path (str or Path) or None for a new "
                                            f"temporary one; got {type(workdir).__name__} {workdir!r}")
            if Path(workdir).exists() and not Path(workdir).is_dir():
                raise InvalidParameterError(f"workdir must be a directory (existing or to be made); {workdir} "
                                            "is a file")
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="drflmodel-flower-")
            workdir = self._tmp.name
        self.workdir = Path(workdir)
        self.start_timeout = float(start_timeout)
        self.tls = tls.check() if isinstance(tls, TLSFiles) else tls
        self.supernode_auth = supernode_auth
        self.port = None
        self.processes: list[subprocess.Popen] = []
        self.supernodes: dict[str, subprocess.Popen] = {}
        self._known_sessions: set[int] = set()
        self._logs = []

    # ------------------------------------------------------------------ environment
    @property
    def env(self) -> dict:
        """The environment of every process: hygiene, this Python's scripts first on ``PATH``
        (Flower starts ``flower-superexec`` by name), ``FLWR_HOME`` in the work directory, and a
        0.1 s task poll for ``flower-superexec`` (default 1 s)."""
        env = dict(os.environ)
        env.update(HYGIENE_ENV)
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        env["FLWR_HOME"] = str(self.workdir / "flwr-home")
        env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")
        return env

    def _bin(self, name: str) -> str:
        path = Path(sys.executable).parent / name
        if not path.exists():
            raise InvalidParameterError(f"{name} not found next to {sys.executable}: {_install_hint('flower')}")
        return str(path)

    def _flwr(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """``flwr ARGS`` against this deployment's connection (its output captured)."""
        return subprocess.run([self._bin("flwr"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def register(self, public_key) -> int:
        """``flwr supernode register PUBLIC_KEY``: the node id the SuperLink gives the key."""
        import json

        out = self._flwr("supernode", "register", str(public_key), self.CONNECTION, "--format", "json")
        try:
            answer = json.loads(out.stdout)
        except ValueError:
            answer = {}
        if out.returncode != 0 or not answer.get("success"):
            raise RuntimeError(f"flwr supernode register {public_key} failed: {(out.stdout + out.stderr).strip()}")
        return int(answer["node-id"])

    def nodes(self) -> list[dict]:
        """``flwr supernode list``: the SuperLink's nodes (``node-id``, ``status``: registered, online, ...)."""
        import json

        out = self._flwr("supernode", "list", self.CONNECTION, "--format", "json")
        if out.returncode != 0:
            raise RuntimeError(f"flwr supernode list failed: {(out.stdout + out.stderr).strip()}")
        return json.loads(out.stdout)["nodes"]

    def _spawn(self, name: str, args: list) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "w")
        self._logs.append(log)
        proc = subprocess.Popen([self._bin(args[0]), *args[1:]], env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(proc)
        return proc

    # ------------------------------------------------------------------ lifecycle
    def _superlink_args(self) -> list[str]:
        args = ["flower-superlink", "--host", "127.0.0.1", "--port", str(self.port),
                "--disable-runtime-dependency-installation"]
        if self.tls is None:
            return args + ["--insecure"]
        args += ["--ssl-ca-certfile", str(self.tls.ca_cert), "--ssl-certfile", str(self.tls.server_cert),
                 "--ssl-keyfile", str(self.tls.server_key)]
        return args + (["--enable-supernode-auth"] if self.supernode_auth else [])

    def _connection_toml(self) -> str:
        """The ``flwr`` command's connection: HTTPS verified against the CA, or plain HTTP."""
        trust = ("insecure = true\n" if self.tls is None
                 else f"root-certificates = {_toml_value(str(self.tls.ca_cert))}\n")
        return (f'[superlink]\ndefault = "{self.CONNECTION}"\n\n[superlink.{self.CONNECTION}]\n'
                f'address = "127.0.0.1:{self.port}"\n' + trust)

    def start(self) -> "LocalDeployment":
        """Start the SuperLink, wait until it accepts connections, start the supernodes (with
        ``supernode_auth``: each one's key registered first)."""
        import socket

        from .credentials import loopback_certificates

        (self.workdir / "flwr-home").mkdir(parents=True, exist_ok=True)
        if self.tls is True:
            self.tls = loopback_certificates(self.workdir / "tls")
        self.port = free_port()
        (self.workdir / "flwr-home" / "config.toml").write_text(self._connection_toml())
        try:
            self._spawn("superlink", self._superlink_args())
            deadline = time.monotonic() + self.start_timeout
            while True:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or self.processes[0].poll() is not None:
                        raise RuntimeError(f"the SuperLink did not start; see {self.workdir / 'superlink.log'}")
                    time.sleep(0.1)
            for i in range(self.n):
                self.start_supernode(i)
        except BaseException:
            self.stop()
            raise
        return self

    def start_supernode(self, partition: int, name: str | None = None, root_certificates=None,
                        private_key=None, register: bool | None = None, max_retries: int | None = None,
                        max_wait_time: float | None = None) -> subprocess.Popen:
        """Start a supernode holding ``partition`` (log ``NAME.log``, default ``supernode{partition}``).

        ``root_certificates`` (default: the deployment's CA) is what it verifies the SuperLink
        against; ``private_key`` (default with ``supernode_auth``: a new key pair in
        ``workdir/keys``, registered first unless ``register=False``) is what it signs with.
        ``max_retries``/``max_wait_time`` bound its attempts to connect (Flower retries forever by
        default); a supernode that is refused then exits."""
        from .credentials import supernode_key_pair

        name = name or f"supernode{partition}"
        args = ["flower-supernode", "--superlink", f"127.0.0.1:{self.port}", "--host", "127.0.0.1",
                "--port", str(free_port()), "--node-config", f"partition-id={partition} num-partitions={self.n}"]
        if self.tls is None:
            args.append("--insecure")
        else:
            args += ["--root-certificates", str(root_certificates or self.tls.ca_cert)]
        if private_key is None and self.supernode_auth:
            private_key, public_key = supernode_key_pair(self.workdir / "keys", name)
            if register is not False:
                self.register(public_key)
        if private_key is not None:
            args += ["--auth-supernode-private-key", str(private_key)]
        if max_retries is not None:
            args += ["--max-retries", str(check_int(max_retries, "max_retries", low=0))]
        if max_wait_time is not None:
            args += ["--max-wait-time", repr(float(max_wait_time))]
        self.supernodes[name] = self._spawn(name, args)
        return self.supernodes[name]

    def run(self, app_dir, run_config: dict | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """``flwr run APP_DIR drflmodel-local --stream`` with ``--run-config`` from ``run_config``;
        returns when the run ends (or raises ``subprocess.TimeoutExpired`` after ``timeout``)."""
        args = [self._bin("flwr"), "run", str(app_dir), self.CONNECTION, "--stream"]
        if run_config:
            args += ["--run-config", " ".join(f"{k}={_toml_value(v)}" for k, v in run_config.items())]
        with open(self.workdir / "flwr-run.log", "w") as log:
            proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            self.processes.append(proc)
            try:
                proc.wait(timeout=timeout)
            finally:
                if proc.poll() is None:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
        return subprocess.CompletedProcess(args, proc.returncode)

    def _sessions(self) -> set[int]:
        """Session ids of the processes started and of all their descendants (Flower's
        ``flower-superexec`` starts a session of its own for the apps it launches)."""
        sids = {p.pid for p in self.processes}
        for proc in self.processes:
            for pid in descendants(proc.pid):
                try:
                    sids.add(os.getsid(pid))
                except OSError:
                    continue
        self._known_sessions |= sids
        return self._known_sessions - {os.getsid(0)}         # never this process's own session

    def pids(self) -> set[int]:
        """Every live (non-zombie) process of the deployment: the sessions of the processes
        started and of their descendants."""
        sessions = self._sessions()
        out = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z" and os.getsid(int(entry.name)) in sessions:
                        out.add(int(entry.name))
                except (OSError, IndexError):
                    continue
        return out

    def stop(self, grace: float = 5.0) -> None:
        """Stop every process (SIGTERM to each started process group, then SIGKILL after
        ``grace`` seconds to whatever is left in their sessions); close the logs."""
        self._sessions()                                   # remember the sessions before the tree dies
        for proc in self.processes:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for _ in range(3):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.2)
        for proc in self.processes:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process ignoring SIGKILL
                pass
        for log in self._logs:
            log.close()
        self._logs = []

    def log(self, name: str) -> str:
        """The text of a process log (``superlink``, ``supernode0``, ..., ``flwr-run``)."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> "LocalDeployment":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
