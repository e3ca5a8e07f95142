"""Compiled kernels of the ai.onnx.ml ops (kernels/ml/ml_scores.py, ml_svm.py, trees.py)
against numpy formulas written out here, plus the handlers' cached fast paths."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.ml import ml_scores, ml_svm, tree_scores, trees
from onnxexec.ops import ml_encoders
from onnxexec.ops.ml_common import memo, probit
from onnxexec.ops.ml_tree_build import forest_from_ids
from tests.unit.ops.test_ml_trees import _random_trees, _reference_walk

f32 = np.float32

# ---------------------------------------------------------------- score transforms


def _np_transform(s: np.ndarray, kind: int) -> np.ndarray:
    """The post-transforms as plain float32 numpy (ONNX-ML / onnxruntime ml_common.h)."""
    with np.errstate(all="ignore"):
        if kind == ml_scores.LOGISTIC:
            return (f32(1) / (f32(1) + np.exp(-s))).astype(f32)
        if kind == ml_scores.SOFTMAX:
            e = np.exp(s - s.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        if kind == ml_scores.SOFTMAX_ZERO:
            top = s.max(axis=1, keepdims=True)
            nz = np.abs(s) > f32(1e-7)
            e = np.where(nz, np.exp(s - top), s * np.exp(-top))
            return e / np.where(nz, e, 0).sum(axis=1, keepdims=True)
        if kind == ml_scores.PROBIT:
            # sqrt(2) erfinv(2p - 1) with Winitzki's a = 0.147
            x = 2 * s.astype(np.float64) - 1
            ln = np.log((1 - x) * (1 + x))
            v = 2 / (np.pi * 0.147) + ln / 2
            return (np.sqrt(2) * np.sign(x) * np.sqrt(-v + np.sqrt(v * v - ln / 0.147))).astype(f32)
    return s


@pytest.mark.parametrize(
    "kind",
    [
        ml_scores.NONE,
        ml_scores.LOGISTIC,
        ml_scores.SOFTMAX,
        ml_scores.SOFTMAX_ZERO,
        ml_scores.PROBIT,
    ],
)
def test_transform_rows_match_numpy(kind):
    rng = np.random.default_rng(kind)
    s = rng.normal(scale=3, size=(20, 4)).astype(f32)
    s[3] = [0.0, 0.0, 5.0, -2.0]  # exact zeros: SOFTMAX_ZERO leaves them out
    s[4] = [-80.0, 90.0, 0.5, 0.0]  # logistic/softmax far from 0
    if kind == ml_scores.PROBIT:
        s = rng.uniform(0.01, 0.99, size=(20, 4)).astype(f32)
    got = s.copy()
    ml_scores.transform_rows(got, kind)
    if kind == ml_scores.PROBIT:
        # the float32 Winitzki formula cancels near p = 0.5: same float32 steps as the
        # numpy form the op used, and within 2e-4 of the float64 formula
        np.testing.assert_allclose(got, probit(s), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, _np_transform(s, kind), atol=2e-4)
        return
    np.testing.assert_allclose(got, _np_transform(s, kind), rtol=2e-6, atol=1e-7)


def test_argmax_row_matches_numpy_with_ties_and_nan():
    for row in ([1.0, 3.0, 3.0], [2.0, np.nan, 5.0, np.nan], [-1.0, -1.0], [np.nan, 1.0]):
        a = np.array(row, f32)
        assert ml_scores.argmax_row(a) == np.argmax(a)


@pytest.mark.parametrize("kind", [ml_scores.NONE, ml_scores.SOFTMAX, ml_scores.LOGISTIC])
def test_linear_classify_is_transformed_xw_plus_b(kind):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(9, 5)).astype(f32)
    w = rng.normal(size=(3, 5)).astype(f32)
    b = rng.normal(size=3).astype(f32)
    scores, best = ml_scores.linear_classify(x, w, b, kind)
    raw = x.astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_array_equal(best, np.argmax(raw, axis=1))
    np.testing.assert_allclose(scores, _np_transform(raw.astype(f32), kind), rtol=1e-5, atol=1e-6)
    # one column: never transformed (the op expands binary scores itself)
    one, _ = ml_scores.linear_classify(x, w[:1], b[:1], ml_scores.LOGISTIC)
    np.testing.assert_allclose(one[:, 0], raw[:, 0], rtol=1e-5, atol=1e-6)


def test_normalize_max_l1_l2_and_zero_rows():
    v = np.array([[3.0, -4.0, 0.0], [0.0, 0.0, 0.0], [-1.0, -2.0, -4.0]], f32)
    l1 = np.abs(v).sum(axis=1, keepdims=True)
    l2 = np.sqrt((v * v).sum(axis=1, keepdims=True))
    mx = v.max(axis=1, keepdims=True)
    for norm, d in ((ml_scores.NORM_L1, l1), (ml_scores.NORM_L2, l2), (ml_scores.NORM_MAX, mx)):
        want = np.where(d != 0, v / np.where(d != 0, d, 1), v)
        np.testing.assert_allclose(ml_scores.normalize(v, norm), want, rtol=1e-6)


# ---------------------------------------------------------------- SVM


def _np_kernel(x, sv, kind, gamma, coef0, degree):
    x64, v64 = x.astype(np.float64), sv.astype(np.float64)
    if kind == ml_svm.RBF:
        return np.exp(-gamma * ((x64[:, None, :] - v64[None]) ** 2).sum(axis=2))
    dot = x64 @ v64.T
    if kind == ml_svm.LINEAR:
        return dot
    dot = gamma * dot + coef0
    with np.errstate(invalid="ignore"):  # negative ** 2.5 is NaN in both
        return np.power(dot, degree) if kind == ml_svm.POLY else np.tanh(dot)


@pytest.mark.parametrize("kind", [ml_svm.LINEAR, ml_svm.POLY, ml_svm.RBF, ml_svm.SIGMOID])
@pytest.mark.parametrize("degree", [3.0, 2.5])
def test_kernel_values_match_numpy(kind, degree):
    rng = np.random.default_rng(kind)
    x = rng.normal(size=(7, 3)).astype(f32)
    sv = rng.normal(size=(5, 3))
    got = ml_svm.kernel_values(x, sv, kind, 0.3, 0.5, degree)
    want = _np_kernel(x, sv, kind, 0.3, 0.5, degree)
    np.testing.assert_allclose(got, want, rtol=1e-5, equal_nan=True)
    assert got.dtype == np.float32


def _np_couple(r: np.ndarray) -> np.ndarray:
    """libsvm's multiclass_probability (Wu, Lin & Weng 2004) for one (K, K) matrix."""
    k = r.shape[0]
    q = np.zeros((k, k), f32)
    for i in range(k):
        for j in range(k):
            if j != i:
                q[i, i] += r[j, i] * r[j, i]
                q[i, j] = -r[j, i] * r[i, j]
    p = np.full(k, f32(1) / f32(k), f32)
    for _ in range(100):
        qp = q @ p
        pqp = f32(p @ qp)
        if np.abs(qp - pqp).max() < f32(0.005) / f32(k):
            break
        for i in range(k):
            diff = (-qp[i] + pqp) / q[i, i]
            p[i] += diff
            pqp = (pqp + diff * (diff * q[i, i] + 2 * qp[i])) / (1 + diff) / (1 + diff)
            qp = (qp + diff * q[i]) / (1 + diff)
            p = p / (1 + diff)
    return p


