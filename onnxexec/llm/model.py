"""A GGUF LLM loaded once: config, prepared weights, planned graphs and the KV cache."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxexec.errors import GGUFError, ModelLoadError
from onnxexec.kernels.quant.dequant import dequantize
from onnxexec.kernels.quant.qmatmul import BLAS_MIN_T, prepare_weight
from onnxexec.llm.checks import check_tensors
from onnxexec.llm.config import ModelConfig, config_from_metadata
from onnxexec.llm.graph import GraphOptions, build_llm_graph
from onnxexec.llm.weights import prepare_weights
from onnxexec.loaders.ggml_types import GGMLType
from onnxexec.loaders.gguf_reader import GGUFFile, GGUFTensor, read_gguf
from onnxexec.ops.registry import load_families
from onnxexec.passes.pipeline import fuse_llm
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


def _check_n_ctx(n_ctx: object, c: ModelConfig) -> int:
    """n_ctx within (0, the trained context] and a KV cache that fits in RAM."""
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int | np.integer):
        raise ValueError(f"context size must be an integer, got {n_ctx!r}")
    n = int(n_ctx)
    if not 0 < n <= c.n_ctx_train:
        raise ValueError(
            f"context size must be positive and <= {c.n_ctx_train} (the model's "
            f"context_length), got {n}"
        )
    need = 2 * c.n_layer * n * c.n_head_kv * c.head_dim * 4  # K and V caches, float32
    if need > _physical_memory():
        raise ValueError(
            f"a KV cache for n_ctx {n} needs {need / 2**30:.1f} GiB, more than this "
            f"machine's {_physical_memory() / 2**30:.1f} GiB of memory"
        )
    return n


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no limit known
        return 1 << 62


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
        warmup: bool = True,
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
        check_tensors(c, self.gguf.tensors, path)
        if n_ctx is not None:
            self.n_ctx = _check_n_ctx(n_ctx, c)
        else:  # checked too: the default's KV cache size comes from the file's metadata
            try:
                self.n_ctx = _check_n_ctx(min(4096, c.n_ctx_train), c)
            except ValueError as e:
                raise GGUFError(f"{path}: {e}") from None
        if isinstance(n_batch, bool) or not isinstance(n_batch, int) or n_batch <= 0:
            raise ValueError(f"n_batch must be a positive integer, got {n_batch!r}")
        self.n_batch = n_batch
        self.options = options or GraphOptions()
        # Q|K|V and gate|up relayouted into stacked arrays (parts are views; exact)
        self.weights = prepare_weights(
            self.gguf.tensors, c.n_layer, prepare_tensor, fuse=self.options.fuse
        )
        self.tokenizer = load_tokenizer(md)
        if self.tokenizer.vocab_size != c.n_vocab:  # llama.cpp: token_embd {n_embd, n_vocab}
            raise GGUFError(
                f"{path}: the vocabulary has {self.tokenizer.vocab_size} tokens but "
                f"token_embd.weight has {c.n_vocab} rows"
            )
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
        """Load (or compile) every kernel a later `eval` can take, then empty the cache.

        Runs the prompt paths (T >= 2 in int8 mode, T >= BLAS_MIN_T in float mode) and
        the one-token path both serial and staged (ops/llm_decode.py picks one per
        token from the machine's load and the thread count): no later call loads or
        compiles a kernel (issue 21), so a change of load, thread count or prompt
        length mid-generation never stalls on a compile. On by default
        (`LLM(..., warmup=False)` skips it; the first calls then load what they need).
        """
        from onnxexec.kernels.math.ggml_math import ready_twins
        from onnxexec.kernels.objload.watch import creating
        from onnxexec.ops.llm_decode import forced_path, warm_pool

        with creating(os.path.basename(self.path)):
            warm_pool()  # whether or not these runs find the cores free to use it
            ready_twins()  # the parallel copies only long prompts take
            for all_logits in (False, True):
                for t in (BLAS_MIN_T, 2):
                    if self.n_ctx < t + 1:
                        continue
                    self.reset()
                    self.eval([0] * t, all_logits=all_logits)
                    # one token: the same ops and kernels in either plan
                    for path in ("serial", "staged") if not all_logits else ():
                        with forced_path(path):
                            self.eval([0])
                            self.rewind(t)
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
                g = fuse_llm(g)  # the readable graph's layers as fused ops, exact
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
        toks = _token_ids(tokens, self.config.n_vocab)
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
        """Restore a save_state() result; ValueError (nothing changed) if it does not fit
        this model: more tokens than n_ctx, ids outside the vocabulary, or K/V arrays
        that are not one (n_tokens, Hkv, Dh) array per layer."""
        if not isinstance(state, CacheState):
            raise ValueError(f"load_state needs a CacheState, got {type(state).__name__}")
        toks = _token_ids(state.tokens, self.config.n_vocab)
        n = len(toks)
        if n > self.n_ctx:
            raise ValueError(f"saved state has {n} tokens > n_ctx {self.n_ctx}")
        c = self.config
        want = (n, c.n_head_kv, c.head_dim)
        for name, arrays in (("k", state.k), ("v", state.v)):
            if not isinstance(arrays, list | tuple) or len(arrays) != c.n_layer:
                raise ValueError(
                    f"saved state: '{name}' must hold {c.n_layer} arrays (one a layer)"
                )
            for il, a in enumerate(arrays):
                if not isinstance(a, np.ndarray) or a.shape != want or a.dtype.kind != "f":
                    got = (
                        f"{a.dtype}{list(a.shape)}"
                        if isinstance(a, np.ndarray)
                        else type(a).__name__
                    )
                    raise ValueError(
                        f"saved state: {name}[{il}] must be float{list(want)}, got {got}"
                    )
        for dst, src in zip(self.k_cache, state.k, strict=True):
            dst[:n] = src
        for dst, src in zip(self.v_cache, state.v, strict=True):
            dst[:n] = src
        self.tokens = toks


def _token_ids(tokens: Iterable[int], n_vocab: int) -> list[int]:
    """tokens as a list of ints, each in [0, n_vocab); ValueError naming the first bad one."""
    if isinstance(tokens, str | bytes) or not isinstance(tokens, Iterable):
        raise ValueError(f"token ids must be a sequence of integers, got {type(tokens).__name__}")
    out = []
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or not 0 <= t < n_vocab:
            raise ValueError(f"token #{i} is {t!r}, not an id in [0, {n_vocab})")
        out.append(int(t))
    return out
