"""Sentence embeddings for /v1/embeddings: pooled hidden states of the GGUF model, or an
ONNX sentence-embedding model with a HF `tokenizer.json` (--embedding-model).

GGUF: the decoder graph with every row kept (last_only=False) whose output is
`result_norm`, the final-norm hidden states llama.cpp pools (llama-context.cpp,
embd = t_embd); pooled as `{arch}.pooling_type` says (llama.h LLAMA_POOLING_TYPE_*:
1 mean, 2 cls = first token, 3 last; unset or none: mean), then L2-normalized as
llama-server's embd_normalize default. ONNX: last_hidden_state (output 0) mean-pooled
over the attention mask (sentence-transformers' Pooling(mean)), L2-normalized.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from onnxexec.errors import ContextLengthError, ModelLoadError
from onnxexec.ir.graph import ValueInfo
from onnxexec.ir.types import TensorType
from onnxexec.llm.graph import build_llm_graph
from onnxexec.passes.pipeline import fuse_llm
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import plan_graph

if TYPE_CHECKING:
    from onnxexec.llm.model import LLM
    from onnxexec.runtime.plan import GraphPlan

POOL_MEAN, POOL_CLS, POOL_LAST = 1, 2, 3


def l2_normalize(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


class GGUFEmbedder:
    """Pooled final-norm hidden states of a GGUF decoder, one text at a time."""

    def __init__(self, llm: LLM, n_ctx: int) -> None:
        self.llm = llm
        self.n_ctx = n_ctx
        arch = llm.gguf.metadata.get("general.architecture", "")
        self.pooling = int(llm.gguf.metadata.get(f"{arch}.pooling_type", POOL_MEAN) or POOL_MEAN)
        self._plan: GraphPlan | None = None
        c = llm.config
        shape = (n_ctx, c.n_head_kv, c.head_dim)
        self._feeds: dict[str, Any] = {}
        for il in range(c.n_layer):
            self._feeds[f"k_cache.{il}"] = np.zeros(shape, np.float32)
            self._feeds[f"v_cache.{il}"] = np.zeros(shape, np.float32)

    def _get_plan(self) -> GraphPlan:
        if self._plan is None:
            llm = self.llm
            llm.plan()  # loads the decoder's op families
            g = build_llm_graph(
                llm.config, llm.weights, n_ctx=self.n_ctx, last_only=False, options=llm.options
            )
            out = ValueInfo("result_norm", TensorType(1, ("T", llm.config.n_embd)))
            g = dataclasses.replace(g, outputs=(out,))
            self._plan = plan_graph(fuse_llm(g) if llm.options.fuse else g)
        return self._plan

    def embed(self, ids: Sequence[int]) -> np.ndarray:
        """(D,) float32 unit vector for one token sequence (a fresh cache, position 0)."""
        if not ids:
            raise ValueError("the input encodes to no tokens")
        if len(ids) > self.n_ctx:
            raise ContextLengthError(
                f"input has {len(ids)} tokens, more than the context of {self.n_ctx}"
            )
        feeds = dict(self._feeds)
        feeds["tokens"] = np.asarray(ids, dtype=np.int64)
        feeds["pos"] = np.asarray(0, dtype=np.int64)
        h = np.asarray(execute(self._get_plan(), feeds)[0], dtype=np.float32)  # (T, D)
        if self.pooling == POOL_CLS:
            v = h[0]
        elif self.pooling == POOL_LAST:
            v = h[-1]
        else:
            v = h.mean(axis=0)
        return l2_normalize(v)


class OnnxEmbedder:
    """An ONNX encoder (input_ids, attention_mask[, token_type_ids]) + tokenizer.json."""

    def __init__(self, model: str, tokenizer: str, max_length: int = 512) -> None:
        try:
            from tokenizers import Tokenizer as HFTokenizer
        except ImportError as e:
            raise ModelLoadError(
                "--embedding-model needs the 'tokenizers' package (pip install tokenizers)"
            ) from e
        from onnxexec.runtime.session import InferenceSession

        self.tokenizer = HFTokenizer.from_file(tokenizer)
        self.tokenizer.enable_truncation(max_length)
        self.session = InferenceSession(model, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        for need in ("input_ids", "attention_mask"):
            if need not in self.inputs:
                raise ModelLoadError(
                    f"{model}: an embedding model needs an input '{need}', it has {self.inputs}"
                )

    def count_tokens(self, texts: Sequence[str]) -> int:
        return sum(len(e.ids) for e in self.tokenizer.encode_batch(list(texts)))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(N, D) float32 unit vectors: masked mean of output 0 over each text's tokens."""
        enc = self.tokenizer.encode_batch(list(texts))
        t = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), t), np.int64)
        mask = np.zeros((len(enc), t), np.int64)
        types = np.zeros((len(enc), t), np.int64)
        for i, e in enumerate(enc):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
            types[i, : len(e.ids)] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = types
        hidden = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)  # (N, T, D)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        return l2_normalize(pooled).astype(np.float32)