def test_svc_scores_votes_and_coupled_probabilities():
    rng = np.random.default_rng(3)
    per_class = [2, 3, 1, 2]
    k, n_vec = len(per_class), sum(per_class)
    x = rng.normal(size=(6, 3)).astype(f32)
    sv = rng.normal(size=(n_vec, 3))
    coef = rng.normal(size=(k - 1, n_vec))
    n_pairs = k * (k - 1) // 2
    rho = rng.normal(size=n_pairs)
    a = (rng.normal(size=n_pairs) - 2).astype(f32)
    b = (rng.normal(size=n_pairs) / 10).astype(f32)
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(np.int64)
    pairs, best, probs = ml_svm.svc_scores(
        x, sv, ml_svm.RBF, 0.4, 0.0, 0.0, coef, rho, starts, a, b
    )
    kern = _np_kernel(x, sv, ml_svm.RBF, 0.4, 0.0, 0.0).astype(f32).astype(np.float64)
    col = 0
    for i in range(k - 1):
        for j in range(i + 1, k):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            want = kern[:, si] @ coef[j - 1, si] + kern[:, sj] @ coef[i, sj] + rho[col]
            np.testing.assert_allclose(pairs[:, col], want, rtol=1e-5, atol=1e-6)
            col += 1
    for row in range(x.shape[0]):
        votes = np.zeros(k, int)
        rm = np.zeros((k, k), f32)
        col = 0
        for i in range(k - 1):
            for j in range(i + 1, k):
                votes[i if pairs[row, col] > 0 else j] += 1
                t = pairs[row, col] * a[col] + b[col]
                p = np.clip(f32(1) - f32(1) / (f32(1) + np.exp(-t)), 1e-7, 1 - 1e-7)
                rm[i, j], rm[j, i] = p, 1 - p
                col += 1
        assert best[row] == np.argmax(votes)
        np.testing.assert_allclose(probs[row], _np_couple(rm), rtol=1e-4, atol=1e-6)
    _, _, none = ml_svm.svc_scores(
        x, sv, ml_svm.RBF, 0.4, 0.0, 0.0, coef, rho, starts, a[:0], b[:0]
    )
    assert none is None


