"""KV caches for several sequences on one LLM's weights, and how prompts are cut.

`SlotModel` owns one KV cache per slot (per layer k/v float32[S, C, Hkv, Dh]; slot s's
rows are the contiguous view [s]) and runs the decoder graph of llm/graph.py on them:
`prefill` appends a piece of one sequence's prompt, `decode` one token of each of
several sequences.

Exactness. A row's logits depend on how it was batched, not only on its tokens:
llama.cpp's (and our) matmul and attention kernels pick a summation order from the
number of rows T they get (kernels/quant/qmatmul.py: a single row takes the vec_dot order,
Q4_K / Q6_K from 8 rows the tiled gemm orders, Q4_K's rows past the last whole group
of 4 the gemv order; ops/llm_fused.py: T = 1 runs the one-token attention path). So
that every sequence computes what `generate` computes for it alone (the prompt in
pieces of LLM.n_batch, then one token at a time), prompts are cut into pieces that give
every row the same `row_class` it gets in that run (`cut`), and a cached prefix is
reused only as far as its rows' classes equal those of the new prompt's run alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numba as nb
import numpy as np

from onnxexec.kernels.quant import qtypes as qt
from onnxexec.kernels.quant.qmatmul import QWeight
from onnxexec.llm.batch_graph import batch_graph
from onnxexec.llm.graph import build_llm_graph
from onnxexec.ops.contention import free_cores
from onnxexec.ops.registry import load_families
from onnxexec.passes.pipeline import fuse_llm
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import GraphPlan, plan_graph

# Row counts where the kernels change summation order (qgemm_exact.GEMM_MIN_T,
# ggml_dot_k.TILED_MIN_T: 8; Q4_K's gemm groups: 4).
MIN_ROWS = 8
GROUP = 4

RowClass = tuple[bool, bool, bool]


def row_class(r: int, start: int, end: int) -> RowClass:
    """How row r of a piece [start, end) evaluated as one batch is summed: (single row,
    fewer than MIN_ROWS rows, inside the piece's whole groups of GROUP rows)."""
    t = end - start
    return (t == 1, t < MIN_ROWS, r - start < t // GROUP * GROUP)


DECODED: RowClass = row_class(0, 0, 1)


def alone_classes(n: int, n_batch: int) -> list[RowClass]:
    """The classes of an n-token prompt evaluated alone (LLM.eval: pieces of n_batch)."""
    out = []
    for a in range(0, n, n_batch):
        b = min(a + n_batch, n)
        out.extend(row_class(r, a, b) for r in range(a, b))
    return out


def cut(start: int, n: int, n_batch: int, budget: int) -> int:
    """How many prompt rows from `start` (a piece boundary) to evaluate now, at most
    `budget` when possible (0: wait). Pieces refine LLM.eval's n_batch pieces so each row
    keeps its class: a piece shorter than MIN_ROWS is taken whole, a longer one in parts
    of >= MIN_ROWS rows whose lengths are multiples of GROUP except the part ending it.
    The first waiting sequence is given a budget of at least 2 * MIN_ROWS, so it always
    progresses (taking at most MIN_ROWS - 1 rows more than its budget)."""
    a = start // n_batch * n_batch
    b = min(a + n_batch, n)
    rem = b - start
    if b - a < MIN_ROWS or rem <= budget:
        return rem if rem <= max(budget, MIN_ROWS - 1) else 0
    take = budget // GROUP * GROUP
    if rem - take < MIN_ROWS:
        take = (rem - MIN_ROWS) // GROUP * GROUP
    return take if take >= MIN_ROWS else 0


def reusable(
    cached: Sequence[int], classes: Sequence[RowClass], prompt: Sequence[int], n_batch: int
) -> int:
    """The longest prefix of `prompt` (at most len - 1: the last token's logits are
    needed) held by a cache with these tokens and row classes, with every row's class
    equal to the prompt's alone and ending on a boundary `cut` can continue from."""
    want = alone_classes(len(prompt), n_batch)
    n = 0
    limit = min(len(cached), len(prompt) - 1)
    while n < limit and cached[n] == prompt[n] and classes[n] == want[n]:
        n += 1
    while n > 0 and not _boundary(n, len(prompt), n_batch):
        n -= 1
    return n


def _boundary(n: int, length: int, n_batch: int) -> bool:
    """A row where a piece of `cut` may start: an n_batch boundary, or inside a piece
    of >= MIN_ROWS rows at a multiple of GROUP that leaves >= MIN_ROWS rows on both sides."""
    a = n // n_batch * n_batch
    b = min(a + n_batch, length)
    return n == a or ((n - a) % GROUP == 0 and n - a >= MIN_ROWS and b - n >= MIN_ROWS)


class SlotModel:
    """The decoder of an LLM over `n_slots` KV caches of n_ctx positions each."""

    def __init__(self, llm: Any, n_slots: int, n_ctx: int) -> None:
        c = llm.config
        self.llm = llm
        self.n_slots = n_slots
        self.n_ctx = n_ctx
        shape = (n_slots, n_ctx, c.n_head_kv, c.head_dim)
        self.k = [np.zeros(shape, np.float32) for _ in range(c.n_layer)]
        self.v = [np.zeros(shape, np.float32) for _ in range(c.n_layer)]
        self._plans: dict[bool, GraphPlan] = {}
        self.max_rows = max_decode_rows(llm.weights.values())

    def plan(self, batch: bool = False) -> GraphPlan:
        """The single-sequence graph (logits of the last row) with C = n_ctx, or with
        `batch` its variant for one token of each of N sequences (llm/batch_graph.py)."""
        if batch not in self._plans:
            llm = self.llm
            g = build_llm_graph(
                llm.config, llm.weights, n_ctx=self.n_ctx, last_only=not batch, options=llm.options
            )
            if llm.options.fuse:
                g = fuse_llm(g)
            if batch:
                g = batch_graph(g, self.n_slots)
            load_families("llm", "llm_fused", "llm_batch")
            self._plans[batch] = plan_graph(g)
        return self._plans[batch]

    def prefill(self, slot: int, tokens: Sequence[int], pos: int) -> np.ndarray:
        """Evaluate tokens at positions pos.. in slot's cache as one batch: (V,) logits
        of the last one."""
        feeds: dict[str, Any] = {
            "tokens": np.asarray(tokens, np.int64),
            "pos": np.asarray(pos, np.int64),
        }
        for il in range(len(self.k)):
            feeds[f"k_cache.{il}"] = self.k[il][slot]
            feeds[f"v_cache.{il}"] = self.v[il][slot]
        return execute(self.plan(), feeds)[0][-1]

    def decode(self, slots: Sequence[int], tokens: Sequence[int], pos: Sequence[int]) -> np.ndarray:
        """One token of each sequence: (N, V) logits, row i for slots[i]. One pass of
        the batched graph for up to max_rows sequences (each weight read once)."""
        n = len(slots)
        feeds: dict[str, Any] = {}
        for il in range(len(self.k)):
            feeds[f"k_cache.{il}"] = self.k[il]
            feeds[f"v_cache.{il}"] = self.v[il]
        outs = []
        with _threads_if_free():
            for i in range(0, n, self.max_rows):
                feeds["tokens"] = np.asarray(tokens[i : i + self.max_rows], np.int64)
                feeds["pos"] = np.asarray(pos[i : i + self.max_rows], np.int64)
                feeds["slot"] = np.asarray(slots[i : i + self.max_rows], np.int64)
                outs.append(execute(self.plan(batch=True), feeds)[0])
        return outs[0] if len(outs) == 1 else np.concatenate(outs)


@contextmanager
def _threads_if_free() -> Iterator[None]:
    """Kernels on the calling thread alone while another process holds a core: each of
    a pass's ~200 parallel regions would wait for a descheduled thread (ops/contention.py;
    the one-token ops decide the same way). numba's thread count is per calling thread."""
    if free_cores() or nb.get_num_threads() == 1:
        yield
        return
    n = nb.get_num_threads()
    nb.set_num_threads(1)
    try:
        yield
    finally:
        nb.set_num_threads(n)


def max_decode_rows(weights: Any) -> int:
    """How many sequences one batched decode pass may hold so that every row is summed
    as a single token is. The block types (Q4_0 .. Q8_0) sum each row alike at any row
    count (tinyBLAS and vec_dot share their arithmetic, kernels/quant/ggml_dot.py); the
    K-quants change order from MIN_ROWS rows (tiled orders) and Q4_K from GROUP rows
    (its repacked gemm order, kernels/quant/ggml_simd_k.py); float matrices (F32 / F16 /
    BF16) from 2 rows (kernels/quant/ggml_dot_f16.py): those decode one sequence a pass."""
    types = set()
    for w in weights:
        if isinstance(w, QWeight):
            types.add(int(w.ggml_type))
        elif isinstance(w, np.ndarray) and w.ndim == 2:
            types.add(qt.F32)
    if types & {qt.F32, qt.F16, qt.BF16}:
        return 1
    if qt.Q4_K in types:
        return GROUP - 1
    if types & {qt.Q2_K, qt.Q3_K, qt.Q5_K, qt.Q6_K}:
        return MIN_ROWS - 1
    return 1 << 30
