"""The semantics implementations most often get wrong, beyond the per-family tests.

Each test pins its opsets (old ones included where the handler has versions) and
checks against an independent reference: values written out from the spec, plain
numpy / Python slicing, or onnxruntime run on the same one-node model. Cases where
onnxruntime departs from the spec (or the ONNX test data) say so and use the spec.
Empty tensors and attributes-that-became-inputs have their own files
(test_empty_tensors.py, test_attr_to_input.py).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto

from tests.unit.ops._node import run_node, run_ort

RNG = np.random.default_rng(11)


def both(op: str, inputs: list, n_outputs: int = 1, opset: int = 21, **attrs: Any) -> tuple:
    """(onnxexec outputs, onnxruntime outputs) of one node."""
    return (
        run_node(op, inputs, n_outputs, opset=opset, **attrs),
        run_ort(op, inputs, n_outputs, opset=opset, **attrs),
    )


def assert_same(ours: list, theirs: list, where: str, atol: float = 1e-5) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{where}: {a.shape} vs {b.shape}"
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol, err_msg=where)


# --- Cast ----------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21])
def test_cast_float_to_int_truncates_toward_zero_at_every_version(opset):
    x = np.array([2.9, -2.9, 0.99, -0.99, 126.5, -127.5], np.float32)
    for to, dt in [(TensorProto.INT8, np.int8), (TensorProto.INT32, np.int32)]:
        (y,) = run_node("Cast", [x], opset=opset, to=to)
        assert y.dtype == dt
        np.testing.assert_array_equal(y, [2, -2, 0, 0, 126, -127])
    (y,) = run_node("Cast", [x.astype(np.float64)], opset=opset, to=TensorProto.INT64)
    np.testing.assert_array_equal(y, [2, -2, 0, 0, 126, -127])


def wrap(v: int, bits: int, signed: bool) -> int:
    """Two's-complement wrap of v into `bits` bits (the spec's int -> int rule)."""
    v %= 1 << bits
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


@pytest.mark.parametrize("opset", [6, 13, 21])
def test_cast_int_to_int_wraps_at_every_version(opset):
    x = np.array([300, -300, 65535, -32769, 2**31 - 1, -(2**31)], np.int64)
    for to, dt, bits, signed in [
        (TensorProto.INT8, np.int8, 8, True),
        (TensorProto.UINT8, np.uint8, 8, False),
        (TensorProto.INT16, np.int16, 16, True),
        (TensorProto.UINT16, np.uint16, 16, False),
    ]:
        (y,) = run_node("Cast", [x], opset=opset, to=to)
        assert y.dtype == dt
        assert y.tolist() == [wrap(int(v), bits, signed) for v in x]


# --- Div / Mod -------------------------------------------------------------------------

A = np.array([-7, 7, -7, 7, -6, 0, 1], np.int64)
B = np.array([2, 2, -2, -2, 4, -5, 3], np.int64)


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize(
    ("opset", "dtype"),
    [(7, np.int32), (7, np.int64), (13, np.int32), (14, np.int8), (14, np.int64)],
)
def test_integer_div_truncates_toward_zero(opset, dtype):
    ours, theirs = both("Div", [A.astype(dtype), B.astype(dtype)], opset=opset)
    assert ours[0].tolist() == [c_div(int(a), int(b)) for a, b in zip(A, B, strict=True)]
    assert_same(ours, theirs, f"Div-{opset} {dtype}")


@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_mod_integer_fmod0_sign_of_divisor_fmod1_c_fmod(opset, dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    py_mod = [int(x) % int(y) for x, y in zip(A, B, strict=True)]  # sign of the divisor
    c_fmod = [int(math.fmod(int(x), int(y))) for x, y in zip(A, B, strict=True)]
    for fmod, expected in [(0, py_mod), (1, c_fmod)]:
        ours, theirs = both("Mod", [a, b], opset=opset, fmod=fmod)
        assert ours[0].dtype == dtype and ours[0].tolist() == expected
        assert_same(ours, theirs, f"Mod-{opset} fmod={fmod}")
    # broadcasting a scalar divisor
    (y,) = run_node("Mod", [a, np.array(-3, dtype)], opset=opset)
    assert y.tolist() == [int(x) % -3 for x in A]


def test_mod_float_fmod1_is_c_fmod():
    a = np.array([-7.5, 7.5, -0.5, 5.0], np.float64)
    b = np.array([2.0, -2.0, 3.0, 2.5], np.float64)
    for opset in (10, 13):
        (y,) = run_node("Mod", [a, b], opset=opset, fmod=1)
        assert y.tolist() == [math.fmod(x, d) for x, d in zip(a, b, strict=True)]


# --- Pooling ---------------------------------------------------------------------------

X_POOL = RNG.standard_normal((1, 2, 7, 6)).astype(np.float32)
POOL_GRID = list(
    itertools.product(
        [(2, 2), (3, 2)],  # kernel
        [(1, 1), (2, 2), (3, 2)],  # strides
        [(0, 0, 0, 0), (1, 0, 1, 1), (1, 1, 1, 1)],  # pads
        [(1, 1), (2, 1)],  # dilations
        [0, 1],  # ceil_mode
    )
)


@pytest.mark.parametrize(
    ("op", "opset"),
    [("AveragePool", 19), ("AveragePool", 11), ("MaxPool", 12), ("MaxPool", 10), ("LpPool", 18)],
)
def test_pool_grid_matches_onnxruntime(op, opset):
    """ceil_mode (the last window averages only its real elements; no window starts in
    the right padding), count_include_pad, pads, strides and dilations together."""
    n = 0
    for k, s, p, d, ceil in POOL_GRID:
        if d != (1, 1) and opset == 11:  # AveragePool has dilations from 19
            continue
        attrs: dict[str, Any] = {"kernel_shape": k, "strides": s, "pads": p, "ceil_mode": ceil}
        if d != (1, 1):
            attrs["dilations"] = d
        variants = [{"count_include_pad": c} for c in (0, 1)] if op == "AveragePool" else [{}]
        for extra in variants:
            ours, theirs = both(op, [X_POOL], opset=opset, **attrs, **extra)
            assert_same(ours, theirs, f"{op}-{opset} {attrs} {extra}")
            n += 1
    assert n >= 36


def test_pool_2d_ceil_overhang_and_padding_by_hand():
    # 3x3 input, k 2, s 2, pads (1, 1, 0, 0), ceil: rows/cols windows
    # [pad, x0] and [x1, x2]; out = ceil((3 + 1 - 2) / 2 + 1) = 2, none start in the pad.
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0], "ceil_mode": 1}
    (y0,) = run_node("AveragePool", [x], opset=19, **attrs)
    np.testing.assert_allclose(y0[0, 0], [[1, 2.5], [5.5, 7]])
    # count_include_pad counts the explicit pad cells, never the ceil overhang
    (y1,) = run_node("AveragePool", [x], opset=19, count_include_pad=1, **attrs)
    np.testing.assert_allclose(y1[0, 0], [[1 / 4, 5 / 4], [11 / 4, 28 / 4]])
    (m,) = run_node("MaxPool", [x], opset=12, **attrs)
    np.testing.assert_array_equal(m[0, 0], [[1, 3], [7, 9]])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize(("op", "opset"), [("AveragePool", 19), ("MaxPool", 8), ("LpPool", 11)])
def test_pool_auto_pad_matches_onnxruntime(auto_pad, op, opset):
    x = RNG.standard_normal((1, 1, 5, 6)).astype(np.float32)
    for k, s in [((3, 2), (2, 2)), ((2, 2), (1, 1)), ((3, 3), (2, 3))]:
        variants = [{"count_include_pad": c} for c in (0, 1)] if op == "AveragePool" else [{}]
        for extra in variants:
            ours, theirs = both(
                op, [x], opset=opset, kernel_shape=k, strides=s, auto_pad=auto_pad, **extra
            )
            assert_same(ours, theirs, f"{op}-{opset} {auto_pad} k={k} s={s} {extra}")


# --- Resize ----------------------------------------------------------------------------

X_RS = RNG.standard_normal((1, 1, 4, 8)).astype(np.float32)
ROI = np.array([0, 0, 0.25, -0.25, 1, 1, 0.75, 1.5], np.float32)  # extrapolates on W
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
        "half_pixel_symmetric", "tf_crop_and_resize"]  # fmt: skip


@pytest.mark.parametrize("opset", [11, 13, 19])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_modes_match_onnxruntime(opset, mode):
    """Every coordinate_transformation_mode x nearest_mode / cubic_coeff_a /
    exclude_outside / antialias, up and down, tf_crop_and_resize extrapolating.

    Sizes (integral output lengths) with dyadic ratios: onnxruntime computes
    coordinates in float32 and, for align_corners / tf_crop_and_resize with a
    fractional output_width, uses the integer length (see the next test), so only
    configurations where both readings of the spec coincide are compared here.
    """
    extras: list[dict[str, Any]] = [{}]
    if mode == "nearest":
        extras += [{"nearest_mode": m} for m in NEAREST_MODES]
    if mode == "cubic":
        extras += [{"cubic_coeff_a": -0.5}, {"exclude_outside": 1}]
    if opset >= 18 and mode != "nearest":
        extras += [{"antialias": 1}, {"antialias": 1, "exclude_outside": 1}]
    n = 0
    for ctm in CTMS:
        if ctm == "half_pixel_symmetric" and opset < 19:
            continue
        if ctm == "tf_half_pixel_for_nn" and (opset >= 19 or mode != "nearest"):
            continue  # nearest-only, removed in Resize-19
        crop = ctm == "tf_crop_and_resize"
        for sizes, extra in itertools.product(([1, 1, 7, 9], [1, 1, 2, 3], [1, 1, 7, 3]), extras):
            attrs = {"mode": mode, "coordinate_transformation_mode": ctm, **extra}
            if crop:
                attrs["extrapolation_value"] = -3.0
            empty = np.array([], np.float32) if opset < 13 else None
            ins = [X_RS, ROI if crop else empty, empty, np.array(sizes, np.int64)]
            ours, theirs = both("Resize", ins, opset=opset, **attrs)
            assert_same(ours, theirs, f"Resize-{opset} {attrs} {sizes}", atol=1e-5)
            n += 1
    assert n >= 15


def test_resize_align_corners_uses_fractional_output_width():
    # Operators.md Resize, resize_downsample_scales_linear_align_corners: scales 0.6 on
    # width 4 give output_width 2.4 (2 outputs); x = 1 * (4 - 1) / (2.4 - 1) = 2.142857.
    # (onnxruntime divides by the integer length - 1 instead and gives 4.)
    x = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], np.float32)
    scales = np.array([1, 1, 0.6, 0.6], np.float32)
    for opset in (11, 13, 19):
        empty = np.array([], np.float32) if opset < 13 else None
        (y,) = run_node(
            "Resize",
            [x, empty, scales],
            opset=opset,
            mode="linear",
            coordinate_transformation_mode="align_corners",
        )
        np.testing.assert_allclose(y.reshape(-1), [1.0, 1 + 3 / 1.4], rtol=1e-6)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_keep_aspect_ratio_policy_values(policy, mode):
    # in (4, 8): sizes (6, 6) -> not_larger scale min(6/4, 6/8) = .75 -> (3, 6),
    # not_smaller 1.5 -> (6, 12); sizes (2, 6) -> .5 -> (2, 4) / .75 -> (3, 6).
    x = RNG.standard_normal((1, 2, 4, 8)).astype(np.float32)
    shapes = {
        "stretch": [(6, 6), (2, 6), (2, 6)],
        "not_larger": [(3, 6), (2, 4), (2, 4)],
        "not_smaller": [(6, 12), (3, 6), (3, 6)],
    }[policy]
    for (sizes, axes), shape in zip(
        [([6, 6], [2, 3]), ([2, 6], [-2, -1]), ([6, 2], [3, 2])], shapes, strict=True
    ):
        ins = [x, None, None, np.array(sizes, np.int64)]
        attrs = {"mode": mode, "keep_aspect_ratio_policy": policy}
        (y,) = run_node("Resize", ins, opset=18, axes=axes, **attrs)
        assert y.shape == (1, 2, *shape)
        # onnxruntime ignores the policy when axes are negative (it returns the input
        # unchanged); the spec counts them from the back, so it gets them normalised.
        theirs = run_ort("Resize", ins, opset=18, axes=[a % 4 for a in axes], **attrs)
        assert_same([y], theirs, f"{policy} {mode} {sizes} {axes}")


def test_resize_tf_crop_and_resize_nearest_extrapolates():
    # roi [0.5, 1.5] of a width-5 axis, 3 outputs: x = 0.5*4 + y * 1.0 * 4 / 2 = 2, 4, 6;
    # x = 6 lies past the last input (4) -> extrapolation_value.
    x = np.array([10, 20, 30, 40, 50], np.float32).reshape(1, 1, 1, 5)
    roi = np.array([0, 0, 0, 0.5, 1, 1, 1, 1.5], np.float32)
    for opset in (11, 13, 18):
        empty = np.array([], np.float32) if opset < 13 else None
        (y,) = run_node(
            "Resize",
            [x, roi, empty, np.array([1, 1, 1, 3], np.int64)],
            opset=opset,
            coordinate_transformation_mode="tf_crop_and_resize",
            extrapolation_value=-1.0,
        )
        np.testing.assert_array_equal(y.reshape(-1), [30, 50, -1])


# --- Slice / Gather ----------------------------------------------------------------------

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
V = np.arange(10, dtype=np.float32).reshape(2, 5)


@pytest.mark.parametrize("opset", [10, 11, 13])
@pytest.mark.parametrize(
    ("itype", "big", "small"), [(np.int32, I32_MAX, I32_MIN), (np.int64, I64_MAX, I64_MIN)]
)
def test_slice_negative_steps_and_int_max_min_ends(opset, itype, big, small):
    cases = [(-1, small, 1, -1), (big, small, 1, -2), (0, big, 1, 2), (small, big, 0, 1),
             (3, -big, 1, -1), (-2, -100, 1, -3), (1, 3, 1, -1), (big, 0, 1, -1)]  # fmt: skip
    for start, end, axis, step in cases:
        ins = [V, *(np.array([v], itype) for v in (start, end, axis, step))]
        (y,) = run_node("Slice", ins, opset=opset)
        # Python slicing clamps exactly as the spec does (start to [0, dim - 1] and
        # end to [-1, dim - 1] for negative steps).
        key = (slice(None),) * axis + (slice(start, end, step),)
        np.testing.assert_array_equal(y, V[key], err_msg=f"{start}:{end}:{step} axis {axis}")
    (y,) = run_node("Slice", [V, *(np.array([v], itype) for v in (-1, small, -1, -1))], opset=13)
    np.testing.assert_array_equal(y, V[:, ::-1])


@pytest.mark.parametrize("opset", [11, 13])
def test_gather_and_gather_elements_negative_indices(opset):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    idx = np.array([[-1, 0], [-4, 3]], np.int64)
    (y,) = run_node("Gather", [x, idx], opset=opset, axis=1)
    np.testing.assert_array_equal(y, x[:, idx % 4])
    idx0 = np.array([-3, 2, -1], np.int32)
    (y,) = run_node("Gather", [x, idx0], opset=opset, axis=-3)
    np.testing.assert_array_equal(y, x[idx0 % 3])
    ge = RNG.integers(-5, 5, size=(3, 4, 2))
    (y,) = run_node("GatherElements", [x, ge], opset=opset, axis=-1)
    np.testing.assert_array_equal(y, np.take_along_axis(x, ge % 5, axis=2))


# --- Softmax / LogSoftmax / Hardmax ------------------------------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [1, 11, 13])
def test_softmax_family_flattens_before_13(op, opset):
    x = RNG.standard_normal((2, 3, 2, 2)).astype(np.float32)
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = 5.0  # a tie: Hardmax takes the first
    for axis in [None, 0, 1, 2, 3] + ([-1, -3] if opset >= 11 else []):
        attrs = {} if axis is None else {"axis": axis}
        ours, theirs = both(op, [x], opset=opset, **attrs)
        assert_same(ours, theirs, f"{op}-{opset} {attrs}", atol=1e-6)
    # independent numpy for axis=1: a (2, 12) matrix before 13, one axis from 13 on
    x64 = x.astype(np.float64)
    rows = x64.reshape(2, 12) if opset < 13 else np.moveaxis(x64, 1, -1).reshape(-1, 3)
    if op == "Hardmax":
        ref_rows = np.eye(rows.shape[1])[rows.argmax(axis=1)]
    else:
        e = np.exp(rows - rows.max(axis=1, keepdims=True))
        ref_rows = e / e.sum(axis=1, keepdims=True)
        ref_rows = np.log(ref_rows) if op == "LogSoftmax" else ref_rows
    if opset < 13:
        ref = ref_rows.reshape(x.shape)
    else:
        ref = np.moveaxis(ref_rows.reshape(2, 2, 2, 3), -1, 1)
    (y,) = run_node(op, [x], opset=opset, axis=1)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


# --- ScatterND / ScatterElements / Where / TopK ----------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize(
    ("opset", "reduction"),
    [(16, "add"), (16, "mul"), (18, "add"), (18, "mul"), (18, "min"), (18, "max")],
)
def test_scatter_reductions_with_duplicates_match_onnxruntime(dtype, opset, reduction):
    data = (RNG.standard_normal((3, 5)) * 5).astype(dtype)
    idx = np.array([[1, 1, -4, 0], [2, 2, 2, -1], [0, 4, 4, 4]], np.int64)  # -4 == 1
    upd = (RNG.standard_normal((3, 4)) * 3).astype(dtype)
    ours, theirs = both(
        "ScatterElements", [data, idx, upd], opset=opset, axis=1, reduction=reduction
    )
    assert_same(ours, theirs, f"ScatterElements-{opset} {reduction}")
    nd_idx = np.array([[0, 1], [2, -1], [0, 1], [-3, -4]], np.int64)  # (0, 1) three times
    nd_upd = (RNG.standard_normal(4) * 3).astype(dtype)
    ours, theirs = both("ScatterND", [data, nd_idx, nd_upd], opset=opset, reduction=reduction)
    assert_same(ours, theirs, f"ScatterND-{opset} {reduction}")
    combine = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
    fold = combine[reduction].reduce([data[0, 1], nd_upd[0], nd_upd[2], nd_upd[3]])
    np.testing.assert_allclose(ours[0][0, 1], fold, rtol=1e-5)


@pytest.mark.parametrize("opset", [9, 16])
def test_where_three_way_broadcast_matches_numpy(opset):
    cond = RNG.random((4, 1, 1)) > 0.5
    a = RNG.standard_normal((1, 3, 1)).astype(np.float32)
    b = RNG.standard_normal((5,)).astype(np.float32)
    ours, theirs = both("Where", [cond, a, b], opset=opset)
    np.testing.assert_array_equal(ours[0], np.where(cond, a, b))
    assert ours[0].shape == (4, 3, 5)
    assert_same(ours, theirs, f"Where-{opset}")


T = np.array([[3, 1, 3, 2, 1, 3], [0, 5, 0, 5, 0, 0]], np.float32)


@pytest.mark.parametrize("opset", [1, 10, 11, 24])
def test_topk_ties_lower_index_and_flags(opset):
    k_in = [] if opset == 1 else [np.array([3], np.int64)]
    k_attr = {"k": 3} if opset == 1 else {}
    flag_sets = [{}] if opset < 11 else [{}, {"largest": 0}, {"largest": 0, "sorted": 1}]
    for flags in flag_sets:
        (v, i), theirs = both("TopK", [T, *k_in], 2, opset=opset, **k_attr, **flags)
        order = np.argsort(T if flags.get("largest") == 0 else -T, axis=1, kind="stable")[:, :3]
        np.testing.assert_array_equal(i, order)  # ties: the lower index first
        np.testing.assert_array_equal(v, np.take_along_axis(T, order, axis=1))
        assert_same([v, i], theirs, f"TopK-{opset} {flags}")
    if opset >= 11:  # sorted=0: any order, but the same set of (value, index) pairs
        v, i = run_node("TopK", [T, *k_in], 2, opset=opset, sorted=0)
        for row in range(2):
            assert sorted(i[row].tolist()) == sorted(np.argsort(-T[row], kind="stable")[:3])
            np.testing.assert_array_equal(v[row], T[row, i[row]])


# --- Reduce* noop_with_empty_axes ------------------------------------------------------------

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_noop_with_empty_axes_matches_onnxruntime(op):
    opset = 13 if op == "ReduceSum" else 18
    x = np.array([[-2.0, 3.0], [0.5, 1.0]], np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x)
    for axes in ([], [np.zeros(0, np.int64)]):
        for noop in (0, 1):
            ours, theirs = both(op, [x, *axes], opset=opset, noop_with_empty_axes=noop)
            assert_same(ours, theirs, f"{op} noop={noop} axes={'input' if axes else 'none'}")
            assert ours[0].shape == ((2, 2) if noop else (1, 1))
    # the opset before axes became an input: no axes attribute reduces everything
    (y,) = run_node(op, [x], opset=opset - 1, keepdims=0)
    assert y.shape == ()
