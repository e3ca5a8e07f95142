"""Training losses: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

Input (N, C, d1..dk), target (N, d1..dk) int. Per element
loss = -input[n, target, d...] * weight[target], with weight 0 where target ==
ignore_index; "mean" divides the sum by the summed weights (the count of non-ignored
elements without a weight input), Operators.md NegativeLogLikelihoodLoss-13.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.registry import op

_REDUCTIONS = ("none", "sum", "mean")


def _work_dtype(dt: np.dtype) -> np.dtype:
    return dt if dt in (np.float32, np.float64) else np.dtype(np.float32)


def _nll(
    logp: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None,
    reduction: str,
    ignore_index: int | None,
    op_name: str,
) -> np.ndarray:
    """Loss on float32/float64 log-probabilities; the caller casts back."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op_name}: unknown reduction '{reduction}'")
    if logp.ndim < 2:
        raise ValueError(f"{op_name}: input must be (N, C, ...), got {list(logp.shape)}")
    n, c = logp.shape[:2]
    if target.shape != (n, *logp.shape[2:]):
        raise ValueError(
            f"{op_name}: target {list(target.shape)} does not fit input {list(logp.shape)}"
        )
    t = target.astype(np.int64)
    ignored = t == ignore_index if ignore_index is not None else np.zeros(t.shape, bool)
    safe = np.where(ignored, 0, t)  # ignore_index may lie outside [0, C)
    if safe.size and (safe.min() < 0 or safe.max() >= c):
        raise IndexError(
            f"{op_name}: target value outside [0, {c - 1}] (ignore_index {ignore_index})"
        )
    picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    w = np.ones(t.shape, logp.dtype) if weight is None else weight.astype(logp.dtype)[safe]
    w = np.where(ignored, 0, w).astype(logp.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(loss.sum() / w.sum())


@op("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(
    input: np.ndarray,  # noqa: A002 - the spec's input name
    target: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    ignore_index: int | None = None,
    reduction: str = "mean",
) -> np.ndarray:
    """-input[n, target[n, d], d] * weight, reduced by none/sum/mean."""
    work = _work_dtype(input.dtype)
    loss = _nll(
        input.astype(work, copy=False),
        target,
        weight,
        reduction,
        ignore_index,
        "NegativeLogLikelihoodLoss",
    )
    return loss.astype(input.dtype)


@op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    ignore_index: int | None = None,
    reduction: str = "mean",
) -> tuple[np.ndarray, np.ndarray]:
    """(loss, log_prob): NLL of log_softmax(scores, axis=1); log_prob is the optional output."""
    work = _work_dtype(scores.dtype)
    x = scores.astype(work, copy=False)
    if x.ndim < 2:
        raise ValueError(
            f"SoftmaxCrossEntropyLoss: scores must be (N, C, ...), got {list(x.shape)}"
        )
    shifted = x - x.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = _nll(log_prob, labels, weights, reduction, ignore_index, "SoftmaxCrossEntropyLoss")
    return loss.astype(scores.dtype), log_prob.astype(scores.dtype)
