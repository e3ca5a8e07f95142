"""The server's configuration: a plain dataclass, so Ray Serve (or any host) can build one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServeConfig:
    model: str  # GGUF path
    n_ctx: int = 4096  # context per slot (KV positions); each slot holds one request
    parallel: int = 4  # slots: requests decoded together in one batched pass
    threads: int = 0  # 0 = all cores
    api_key: str | None = None  # Bearer token required on every API route when set
    queue: int = 16  # requests waiting for a slot before 429
    embedding_model: str | None = None  # ONNX sentence-embedding model for /v1/embeddings
    tokenizer: str | None = None  # its tokenizer.json
    model_alias: str | None = None  # the id /v1/models reports (default: the file's name)
    cors_origins: tuple[str, ...] = ()  # CORS is off unless origins are given
    chunk: int = 256  # prompt tokens prefilled per engine step (chunked prefill)
    retry_after_s: int = 1  # Retry-After of a 429