def test_svr_scores_sum_kernel_times_coef():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 2)).astype(f32)
    sv, coef = rng.normal(size=(4, 2)), rng.normal(size=4)
    got = ml_svm.svr_scores(x, sv, ml_svm.POLY, 0.5, 1.0, 2.0, coef, 0.25)
    want = _np_kernel(x, sv, ml_svm.POLY, 0.5, 1.0, 2.0).astype(f32) @ coef + 0.25
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---------------------------------------------------------------- trees


_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")


def _branchy_trees(rng, *args, **kwargs):
    """_random_trees with at least a few branch nodes (a root may come out a leaf)."""
    while True:
        a, w = _random_trees(rng, *args, **kwargs)
        if sum(m != "LEAF" for m in a["nodes_modes"]) >= 4:
            return a, w


def _forest(a, w, n_out):
    return forest_from_ids(
        a["nodes_treeids"],
        a["nodes_nodeids"],
        a["nodes_featureids"],
        a["nodes_modes"],
        np.asarray(a["nodes_values"], f32),
        a["nodes_truenodeids"],
        a["nodes_falsenodeids"],
        a["nodes_missing_value_tracks_true"],
        w["treeids"],
        w["nodeids"],
        w["ids"],
        np.asarray(w["weights"], f32),
        n_out,
    )


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("aggregate", [trees.SUM, trees.MIN, trees.MAX])
def test_single_mode_forest_walk_matches_reference(mode, aggregate):
    """Forests of one comparison take the 4-rows-at-a-time walker (any row count)."""
    rng = np.random.default_rng(len(mode) + aggregate)
    a, w = _branchy_trees(rng, 5, 3, 2, depth=5, modes=(mode,))
    forest = _forest(a, w, 2)
    assert forest.uniform_mode == _MODES.index(mode)
    x = rng.normal(size=(11, 3)).astype(f32)  # 11: two blocks of four and a tail of three
    x[rng.random(x.shape) < 0.15] = np.nan
    x[:4, 0] = a["nodes_values"][0]
    got, got_has = trees.predict_forest(forest, x, aggregate)
    ref, ref_has = _reference_walk(a, {**w, "weights": list(f32(w["weights"]))}, x, 2, aggregate)
    np.testing.assert_array_equal(got_has, ref_has)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("modes", [("BRANCH_LEQ",), _MODES])
