"""The hostile-reply battery across processes over TLS (slow): the example Flower App, its client 0
replaced by one that garbles its replies to the oracle's queries (another framework's tensor, pickled
.npy bytes, 10^8 declared floats, 1e300, another partition's id), run by flower-superlink, two
flower-supernodes and ``flwr run`` over TLS with authenticated supernodes. Each run trains, saves its
trace and reports NOT GRADED with the named fault; no ServerApp crashes."""

import json
import shutil
import time
from pathlib import Path

import pytest

from drflmodel.flower.deploy import LocalDeployment

from .conftest import assert_no_flower_processes

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
HANG_GUARD = 600.0

HOSTILE_CLIENT = '''"""Client 0 garbles its replies to the oracle's {query!r} query ({mutation})."""
import io
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.clientapp import ClientApp

from drflmodel.flower.deploy import config_client_app

_inner = config_client_app(Path(__file__).resolve().parent.parent)


def _npy(a):
    out = io.BytesIO()
    np.save(out, a, allow_pickle=True)
    return out.getvalue()


def _header(n):
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {{"descr": "<f8", "fortran_order": False, "shape": (n,)}})
    return out.getvalue() + bytes(64)


def _mutate(content):
    mutation = {mutation!r}
    if mutation == "another partition-id":
        content["metrics"]["partition-id"] = 1
        return content
    rec = content.array_records["payload"]
    arrays = {{k: rec[k] for k in rec.keys()}}
    key = {key!r}
    a = arrays[key]
    if mutation == "torch tensor":
        arrays[key] = Array(dtype="float32", shape=tuple(a.shape), stype="torch.Tensor", data=a.data)
    elif mutation == "pickled .npy":
        n = int(np.prod(a.shape))
        arrays[key] = Array(dtype="object", shape=tuple(a.shape), stype="numpy.ndarray",
                            data=_npy(np.array([{{}}] * n, dtype=object).reshape(tuple(a.shape))))
    elif mutation == "1e8 declared":
        arrays[key] = Array(dtype="<f8", shape=(10**8,), stype="numpy.ndarray", data=_header(10**8))
    elif mutation == "1e300":
        arrays[key] = Array(np.full(tuple(a.shape), 1e300))
    content["payload"] = ArrayRecord(arrays)
    return content


class _Hostile(ClientApp):
    def __call__(self, message, context):
        reply = _inner(message, context)
        if (int(context.node_config["partition-id"]) == 0 and not reply.has_error()
                and message.metadata.message_type == "query.drflmodel_{query}"):
            reply.content = _mutate(reply.content)
        return reply


app = _Hostile()
'''

CASES = [("statistics", "torch tensor", "gram", "decode"), ("statistics", "pickled .npy", "gram", "decode"),
         ("statistics", "1e8 declared", "moment", "shape"), ("statistics", "1e300", "yy", "magnitude"),
         ("describe", "another partition-id", "rows", None)]


@pytest.mark.slow
@pytest.mark.parametrize("query, mutation, key, check", CASES, ids=[f"{q}-{m}" for q, m, _, _ in CASES])
def test_a_hostile_client_across_processes_over_tls_is_a_named_fault(tmp_path, query, mutation, key, check):
    app = tmp_path / "app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("__pycache__", "*.npz", "*.json"))
    (app / "drflmodel_app" / "client_app.py").write_text(HOSTILE_CLIENT.format(query=query, mutation=mutation, key=key))
    problem = app / "problem.toml"
    problem.write_text(problem.read_text().replace("n_clients = 3", "n_clients = 2"))
    out, report_out = tmp_path / "trace.npz", tmp_path / "report.json"
    dep = LocalDeployment(2, workdir=tmp_path / "dep", tls=True, supernode_auth=True, start_timeout=HANG_GUARD)
    started = time.monotonic()
    try:
        dep.start()
        result = dep.run(app, {"problem-config": str(problem), "trace-out": str(out), "report-out": str(report_out)},
                         timeout=HANG_GUARD)
        log = dep.log("flwr-run")
        assert result.returncode == 0, log
    finally:
        dep.stop()
    assert_no_flower_processes()
    assert "Traceback" not in log, log
    report = json.loads(report_out.read_text())
    assert report["graded"] is False and report["passed"] is False, report
    reason = report["reasons"][0]
    if check is None:                        # two supernodes claim partition 1: the setup is refused, named
        assert "both hold partition-id 1" in reason, reason
    else:
        assert "client 0 failed" in reason and f"'{check}'" in reason, reason
    from drflmodel.solvers import Trace

    assert len(Trace.load(out).theta) == 4, time.monotonic() - started        # the run trained: rounds 0..3
