"""`create_app(config) -> FastAPI`: the OpenAI-compatible server (llama-server's routes).

The model loads in a thread when the app starts (GET /health answers 503 until then);
one scheduler thread drives the batching engine (scheduler.py). Every error is OpenAI's
JSON error object. With `api_key` set every route but the page and /health needs
`Authorization: Bearer KEY` (401 otherwise). CORS is off unless origins are configured.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from importlib import resources
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException

from onnxexec.serve.api_generate import chat_completions, completions
from onnxexec.serve.config import ServeConfig
from onnxexec.serve.metrics import Metrics
from onnxexec.serve.openai_schema import APIError, bad
from onnxexec.serve.state import ServerState

_PUBLIC = {"/", "/health", "/v1/health"}
_ROUTES = {
    "/",
    "/health",
    "/v1/health",
    "/metrics",
    "/props",
    "/v1/models",
    "/models",
    "/tokenize",
    "/detokenize",
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/v1/embeddings",
    "/embeddings",
}


async def _json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad(f"the request body is not valid JSON: {e}") from None


def create_app(config: ServeConfig) -> FastAPI:
    """The server for `config` (loads the model when the ASGI lifespan starts)."""
    st = ServerState(config)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        threading.Thread(target=st.load, args=(loop,), name="onnxexec-load", daemon=True).start()
        yield
        st.close()

    app = FastAPI(
        title="onnxexec", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.server = st
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
        )

    @app.middleware("http")
    async def auth_and_count(request: Request, call_next: Any) -> Response:
        path = request.url.path
        key = config.api_key
        if key and path not in _PUBLIC and request.method != "OPTIONS":
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
                err = APIError(
                    401, "Invalid API key", type_="authentication_error", code="invalid_api_key"
                )
                metrics.request(path if path in _ROUTES else "other", 401)
                return JSONResponse(err.body(), status_code=401)
        response = await call_next(request)
        metrics.request(path if path in _ROUTES else "other", response.status_code)
        return response

    @app.exception_handler(APIError)
    async def api_error(request: Request, e: APIError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        err = APIError(e.status_code, str(e.detail), type_=kind)
        return JSONResponse(err.body(), status_code=e.status_code)

    @app.exception_handler(Exception)
    async def server_error(request: Request, e: Exception) -> JSONResponse:
        err = APIError(500, f"{type(e).__name__}: {e}", type_="server_error")
        return JSONResponse(err.body(), status_code=500)

    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        html = resources.files("onnxexec.serve").joinpath("static/index.html").read_text("utf-8")
        return HTMLResponse(html)

    @app.get("/health")
    @app.get("/v1/health")
    async def health() -> JSONResponse:
        st.check_ready()
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def get_metrics() -> PlainTextResponse:
        stats = st.engine.stats if st.ready else None
        text = metrics.render(stats, st.scheduler.in_flight if st.ready else 0)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.get("/props")
    async def props() -> JSONResponse:
        st.check_ready()
        slots = st.engine.stats.slots
        return JSONResponse(
            {
                "model": st.model_id,
                "model_path": config.model,
                "n_ctx": st.n_ctx,
                "total_slots": config.parallel,
                "chat_template": st.template or "",
                "default_generation_settings": {"n_ctx": st.n_ctx, "model": st.model_id},
                "slots": [
                    {
                        "id": i,
                        "n_past": s.n_past,
                        "n_ctx": s.n_ctx,
                        "is_processing": s.request_id is not None,
                    }
                    for i, s in enumerate(slots)
                ],
            }
        )

    @app.get("/v1/models")
    @app.get("/models")
    async def models() -> JSONResponse:
        data = [
            {
                "id": st.model_id,
                "object": "model",
                "created": st.created,
                "owned_by": "onnxexec",
                "meta": {"n_ctx": st.n_ctx},
            }
        ]
        if config.embedding_model:
            data.append(
                {
                    "id": _embedding_id(config),
                    "object": "model",
                    "created": st.created,
                    "owned_by": "onnxexec",
                }
            )
        return JSONResponse({"object": "list", "data": data})

    @app.post("/tokenize")
    async def tokenize(request: Request) -> JSONResponse:
        body = await _json(request)
        st.check_ready()
        if not isinstance(body, dict) or not isinstance(body.get("content"), str):
            raise bad("'content' must be a string", "content")
        ids = st.tok.encode(
            body["content"],
            add_special=bool(body.get("add_special", False)),
            parse_special=bool(body.get("parse_special", True)),
        )
        if body.get("with_pieces"):
            pieces = [
                {"id": t, "piece": st.tok.token_to_piece(t).decode("utf-8", "replace")} for t in ids
            ]
            return JSONResponse({"tokens": pieces})
        return JSONResponse({"tokens": ids})

    @app.post("/detokenize")
    async def detokenize(request: Request) -> JSONResponse:
        body = await _json(request)
        st.check_ready()
        toks = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(toks, list) or not all(
            isinstance(t, int) and 0 <= t < st.tok.vocab_size for t in toks
        ):
            raise bad(f"'tokens' must be a list of ids in [0, {st.tok.vocab_size})", "tokens")
        return JSONResponse({"content": st.tok.decode(toks)})

    @app.post("/v1/chat/completions")
    @app.post("/chat/completions")
    async def chat(request: Request) -> Any:
        return await chat_completions(st, request, await _json(request))

    @app.post("/v1/completions")
    @app.post("/completions")
    async def complete(request: Request) -> Any:
        return await completions(st, request, await _json(request))

    @app.post("/v1/embeddings")
    @app.post("/embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        body = await _json(request)
        st.check_ready()
        return JSONResponse(await _embed(st, config, body))

    return app


def _embedding_id(config: ServeConfig) -> str:
    import os

    return os.path.basename(config.embedding_model or "")


async def _embed(st: ServerState, config: ServeConfig, body: Any) -> dict[str, Any]:
    """/v1/embeddings: the ONNX model when configured (unless `model` names the GGUF)."""
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    inp = body.get("input")
    items: list[str | list[int]]
    if isinstance(inp, str):
        items = [inp]
    elif isinstance(inp, list) and inp and all(isinstance(t, int) for t in inp):
        items = [list(inp)]
    elif isinstance(inp, list) and inp and all(isinstance(x, str | list) for x in inp):
        items = list(inp)
    else:
        raise bad("'input' must be a string, a list of strings or token id lists", "input")
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise bad("'encoding_format' must be 'float' or 'base64'", "encoding_format")
    use_onnx = st.onnx_embedder is not None and body.get("model") != st.model_id
    if use_onnx:
        texts = [x for x in items if isinstance(x, str)]
        if len(texts) != len(items):
            raise bad("the ONNX embedding model takes text inputs", "input")
        emb = st.onnx_embedder
        assert emb is not None
        vecs = await st.scheduler.run(lambda: emb.embed(texts))
        n_tok = emb.count_tokens(texts)
        model = _embedding_id(config)
    else:
        gg = st.gguf_embedder
        assert gg is not None
        ids = [st.text_prompt(x) for x in items]
        try:
            vecs = np.stack([await st.scheduler.run(partial(gg.embed, i)) for i in ids])
        except ValueError as err:
            raise bad(str(err), "input") from None
        n_tok = sum(len(i) for i in ids)
        model = st.model_id
    data = []
    for i, v in enumerate(np.asarray(vecs, dtype=np.float32)):
        e: Any = (
            base64.b64encode(v.astype("<f4").tobytes()).decode()
            if fmt == "base64"
            else [float(x) for x in v]
        )
        data.append({"object": "embedding", "index": i, "embedding": e})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": n_tok, "total_tokens": n_tok},
    }
