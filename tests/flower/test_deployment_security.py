"""A deployment locked with Flower 1.41's own mechanisms, on loopback: TLS (a CA, the SuperLink's
certificate and key; supernodes and the flwr command verify it) and SuperNode authentication
(``--enable-supernode-auth``: only registered public keys are admitted). Certificates and keys are
made for each test with the ``cryptography`` package in a temporary directory.

Default suite: a supernode that trusts another CA is refused at the TLS handshake, one whose key was
never registered is refused by the SuperLink, the registered one comes online. Slow: a Scaff-PD run
across processes over TLS with authenticated supernodes equals the simulator.

Waits end on events (a process exiting, a node coming online); :data:`HANG_GUARD` only stops a test
that would otherwise never end."""

import time
from pathlib import Path

import pytest

from drflmodel.flower import loopback_certificates, supernode_key_pair
from drflmodel.flower._net import listening_sockets
from drflmodel.flower.deploy import LocalDeployment
from drflmodel.errors import InvalidParameterError

from .conftest import assert_no_flower_processes

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
HANG_GUARD = 600.0


def _wait(condition, what: str):
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"hang guard: {what}")
        time.sleep(0.5)


def test_credentials_are_what_flower_reads(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    tls = loopback_certificates(tmp_path / "tls")
    ca = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(tls.server_cert.read_bytes())
    server.verify_directly_issued_by(ca)                       # signed by the CA, or raises
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    private, public = supernode_key_pair(tmp_path / "keys", "site0")
    key = serialization.load_ssh_private_key(private.read_bytes(), None)       # what flower-supernode reads
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp384r1"
    assert serialization.load_ssh_public_key(public.read_bytes()).public_numbers() == key.public_key().public_numbers()
    for secret in (private, tls.server_key):
        assert secret.stat().st_mode & 0o777 == 0o600
    with pytest.raises(InvalidParameterError, match="supernode_auth=True needs tls"):
        LocalDeployment(1, workdir=tmp_path, supernode_auth=True)
    with pytest.raises(InvalidParameterError, match="tls must be None, True or a TLSFiles"):
        LocalDeployment(1, workdir=tmp_path, tls="yes")


def test_a_wrong_root_certificate_and_an_unregistered_key_are_refused(tmp_path):
    other_ca = loopback_certificates(tmp_path / "elsewhere").ca_cert         # a CA the SuperLink never used
    dep = LocalDeployment(1, workdir=tmp_path / "dep", tls=True, supernode_auth=True, start_timeout=HANG_GUARD)
    try:
        dep.start()
        assert "--enable-supernode-auth" in dep.processes[0].args and "--insecure" not in dep.processes[0].args
        assert 'root-certificates = "' in (dep.workdir / "flwr-home" / "config.toml").read_text()
        # a registered key, but the supernode trusts another CA: the TLS handshake fails
        wrong_ca = dep.start_supernode(0, name="wrong-ca", root_certificates=other_ca, max_retries=0,
                                       max_wait_time=60)
        # the deployment's CA, but a key nobody registered: the SuperLink refuses it
        stray, _ = supernode_key_pair(tmp_path / "stray", "stray")
        unregistered = dep.start_supernode(0, name="unregistered", private_key=stray, max_retries=0,
                                           max_wait_time=60)
        _wait(lambda: wrong_ca.poll() is not None and unregistered.poll() is not None, "refused supernodes exit")
        _wait(lambda: any(n["status"] == "online" for n in dep.nodes()), "the registered supernode comes online")
        assert wrong_ca.returncode != 0 and unregistered.returncode != 0
        assert "CERTIFICATE_VERIFY_FAILED" in dep.log("wrong-ca"), dep.log("wrong-ca")
        assert "No SuperNode found with the given public key" in dep.log("superlink"), dep.log("superlink")
        nodes = dep.nodes()
        # supernode0 online; the wrong-CA supernode's key was registered but it never came online
        assert sorted(n["status"] for n in nodes) == ["online", "registered"], nodes
        assert dep.supernodes["supernode0"].poll() is None
        assert all(s["loopback"] for s in listening_sockets(dep.pids()))
    finally:
        dep.stop()
    assert dep.pids() == set()
    assert_no_flower_processes()


@pytest.mark.slow
def test_scaffpd_across_processes_over_tls_with_authenticated_supernodes(tmp_path):
    """The example app's Scaff-PD (2 clients, 3 rounds) on a TLS SuperLink admitting registered
    supernodes only; the flwr command submits the run over TLS too. Same iterates as the simulator."""
    import drflmodel.flower as dmf
    from drflmodel._config import build_problem, build_solver, load_config
    from drflmodel.solvers import Trace

    problem_toml = tmp_path / "problem.toml"
    problem_toml.write_text((APP / "problem.toml").read_text().replace("n_clients = 3", "n_clients = 2"))
    out = tmp_path / "trace.npz"
    dep = LocalDeployment(2, workdir=tmp_path / "dep", tls=True, supernode_auth=True, start_timeout=HANG_GUARD)
    try:
        dep.start()
        result = dep.run(APP, {"problem-config": str(problem_toml), "trace-out": str(out)}, timeout=HANG_GUARD)
        assert result.returncode == 0, dep.log("flwr-run")
    finally:
        dep.stop()
    assert_no_flower_processes()
    cfg = load_config(problem_toml, need_solver=True)
    sim = build_solver(cfg).run(build_problem(cfg), seed=cfg["solver"]["seed"])
    gaps = dmf.compare_traces(sim, Trace.load(out))
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10, gaps
