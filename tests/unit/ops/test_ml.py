"""ai.onnx.ml ops besides trees: post transforms, linear models and SVMs (against
numpy math and onnxruntime), encoders and feature transforms (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxexec.ops.ml_common import probit, softmax_zero
from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._ml_helpers import _assert_same, _both, _model, _ti

# ---------------------------------------------------------------- post transforms


def test_probit_approximates_the_normal_quantile():
    p = np.array([0.025, 0.16, 0.5, 0.84, 0.975], np.float32)
    np.testing.assert_allclose(probit(p), [-1.95996, -0.99446, 0.0, 0.99446, 1.95996], atol=5e-3)


def test_softmax_zero_leaves_zero_scores_out():
    s = np.array([[0.0, 1.0, 2.0]], np.float32)
    e = np.exp(np.array([1.0, 2.0]) - 2.0)
    np.testing.assert_allclose(softmax_zero(s), [[0.0, *(e / e.sum())]], rtol=1e-6)


# ---------------------------------------------------------------- linear models and SVMs


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", [[0, 1], ["neg", "pos"], [4, 5, 6]])
def test_linear_classifier_matches_onnxruntime(post, labels):
    rng = np.random.default_rng(len(labels))
    n_t = 1 if len(labels) == 2 else len(labels)
    attrs = dict(
        coefficients=[float(v) for v in rng.normal(size=n_t * 3)],
        intercepts=[float(v) for v in rng.normal(size=n_t)],
        post_transform=post,
    )
    strings = isinstance(labels[0], str)
    attrs["classlabels_strings" if strings else "classlabels_ints"] = labels
    x = rng.normal(size=(12, 3)).astype(np.float32)
    outs = [_ti("Y", T.STRING if strings else T.INT64), _ti("Z")]
    ref, out = _both(_model("LinearClassifier", [_ti("X")], outs, ml_opset=1, **attrs), {"X": x})
    _assert_same(ref, out)


def test_linear_regressor_is_x_times_coefficients_plus_intercepts():
    x = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    model = _model(
        "LinearRegressor",
        [_ti("X")],
        [_ti("Y")],
        ml_opset=1,
        coefficients=[1.0, 2.0, 0.5, -1.0],
        intercepts=[0.5, 1.0],
        targets=2,
    )
    y = InferenceSession(model).run(None, {"X": x})[0]
    np.testing.assert_allclose(y, [[1 + 4 + 0.5, 0.5 - 2 + 1], [3 - 2 + 0.5, 1.5 + 1 + 1]])


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize(("k", "proba"), [(2, False), (3, False), (3, True), (2, True)])
def test_svm_classifier_matches_onnxruntime(kernel, k, proba):
    rng = np.random.default_rng(k * 10 + proba)
    vpc = [int(v) for v in rng.integers(1, 4, size=k)]
    n_vec, n_pairs = sum(vpc), k * (k - 1) // 2
    attrs = dict(
        kernel_type=kernel,
        kernel_params=[0.3, 0.5, 2.0],
        classlabels_ints=list(range(k)),
        vectors_per_class=vpc,
        support_vectors=[float(v) for v in rng.normal(size=n_vec * 3)],
        coefficients=[float(v) for v in rng.normal(size=(k - 1) * n_vec)],
        rho=[float(v) for v in rng.normal(size=n_pairs)],
    )
    if proba:
        attrs.update(
            prob_a=[float(v) - 2 for v in rng.normal(size=n_pairs)],
            prob_b=[float(v) / 10 for v in rng.normal(size=n_pairs)],
        )
    x = rng.normal(size=(15, 3)).astype(np.float32)
    ref, out = _both(
        _model("SVMClassifier", [_ti("X")], [_ti("Y", T.INT64), _ti("Z")], ml_opset=1, **attrs),
        {"X": x},
    )
    _assert_same(ref, out)


def test_svm_regressor_rbf_and_one_class():
    sv = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)
    coef, rho, gamma = np.array([0.5, -2.0]), 0.25, 0.7
    x = np.array([[0.2, 0.3], [2.0, -1.0]], np.float32)
    k = np.exp(-gamma * ((x[:, None, :] - sv[None]) ** 2).sum(axis=2))
    for one_class in (0, 1):
        model = _model(
            "SVMRegressor",
            [_ti("X")],
            [_ti("Y")],
            ml_opset=1,
            kernel_type="RBF",
            kernel_params=[gamma, 0.0, 3.0],
            n_supports=2,
            one_class=one_class,
            coefficients=coef.tolist(),
            rho=[rho],
            support_vectors=sv.reshape(-1).tolist(),
        )
        y = InferenceSession(model).run(None, {"X": x})[0]
        want = (k @ coef + rho).reshape(-1, 1)
        np.testing.assert_allclose(y, np.where(want > 0, 1, -1) if one_class else want, rtol=1e-5)


# ---------------------------------------------------------------- encoders and transforms


def _run(op, ins, outs, feeds, ml_opset=3, **attrs):
    return InferenceSession(_model(op, ins, outs, ml_opset, **attrs)).run(None, feeds)


def test_label_encoder_versions():
    x = np.array(["a", "b", "zz"], object)
    # opset 1: string -> index in classes_strings, default_int64 otherwise
    y = _run(
        "LabelEncoder",
        [_ti("X", T.STRING)],
        [_ti("Y", T.INT64)],
        {"X": x},
        1,
        classes_strings=["b", "a"],
        default_int64=-5,
    )[0]
    np.testing.assert_array_equal(y, [1, 0, -5])
    # opset 2: float keys, NaN key matches NaN input
    xf = np.array([[1.0, np.nan], [2.5, 7.0]], np.float32)
    y = _run(
        "LabelEncoder",
        [_ti("X")],
        [_ti("Y", T.STRING)],
        {"X": xf},
        2,
        keys_floats=[1.0, float("nan"), 2.5],
        values_strings=["one", "nan", "x"],
        default_string="?",
    )[0]
    np.testing.assert_array_equal(y, np.array([["one", "nan"], ["x", "?"]], object))
    # opset 4: tensor keys/values with a default tensor, int16 output
    y = _run(
        "LabelEncoder",
        [_ti("X", T.INT64)],
        [_ti("Y", T.INT16)],
        {"X": np.array([3, 4, 9])},
        4,
        keys_tensor=helper.make_tensor("k", T.INT64, (2,), [3, 4]),
        values_tensor=helper.make_tensor("v", T.INT16, (2,), [30, 40]),
        default_tensor=helper.make_tensor("d", T.INT16, (1,), [-7]),
    )[0]
    assert y.dtype == np.int16
    np.testing.assert_array_equal(y, [30, 40, -7])


def test_category_mapper_and_one_hot_encoder():
    y = _run(
        "CategoryMapper",
        [_ti("X", T.INT64)],
        [_ti("Y", T.STRING)],
        {"X": np.array([[20, 7]])},
        cats_strings=["a", "b"],
        cats_int64s=[10, 20],
        default_string="D",
    )[0]
    np.testing.assert_array_equal(y, np.array([["b", "D"]], object))
    x = np.array([["b", "q"], ["a", "b"]], object)
    y = _run("OneHotEncoder", [_ti("X", T.STRING)], [_ti("Y")], {"X": x}, cats_strings=["a", "b"])[
        0
    ]
    np.testing.assert_array_equal(y, [[[0, 1], [0, 0]], [[1, 0], [0, 1]]])
    y = _run(
        "OneHotEncoder",
        [_ti("X", T.DOUBLE)],
        [_ti("Y")],
        {"X": np.array([3.7, 1.0])},
        cats_int64s=[1, 3],
    )[0]
    np.testing.assert_array_equal(y, [[0, 1], [1, 0]])  # 3.7 truncates to 3
    with pytest.raises(Exception, match="not a known category"):
        _run(
            "OneHotEncoder",
            [_ti("X", T.INT64)],
            [_ti("Y")],
            {"X": np.array([5])},
            cats_int64s=[1, 3],
            zeros=0,
        )


def _map_info(name, key, value):
    return helper.make_value_info(
        name, helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None))
    )


def test_dict_vectorizer_cast_map_zip_map():
    y = _run(
        "DictVectorizer",
        [_map_info("X", T.STRING, T.FLOAT)],
        [_ti("Y")],
        {"X": {"b": np.float32(2), "z": np.float32(5)}},
        string_vocabulary=["a", "b"],
    )[0]
    np.testing.assert_array_equal(y, [[0, 2]])
    y = _run(
        "CastMap",
        [_map_info("X", T.INT64, T.FLOAT)],
        [_ti("Y", T.STRING)],
        {"X": {2: 1.5, 0: 2.0}},
        cast_to="TO_STRING",
        map_form="SPARSE",
        max_map=4,
    )[0]
    np.testing.assert_array_equal(y, np.array([["2.000000", "0.f", "1.500000", "0.f"]], object))
    y = _run(
        "CastMap", [_map_info("X", T.INT64, T.STRING)], [_ti("Y")], {"X": {3: "1.5", 1: "-2"}}
    )[0]
    np.testing.assert_array_equal(y, np.array([[-2.0, 1.5]], np.float32))
    seq = helper.make_value_info(
        "Z",
        helper.make_sequence_type_proto(
            helper.make_map_type_proto(T.INT64, helper.make_tensor_type_proto(T.FLOAT, None))
        ),
    )
    z = _run(
        "ZipMap",
        [_ti("X")],
        [seq],
        {"X": np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)},
        classlabels_int64s=[3, 7],
    )[0]
    assert z == [{3: 0.25, 7: 0.75}, {3: 1.0, 7: 0.0}]


def test_feature_transforms():
    x = np.array([[1.0, np.nan, -2.0], [0.0, 3.0, 4.0]], np.float32)
    z = _run(
        "ArrayFeatureExtractor",
        [_ti("X"), _ti("I", T.INT64)],
        [_ti("Z")],
        {"X": x[0], "I": np.array([2, 0])},
    )[0]
    np.testing.assert_array_equal(z, [[-2.0, 1.0]])  # 1-D data gives one row
    y = _run("Binarizer", [_ti("X")], [_ti("Y")], {"X": x[1:]}, threshold=2.5)[0]
    np.testing.assert_array_equal(y, [[0, 1, 1]])
    y = _run(
        "Imputer",
        [_ti("X")],
        [_ti("Y")],
        {"X": x},
        imputed_value_floats=[9.0, 8.0, 7.0],
        replaced_value_float=float("nan"),
    )[0]
    np.testing.assert_array_equal(y, [[1, 8, -2], [0, 3, 4]])
    y = _run(
        "Scaler",
        [_ti("X", T.INT64)],
        [_ti("Y")],
        {"X": np.array([[1, 2]])},
        offset=[1.0, 0.0],
        scale=[2.0, 3.0],
    )[0]
    np.testing.assert_array_equal(y, np.array([[0, 6]], np.float32))
    v = np.array([[3.0, -4.0], [0.0, 0.0]], np.float32)
    for norm, want in (
        ("L2", [[0.6, -0.8], [0, 0]]),
        ("L1", [[3 / 7, -4 / 7], [0, 0]]),
        ("MAX", [[1.0, -4 / 3], [0, 0]]),
    ):  # MAX divides by the row max
        y = _run("Normalizer", [_ti("X")], [_ti("Y")], {"X": v}, norm=norm)[0]
        np.testing.assert_allclose(y, want, rtol=1e-6)
    y = _run(
        "FeatureVectorizer",
        [_ti("A"), _ti("B")],
        [_ti("Y")],
        {"A": x[:, :2], "B": np.array([[5.0], [6.0]], np.float32)},
        inputdimensions=[1, 2],
    )[0]
    np.testing.assert_array_equal(y, [[1, 5, 0], [0, 6, 0]])
