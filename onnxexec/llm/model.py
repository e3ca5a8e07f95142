"""A GGUF LLM loaded once: config, prepared weights, planned graphs and the KV cache."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxexec.errors import ModelLoadError
from onnxexec.kernels.dequant import dequantize
from onnxexec.kernels.qmatmul import prepare_weight
from onnxexec.llm.config import ModelConfig, config_from_metadata
from onnxexec.llm.fusion import fuse_graph, prepare_weights
from onnxexec.llm.graph import GraphOptions, build_llm_graph
from onnxexec.loaders.ggml_types import GGMLType
from onnxexec.loaders.gguf_reader import GGUFFile, GGUFTensor, read_gguf
from onnxexec.ops.registry import load_families
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import GraphPlan, plan_graph
from onnxexec.runtime.threads import set_threads


def prepare_tensor(t: GGUFTensor) -> Any:
    """1-D tensors (norms, biases) -> float32; matrices -> a kernel-ready weight.

    F32 matrices stay a zero-copy view of the file; quantized ones are relayouted once
    by prepare_weight (never expanded to float32).
    """
    if len(t.shape) == 1 or t.ggml_type == GGMLType.F32:
        arr = dequantize(t.data, t.ggml_type, t.shape)
        return np.asarray(arr, dtype=np.float32).reshape(t.shape)
    return prepare_weight(t.data, t.ggml_type, t.shape)


@dataclass
class CacheState:
    """A saved KV cache: the tokens it holds and copies of the filled rows."""

    tokens: list[int]
    k: list[np.ndarray]
    v: list[np.ndarray]


class LLM:
    """Load once, then `eval` tokens into the KV cache and read logits.

    The cache is preallocated for `n_ctx` positions and written in place by the
    graph's KVAttention nodes; `tokens` records what it holds, so a new prompt that
    shares a prefix only evaluates the rest (see `reuse_prefix`).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        n_ctx: int | None = None,
        threads: int = 0,
        n_batch: int = 512,
        options: GraphOptions | None = None,
        warmup: bool = False,
    ) -> None:
        from onnxexec.llm.tokenizer import load_tokenizer

        self.path = str(path)
        self.threads = set_threads(threads)
        self.gguf: GGUFFile = read_gguf(path)
        md = self.gguf.metadata
        emb = self.gguf.tensors.get("token_embd.weight")
        if emb is None:
            raise ModelLoadError(f"{path}: GGUF file has no tensor 'token_embd.weight'")
        self.config: ModelConfig = config_from_metadata(md, n_vocab=emb.shape[0])
        c = self.config
        self.n_ctx = min(4096, c.n_ctx_train) if n_ctx is None else int(n_ctx)
        if self.n_ctx <= 0:
            raise ValueError(f"context size must be positive, got {self.n_ctx}")
        self.n_batch = n_batch
        self.options = options or GraphOptions()
        # Q|K|V and gate|up relayouted into stacked arrays (parts are views; exact)
        self.weights = prepare_weights(
            self.gguf.tensors, c.n_layer, prepare_tensor, fuse=self.options.fuse
        )
        self.tokenizer = load_tokenizer(md)
        self._plans: dict[bool, GraphPlan] = {}
        shape = (self.n_ctx, c.n_head_kv, c.head_dim)
        self.k_cache = [np.zeros(shape, np.float32) for _ in range(c.n_layer)]
        self.v_cache = [np.zeros(shape, np.float32) for _ in range(c.n_layer)]
        self._feeds: dict[str, Any] = {}
        for il in range(c.n_layer):
            self._feeds[f"k_cache.{il}"] = self.k_cache[il]
            self._feeds[f"v_cache.{il}"] = self.v_cache[il]
        self.tokens: list[int] = []
        if warmup:
            self.warmup()

    def warmup(self) -> None:
        """Plan the graph and run the prompt (T >= 2) and decode (T = 1) code paths once,
        so that loading compiled kernels is not counted in the first timings.

        Off by default (`LLM(..., warmup=True)` runs it): a first prompt loads the
        kernels it needs anyway, so warming up only delays the first token (by the
        decode path's kernels and three tokens' work, ~0.5 s for SmolLM2-135M)."""
        if self.n_ctx >= 3:
            self.eval([0, 0])
            self.eval([0])
        self.reset()

    def plan(self, last_only: bool = True) -> GraphPlan:
        """The planned graph (built on first use; weights are shared between the two)."""
        if last_only not in self._plans:
            g = build_llm_graph(
                self.config,
                self.weights,
                n_ctx=self.n_ctx,
                last_only=last_only,
                name=os.path.basename(self.path),
                options=self.options,
            )
            if self.options.fuse:
                g = fuse_graph(g)  # layer-sized ops, exact
            # the decoder's ops: planning then imports no other op family (ONNX ones)
            load_families("llm", "llm_fused")
            self._plans[last_only] = plan_graph(g)
        return self._plans[last_only]

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def reset(self) -> None:
        self.tokens = []

    def rewind(self, n: int) -> None:
        """Keep only the first n cached positions (later rows are overwritten on reuse)."""
        self.tokens = self.tokens[: max(0, n)]

    def reuse_prefix(self, tokens: Sequence[int]) -> int:
        """Rewind to the longest common prefix with `tokens`; returns how many are reused.

        At least one token is always left to evaluate so there are logits to sample from.
        """
        n = 0
        limit = min(len(self.tokens), len(tokens) - 1)
        while n < limit and self.tokens[n] == tokens[n]:
            n += 1
        self.rewind(n)
        return n

    def eval(self, tokens: Sequence[int], all_logits: bool = False) -> np.ndarray:
        """Append `tokens` to the cache; logits (len, V) if all_logits else (1, V) for the last."""
        toks = [int(t) for t in tokens]
        if not toks:
            raise ValueError("eval needs at least one token")
        if self.n_past + len(toks) > self.n_ctx:
            raise ValueError(
                f"context full: {self.n_past} cached + {len(toks)} new tokens > n_ctx {self.n_ctx}"
            )
        plan = self.plan(last_only=not all_logits)
        outs = []
        for start in range(0, len(toks), self.n_batch):
            chunk = toks[start : start + self.n_batch]
            last_chunk = start + self.n_batch >= len(toks)
            feeds = self._feeds
            feeds["tokens"] = np.asarray(chunk, dtype=np.int64)
            feeds["pos"] = np.asarray(self.n_past, dtype=np.int64)
            logits = execute(plan, feeds)[0]
            self.tokens.extend(chunk)
            if all_logits or last_chunk:
                outs.append(logits)
        return outs[0] if len(outs) == 1 else np.concatenate(outs)

    def save_state(self) -> CacheState:
        n = self.n_past
        return CacheState(
            list(self.tokens),
            [k[:n].copy() for k in self.k_cache],
            [v[:n].copy() for v in self.v_cache],
        )

    def load_state(self, state: CacheState) -> None:
        n = len(state.tokens)
        if n > self.n_ctx:
            raise ValueError(f"saved state has {n} tokens > n_ctx {self.n_ctx}")
        for dst, src in zip(self.k_cache, state.k, strict=True):
            dst[:n] = src
        for dst, src in zip(self.v_cache, state.v, strict=True):
            dst[:n] = src
        self.tokens = list(state.tokens)
