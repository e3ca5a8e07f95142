"""ai.onnx.ml tree ensembles: TreeEnsembleRegressor, TreeEnsembleClassifier, TreeEnsemble.

Trees are flattened once (ml_tree_build) and walked by the numba kernel in
kernels/ml/trees.py; ml_tree_scores turns the summed leaf weights into outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from onnxexec.kernels.ml.trees import AVERAGE, MAX, MIN, SUM, Forest
from onnxexec.ops.ml_common import (
    as_rows,
    check_post_transform,
    class_labels,
    floats_or_tensor,
)
from onnxexec.ops.ml_tree_build import cached_forest, forest_from_ids, forest_from_indices
from onnxexec.ops.ml_tree_scores import (
    ForestRunner,
    TreeState,
    class_labels_of,
    classification_runner,
    classification_scores,
    prepare_tree,
    regression_runner,
    regression_scores,
)
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"
_AGGREGATES: Final = {"AVERAGE": AVERAGE, "SUM": SUM, "MIN": MIN, "MAX": MAX}
_V5_POST: Final = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def _regressor_model(
    base_values: Sequence[float] | None,
    base_values_as_tensor: np.ndarray | None,
    n_targets: int,
    *nodes_and_targets: Any,
) -> tuple[Forest, np.ndarray | None]:
    """(forest, base values) of a TreeEnsembleRegressor node, built once."""
    forest = forest_from_ids(*nodes_and_targets, n_targets)
    return forest, floats_or_tensor(base_values, base_values_as_tensor)


def _regress(
    x: np.ndarray,
    aggregate_function: str,
    post_transform: str,
    n_targets: int | None,
    base_values: Sequence[float] | None,
    base_values_as_tensor: np.ndarray | None,
    *nodes_and_targets: Any,
    state: TreeState | None = None,
) -> np.ndarray:
    """TreeEnsembleRegressor of any opset (positional: handlers call it per run)."""
    if state is not None and state.runner is not None:
        return state.runner(as_rows(x, "TreeEnsembleRegressor"))
    check_post_transform(post_transform, "TreeEnsembleRegressor")
    aggregate = _AGGREGATES.get(aggregate_function)
    if aggregate is None:
        raise ValueError(
            f"TreeEnsembleRegressor: unknown aggregate_function '{aggregate_function}'"
        )
    if n_targets is None:
        raise ValueError("TreeEnsembleRegressor: n_targets is required")
    forest, base = cached_forest(
        _regressor_model, base_values, base_values_as_tensor, n_targets, *nodes_and_targets
    )
    if state is not None:
        state.runner = regression_runner(forest, aggregate, base, post_transform)
    return regression_scores(
        as_rows(x, "TreeEnsembleRegressor"), forest, aggregate, base, post_transform
    )


@op("TreeEnsembleRegressor", since=3, domain=ML, prepare=prepare_tree)
def tree_ensemble_regressor(
    x: np.ndarray,
    *,
    aggregate_function: str = "SUM",
    base_values: Sequence[float] | None = None,
    base_values_as_tensor: np.ndarray | None = None,
    n_targets: int | None = None,
    nodes_falsenodeids: Sequence[int] = (),
    nodes_featureids: Sequence[int] = (),
    nodes_hitrates: Sequence[float] | None = None,
    nodes_hitrates_as_tensor: np.ndarray | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None,
    nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (),
    nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (),
    nodes_values: Sequence[float] | None = None,
    nodes_values_as_tensor: np.ndarray | None = None,
    post_transform: str = "NONE",
    target_ids: Sequence[int] = (),
    target_nodeids: Sequence[int] = (),
    target_treeids: Sequence[int] = (),
    target_weights: Sequence[float] | None = None,
    target_weights_as_tensor: np.ndarray | None = None,
    prepared: TreeState | None = None,
) -> np.ndarray:
    """(N, F) -> (N, n_targets) float32; *_as_tensor attributes take precedence."""
    return _regress(
        x,
        aggregate_function,
        post_transform,
        n_targets,
        base_values,
        base_values_as_tensor,
        nodes_treeids,
        nodes_nodeids,
        nodes_featureids,
        nodes_modes,
        nodes_values_as_tensor if nodes_values_as_tensor is not None else nodes_values,
        nodes_truenodeids,
        nodes_falsenodeids,
        nodes_missing_value_tracks_true,
        target_treeids,
        target_nodeids,
        target_ids,
        target_weights_as_tensor if target_weights_as_tensor is not None else target_weights,
        state=prepared,
    )


@op("TreeEnsembleRegressor", since=1, domain=ML, prepare=prepare_tree)
def tree_ensemble_regressor_v1(
    x: np.ndarray,
    *,
    aggregate_function: str = "SUM",
    base_values: Sequence[float] | None = None,
    n_targets: int | None = None,
    nodes_falsenodeids: Sequence[int] = (),
    nodes_featureids: Sequence[int] = (),
    nodes_hitrates: Sequence[float] | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None,
    nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (),
    nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (),
    nodes_values: Sequence[float] | None = None,
    post_transform: str = "NONE",
    target_ids: Sequence[int] = (),
    target_nodeids: Sequence[int] = (),
    target_treeids: Sequence[int] = (),
    target_weights: Sequence[float] | None = None,
    prepared: TreeState | None = None,
) -> np.ndarray:
    """Opsets 1-2: v3 without the *_as_tensor attributes."""
    return _regress(
        x,
        aggregate_function,
        post_transform,
        n_targets,
        base_values,
        None,
        nodes_treeids,
        nodes_nodeids,
        nodes_featureids,
        nodes_modes,
        nodes_values,
        nodes_truenodeids,
        nodes_falsenodeids,
        nodes_missing_value_tracks_true,
        target_treeids,
        target_nodeids,
        target_ids,
        target_weights,
        state=prepared,
    )


@dataclass(frozen=True)
class _ClassifierModel:
    forest: Forest
    base: np.ndarray | None
    labels: np.ndarray
    binary_case: bool  # two labels scored by one weight column
    all_positive: bool  # every class weight >= 0


def _classifier_model(
    base_values: Sequence[float] | None,
    base_values_as_tensor: np.ndarray | None,
    classlabels_int64s: Sequence[int] | None,
    classlabels_strings: Sequence[str] | None,
    *nodes_and_classes: Any,
) -> _ClassifierModel:
    labels = class_labels(classlabels_int64s, classlabels_strings, "TreeEnsembleClassifier")
    n_classes = labels.shape[0]
    class_ids, weights = nodes_and_classes[-2], nodes_and_classes[-1]
    return _ClassifierModel(
        forest=forest_from_ids(*nodes_and_classes, n_classes),
        base=floats_or_tensor(base_values, base_values_as_tensor),
        labels=labels,
        binary_case=n_classes == 2 and len(set(class_ids)) == 1,
        all_positive=bool((np.asarray(weights, dtype=np.float64) >= 0).all()),
    )


def _classify(
    x: np.ndarray, post_transform: str, *model_attrs: Any, state: TreeState | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """TreeEnsembleClassifier of any opset (positional: handlers call it per run)."""
    if state is not None and state.runner is not None:
        pick, z = state.runner(as_rows(x, "TreeEnsembleClassifier"))
        return class_labels_of(pick, state.runner.forest, *state.labels), z
    check_post_transform(post_transform, "TreeEnsembleClassifier")
    m = cached_forest(_classifier_model, *model_attrs)
    if state is not None:
        state.runner = classification_runner(
            m.forest, m.base, m.binary_case, m.all_positive, post_transform
        )
        state.labels = (m.labels, m.binary_case)
    return classification_scores(
        m.forest,
        as_rows(x, "TreeEnsembleClassifier"),
        m.base,
        m.labels,
        m.binary_case,
        m.all_positive,
        post_transform,
    )


@op("TreeEnsembleClassifier", since=3, domain=ML, prepare=prepare_tree)
def tree_ensemble_classifier(
    x: np.ndarray,
    *,
    base_values: Sequence[float] | None = None,
    base_values_as_tensor: np.ndarray | None = None,
    class_ids: Sequence[int] = (),
    class_nodeids: Sequence[int] = (),
    class_treeids: Sequence[int] = (),
    class_weights: Sequence[float] | None = None,
    class_weights_as_tensor: np.ndarray | None = None,
    classlabels_int64s: Sequence[int] | None = None,
    classlabels_strings: Sequence[str] | None = None,
    nodes_falsenodeids: Sequence[int] = (),
    nodes_featureids: Sequence[int] = (),
    nodes_hitrates: Sequence[float] | None = None,
    nodes_hitrates_as_tensor: np.ndarray | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None,
    nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (),
    nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (),
    nodes_values: Sequence[float] | None = None,
    nodes_values_as_tensor: np.ndarray | None = None,
    post_transform: str = "NONE",
    prepared: TreeState | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) -> labels (N,) int64|string, scores (N, n_classes) float32."""
    return _classify(
        x,
        post_transform,
        base_values,
        base_values_as_tensor,
        classlabels_int64s,
        classlabels_strings,
        nodes_treeids,
        nodes_nodeids,
        nodes_featureids,
        nodes_modes,
        nodes_values_as_tensor if nodes_values_as_tensor is not None else nodes_values,
        nodes_truenodeids,
        nodes_falsenodeids,
        nodes_missing_value_tracks_true,
        class_treeids,
        class_nodeids,
        class_ids,
        class_weights_as_tensor if class_weights_as_tensor is not None else class_weights,
        state=prepared,
    )


