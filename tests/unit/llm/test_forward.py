"""The LLM graph run by the executor vs an independent float64 numpy forward pass."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.llm.graph import GraphOptions
from onnxexec.llm.model import LLM
from tests.unit.llm._tiny import Reference, write_tiny_gguf

EXACT = GraphOptions(kv_f16=False, ggml_act=False)
CASES = {
    "llama": {},
    "qwen2": {},
    "qwen3": {},
    # layers 0 and 2 use a 4-token sliding window (pattern 2), plus final soft-capping
    "gemma3": dict(n_layer=3, window=4, softcap=20.0),
}
TEXT = "the cat sat on a mat in the sun, then the rat ate"


@pytest.fixture(scope="module", params=sorted(CASES))
def tiny(request, tmp_path_factory):
    arch = request.param
    path = write_tiny_gguf(tmp_path_factory.mktemp(arch) / f"{arch}.gguf", arch, **CASES[arch])
    return arch, path


def test_all_logits_match_reference(tiny):
    _arch, path = tiny
    llm = LLM(path, n_ctx=64, options=EXACT)
    ids = llm.tokenizer.encode(TEXT, add_special=True)
    assert len(ids) > 8  # longer than the gemma3 window
    got = llm.eval(ids, all_logits=True)
    ref = Reference(path).forward(ids)
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-4 * np.abs(ref).max())
    np.testing.assert_array_equal(got.argmax(axis=1), ref.argmax(axis=1))


def test_quantized_weights_match_reference_on_dequantized_weights(tmp_path):
    """Q8_0 weights: the int8-activation path stays close to float math on the
    dequantized weights (activation rounding to 8 bits only)."""
    path = write_tiny_gguf(tmp_path / "q8.gguf", "qwen3", wtype="Q8_0")
    llm = LLM(path, n_ctx=64, options=EXACT)
    ids = llm.tokenizer.encode(TEXT, add_special=True)
    ref = Reference(path).forward(ids)
    got = llm.eval(ids, all_logits=True)
    np.testing.assert_allclose(got, ref, rtol=0, atol=3e-2 * np.abs(ref).max())


def test_last_logits_and_ggml_numerics_stay_close(tiny):
    """The default options (f16 KV cache, f16 GELU table) only perturb logits slightly."""
    _arch, path = tiny
    ids = LLM(path, n_ctx=32, options=EXACT).tokenizer.encode(TEXT, add_special=True)
    ref = Reference(path).forward(ids)[-1]
    got = LLM(path, n_ctx=32).eval(ids)
    assert got.shape == (1, ref.size)
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=2e-2 * np.abs(ref).max())
