"""com.microsoft QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul, MatMulNBits and
GatherBlockQuantized vs onnxruntime."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.unit.ops._ms_node import assert_within_one_step, ours_and_ort

RNG = np.random.default_rng(2323)


def _q(shape, dt):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dt)


def _s(v):
    return np.array(v, np.float32)


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize(
    ("adt", "bdt"), [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)]
)
def test_matmul_integer_to_float(adt, bdt, per_column):
    a, b = _q((2, 5, 48), adt), _q((48, 12), bdt)
    n = 12 if per_column else 1
    bs = RNG.uniform(0.001, 0.01, n).astype(np.float32).reshape(-1 if per_column else ())
    bz = _q(n, bdt).reshape(-1 if per_column else ())
    bias = RNG.normal(size=12).astype(np.float32)
    ins = [a, b, _s(0.02), bs, np.array(3, adt), bz, bias]
    (got,), (want,) = ours_and_ort("MatMulIntegerToFloat", ins)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("bdt", [np.int8, np.uint8])
def test_dynamic_quantize_matmul(bdt, per_column):
    a = RNG.normal(size=(3, 7, 64)).astype(np.float32)
    b = _q((64, 16), bdt)
    n = 16 if per_column else 1
    bs = RNG.uniform(0.001, 0.01, n).astype(np.float32).reshape(-1 if per_column else ())
    bz = _q(n, bdt).reshape(-1 if per_column else ())
    bias = RNG.normal(size=16).astype(np.float32)
    (got,), (want,) = ours_and_ort("DynamicQuantizeMatMul", [a, b, bs, bz, bias])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("quantized_out", [False, True])
@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (0, 1), (1, 0)])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(per_column, trans_a, trans_b, quantized_out):
    m, k, n = 6, 40, 10
    a = _q((k, m) if trans_a else (m, k), np.uint8)
    b = _q((n, k) if trans_b else (k, n), np.int8)
    bs = RNG.uniform(0.001, 0.01, n if per_column else ()).astype(np.float32)
    bz = np.zeros(n if per_column else (), np.int8)  # onnxruntime: symmetric int8 B
    c = RNG.integers(-5000, 5000, n).astype(np.int32)
    ins = [a, _s(0.03), np.array(120, np.uint8), b, bs, bz, c]
    if quantized_out:
        ins += [_s(0.05), np.array(128, np.uint8)]
    attrs = {"alpha": 0.5, "transA": trans_a, "transB": trans_b}
    (got,), (want,) = ours_and_ort("QGemm", ins, **attrs)
    if quantized_out:
        assert_within_one_step(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _nbits_inputs(n, k, block, zp_kind, bits=4):
    k_blocks = -(-k // block)
    b = RNG.integers(0, 256, (n, k_blocks, block * bits // 8)).astype(np.uint8)
    scales = RNG.uniform(0.01, 0.05, (n, k_blocks)).astype(np.float32)
    zp = None
    if zp_kind == "packed":
        zp = RNG.integers(0, 256, (n, -(-k_blocks * bits // 8))).astype(np.uint8)
    elif zp_kind == "float":
        zp = RNG.uniform(0, 15, (n, k_blocks)).astype(np.float32)
    return b, scales, zp


@pytest.mark.parametrize("accuracy_level", [0, 4])
@pytest.mark.parametrize("zp_kind", ["none", "packed", "float"])
@pytest.mark.parametrize("block", [32, 64, 128])
def test_matmul_nbits(block, zp_kind, accuracy_level):
    n, k = 24, 256
    b, scales, zp = _nbits_inputs(n, k, block, zp_kind)
    a = RNG.normal(size=(2, 3, k)).astype(np.float32)
    bias = RNG.normal(size=n).astype(np.float32)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block, "accuracy_level": accuracy_level}
    (got,), (want,) = ours_and_ort("MatMulNBits", [a, b, scales, zp, None, bias], **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("bits", [2, 8])
def test_matmul_nbits_other_widths(bits):
    n, k, block = 8, 96, 32  # K not a multiple of a 64 block elsewhere; here 3 blocks
    b, scales, zp = _nbits_inputs(n, k, block, "packed", bits)
    a = RNG.normal(size=(4, k)).astype(np.float32)
    attrs = {"K": k, "N": n, "bits": bits, "block_size": block}
    (got,), (want,) = ours_and_ort("MatMulNBits", [a, b, scales, zp], **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_matmul_nbits_k_not_a_block_multiple():
    n, k, block = 8, 80, 32
    b, scales, zp = _nbits_inputs(n, k, block, "packed")
    a = RNG.normal(size=(3, k)).astype(np.float32)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block}
    (got,), (want,) = ours_and_ort("MatMulNBits", [a, b, scales, zp], **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("dt", [ml_dtypes.int4, ml_dtypes.uint4])
@pytest.mark.parametrize(("gather_axis", "quantize_axis"), [(0, 1), (1, 0), (0, 0)])
def test_gather_block_quantized_4bit(dt, with_zp, gather_axis, quantize_axis):
    lo, hi = (-8, 8) if dt == ml_dtypes.int4 else (0, 16)
    data = RNG.integers(lo, hi, (64, 48)).astype(dt)
    block = 16
    sshape = [64, 48]
    sshape[quantize_axis] //= block
    scales = RNG.uniform(0.1, 1.0, sshape).astype(np.float32)
    zp = RNG.integers(lo, hi, sshape).astype(dt) if with_zp else None
    size = data.shape[gather_axis]
    idx = np.array([[0, 5, size - 1], [-1, 17, size + 3]], np.int64)  # size + 3: out of range
    attrs = {"block_size": block, "gather_axis": gather_axis, "quantize_axis": quantize_axis}
    (got,), (want,) = ours_and_ort(
        "GatherBlockQuantized", [data, idx, scales, zp], n_feeds=0, **attrs
    )
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("bits", [4, 8])
def test_gather_block_quantized_uint8(bits):
    rows, cols, block = 50, 64, 32
    data = RNG.integers(0, 256, (rows, cols * bits // 8)).astype(np.uint8)
    scales = RNG.uniform(0.1, 1.0, (rows, cols // block)).astype(np.float32)
    zp = RNG.integers(0, 256, (rows, cols // block * bits // 8)).astype(np.uint8)
    idx = np.array([3, 0, 49, 7], np.int32)
    attrs = {"bits": bits, "block_size": block, "gather_axis": 0, "quantize_axis": 1}
    (got,), (want,) = ours_and_ort(
        "GatherBlockQuantized", [data, idx, scales, zp], n_feeds=0, **attrs
    )
    np.testing.assert_allclose(got, want, rtol=1e-6)
