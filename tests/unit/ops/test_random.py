"""Random ops: shapes, dtypes, value sets, rough moments, seed reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import node_model, run_node


def test_seeded_output_is_reproducible_across_runs_and_sessions():
    model, feeds = node_model("RandomNormal", [], 1, 21, shape=[3, 4], seed=1.5)
    s1, s2 = InferenceSession(model), InferenceSession(model)
    a, b, c = s1.run(None, feeds)[0], s1.run(None, feeds)[0], s2.run(None, feeds)[0]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    (other,) = run_node("RandomNormal", [], 1, 21, shape=[3, 4], seed=2.5)
    assert not np.array_equal(a, other)


def test_random_normal_moments_and_dtype():
    (x,) = run_node("RandomNormal", [], 1, 21, shape=[200, 100], mean=3.0, scale=0.5)
    assert x.dtype == np.float32 and x.shape == (200, 100)
    assert abs(x.mean() - 3.0) < 0.02 and abs(x.std() - 0.5) < 0.02


def test_random_uniform_range_and_double():
    (x,) = run_node(
        "RandomUniform", [], 1, 21, shape=[1000], low=-2.0, high=-1.0, dtype=TensorProto.DOUBLE
    )
    assert x.dtype == np.float64 and x.min() >= -2.0 and x.max() < -1.0


@pytest.mark.parametrize("opset", [1, 22])
def test_like_ops_take_shape_and_dtype_from_input(opset):
    src = np.zeros((2, 5), np.float16)
    (n,) = run_node("RandomNormalLike", [src], 1, opset)
    (u,) = run_node("RandomUniformLike", [src], 1, opset, dtype=TensorProto.DOUBLE)
    assert n.shape == (2, 5) and n.dtype == np.float16
    assert u.shape == (2, 5) and u.dtype == np.float64 and ((u >= 0) & (u < 1)).all()


def test_bfloat16_output_at_opset_22():
    (x,) = run_node("RandomUniform", [], 1, 22, shape=[4], dtype=TensorProto.BFLOAT16)
    assert x.dtype.name == "bfloat16" and x.shape == (4,)


def test_bernoulli_values_and_extremes():
    p = np.array([[0.0, 1.0, 0.5, 0.5]] * 500, np.float32)
    (x,) = run_node("Bernoulli", [p], 1, 15)
    assert x.dtype == np.float32 and set(np.unique(x)) <= {0.0, 1.0}
    assert (x[:, 0] == 0).all() and (x[:, 1] == 1).all()
    assert 0.4 < x[:, 2:].mean() < 0.6
    (xi,) = run_node("Bernoulli", [p], 1, 22, dtype=TensorProto.INT64, seed=0.0)
    assert xi.dtype == np.int64


def test_multinomial_follows_logits():
    logits = np.log(np.array([[0.7, 0.2, 0.1], [1e-9, 1e-9, 1.0]], np.float32))
    (idx,) = run_node("Multinomial", [logits], 1, 7, sample_size=4000, seed=3.0)
    assert idx.dtype == np.int32 and idx.shape == (2, 4000)
    freq = np.bincount(idx[0], minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.7, 0.2, 0.1], atol=0.03)
    assert (idx[1] == 2).all()
    (idx64,) = run_node("Multinomial", [logits], 1, 22, dtype=TensorProto.INT64)
    assert idx64.dtype == np.int64 and idx64.shape == (2, 1)
