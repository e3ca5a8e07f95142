"""Tree-ensemble scores: summed leaf weights -> classifier labels/scores or regression
outputs, as onnxruntime's tree_ensemble_aggregator.h (the ONNX-ML spec leaves the
binary and base-value cases open), and the tree walk fused with that scoring.

A class or target no reached leaf (or base value) scored reads as 0, as
onnxruntime's ScoreValue does. Arithmetic is float32 like onnxruntime's outputs.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.ml.ml_scores import (
    LOGISTIC,
    PROBIT,
    argmax_row,
    logistic32,
    probit32,
    transform_row,
)
from onnxexec.kernels.ml.trees import (
    AVERAGE,
    MAX,
    MIN,
    SUM,
    Forest,
    checked_rows,
    predict,  # the serial walk kernel: the fused kernels call it from compiled code
    predict_forest,
    wants_parallel,
)

_F0 = np.float32(0)
_F1 = np.float32(1)


@nb.njit(cache=True)
def _expand_one(s, kind, mode, z):
    """One lone binary score -> z[0], z[1] (ml_common.expand_binary for one row)."""
    z[0] = _F0
    z[1] = _F0
    if kind == PROBIT:
        z[0] = probit32(s)
    elif mode == -1:
        z[0] = s
    elif mode == 0 or mode == 1:
        p = logistic32(s) if kind == LOGISTIC else s
        z[0] = _F1 - p
        z[1] = p
    elif mode == 2 or mode == 3:
        z[0] = logistic32(-s) if kind == LOGISTIC else -s
        z[1] = logistic32(s) if kind == LOGISTIC else s


@nb.njit(cache=True)
def tree_classes_into(scores, has, base, binary_case, all_positive, kind, pick, z):
    """Class scores of summed tree weights, as onnxruntime's TreeAggregatorClassifier.

    scores (N, C) float64 sums, has (N, C) whether some leaf scored the class, base
    (B,) float32. C > 2: pick = argmax over the scored classes, z = transform of the
    scores (0 where unscored). C <= 2: pick = 1 for the positive class else 0, and
    z (N, 2) the (expanded) scores; see ops/ml_tree_scores.py for the cases.
    """
    n, c = scores.shape
    nb_ = base.shape[0]
    tmp = np.empty(max(c, 2), np.float32)
    for r in range(n):
        if c > 2:
            for j in range(c):
                v = np.float32(scores[r, j])
                scored = has[r, j]
                if j < nb_:
                    v += base[j]
                    scored = True
                z[r, j] = v if scored else _F0
                tmp[j] = v if scored else np.float32(-np.inf)
            pick[r] = argmax_row(tmp[:c])
            transform_row(z[r], kind)
            continue
        if c == 1:
            s0 = np.float32(scores[r, 0])
            if nb_ == 2:
                s0 += base[1]
            elif nb_ == 1:
                s0 += base[0]
            pick[r] = 1 if s0 > 0 else 0
            z[r, 0] = probit32(s0) if kind == PROBIT else s0
            continue
        s0 = np.float32(scores[r, 0])
        s1 = np.float32(scores[r, 1])
        h0 = has[r, 0]
        h1 = has[r, 1]
        second = -1
        if nb_ == 2:
            # with a class-1 score onnxruntime assumes base[0] == base[1] and rebuilds
            # both columns from column 0; otherwise "binary as multiclass"
            p1 = base[1] + s0 if h1 else s1 + base[1]
            s0 = -p1 if h1 else s0 + base[0]
            s1 = p1
            two = True
        else:
            if nb_ == 1:
                s0 += base[0]
            else:
                second = 3
            two = h1
        pos = s1 if h1 else (s0 if h0 else _F0)
        if binary_case:
            win = pos > np.float32(0.5) if all_positive else pos > _F0
            if all_positive:
                second = 0 if win else 1
            else:
                second = 2 if win else 3
        else:
            win = pos > _F0
        pick[r] = 1 if win else 0
        v0 = s0 if h0 else _F0
        v1 = s1 if h1 else _F0
        if two:
            z[r, 0] = v0
            z[r, 1] = v1
            transform_row(z[r], kind)
        else:
            _expand_one(v0, kind, second, z[r])


def tree_classes(
    scores: np.ndarray,
    has: np.ndarray,
    base: np.ndarray,
    binary_case: bool,
    all_positive: bool,
    kind: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(pick (N,) int64, scores (N, C) float32); see tree_classes_into."""
    n, c = scores.shape
    pick = np.empty(n, np.int64)
    z = np.empty((n, c), np.float32)
    tree_classes_into(scores, has, base, binary_case, all_positive, kind, pick, z)
    return pick, z


