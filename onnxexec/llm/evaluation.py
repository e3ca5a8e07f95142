"""Perplexity as llama.cpp's llama-perplexity computes it (tools/perplexity).

The text is tokenized once (with BOS when the model adds one); at least 2*n_ctx
tokens are required. It is cut into chunks of n_ctx tokens; each chunk is evaluated
from an empty cache with its first token replaced by BOS (when the vocabulary adds
BOS), and only the second half of each chunk is scored: the tokens at positions
n_ctx/2 + 1 .. n_ctx-1, each predicted from the logits of the position before it
(perplexity.cpp: process_logits over n_ctx - 1 - first tokens from `first`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from onnxexec.llm.model import LLM


@dataclass
class ChunkResult:
    index: int
    nll_sum: float
    count: int

    @property
    def ppl_so_far(self) -> float:
        return math.exp(self.nll_sum / self.count)


def _log_softmax_at(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    return x[np.arange(len(targets)), targets] - lse


def perplexity(
    llm: LLM, text: str, n_ctx: int = 512, on_chunk: Callable[[ChunkResult], None] | None = None
) -> float:
    """exp(mean NLL) over the scored halves of every full chunk."""
    if n_ctx > llm.n_ctx:
        raise ValueError(f"--ctx {n_ctx} exceeds the model context {llm.n_ctx}")
    tok = llm.tokenizer
    ids = tok.encode(text, add_special=True, parse_special=False)
    n_chunks = len(ids) // n_ctx
    if len(ids) < 2 * n_ctx:
        raise ValueError(
            f"text has {len(ids)} tokens; need at least {2 * n_ctx} (2 * ctx, as llama-perplexity)"
        )
    nll_sum, count = 0.0, 0
    for res in _chunks(llm, ids, n_ctx, n_chunks):
        nll_sum += res.nll_sum
        count += res.count
        if on_chunk:
            on_chunk(ChunkResult(res.index, nll_sum, count))
    return math.exp(nll_sum / count)


def _chunks(llm: LLM, ids: list[int], n_ctx: int, n_chunks: int) -> Iterator[ChunkResult]:
    first = n_ctx // 2
    add_bos = bool(getattr(llm.tokenizer, "add_bos", False))
    for i in range(n_chunks):
        chunk = ids[i * n_ctx : (i + 1) * n_ctx]
        if add_bos:
            chunk = [llm.tokenizer.bos_id, *chunk[1:]]
        llm.reset()
        logits = llm.eval(chunk, all_logits=True)
        targets = np.asarray(chunk[first + 1 :], dtype=np.int64)
        lp = _log_softmax_at(logits[first : n_ctx - 1], targets)
        yield ChunkResult(i, float(-lp.sum()), len(targets))
