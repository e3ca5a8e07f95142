"""Perplexity on a tiny model vs a direct numpy computation of llama-perplexity's
definition (tools/perplexity/perplexity.cpp), using the independent reference forward."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxexec.llm.evaluation import perplexity
from onnxexec.llm.graph import GraphOptions
from onnxexec.llm.model import LLM
from tests.unit.llm._tiny import Reference, write_tiny_gguf

TEXT = (
    "the cat sat on a mat in the sun, then the rat ate the hat and ran at the "
    "man in the van; there was a fat bat on the hat rack near the tan sand. "
) * 2


def reference_ppl(path, ids: list[int], n_ctx: int, bos: int | None) -> tuple[float, int]:
    ref = Reference(path)
    first = n_ctx // 2
    nll, count = 0.0, 0
    for c in range(len(ids) // n_ctx):
        chunk = list(ids[c * n_ctx : (c + 1) * n_ctx])
        if bos is not None:
            chunk[0] = bos
        logits = ref.forward(chunk)
        for j in range(first + 1, n_ctx):  # token j predicted by position j - 1
            row = logits[j - 1]
            m = row.max()
            nll -= row[chunk[j]] - m - math.log(np.exp(row - m).sum())
            count += 1
    return math.exp(nll / count), count


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_matches_numpy_definition(arch, tmp_path):
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", arch)
    llm = LLM(path, n_ctx=32, options=GraphOptions(kv_f16=False, ggml_act=False))
    ids = llm.tokenizer.encode(TEXT, add_special=True)
    n_ctx = 16
    assert len(ids) >= 3 * n_ctx
    chunks = []
    got = perplexity(llm, TEXT, n_ctx, on_chunk=chunks.append)
    bos = llm.tokenizer.bos_id if llm.tokenizer.add_bos else None
    assert (bos is not None) == (arch == "llama")
    want, count = reference_ppl(path, ids, n_ctx, bos)
    assert got == pytest.approx(want, rel=1e-5)
    assert len(chunks) == len(ids) // n_ctx and chunks[-1].count == count
    assert chunks[-1].ppl_so_far == pytest.approx(got)


def test_needs_two_contexts_of_text(tmp_path):
    llm = LLM(write_tiny_gguf(tmp_path / "m.gguf"), n_ctx=32)
    with pytest.raises(ValueError, match="need at least 64"):
        perplexity(llm, "the cat sat", 32)
    with pytest.raises(ValueError, match="exceeds the model context"):
        perplexity(llm, TEXT, 64)
