"""Scores of tree ensembles after the leaves are summed (no handlers here).

Averaging, base values, binary classification with one weight column and post
transforms follow onnxruntime's tree_ensemble_aggregator.h, which the ONNX-ML spec
leaves open. A target or class no reached leaf (or base value) scored reads as 0,
as onnxruntime's ScoreValue does.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.trees import AVERAGE, Forest, predict_forest
from onnxexec.ops.ml_common import (
    SECOND_CLASS_NONE,
    expand_binary,
    probit,
    transform_scores,
)


def _aggregate(
    scores: np.ndarray, n_trees: int, aggregate: int, base: np.ndarray | None
) -> np.ndarray:
    """Averaging and base values for regression (float32 like onnxruntime's output)."""
    s = scores / n_trees if aggregate == AVERAGE else scores
    s = s.astype(np.float32)
    if base is not None and base.shape[0] == s.shape[1]:
        s = s + base.astype(np.float32)
    return s


def regression_scores(
    x: np.ndarray, forest: Forest, aggregate: int, base: np.ndarray | None, post_transform: str
) -> np.ndarray:
    """(N, F) rows -> (N, n_targets) float32 regression outputs."""
    scores, has = predict_forest(forest, x, aggregate)
    s = _aggregate(scores, forest.n_trees, aggregate, base)
    if s.shape[1] == 1:
        # One target: onnxruntime's FinalizeScores1 applies only PROBIT.
        return probit(s) if post_transform == "PROBIT" else s
    # onnxruntime reads a target no leaf reached as 0, base value or not.
    return transform_scores(np.where(has, s, np.float32(0)), post_transform)


def _binary_label(
    pos: np.ndarray, binary_case: bool, all_positive: bool, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray | int]:
    """onnxruntime's _set_score_binary: (label per row, second-class mode per row)."""
    if binary_case:
        win = pos > 0.5 if all_positive else pos > 0
        mode = np.where(win, 0, 1) if all_positive else np.where(win, 2, 3)
        return np.where(win, labels[1], labels[0]), mode
    # Not a 2-label single-column model: onnxruntime answers index 1 / 0.
    win = pos > 0
    if labels.dtype == object:
        return np.where(win, labels[min(1, labels.shape[0] - 1)], labels[0]), SECOND_CLASS_NONE
    return win.astype(np.int64), SECOND_CLASS_NONE


def classification_scores(
    scores: np.ndarray,
    has: np.ndarray,
    base: np.ndarray | None,
    labels: np.ndarray,
    binary_case: bool,
    all_positive: bool,
    post_transform: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores from summed class weights, as onnxruntime's
    TreeAggregatorClassifier: a class score no leaf (or base value) set reads as 0.
    """
    s = scores.astype(np.float32)
    has = has.copy()
    n, c = s.shape
    b = np.zeros(0, np.float32) if base is None else base.astype(np.float32)
    if c > 2:
        k = min(b.shape[0], c)
        s[:, :k] += b[:k]
        has[:, :k] = True
        best = np.argmax(np.where(has, s, -np.inf), axis=1)
        return labels[best], transform_scores(np.where(has, s, np.float32(0)), post_transform)
    if c == 1:
        s0 = s[:, 0] + (b[1] if b.shape[0] == 2 else b[0] if b.shape[0] == 1 else 0)
        lab, _ = _binary_label(s0, False, all_positive, labels)
        return lab, expand_binary(s0, post_transform, SECOND_CLASS_NONE)[:, :1]
    s0, s1 = s[:, 0], s[:, 1]
    h0, h1 = has[:, 0], has[:, 1]
    second: np.ndarray | int = SECOND_CLASS_NONE
    if b.shape[0] == 2:
        # onnxruntime: with a class-1 score it assumes base[0] == base[1] and
        # rebuilds both columns from column 0; otherwise "binary as multiclass".
        p1 = np.where(h1, b[1] + s0, s1 + b[1])
        s0 = np.where(h1, -p1, s0 + b[0])
        s1 = p1
        two = np.ones(n, dtype=bool)
    else:
        if b.shape[0] == 1:
            s0 = s0 + b[0]
        else:
            second = 3
        two = h1
    pos = np.where(h1, s1, np.where(h0, s0, 0))
    lab, mode = _binary_label(pos, binary_case, all_positive, labels)
    if binary_case:
        second = mode
    v0 = np.where(h0, s0, np.float32(0))
    v1 = np.where(h1, s1, np.float32(0))
    z = np.empty((n, 2), dtype=np.float32)
    if two.any():
        z[two] = transform_scores(np.stack([v0[two], v1[two]], axis=1), post_transform)
    one = ~two
    if one.any():
        mode_one = second if isinstance(second, int) else second[one]
        z[one] = expand_binary(v0[one], post_transform, mode_one)
    return lab, z
