"""A real two-node Ray cluster on this machine for tests/ray (loopback, 1 CPU per node).

`ray start --head` and `ray start --address` each run in a new session, so every daemon
and worker process they spawn shares that session's process group: teardown signals the
two groups by id and touches no other Ray on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="tests/ray need the onnxexec[ray] extra (ray[data,serve])")
pytest.importorskip("pyarrow", reason="tests/ray need pyarrow (installed with ray[data])")

ROOT = Path(__file__).resolve().parents[2]
STORE_BYTES = 200 * 1024 * 1024  # small object stores: two nodes on a shared 2-core box
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_env() -> dict[str, str]:
    """Environment for the nodes and for driver subprocesses: this checkout first on
    the path (workers import onnxexec from it), no token auth, no usage reporting."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["RAY_AUTH_MODE"] = "disabled"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def _ray_start(args: list[str], env: dict[str, str]) -> int:
    """Run `ray start ARGS` in a new session; returns that session's process group id."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args]
    p = subprocess.Popen(
        cmd, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = p.communicate(timeout=START_TIMEOUT_S)
    if p.returncode != 0:
        raise RuntimeError(f"ray start failed:\n{out.decode(errors='replace')[-3000:]}")
    return p.pid


def _stop(pgids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in pgids:
            try:
                os.killpg(g, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            alive = []
            for g in pgids:
                try:
                    os.killpg(g, 0)
                    alive.append(g)
                except ProcessLookupError:
                    pass
            if not alive:
                return
            time.sleep(0.2)


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """GCS address of a running head + worker node; the test process is its driver."""
    import ray

    env = ray_env()
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp_dir = tempfile.mkdtemp(prefix="oxray", dir="/tmp")  # Ray's socket paths are short
    common = ["--num-cpus", "1", "--object-store-memory", str(STORE_BYTES)]
    common += ["--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    pgids: list[int] = []
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update({k: env[k] for k in saved})
    try:
        pgids.append(
            _ray_start(
                [
                    "--head",
                    "--port",
                    str(port),
                    "--temp-dir",
                    temp_dir,
                    "--include-dashboard",
                    "false",
                    *common,
                ],
                env,
            )
        )
        pgids.append(_ray_start(["--address", address, *common], env))
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        deadline = time.monotonic() + START_TIMEOUT_S
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the second Ray node did not join")
            time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        _stop(pgids)
        shutil.rmtree(temp_dir, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def mlp_model() -> str:
    return str(ROOT / "models" / "sample" / "mlp.onnx")
