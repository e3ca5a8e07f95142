"""ai.onnx.ml tree ensembles: TreeEnsembleRegressor, TreeEnsembleClassifier, TreeEnsemble.

Trees are flattened once (ml_tree_build) and walked by the numba kernel in
kernels/trees.py. What happens after the leaf weights are summed (base values,
averaging, binary classification with one weight column, post transforms) follows
onnxruntime's tree_ensemble_aggregator.h, which the spec leaves open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from onnxexec.kernels.trees import AVERAGE, MAX, MIN, SUM, Forest, predict_forest
from onnxexec.ops.ml_common import (
    SECOND_CLASS_NONE,
    as_rows,
    check_post_transform,
    class_labels,
    expand_binary,
    floats_or_tensor,
    probit,
    transform_scores,
)
from onnxexec.ops.ml_tree_build import cached_forest, forest_from_ids, forest_from_indices
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"
_AGGREGATES: Final = {"AVERAGE": AVERAGE, "SUM": SUM, "MIN": MIN, "MAX": MAX}
_V5_POST: Final = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def _aggregate(scores: np.ndarray, n_trees: int, aggregate: int, base: np.ndarray | None) -> np.ndarray:
    """Averaging and base values for regression (float32 like onnxruntime's output)."""
    s = scores / n_trees if aggregate == AVERAGE else scores
    s = s.astype(np.float32)
    if base is not None and base.shape[0] == s.shape[1]:
        s = s + base.astype(np.float32)
    return s


def _regression(x: np.ndarray, forest: Forest, aggregate: int, base: np.ndarray | None,
                post_transform: str) -> np.ndarray:
    scores, has = predict_forest(forest, x, aggregate)
    s = _aggregate(scores, forest.n_trees, aggregate, base)
    if s.shape[1] == 1:
        # One target: onnxruntime's FinalizeScores1 applies only PROBIT.
        return probit(s) if post_transform == "PROBIT" else s
    # onnxruntime reads a target no leaf reached as 0, base value or not.
    return transform_scores(np.where(has, s, np.float32(0)), post_transform)


def _regressor(x: np.ndarray, *, aggregate_function: str, base_values: np.ndarray | None,
               n_targets: int | None, nodes: tuple, targets: tuple, post_transform: str) -> np.ndarray:
    check_post_transform(post_transform, "TreeEnsembleRegressor")
    if aggregate_function not in _AGGREGATES:
        raise ValueError(f"TreeEnsembleRegressor: unknown aggregate_function '{aggregate_function}'")
    if n_targets is None:
        raise ValueError("TreeEnsembleRegressor: n_targets is required")
    forest = cached_forest(forest_from_ids, *nodes, *targets, n_targets)
    return _regression(as_rows(x, "TreeEnsembleRegressor"), forest,
                       _AGGREGATES[aggregate_function], base_values, post_transform)


@op("TreeEnsembleRegressor", since=3, domain=ML)
def tree_ensemble_regressor(
    x: np.ndarray, *, aggregate_function: str = "SUM", base_values: Sequence[float] | None = None,
    base_values_as_tensor: np.ndarray | None = None, n_targets: int | None = None,
    nodes_falsenodeids: Sequence[int] = (), nodes_featureids: Sequence[int] = (),
    nodes_hitrates: Sequence[float] | None = None, nodes_hitrates_as_tensor: np.ndarray | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None, nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (), nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (), nodes_values: Sequence[float] | None = None,
    nodes_values_as_tensor: np.ndarray | None = None, post_transform: str = "NONE",
    target_ids: Sequence[int] = (), target_nodeids: Sequence[int] = (),
    target_treeids: Sequence[int] = (), target_weights: Sequence[float] | None = None,
    target_weights_as_tensor: np.ndarray | None = None,
) -> np.ndarray:
    """(N, F) -> (N, n_targets) float32; *_as_tensor attributes take precedence."""
    values = nodes_values_as_tensor if nodes_values_as_tensor is not None else nodes_values
    weights = target_weights_as_tensor if target_weights_as_tensor is not None else target_weights
    nodes = (nodes_treeids, nodes_nodeids, nodes_featureids, nodes_modes, values,
             nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true)
    targets = (target_treeids, target_nodeids, target_ids, weights)
    return _regressor(x, aggregate_function=aggregate_function,
                      base_values=floats_or_tensor(base_values, base_values_as_tensor),
                      n_targets=n_targets, nodes=nodes, targets=targets, post_transform=post_transform)


@op("TreeEnsembleRegressor", since=1, domain=ML)
def tree_ensemble_regressor_v1(
    x: np.ndarray, *, aggregate_function: str = "SUM", base_values: Sequence[float] | None = None,
    n_targets: int | None = None, nodes_falsenodeids: Sequence[int] = (),
    nodes_featureids: Sequence[int] = (), nodes_hitrates: Sequence[float] | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None, nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (), nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (), nodes_values: Sequence[float] | None = None,
    post_transform: str = "NONE", target_ids: Sequence[int] = (),
    target_nodeids: Sequence[int] = (), target_treeids: Sequence[int] = (),
    target_weights: Sequence[float] | None = None,
) -> np.ndarray:
    """Opsets 1-2: as v3 without the *_as_tensor attributes."""
    nodes = (nodes_treeids, nodes_nodeids, nodes_featureids, nodes_modes, nodes_values,
             nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true)
    targets = (target_treeids, target_nodeids, target_ids, target_weights)
    return _regressor(x, aggregate_function=aggregate_function,
                      base_values=floats_or_tensor(base_values, None),
                      n_targets=n_targets, nodes=nodes, targets=targets, post_transform=post_transform)


def _binary_label(pos: np.ndarray, binary_case: bool, all_positive: bool,
                  labels: np.ndarray) -> tuple[np.ndarray, np.ndarray | int]:
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


def _classification(scores: np.ndarray, has: np.ndarray, base: np.ndarray | None,
                    labels: np.ndarray, binary_case: bool, all_positive: bool,
                    post_transform: str) -> tuple[np.ndarray, np.ndarray]:
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


def _classifier(x: np.ndarray, *, base_values: np.ndarray | None, nodes: tuple,
                classes: tuple, labels: np.ndarray, post_transform: str) -> tuple[np.ndarray, np.ndarray]:
    check_post_transform(post_transform, "TreeEnsembleClassifier")
    n_classes = labels.shape[0]
    forest = cached_forest(forest_from_ids, *nodes, *classes, n_classes)
    scores, has = predict_forest(forest, as_rows(x, "TreeEnsembleClassifier"), SUM)
    class_ids, weights = classes[2], classes[3]
    binary_case = n_classes == 2 and len(set(class_ids)) == 1
    all_positive = bool((np.asarray(weights, dtype=np.float64) >= 0).all())
    return _classification(scores, has, base_values, labels, binary_case, all_positive,
                           post_transform)


@op("TreeEnsembleClassifier", since=3, domain=ML)
def tree_ensemble_classifier(
    x: np.ndarray, *, base_values: Sequence[float] | None = None,
    base_values_as_tensor: np.ndarray | None = None, class_ids: Sequence[int] = (),
    class_nodeids: Sequence[int] = (), class_treeids: Sequence[int] = (),
    class_weights: Sequence[float] | None = None, class_weights_as_tensor: np.ndarray | None = None,
    classlabels_int64s: Sequence[int] | None = None, classlabels_strings: Sequence[str] | None = None,
    nodes_falsenodeids: Sequence[int] = (), nodes_featureids: Sequence[int] = (),
    nodes_hitrates: Sequence[float] | None = None, nodes_hitrates_as_tensor: np.ndarray | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None, nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (), nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (), nodes_values: Sequence[float] | None = None,
    nodes_values_as_tensor: np.ndarray | None = None, post_transform: str = "NONE",
) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) -> labels (N,) int64|string, scores (N, n_classes) float32."""
    values = nodes_values_as_tensor if nodes_values_as_tensor is not None else nodes_values
    weights = class_weights_as_tensor if class_weights_as_tensor is not None else class_weights
    nodes = (nodes_treeids, nodes_nodeids, nodes_featureids, nodes_modes, values,
             nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true)
    classes = (class_treeids, class_nodeids, class_ids, weights)
    labels = class_labels(classlabels_int64s, classlabels_strings, "TreeEnsembleClassifier")
    return _classifier(x, base_values=floats_or_tensor(base_values, base_values_as_tensor),
                       nodes=nodes, classes=classes, labels=labels, post_transform=post_transform)


@op("TreeEnsembleClassifier", since=1, domain=ML)
def tree_ensemble_classifier_v1(
    x: np.ndarray, *, base_values: Sequence[float] | None = None, class_ids: Sequence[int] = (),
    class_nodeids: Sequence[int] = (), class_treeids: Sequence[int] = (),
    class_weights: Sequence[float] | None = None, classlabels_int64s: Sequence[int] | None = None,
    classlabels_strings: Sequence[str] | None = None, nodes_falsenodeids: Sequence[int] = (),
    nodes_featureids: Sequence[int] = (), nodes_hitrates: Sequence[float] | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None, nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (), nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (), nodes_values: Sequence[float] | None = None,
    post_transform: str = "NONE",
) -> tuple[np.ndarray, np.ndarray]:
    """Opsets 1-2: as v3 without the *_as_tensor attributes."""
    nodes = (nodes_treeids, nodes_nodeids, nodes_featureids, nodes_modes, nodes_values,
             nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true)
    classes = (class_treeids, class_nodeids, class_ids, class_weights)
    labels = class_labels(classlabels_int64s, classlabels_strings, "TreeEnsembleClassifier")
    return _classifier(x, base_values=floats_or_tensor(base_values, None), nodes=nodes,
                       classes=classes, labels=labels, post_transform=post_transform)


@op("TreeEnsemble", since=5, domain=ML)
def tree_ensemble(
    x: np.ndarray, *, aggregate_function: int = 1, leaf_targetids: Sequence[int],
    leaf_weights: np.ndarray, membership_values: np.ndarray | None = None,
    n_targets: int | None = None, nodes_falseleafs: Sequence[int],
    nodes_falsenodeids: Sequence[int], nodes_featureids: Sequence[int],
    nodes_hitrates: np.ndarray | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None, nodes_modes: np.ndarray,
    nodes_splits: np.ndarray, nodes_trueleafs: Sequence[int], nodes_truenodeids: Sequence[int],
    post_transform: int = 0, tree_roots: Sequence[int],
) -> np.ndarray:
    """(N, F) -> (N, n_targets) in X's dtype.

    aggregate_function 0-3 = AVERAGE, SUM, MIN, MAX; post_transform 0-4 = NONE,
    SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT (TreeEnsemble-5 spec).
    """
    if aggregate_function not in (AVERAGE, SUM, MIN, MAX):
        raise ValueError(f"TreeEnsemble: aggregate_function must be 0-3, got {aggregate_function}")
    if not 0 <= post_transform < len(_V5_POST):
        raise ValueError(f"TreeEnsemble: post_transform must be 0-4, got {post_transform}")
    if n_targets is None:
        raise ValueError("TreeEnsemble: n_targets is required")
    forest = cached_forest(forest_from_indices, tree_roots, nodes_modes, nodes_featureids,
                           nodes_splits, nodes_truenodeids, nodes_trueleafs, nodes_falsenodeids,
                           nodes_falseleafs, nodes_missing_value_tracks_true, membership_values,
                           leaf_targetids, leaf_weights, n_targets)
    rows = as_rows(x, "TreeEnsemble")
    scores, _ = predict_forest(forest, rows.astype(np.float32) if rows.dtype == np.float16 else rows,
                               aggregate_function)
    if aggregate_function == AVERAGE:
        scores = scores / forest.n_trees
    post = _V5_POST[post_transform]
    if scores.shape[1] == 1:
        out = probit(scores) if post == "PROBIT" else scores
    else:
        out = transform_scores(scores, post)
    return out.astype(x.dtype)
