"""Scores of tree ensembles after the leaves are summed (no handlers here).

Averaging, base values, binary classification with one weight column and post
transforms follow onnxruntime's tree_ensemble_aggregator.h, which the ONNX-ML spec
leaves open. A target or class no reached leaf (or base value) scored reads as 0,
as onnxruntime's ScoreValue does. Walking the trees and scoring the rows is one
compiled call (kernels/ml/tree_scores.py: predict_targets, predict_classes).
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.ml.tree_scores import predict_classes, predict_targets
from onnxexec.kernels.ml.trees import Forest
from onnxexec.ops.ml_common import POST_TRANSFORMS

_NO_BASE = np.zeros(0, np.float32)


def _base32(base: np.ndarray | None) -> np.ndarray:
    return _NO_BASE if base is None else base.astype(np.float32, copy=False)


def regression_scores(
    x: np.ndarray, forest: Forest, aggregate: int, base: np.ndarray | None, post_transform: str
) -> np.ndarray:
    """(N, F) rows -> (N, n_targets) float32 regression outputs.

    One target takes only PROBIT (onnxruntime's FinalizeScores1); with several, a
    target no leaf reached reads as 0, base value or not.
    """
    return predict_targets(
        forest, x, aggregate, _base32(base), POST_TRANSFORMS.index(post_transform)
    )


def classification_scores(
    forest: Forest,
    x: np.ndarray,
    base: np.ndarray | None,
    labels: np.ndarray,
    binary_case: bool,
    all_positive: bool,
    post_transform: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores of (N, F) rows from summed class weights, as onnxruntime's
    TreeAggregatorClassifier: a class score no leaf (or base value) set reads as 0.

    With more than two classes the label is the best scored class. With one or two
    score columns (onnxruntime's _set_score_binary) the row picks labels[1] or
    labels[0]; unless `binary_case` (two labels, one weight column), integer labels
    read as the index 1 / 0 itself, as onnxruntime answers.
    """
    pick, z = predict_classes(
        forest, x, _base32(base), binary_case, all_positive, POST_TRANSFORMS.index(post_transform)
    )
    if forest.n_targets > 2 or binary_case:
        return labels[pick], z
    if labels.dtype == object:
        return labels[np.minimum(pick, labels.shape[0] - 1)], z
    return pick, z
