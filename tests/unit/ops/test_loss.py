"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ops/loss.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node

RNG = np.random.default_rng(3)
LOGP = RNG.standard_normal((3, 4, 2)).astype(np.float32)  # (N, C, d1)
TARGET = np.array([[0, 3], [2, 1], [1, 1]], np.int64)
WEIGHT = np.array([0.5, 1.0, 2.0, 4.0], np.float32)


def nll_ref(logp, target, weight=None, reduction="mean", ignore_index=None):
    """Operators.md NegativeLogLikelihoodLoss written out with loops."""
    n, _, d = logp.shape
    loss = np.zeros((n, d))
    wsum = 0.0
    for i in range(n):
        for j in range(d):
            t = target[i, j]
            if t == ignore_index:
                continue
            w = 1.0 if weight is None else weight[t]
            loss[i, j] = -logp[i, t, j] * w
            wsum += w
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / wsum


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll(reduction, weighted):
    ins = [LOGP, TARGET] + ([WEIGHT] if weighted else [])
    (y,) = run_node("NegativeLogLikelihoodLoss", ins, opset=13, reduction=reduction)
    ref = nll_ref(LOGP, TARGET, WEIGHT if weighted else None, reduction)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_nll_ignore_index_outside_class_range():
    target = TARGET.copy()
    target[0, 0] = -100  # must not be used as an index
    ins = [LOGP, target, WEIGHT]
    (y,) = run_node("NegativeLogLikelihoodLoss", ins, opset=22, ignore_index=-100)
    np.testing.assert_allclose(y, nll_ref(LOGP, target, WEIGHT, "mean", -100), rtol=1e-5)


def test_nll_bad_target_raises():
    with pytest.raises(Exception, match="target value outside"):
        run_node("NegativeLogLikelihoodLoss", [LOGP, TARGET + 1], opset=13)


def log_softmax(x):
    x = x.astype(np.float64)
    return (
        x
        - x.max(axis=1, keepdims=True)
        - np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
    )


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_sce_loss_and_log_prob(reduction):
    scores = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    loss, log_prob = run_node(
        "SoftmaxCrossEntropyLoss",
        [scores, TARGET, WEIGHT],
        2,
        opset=13,
        reduction=reduction,
        ignore_index=1,
    )
    lp = log_softmax(scores)
    np.testing.assert_allclose(log_prob, lp, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, nll_ref(lp, TARGET, WEIGHT, reduction, 1), rtol=1e-5)


def test_sce_single_output_v12_2d():
    scores = RNG.standard_normal((5, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 1, 0], np.int64)
    (loss,) = run_node("SoftmaxCrossEntropyLoss", [scores, labels], 1, opset=12)
    lp = log_softmax(scores)
    np.testing.assert_allclose(loss, -lp[np.arange(5), labels].mean(), rtol=1e-5)