@op("TreeEnsembleClassifier", since=1, domain=ML, prepare=prepare_tree)
def tree_ensemble_classifier_v1(
    x: np.ndarray,
    *,
    base_values: Sequence[float] | None = None,
    class_ids: Sequence[int] = (),
    class_nodeids: Sequence[int] = (),
    class_treeids: Sequence[int] = (),
    class_weights: Sequence[float] | None = None,
    classlabels_int64s: Sequence[int] | None = None,
    classlabels_strings: Sequence[str] | None = None,
    nodes_falsenodeids: Sequence[int] = (),
    nodes_featureids: Sequence[int] = (),
    nodes_hitrates: Sequence[float] | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None,
    nodes_modes: Sequence[str] = (),
    nodes_nodeids: Sequence[int] = (),
    nodes_treeids: Sequence[int] = (),
    nodes_truenodeids: Sequence[int] = (),
    nodes_values: Sequence[float] | None = None,
    post_transform: str = "NONE",
    prepared: TreeState | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Opsets 1-2: v3 without the *_as_tensor attributes."""
    return _classify(
        x,
        post_transform,
        base_values,
        None,
        classlabels_int64s,
        classlabels_strings,
        nodes_treeids,
        nodes_nodeids,
        nodes_featureids,
        nodes_modes,
        nodes_values,
        nodes_truenodeids,
        nodes_falsenodeids,
        nodes_missing_value_tracks_true,
        class_treeids,
        class_nodeids,
        class_ids,
        class_weights,
        state=prepared,
    )


@op("TreeEnsemble", since=5, domain=ML, prepare=prepare_tree)
def tree_ensemble(
    x: np.ndarray,
    *,
    aggregate_function: int = 1,
    leaf_targetids: Sequence[int],
    leaf_weights: np.ndarray,
    membership_values: np.ndarray | None = None,
    n_targets: int | None = None,
    nodes_falseleafs: Sequence[int],
    nodes_falsenodeids: Sequence[int],
    nodes_featureids: Sequence[int],
    nodes_hitrates: np.ndarray | None = None,
    nodes_missing_value_tracks_true: Sequence[int] | None = None,
    nodes_modes: np.ndarray,
    nodes_splits: np.ndarray,
    nodes_trueleafs: Sequence[int],
    nodes_truenodeids: Sequence[int],
    post_transform: int = 0,
    tree_roots: Sequence[int],
    prepared: TreeState | None = None,
) -> np.ndarray:
    """(N, F) -> (N, n_targets) in X's dtype.

    aggregate_function 0-3 = AVERAGE, SUM, MIN, MAX; post_transform 0-4 = NONE,
    SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT (TreeEnsemble-5 spec).
    """
    if prepared is not None and prepared.runner is not None:
        return prepared.runner(as_rows(x, "TreeEnsemble")).astype(x.dtype)
    if aggregate_function not in (AVERAGE, SUM, MIN, MAX):
        raise ValueError(f"TreeEnsemble: aggregate_function must be 0-3, got {aggregate_function}")
    if not 0 <= post_transform < len(_V5_POST):
        raise ValueError(f"TreeEnsemble: post_transform must be 0-4, got {post_transform}")
    if n_targets is None:
        raise ValueError("TreeEnsemble: n_targets is required")
    forest = cached_forest(
        forest_from_indices,
        tree_roots,
        nodes_modes,
        nodes_featureids,
        nodes_splits,
        nodes_truenodeids,
        nodes_trueleafs,
        nodes_falsenodeids,
        nodes_falseleafs,
        nodes_missing_value_tracks_true,
        membership_values,
        leaf_targetids,
        leaf_weights,
        n_targets,
    )
    runner = ForestRunner(forest, aggregate_function, _V5_POST[post_transform])
    if prepared is not None:
        prepared.runner = runner
    return runner(as_rows(x, "TreeEnsemble")).astype(x.dtype)