@nb.njit(cache=True)
def tree_targets_into(scores, has, divisor, base, kind, out):
    """Regression outputs: scores / divisor as float32 plus base, then (several
    targets) the post-transform of the scored targets (0 where no leaf scored)."""
    n, t = scores.shape
    for r in range(n):
        for j in range(t):
            v = np.float32(scores[r, j] / divisor)
            if base.shape[0] == t:
                v += base[j]
            if t > 1 and not has[r, j]:
                v = _F0
            out[r, j] = v
        if t == 1:
            if kind == PROBIT:
                out[r, 0] = probit32(out[r, 0])
        else:
            transform_row(out[r], kind)


def tree_targets(
    scores: np.ndarray, has: np.ndarray, divisor: float, base: np.ndarray, kind: int
) -> np.ndarray:
    """(N, T) float32 regression outputs; a lone target only takes PROBIT (onnxruntime)."""
    out = np.empty(scores.shape, np.float32)
    tree_targets_into(scores, has, float(divisor), base, kind, out)
    return out


@nb.njit(cache=True)
def predict_classes_jit(
    x,
    roots,
    m,
    feat,
    thr,
    tc,
    fc,
    miss,
    nodes,
    members,
    w_target,
    w_value,
    base,
    binary_case,
    all_positive,
    kind,
    pick,
    z,
):
    """predict (SUM) then ml_scores' tree_classes, in one call."""
    out = np.zeros((x.shape[0], z.shape[1]), np.float64)
    has = np.zeros((x.shape[0], z.shape[1]), np.bool_)
    predict(x, roots, m, feat, thr, tc, fc, miss, nodes, members, w_target, w_value, SUM, out, has)
    tree_classes_into(out, has, base, binary_case, all_positive, kind, pick, z)


def predict_classes(
    forest: Forest,
    x: np.ndarray,
    base: np.ndarray,
    binary_case: bool,
    all_positive: bool,
    kind: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Summed class weights of every row turned into (pick, scores) as
    kernels.ml.ml_scores.tree_classes does, walking and scoring in one compiled call."""
    if wants_parallel(forest, x.shape[0]):
        scores, has = predict_forest(forest, x, SUM)
        return tree_classes(scores, has, base, binary_case, all_positive, kind)
    x = checked_rows(forest, x)
    n = x.shape[0]
    pick = np.empty(n, np.int64)
    z = np.empty((n, forest.n_targets), np.float32)
    f = forest
    predict_classes_jit(
        x,
        f.roots,
        f.uniform_mode,
        f.branch_feature,
        f.threshold,
        f.true_child,
        f.false_child,
        f.missing_true,
        f.packed,
        f.members,
        f.weight_target,
        f.weight_value,
        base,
        binary_case,
        all_positive,
        kind,
        pick,
        z,
    )
    return pick, z


@nb.njit(cache=True)
def predict_targets_jit(
    x,
    roots,
    m,
    feat,
    thr,
    tc,
    fc,
    miss,
    nodes,
    members,
    w_target,
    w_value,
    aggregate,
    divisor,
    base,
    kind,
    y,
):
    """predict then ml_scores' tree_targets, in one call."""
    out = np.zeros(y.shape, np.float64)
    has = np.zeros(y.shape, np.bool_)
    predict(
        x, roots, m, feat, thr, tc, fc, miss, nodes, members, w_target, w_value, aggregate, out, has
    )
    tree_targets_into(out, has, divisor, base, kind, y)


def predict_targets(
    forest: Forest, x: np.ndarray, aggregate: int, base: np.ndarray, kind: int
) -> np.ndarray:
    """(N, T) float32 regression outputs of (N, F) rows, as kernels.ml.ml_scores.tree_targets
    computes them from predict_forest's sums (AVERAGE divides by the tree count), in one
    compiled call."""
    divisor = forest.n_trees if aggregate == AVERAGE else 1
    if aggregate not in (AVERAGE, SUM, MIN, MAX) or wants_parallel(forest, x.shape[0]):
        scores, has = predict_forest(forest, x, aggregate)
        return tree_targets(scores, has, divisor, base, kind)
    x = checked_rows(forest, x)
    y = np.empty((x.shape[0], forest.n_targets), np.float32)
    f = forest
    predict_targets_jit(
        x,
        f.roots,
        f.uniform_mode,
        f.branch_feature,
        f.threshold,
        f.true_child,
        f.false_child,
        f.missing_true,
        f.packed,
        f.members,
        f.weight_target,
        f.weight_value,
        aggregate,
        float(divisor),
        base,
        kind,
        y,
    )
    return y
