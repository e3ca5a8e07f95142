"""Dequantization vs gguf-py, bit for bit, for every supported type.

Run also with NUMBA_DISABLE_JIT=1 (the sizes are small so the Python bodies stay fast).
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.dequant import SUPPORTED_TYPES, block_geometry, dequantize
from onnxexec.kernels.quant.fp16 import f16_to_f32, round_to_f16
from tests.unit.kernels._qblocks import (
    ALL_TYPES,
    extreme_blocks,
    geometry,
    mismatch_report,
    name,
    random_blocks,
    reference_dequant,
)

# inf * 0 in the extreme-scale blocks warns when the kernels run as Python (NUMBA_DISABLE_JIT)
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning"
)

GGUF_QUANTIZABLE = (q.Q4_0, q.Q4_1, q.Q5_0, q.Q5_1, q.Q8_0, q.BF16)


def _check(raw: np.ndarray, t: int, n_values: int) -> None:
    ours = dequantize(raw, t, (n_values,))
    report = mismatch_report(ours, reference_dequant(raw, t), raw, t)
    if report:
        pytest.fail(report)


@pytest.mark.parametrize("t", ALL_TYPES, ids=name)
def test_random_blocks_bit_exact(t: int) -> None:
    rng = np.random.default_rng(t)
    block, _ = geometry(t)
    n_blocks = 48 if block > 1 else 4096
    _check(random_blocks(t, n_blocks, rng), t, n_blocks * block)


@pytest.mark.parametrize("t", [t for t in ALL_TYPES if t not in (q.F32, q.F16, q.BF16)], ids=name)
def test_extreme_scales_bit_exact(t: int) -> None:
    """Scales of 0, -0, subnormal, max, inf, NaN: inf*0 -> NaN etc. must match too."""
    raw = extreme_blocks(t, np.random.default_rng(100 + t))
    block, size = geometry(t)
    _check(raw, t, raw.size // size * block)


@pytest.mark.parametrize("t", GGUF_QUANTIZABLE, ids=name)
def test_gguf_quantized_data_bit_exact(t: int) -> None:
    """Blocks written by gguf-py's own quantizer from realistic float data."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 64)) * np.logspace(-3, 2, 8)[:, None]).astype(np.float32)
    raw = gguf.quants.quantize(x, gguf.GGMLQuantizationType(t)).reshape(-1).view(np.uint8)
    _check(raw, t, x.size)


def test_all_half_bit_patterns() -> None:
    raw = np.arange(65536, dtype="<u2").view(np.uint8)
    _check(raw, q.F16, 65536)


def test_shape_and_f32_view() -> None:
    x = np.arange(12, dtype=np.float32)
    out = dequantize(x.view(np.uint8), q.F32, (3, 4))
    assert out.shape == (3, 4)
    assert np.shares_memory(out, x)
    raw = random_blocks(q.Q4_K, 2, np.random.default_rng(0))
    assert dequantize(raw, q.Q4_K, (2, 256)).shape == (2, 256)


def test_errors() -> None:
    with pytest.raises(NotImplementedError, match="IQ2_XXS"):
        dequantize(np.zeros(66, np.uint8), gguf.GGMLQuantizationType.IQ2_XXS, (256,))
    with pytest.raises(ValueError, match="Q8_0: 32 values need 34 bytes"):
        dequantize(np.zeros(35, np.uint8), q.Q8_0, (2, 16))
    with pytest.raises(ValueError, match="multiple of the block size"):
        dequantize(np.zeros(34, np.uint8), q.Q8_0, (31,))
    with pytest.raises(NotImplementedError):
        block_geometry(q.TQ1_0)


def test_supported_types() -> None:
    assert set(ALL_TYPES) == set(SUPPORTED_TYPES)
    for t in ALL_TYPES:
        assert block_geometry(t) == geometry(t)


def test_half_helpers() -> None:
    """f16_to_f32 on every half pattern, round_to_f16 vs numpy's float16 cast (RNE)."""
    pats = np.arange(65536, dtype=np.uint32)
    ref = pats.astype("<u2").view(np.float16).astype(np.float32)
    sel = pats[:: 97 if _jit_disabled() else 1]
    ours = np.array([f16_to_f32(np.uint8(p & 0xFF), np.uint8(p >> 8)) for p in sel], np.float32)
    assert mismatch_report(ours, ref[sel], np.zeros(2 * sel.size, np.uint8), q.F16) is None
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            (rng.standard_normal(2000) * 10.0 ** rng.uniform(-9, 5, 2000)).astype(np.float32),
            np.array(
                [65504, 65519.99, 65520, 1e9, -1e9, 2**-25, 2**-24 * 1.5, 0.0, -0.0], np.float32
            ),
        ]
    )
    ours = np.array([round_to_f16(v) for v in x], np.float32)
    np.testing.assert_array_equal(ours, x.astype(np.float16).astype(np.float32))


def _jit_disabled() -> bool:
    import numba

    return bool(numba.config.DISABLE_JIT)
