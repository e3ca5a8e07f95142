"""Ray Serve deployments: `POST /v1/infer` for ONNX models with request batching, and
the OpenAI-compatible app of `onnxexec.serve` replicated behind Serve's HTTP proxy.

`serve_model` is the hook behind `onnxexec serve MODEL --ray`; `onnx_app` and `llm_app`
build the Serve applications for `serve.run` (a Python API of their own).
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from onnxexec.ray.predictors import ELEMENT_DTYPES, make_session
from onnxexec.ray.sources import BatchInputError

NPZ_TYPES = ("application/x-npz", "application/octet-stream")


def _decode(body: bytes, content_type: str) -> dict[str, np.ndarray]:
    """Request body -> feeds: an .npz archive, or JSON {"inputs": {name: nested list}}."""
    if any(t in content_type for t in NPZ_TYPES):
        with np.load(io.BytesIO(body), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    try:
        doc = json.loads(body or b"null")
    except json.JSONDecodeError as e:
        raise BatchInputError(f"request body is neither an .npz nor JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), dict):
        raise BatchInputError('JSON body must be {"inputs": {"<input name>": [...]}}')
    return {k: np.asarray(v) for k, v in doc["inputs"].items()}


def _encode(outputs: dict[str, np.ndarray], accept: str, batch: int) -> Any:
    from starlette.responses import JSONResponse, Response

    headers = {"x-onnxexec-batch": str(batch)}  # rows of the run that served the request
    if any(t in accept for t in NPZ_TYPES):
        buf = io.BytesIO()
        np.savez(buf, **outputs)
        return Response(buf.getvalue(), media_type=NPZ_TYPES[0], headers=headers)
    body = {"outputs": {k: np.asarray(v).tolist() for k, v in outputs.items()}}
    return JSONResponse(body, headers=headers)


class OnnxInfer:
    """One replica: an InferenceSession; concurrent requests whose inputs agree in
    names, dtypes and per-row shapes run as one batch along axis 0."""

    def __init__(
        self,
        model: str,
        threads: int = 1,
        max_batch_size: int = 32,
        batch_wait_timeout_s: float = 0.01,
    ) -> None:
        self.session = make_session(model, threads)
        self.inputs = {a.name: a for a in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]
        # a fixed leading dimension cannot take a concatenated batch
        self.batchable = all(
            not isinstance(a.shape[0], int) for a in self.inputs.values() if a.shape
        )
        self.infer.set_max_batch_size(max_batch_size if self.batchable else 1)
        self.infer.set_batch_wait_timeout_s(batch_wait_timeout_s)

    def _check(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if set(feeds) != set(self.inputs):
            raise BatchInputError(
                f"inputs {sorted(feeds)} given; the model takes {sorted(self.inputs)}"
            )
        out = {}
        for name, arr in feeds.items():
            dtype = ELEMENT_DTYPES.get(self.inputs[name].type[7:-1], np.float32)
            try:  # JSON numbers arrive as float64/int64: cast within the same kind only
                out[name] = arr.astype(dtype, casting="same_kind", copy=False)
            except TypeError as e:
                raise BatchInputError(f"input '{name}': {e}") from None
        return out

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.output_names, self.session.run(self.output_names, feeds), strict=True))

    def _run_group(self, group: list[dict[str, np.ndarray]]) -> list[Any]:
        if len(group) == 1:
            return [(self._run(group[0]), 1)]
        rows = [len(next(iter(f.values()))) for f in group]
        merged = {k: np.concatenate([f[k] for f in group]) for k in group[0]}
        outs = self._run(merged)
        if any(v.ndim == 0 or len(v) != sum(rows) for v in outs.values()):
            return [(self._run(f), 1) for f in group]  # outputs not per row: run apart
        cuts = np.cumsum(rows)[:-1]
        parts = {k: np.split(v, cuts) for k, v in outs.items()}
        return [({k: parts[k][i] for k in outs}, len(group)) for i in range(len(group))]

    async def infer(self, requests: list[dict[str, np.ndarray]]) -> list[Any]:
        """Decorated with @serve.batch below: a list of feeds -> a list of
        (outputs, batch size) or the exception for that request."""
        results: list[Any] = [None] * len(requests)
        groups: dict[Any, list[int]] = {}
        for i, feeds in enumerate(requests):
            try:
                requests[i] = self._check(feeds)
            except Exception as e:
                results[i] = e
                continue
            key = tuple(
                sorted((k, v.dtype.str, v.shape[1:], v.ndim) for k, v in requests[i].items())
            )
            groups.setdefault(key if all(v.ndim for v in requests[i].values()) else i, []).append(i)
        for idx in groups.values():
            try:
                for i, r in zip(idx, self._run_group([requests[i] for i in idx]), strict=True):
                    results[i] = r
            except Exception:
                for i in idx:  # isolate the failing request
                    try:
                        results[i] = (self._run(requests[i]), 1)
                    except Exception as e:
                        results[i] = e
        return results

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        if request.url.path.rstrip("/") != "/v1/infer":
            return JSONResponse({"error": f"no route {request.url.path}"}, status_code=404)
        if request.method != "POST":
            return JSONResponse({"error": "use POST"}, status_code=405)
        try:
            feeds = _decode(await request.body(), request.headers.get("content-type", ""))
        except Exception as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        result = await self.infer(feeds)
        if isinstance(result, Exception):
            status = 400 if isinstance(result, (BatchInputError, ValueError)) else 500
            return JSONResponse({"error": " ".join(str(result).split())}, status_code=status)
        outputs, batch = result
        return _encode(outputs, request.headers.get("accept", ""), batch)


def _with_batching() -> type:
    from ray import serve

    # serve.batch wraps a coroutine method; applied here so importing this module
    # does not import Ray
    cls = type("OnnxInferDeployment", (OnnxInfer,), {})
    cls.infer = serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)(OnnxInfer.infer)
    return cls


def _scaling(replicas: int, min_replicas: int | None, max_replicas: int | None) -> dict[str, Any]:
    if min_replicas is None and max_replicas is None:
        return {"num_replicas": replicas}
    lo = min_replicas if min_replicas is not None else 1
    hi = max_replicas if max_replicas is not None else max(lo, replicas)
    return {
        "autoscaling_config": {
            "min_replicas": lo,
            "max_replicas": hi,
            "initial_replicas": min(max(replicas, lo), hi),
        }
    }


def onnx_app(
    model: str,
    *,
    replicas: int = 1,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    threads: int = 1,
    max_batch_size: int = 32,
    batch_wait_timeout_s: float = 0.01,
) -> Any:
    """Serve application: `POST /v1/infer` on an ONNX model (JSON or .npz in and out;
    `Accept: application/x-npz` for an .npz answer), `replicas` replicas or autoscaled
    between min and max, each with `threads` threads."""
    from ray import serve

    dep = serve.deployment(
        _with_batching(),
        name="onnxexec-infer",
        ray_actor_options={"num_cpus": threads},
        **_scaling(replicas, min_replicas, max_replicas),
    )
    return dep.bind(model, threads, max_batch_size, batch_wait_timeout_s)


def llm_app(
    config: Any,
    *,
    replicas: int = 1,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    threads: int = 1,
) -> Any:
    """Serve application: the OpenAI-compatible FastAPI app of `onnxexec.serve`
    (`create_app(config)`), built on every replica behind Serve's HTTP proxy."""
    from ray import serve

    def build() -> Any:
        # a plain function (Serve calls it with no arguments on each replica), so the
        # model is loaded there, in the app's lifespan, never in the driver
        from onnxexec.serve.app import create_app

        return create_app(config)

    ingress = serve.ingress(build)()
    dep = serve.deployment(
        ingress,
        name="onnxexec-openai",
        ray_actor_options={"num_cpus": threads},
        **_scaling(replicas, min_replicas, max_replicas),
    )
    return dep.bind()


def serve_model(
    model: str,
    *,
    config: Any = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    replicas: int = 1,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    threads: int = 1,
    address: str | None = None,
    blocking: bool = True,
) -> None:
    """`onnxexec serve MODEL --ray`: a GGUF model (with `config`, the serve app's config
    dataclass) behind the OpenAI-compatible app, an ONNX model behind /v1/infer.
    Connects to Ray at `address` (or starts it locally) and blocks until interrupted."""
    from ray import serve

    from onnxexec.ray.batch import connect

    scaling = {"replicas": replicas, "min_replicas": min_replicas, "max_replicas": max_replicas}
    if model.lower().endswith(".gguf"):
        if config is None:
            raise BatchInputError("serving a GGUF model on Ray needs the serve app's config")
        app = llm_app(config, threads=threads, **scaling)
    else:
        app = onnx_app(model, threads=threads, **scaling)
    connect(address)
    serve.start(http_options={"host": host, "port": port})
    serve.run(app, name="onnxexec", route_prefix="/", blocking=blocking)
