"""Loading a GGUF model keeps one copy of each weight (issue #6's peak-RSS target).

Weights kept as GGUF bytes must be views of the file mapping; relayouted weights of a
fused group (Q|K|V, gate|up) must be views of the one stacked array that
qmatmul.prepare_fused builds in place, and equal what fuse_rows builds from separately
prepared weights (whose products the kernel tests check against references).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from onnxexec.kernels.quant import qmatmul as qm
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.dequant import block_geometry
from onnxexec.llm.model import LLM
from onnxexec.loaders.ggml_types import GGMLType

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "models"))

RELAYOUT_TYPES = [q.Q4_0, q.Q4_1, q.Q5_0, q.Q5_1, q.Q4_K, q.Q5_K, q.Q6_K, q.Q8_0]


def _raw(t: int, n: int, k: int, rng) -> np.ndarray:
    block, size = block_geometry(t)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    half = rng.integers(0x2000, 0x3000, raw.shape[0], dtype=np.uint16).view(np.uint8)
    for off in (0, 2, size - 2):  # the half scales of every block type used here
        raw[:, off : off + 2] = half.reshape(-1, 2)
    return raw.reshape(-1)


def _file_map(arr: np.ndarray) -> np.memmap:
    base = arr
    while not isinstance(base, np.memmap):
        base = base.base
        assert base is not None, "not a view of a memory map"
    return base


@pytest.mark.parametrize("t", RELAYOUT_TYPES)
def test_prepare_fused_equals_fuse_rows(t):
    rng = np.random.default_rng(100 + t)
    k = 256
    ns = [2100, 70, 64]  # 2100 > RELAYOUT_ROWS: chunked; 70 ends inside a lane group
    if not all(qm.relayouted(t, n) for n in ns):
        pytest.skip(f"{q.type_name(t)} keeps its GGUF bytes on this host")
    raws = [_raw(t, n, k, rng) for n in ns]
    fused, parts = qm.prepare_fused(raws, t, [(n, k) for n in ns])
    separate = [qm.prepare_weight(r, t, (n, k)) for r, n in zip(raws, ns, strict=True)]
    ref, ref_parts = qm.fuse_rows(separate)
    assert fused.shape == ref.shape == (2112 + 128 + 64, k) and fused.layout == ref.layout
    for key, a in ref.arrays.items():
        np.testing.assert_array_equal(fused.arrays[key], a)
    assert [p.col0 for p in parts] == [0, 2112, 2240]
    for p, rp in zip(parts, ref_parts, strict=True):
        assert p.parent is fused and p.shape == rp.shape and p.col0 == rp.col0
        for key, a in p.arrays.items():
            if isinstance(a, np.ndarray) and a.size:
                assert np.shares_memory(a, fused.arrays[key]), key
    x = rng.standard_normal((3, k)).astype(np.float32)
    np.testing.assert_array_equal(qm.qmatmul(x, fused), qm.qmatmul(x, ref))


def test_prepare_fused_rejects_what_it_cannot_stack():
    rng = np.random.default_rng(0)
    t = q.Q4_0
    if not qm.relayouted(t, 64):
        pytest.skip("Q4_0 keeps its GGUF bytes on this host")
    with pytest.raises(ValueError, match="row length"):
        qm.prepare_fused([_raw(t, 64, 256, rng), _raw(t, 64, 512, rng)], t, [(64, 256), (64, 512)])


@pytest.mark.parametrize("wtype", ["Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K", "F16"])
def test_loaded_weights_are_single_copies(wtype, vocab, tmp_path):
    import build_tiny_gguf

    path = build_tiny_gguf.build_tiny_gguf("llama", wtype, tmp_path / "m.gguf", vocab)
    llm = LLM(path, n_ctx=16, threads=1)
    n_raw = n_fused = 0
    for name, t in llm.gguf.tensors.items():
        w = llm.weights[name]
        if len(t.shape) == 1 or t.ggml_type == GGMLType.F32:
            continue
        assert isinstance(w, qm.QWeight), name  # never a float32 copy of a quantized matrix
        if w.layout == "raw":
            mm = _file_map(t.data)
            assert np.shares_memory(w.arrays["raw"], mm), name
            n_raw += 1
        elif w.parent is not None:
            for key, a in w.arrays.items():
                if isinstance(a, np.ndarray) and a.size:
                    assert np.shares_memory(a, w.parent.arrays[key]), (name, key)
            n_fused += 1
    n = llm.config.n_layer
    attn_ffn = sum(1 for name in llm.weights if name.split(".")[-2] in ("attn_q", "ffn_gate"))
    assert n_raw + n_fused >= attn_ffn == 2 * n
    assert n_fused == 0 or n_fused >= 2 * n  # relayouted groups are all stacked
