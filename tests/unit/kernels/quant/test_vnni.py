"""The AVX-512 VNNI lane sums (ggml_simd.VNNI) give the AVX2 code's bits.

Both variants of the same tile intrinsic are compiled in one process (the module's
VNNI gate patched while numba generates each) and run on the same bytes, including
the extremes where an int16 step could saturate (Q8_0 weights and activations of
-128 / 127, Q4_1 nibbles of 15): the outputs must be equal bit for bit, and the
VNNI variant must really contain `vpdpbusd` (and the AVX2 one must not). The gate
itself must be off under ONNXEXEC_ISA=avx2."""

from __future__ import annotations

import os
import subprocess
import sys

import numba as nb
import numpy as np
import pytest

from onnxexec.kernels import isa
from onnxexec.kernels.quant import ggml_simd
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act8
from onnxexec.kernels.quant.ggml_dot import BLOCK_TYPES
from tests.unit.kernels._qblocks import random_blocks

HOST_VNNI = ggml_simd.AVAILABLE and isa.has("avx512_vnni", "avx512vl")
needs_vnni = pytest.mark.skipif(not HOST_VNNI, reason="host without AVX-512 VNNI / VL")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))


def _tile(kind: int, rows: int, cols: int, vnni: bool, monkeypatch: pytest.MonkeyPatch):
    """An njit runner of one (rows x cols) tile intrinsic, generated with VNNI = vnni."""
    monkeypatch.setattr(ggml_simd, "VNNI", vnni)
    dot = ggml_simd._make_dot(kind, rows, cols)

    @nb.njit(nogil=True)
    def run(raw, rb, nblk, x8, xst, out):
        T, K = x8.shape
        N = out.shape[1]
        for r in range(0, N, rows):
            for t in range(0, T, cols):
                do = t * 3 * nblk
                dot(raw, r * rb, rb, nblk, x8, t * K, xst, do, do + nblk, out, t * N + r, N)

    return run


def _inputs(t: int, n: int, k: int, rows: int, seed: int):
    rng = np.random.default_rng(seed)
    raw = random_blocks(t, n * k // 32, rng).reshape(n * k // 32, BLOCK_TYPES[t][1])
    x = rng.standard_normal((rows, k)).astype(np.float32)
    if t == q.Q8_0:  # the int8 extremes in whole blocks: every pair at the edge
        raw[::3, 2:] = np.uint8(0x80)  # -128
        raw[1::3, 2:] = np.uint8(0x7F)
    elif t == q.Q4_1:
        raw[::2, 4:] = np.uint8(0xFF)  # nibbles 15
    x[:, :64] = -1.0  # quantizes to -127 (amax / 127 scale), the lowest activation
    x[0, 32:64] = 1.0
    x8, xst = quantize_act8(x)
    return raw.reshape(-1), x8, xst


@needs_vnni
@pytest.mark.parametrize("t", sorted(ggml_simd.KINDS), ids=q.type_name)
@pytest.mark.parametrize(("rows", "cols"), [(ggml_simd.HALF, ggml_simd.COLS), (ggml_simd.ROWS, 1)])
def test_vnni_tiles_equal_avx2_bits(t, rows, cols, monkeypatch):
    n, k, nrow = 8, 128, 4
    kind = ggml_simd.KINDS[t]
    raw, x8, xst = _inputs(t, n, k, nrow, seed=t + rows)
    rb = raw.size // n
    outs = {}
    for vnni in (False, True):
        run = _tile(kind, rows, cols, vnni, monkeypatch)
        out = np.full((nrow, n), np.nan, np.float32)
        run(raw, rb, k // 32, x8, xst, out)
        asm = "".join(run.inspect_asm().values())
        assert ("vpdpbusd" in asm) == vnni
        outs[vnni] = out
    assert not np.isnan(outs[True]).any()
    np.testing.assert_array_equal(outs[True].view(np.uint32), outs[False].view(np.uint32))


def test_gate_off_under_isa_avx2():
    code = "from onnxexec.kernels.quant import ggml_simd as g; print(g.VNNI)"
    env = dict(os.environ, ONNXEXEC_ISA="avx2", PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_gate_follows_host():
    assert ggml_simd.VNNI == (HOST_VNNI and isa.level() == "avx512")