def test_parallel_walk_equals_serial(modes, monkeypatch):
    rng = np.random.default_rng(7)
    a, w = _branchy_trees(rng, 6, 4, 3, depth=6, modes=modes)
    forest = _forest(a, w, 3)
    x = rng.normal(size=(301, 4)).astype(f32)
    x[rng.random(x.shape) < 0.1] = np.nan
    base = np.array([0.5], f32)
    serial = trees.predict_forest(forest, x, trees.SUM)
    serial_classes = tree_scores.predict_classes(forest, x, base, False, True, ml_scores.SOFTMAX)
    serial_targets = tree_scores.predict_targets(forest, x, trees.AVERAGE, base, ml_scores.LOGISTIC)
    monkeypatch.setattr(trees, "PARALLEL_MIN_WORK", 1)
    parallel = trees.predict_forest(forest, x, trees.SUM)
    np.testing.assert_array_equal(parallel[1], serial[1])
    np.testing.assert_array_equal(parallel[0], serial[0])
    for got, want in zip(
        (
            *tree_scores.predict_classes(forest, x, base, False, True, ml_scores.SOFTMAX),
            tree_scores.predict_targets(forest, x, trees.AVERAGE, base, ml_scores.LOGISTIC),
        ),
        (*serial_classes, serial_targets),
        strict=True,
    ):
        np.testing.assert_array_equal(got, want)
    # the fused walk + scoring equals scoring predict_forest's sums
    scores, has = serial
    want = tree_scores.tree_classes(scores, has, base, False, True, ml_scores.SOFTMAX)
    np.testing.assert_array_equal(serial_classes[0], want[0])
    np.testing.assert_array_equal(serial_classes[1], want[1])
    avg = trees.predict_forest(forest, x, trees.AVERAGE)
    want_t = tree_scores.tree_targets(*avg, forest.n_trees, base, ml_scores.LOGISTIC)
    np.testing.assert_array_equal(serial_targets, want_t)


# ---------------------------------------------------------------- handler caches


def test_memo_builds_once_per_attribute_objects():
    calls = []

    def build(*attrs):
        calls.append(attrs)
        return object()

    a, b = (1.0, 2.0), tuple([3.0])
    first = memo(build, a, b)
    assert memo(build, a, b) is first and len(calls) == 1
    assert memo(build, a, tuple([3.0])) is not first  # equal value, another object
    assert len(calls) == 2


def test_lookup_small_and_large_inputs_agree():
    keys = np.array([1.5, np.nan, -0.0, 7.0], f32)
    values = np.array([10, 20, 30, 40], np.int64)
    x = np.array([1.5, np.nan, 0.0, 2.0, 7.0, -0.0], f32)
    want = [10, 20, 30, -1, 40, 30]
    small = ml_encoders._lookup(x, keys, values, -1)
    big = ml_encoders._lookup(np.tile(x, 200), keys, values, -1)  # np.unique path
    np.testing.assert_array_equal(small, want)
    np.testing.assert_array_equal(big, np.tile(want, 200))
    s = ml_encoders._lookup(np.array([["b", "q"]], object), np.array(["a", "b"], object),
                            np.array([1, 2]), 0)  # fmt: skip
    np.testing.assert_array_equal(s, [[2, 0]])


def test_one_hot_encoder_unknown_values_are_zero_rows():
    x = np.array([["red", "blue"], ["purple", "red"]], object)
    y = ml_encoders.one_hot_encoder(x, cats_strings=("red", "green", "blue"))
    want = np.zeros((2, 2, 3), f32)
    want[0, 0, 0] = want[0, 1, 2] = want[1, 1, 0] = 1
    np.testing.assert_array_equal(y, want)
    assert y.dtype == np.float32
    ints = ml_encoders.one_hot_encoder(np.arange(600) % 5, cats_int64s=(4, 1))
    np.testing.assert_array_equal(ints.argmax(axis=1)[:5], [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(ints.sum(axis=1)[:5], [0, 1, 0, 0, 1])
    with pytest.raises(ValueError, match="not a known category"):
        ml_encoders.one_hot_encoder(x, cats_strings=("red",), zeros=0)


@pytest.mark.parametrize("n_labels", [1, 3, 70])
def test_zip_map_rows_are_label_dicts(n_labels):
    labels = tuple(f"c{i}" for i in range(n_labels))
    x = np.arange(2 * n_labels, dtype=f32).reshape(2, n_labels)
    out = ml_encoders.zip_map(x, classlabels_strings=labels)
    assert out == [dict(zip(labels, map(float, row), strict=True)) for row in x]


def test_scale_rows_per_feature_single_value_and_rank():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 4)).astype(f32)
    off, sc = rng.normal(size=4).astype(f32), rng.normal(size=4).astype(f32)
    np.testing.assert_array_equal(ml_scores.scale_rows(x, off, sc), (x - off) * sc)
    one = np.array([0.5], f32)
    np.testing.assert_array_equal(ml_scores.scale_rows(x, one, sc), (x - f32(0.5)) * sc)
    np.testing.assert_array_equal(ml_scores.scale_rows(x[0, 0], off, one), (x[0, 0] - off) * 0.5)
    assert ml_scores.scale_rows(np.zeros((0, 4), f32), off, sc).shape == (0, 4)
