"""Tree-ensemble evaluation: every tree flattened into parallel node arrays.

A `Forest` is built once per model (see ops/ml_tree.py) from either attribute
layout (TreeEnsembleRegressor/Classifier's (tree id, node id) tables or
TreeEnsemble-5's index-based nodes + leaves). Leaves are nodes with mode LEAF whose
weights live in [weight_start, weight_end) of the (target, value) arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numba as nb
import numpy as np

# Node modes (TreeEnsemble-5 numbering; LEAF is ours).
LEQ: Final = 0
LT: Final = 1
GTE: Final = 2
GT: Final = 3
EQ: Final = 4
NEQ: Final = 5
MEMBER: Final = 6
LEAF: Final = 7

# Aggregate functions (TreeEnsemble-5 numbering).
AVERAGE: Final = 0
SUM: Final = 1
MIN: Final = 2
MAX: Final = 3


@dataclass(frozen=True)
class Forest:
    """Flattened trees; node arrays have one entry per node (leaves included)."""

    roots: np.ndarray  # (n_trees,) int64 node index of each root
    feature: np.ndarray  # (n_nodes,) int64
    threshold: np.ndarray  # (n_nodes,) float64
    mode: np.ndarray  # (n_nodes,) int64, LEQ..MEMBER or LEAF
    true_child: np.ndarray  # (n_nodes,) int64 node index
    false_child: np.ndarray  # (n_nodes,) int64 node index
    missing_true: np.ndarray  # (n_nodes,) bool: NaN takes the true branch
    member_start: np.ndarray  # (n_nodes,) int64 into `members` (MEMBER nodes)
    member_end: np.ndarray  # (n_nodes,) int64
    members: np.ndarray  # (n_members,) float64 set values of MEMBER nodes
    weight_start: np.ndarray  # (n_nodes,) int64 into the weight arrays (leaves)
    weight_end: np.ndarray  # (n_nodes,) int64
    weight_target: np.ndarray  # (n_weights,) int64 target / class index
    weight_value: np.ndarray  # (n_weights,) float64
    n_targets: int
    n_features: int  # 1 + the largest feature index a branch node reads

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])


@nb.njit(parallel=True, cache=True)
def _predict_forest(
    x,
    roots,
    feature,
    threshold,
    mode,
    true_child,
    false_child,
    missing_true,
    member_start,
    member_end,
    members,
    weight_start,
    weight_end,
    weight_target,
    weight_value,
    aggregate,
    out,
    has,
):
    """Walk every tree for every row; aggregate leaf weights into out/has.

    x (N, F) float, out (N, T) float64 zeros, has (N, T) bool False.
    """
    n_rows = x.shape[0]
    for r in nb.prange(n_rows):  # each r writes only out[r], has[r]: no races
        for t in range(roots.shape[0]):
            i = roots[t]
            while mode[i] != LEAF:
                v = x[r, feature[i]]
                m = mode[i]
                th = threshold[i]
                if m == LEQ:
                    go = v <= th
                elif m == LT:
                    go = v < th
                elif m == GTE:
                    go = v >= th
                elif m == GT:
                    go = v > th
                elif m == EQ:
                    go = v == th
                elif m == NEQ:
                    go = v != th
                else:
                    go = False
                    for k in range(member_start[i], member_end[i]):
                        if v == members[k]:
                            go = True
                            break
                if not go and missing_true[i] and np.isnan(v):
                    go = True
                i = true_child[i] if go else false_child[i]
            for k in range(weight_start[i], weight_end[i]):
                tg = weight_target[k]
                w = weight_value[k]
                if aggregate == MIN:
                    if not has[r, tg] or w < out[r, tg]:
                        out[r, tg] = w
                elif aggregate == MAX:
                    if not has[r, tg] or w > out[r, tg]:
                        out[r, tg] = w
                else:
                    out[r, tg] += w
                has[r, tg] = True


def predict_forest(forest: Forest, x: np.ndarray, aggregate: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) rows -> (scores (N, T) float64, has_score (N, T) bool), before averaging.

    SUM/AVERAGE add leaf weights, MIN/MAX keep the extreme; `has_score` marks the
    targets some reached leaf contributed to (onnxruntime's ScoreValue.has_score).
    """
    if x.ndim != 2:
        raise ValueError(f"expected (N, F) rows, got shape {list(x.shape)}")
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    if aggregate not in (AVERAGE, SUM, MIN, MAX):
        raise ValueError(f"unknown aggregate function {aggregate}")
    if x.shape[1] < forest.n_features:
        raise ValueError(
            f"trees read feature {forest.n_features - 1}, input has {x.shape[1]} features"
        )
    out = np.zeros((x.shape[0], forest.n_targets), dtype=np.float64)
    has = np.zeros((x.shape[0], forest.n_targets), dtype=np.bool_)
    f = forest
    _predict_forest(
        np.ascontiguousarray(x),
        f.roots,
        f.feature,
        f.threshold,
        f.mode,
        f.true_child,
        f.false_child,
        f.missing_true,
        f.member_start,
        f.member_end,
        f.members,
        f.weight_start,
        f.weight_end,
        f.weight_target,
        f.weight_value,
        aggregate,
        out,
        has,
    )
    return out, has
