"""LLM: KV-cache reuse, prefix reuse, chunked prefill, saved state, context limits."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.llm.graph import GraphOptions
from onnxexec.llm.model import LLM
from tests.unit.llm._tiny import write_tiny_gguf

# float numerics: the cache reuse logic is checked without ggml's rounding, which (as in
# llama.cpp) sums in a different order for prompt batches than for single tokens
FLOAT = GraphOptions(kv_f16=False, ggml_act=False)

TEXT = "the cat sat on a mat in the sun, then the rat ate the hat"


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def path(request, tmp_path_factory):
    kw = dict(n_layer=3, window=4) if request.param == "gemma3" else {}
    return write_tiny_gguf(tmp_path_factory.mktemp("m") / "m.gguf", request.param, **kw)


@pytest.fixture()
def llm(path):
    return LLM(path, n_ctx=64, options=FLOAT)


def count_runs(llm, monkeypatch) -> list[int]:
    """Record the length of every batch the graph is executed on."""
    seen: list[int] = []
    import onnxexec.llm.model as model

    real = model.execute

    def spy(plan, feeds):
        seen.append(len(feeds["tokens"]))
        return real(plan, feeds)

    monkeypatch.setattr(model, "execute", spy)
    return seen


def test_two_pieces_equal_one_piece(llm):
    ids = llm.tokenizer.encode(TEXT)
    whole = llm.eval(ids, all_logits=True)
    llm.reset()
    a = llm.eval(ids[:7], all_logits=True)
    b = llm.eval(ids[7:], all_logits=True)
    np.testing.assert_allclose(np.concatenate([a, b]), whole, rtol=0, atol=1e-4)
    assert llm.tokens == ids and llm.n_past == len(ids)


def test_token_by_token_equals_batch(llm):
    ids = llm.tokenizer.encode(TEXT)[:10]
    whole = llm.eval(ids, all_logits=True)
    llm.reset()
    steps = np.concatenate([llm.eval([t]) for t in ids])
    np.testing.assert_allclose(steps, whole, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(steps.argmax(1), whole.argmax(1))


def test_chunked_prefill_equals_single_batch(path):
    ids = LLM(path, n_ctx=64).tokenizer.encode(TEXT)
    one = LLM(path, n_ctx=64, options=FLOAT).eval(ids, all_logits=True)
    chunked = LLM(path, n_ctx=64, n_batch=5, options=FLOAT)
    np.testing.assert_allclose(chunked.eval(ids, all_logits=True), one, rtol=0, atol=1e-4)
    last = LLM(path, n_ctx=64, n_batch=5, options=FLOAT).eval(ids)
    np.testing.assert_allclose(last, one[-1:], rtol=0, atol=1e-4)


def test_ggml_numerics_pieces_stay_close(path):
    """With ggml's rounding (the default) pieces differ in the last bits only."""
    llm = LLM(path, n_ctx=64)
    ids = llm.tokenizer.encode(TEXT)
    whole = llm.eval(ids, all_logits=True)
    llm.reset()
    pieces = np.concatenate([llm.eval(ids[:6], all_logits=True)] + [llm.eval([t]) for t in ids[6:]])
    np.testing.assert_allclose(pieces, whole, rtol=0, atol=1e-3 * np.abs(whole).max())
    np.testing.assert_array_equal(pieces.argmax(1), whole.argmax(1))


def test_prefix_reuse_evaluates_only_new_tokens(llm, monkeypatch):
    ids = llm.tokenizer.encode(TEXT)
    llm.eval(ids[:12])
    seen = count_runs(llm, monkeypatch)
    assert llm.reuse_prefix(ids) == 12
    out = llm.eval(ids[12:])
    assert seen == [len(ids) - 12]
    fresh = LLM(llm.path, n_ctx=64, options=FLOAT)
    np.testing.assert_allclose(out, fresh.eval(ids), rtol=0, atol=1e-4)


def test_reuse_prefix_rewinds_on_divergence_and_keeps_one_token(llm):
    ids = llm.tokenizer.encode(TEXT)
    llm.eval(ids)
    other = [*ids[:5], ids[5] + 1, *ids[6:]]
    assert llm.reuse_prefix(other) == 5 and llm.tokens == ids[:5]
    llm.eval(ids[5:])
    # identical prompt: all but the last token are reused, so there are logits to sample
    assert llm.reuse_prefix(ids) == len(ids) - 1


def test_save_and_load_state(llm):
    ids = llm.tokenizer.encode(TEXT)
    llm.eval(ids[:9])
    state = llm.save_state()
    want = llm.eval(ids[9:])
    llm.reset()
    llm.eval(ids[:3])  # overwrite the cache
    llm.load_state(state)
    assert llm.tokens == ids[:9]
    np.testing.assert_array_equal(llm.eval(ids[9:]), want)


def test_context_limit_and_empty_eval(path):
    small = LLM(path, n_ctx=6)
    with pytest.raises(ValueError, match="context full"):
        small.eval(list(range(10, 17)))
    with pytest.raises(ValueError, match="at least one token"):
        small.eval([])
    with pytest.raises(ValueError, match="positive"):
        LLM(path, n_ctx=0)


@pytest.mark.parametrize(
    ("arch", "wtype"), [("llama", "Q4_0"), ("llama", "Q8_0"), ("qwen2", "Q4_1"), ("gemma3", "Q5_0")]
)
def test_fused_graph_computes_the_same_bits(arch, wtype, tmp_path):
    """The LLM pass set's layer-sized ops (passes/llm_blocks.py) reproduce the
    one-op-per-node graph exactly."""
    path = write_tiny_gguf(tmp_path / "q.gguf", arch, wtype=wtype)
    ids = LLM(path, n_ctx=64).tokenizer.encode(TEXT)
    out = []
    for fuse in (True, False):
        llm = LLM(path, n_ctx=64, options=GraphOptions(fuse=fuse))
        prompt = llm.eval(ids, all_logits=True)
        steps = [llm.eval([t]) for t in ids[:4]]
        out.append(np.concatenate([prompt, *steps]))
    np.testing.assert_array_equal(out[0], out[1])
