"""Scores of tree ensembles after the leaves are summed (no handlers here).

Averaging, base values, binary classification with one weight column and post
transforms follow onnxruntime's tree_ensemble_aggregator.h, which the ONNX-ML spec
leaves open. A target or class no reached leaf (or base value) scored reads as 0,
as onnxruntime's ScoreValue does. Walking the trees and scoring the rows is one
compiled call (kernels/ml/tree_scores.py: predict_targets, predict_classes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.kernels.ml.tree_scores import (
    predict_classes,
    predict_classes_jit,
    predict_targets,
    predict_targets_jit,
)
from onnxexec.kernels.ml.trees import (
    AVERAGE,
    SUM,
    Forest,
    checked_rows,
    predict,
    predict_forest,
    wants_parallel,
)
from onnxexec.ops.ml_common import POST_TRANSFORMS, probit, transform_scores

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
    return class_labels_of(pick, forest, labels, binary_case), z


def class_labels_of(
    pick: np.ndarray, forest: Forest, labels: np.ndarray, binary_case: bool
) -> np.ndarray:
    """The labels of classification_scores' picked class indexes (see there)."""
    if forest.n_targets > 2 or binary_case:
        return labels[pick]
    if labels.dtype == object:
        return labels[np.minimum(pick, labels.shape[0] - 1)]
    return pick


class TreeRunner:
    """predict_classes / predict_targets bound to one forest and its scoring options,
    for a node's prepared state (ops/ml_tree.py): the forest's arrays are bound once
    and the compiled overload for the rows' layout is looked up once (objload's
    `linked`), not per call. At a few rows that per-call work (the argument key of 18
    arguments, the wrappers) cost more than walking the trees. Same kernels, so the
    same bits; rows that want threads take the general path."""

    __slots__ = ("args", "classes", "fn", "fn_key", "forest", "options")

    def __init__(
        self, forest: Forest, classes: bool, options: tuple[Any, ...], aggregate: int = SUM
    ) -> None:
        f = forest
        self.forest, self.classes, self.options = forest, classes, options
        arrays = (f.roots, f.uniform_mode, f.branch_feature, f.threshold, f.true_child,
                  f.false_child, f.missing_true, f.packed, f.members, f.weight_target,
                  f.weight_value)  # fmt: skip
        if classes:  # options: base, binary_case, all_positive, kind
            self.args = (*arrays, *options)
        else:  # options: base, kind
            divisor = float(f.n_trees if aggregate == AVERAGE else 1)
            self.args = (*arrays, aggregate, divisor, *options)
        self.fn: Any = None
        self.fn_key: Any = None

    def __call__(self, x: np.ndarray) -> Any:
        f = self.forest
        if wants_parallel(f, x.shape[0]):
            if self.classes:
                return predict_classes(f, x, *self.options)
            return predict_targets(f, x, self.args[11], *self.options)
        x = checked_rows(f, x)
        n = x.shape[0]
        if self.classes:
            out: Any = (np.empty(n, np.int64), np.empty((n, f.n_targets), np.float32))
            kernel = predict_classes_jit
        else:
            out = (np.empty((n, f.n_targets), np.float32),)
            kernel = predict_targets_jit
        args = (x, *self.args, *out)
        key = (x.dtype, x.flags.num)
        if key != self.fn_key:
            self.fn = getattr(kernel, "linked", lambda a: None)(args) or kernel
            self.fn_key = key
        self.fn(*args)
        return out if self.classes else out[0]


def regression_runner(
    forest: Forest, aggregate: int, base: np.ndarray | None, post_transform: str
) -> TreeRunner:
    """regression_scores bound to one node (kernels/ml/tree_scores.py TreeRunner)."""
    options = (_base32(base), POST_TRANSFORMS.index(post_transform))
    return TreeRunner(forest, False, options, aggregate)


def classification_runner(
    forest: Forest, base: np.ndarray | None, binary_case: bool, all_positive: bool, post: str
) -> TreeRunner:
    """classification_scores' (pick, scores) bound to one node (TreeRunner)."""
    options = (_base32(base), binary_case, all_positive, POST_TRANSFORMS.index(post))
    return TreeRunner(forest, True, options)


class ForestRunner:
    """TreeEnsemble-5 (ai.onnx.ml opset 5) bound to one forest: predict_forest's
    float64 sums with the forest arrays bound once and the compiled overload looked
    up once (as TreeRunner), then the same numpy averaging and post transform as
    the unprepared handler, so the same bits."""

    __slots__ = ("aggregate", "args", "fn", "fn_key", "forest", "post")

    def __init__(self, forest: Forest, aggregate: int, post: str) -> None:
        f = forest
        self.forest, self.aggregate, self.post = forest, aggregate, post
        self.args = (f.roots, f.uniform_mode, f.branch_feature, f.threshold, f.true_child,
                     f.false_child, f.missing_true, f.packed, f.members, f.weight_target,
                     f.weight_value, aggregate)  # fmt: skip
        self.fn: Any = None
        self.fn_key: Any = None

    def _sums(self, x: np.ndarray) -> np.ndarray:
        f = self.forest
        if wants_parallel(f, x.shape[0]):
            return predict_forest(f, x, self.aggregate)[0]
        x = checked_rows(f, x)
        out = np.zeros((x.shape[0], f.n_targets), dtype=np.float64)
        has = np.zeros((x.shape[0], f.n_targets), dtype=np.bool_)
        args = (x, *self.args, out, has)
        key = (x.dtype, x.flags.num)
        if key != self.fn_key:
            self.fn = getattr(predict, "linked", lambda a: None)(args) or predict
            self.fn_key = key
        self.fn(*args)
        return out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """(N, F) rows -> (N, n_targets) float64 scores (float16 rows read as float32)."""
        scores = self._sums(x.astype(np.float32) if x.dtype == np.float16 else x)
        if self.aggregate == AVERAGE:
            scores = scores / self.forest.n_trees
        if scores.shape[1] == 1:  # one target: only PROBIT applies
            return probit(scores) if self.post == "PROBIT" else scores
        return transform_scores(scores, self.post)


class TreeState:
    """A tree-ensemble node's prepared state (ops/registry.py `prepare`): its forest
    bound to the scoring kernel (TreeRunner), made on the first run from the node's
    attributes and reused by every later run: a run of a few rows then skips the
    attribute memo, the checks and the kernel's argument key."""

    __slots__ = ("__weakref__", "labels", "runner")

    def __init__(self) -> None:
        self.runner: Any = None
        self.labels: Any = None  # (labels, binary_case) of a classifier


def prepare_tree(consts: tuple[Any, ...], attrs: dict) -> TreeState:
    return TreeState()
