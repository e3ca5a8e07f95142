"""Tree-ensemble evaluation: every tree flattened into parallel node arrays.

A `Forest` is built once per model (see ops/ml_tree_build.py) from either attribute
layout (TreeEnsembleRegressor/Classifier's (tree id, node id) tables or
TreeEnsemble-5's index-based nodes + leaves). Leaves are nodes with mode LEAF whose
weights live in [weight_start, weight_end) of the (target, value) arrays.

The kernel reads a packed copy (`Forest.packed`: one int64 row per node) so a call
passes a handful of arrays: numba's dispatcher checks every argument's type on each
call, which for the small models skl2onnx writes costs more than the walk itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

# Columns of Forest.packed.
_FEATURE, _MODE, _TRUE, _FALSE, _MISSING, _W_START, _W_END, _M_START, _M_END = range(9)

# Rows x trees below which one thread walks everything: waking numba's workers costs
# tens of microseconds (far more on a busy machine), a tree walk tens of nanoseconds.
PARALLEL_MIN_WORK: Final = 1 << 15


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
    packed: np.ndarray = field(init=False, repr=False)  # (n_nodes, 9) int64, see _FEATURE..

    def __post_init__(self) -> None:
        cols = (
            self.feature,
            self.mode,
            self.true_child,
            self.false_child,
            self.missing_true,
            self.weight_start,
            self.weight_end,
            self.member_start,
            self.member_end,
        )
        packed = np.ascontiguousarray(np.stack([np.asarray(c, np.int64) for c in cols], axis=1))
        object.__setattr__(self, "packed", packed)

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])


@nb.njit(cache=True)
def _walk_row(x, r, roots, nodes, threshold, members, w_target, w_value, aggregate, out, has):
    """Walk every tree for row r of x; aggregate its leaves' weights into out[r], has[r]."""
    for t in range(roots.shape[0]):
        i = roots[t]
        while nodes[i, _MODE] != LEAF:
            v = x[r, nodes[i, _FEATURE]]
            m = nodes[i, _MODE]
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
                for k in range(nodes[i, _M_START], nodes[i, _M_END]):
                    if v == members[k]:
                        go = True
                        break
            if not go and nodes[i, _MISSING] != 0 and np.isnan(v):
                go = True
            i = nodes[i, _TRUE] if go else nodes[i, _FALSE]
        for k in range(nodes[i, _W_START], nodes[i, _W_END]):
            tg = w_target[k]
            w = w_value[k]
            if aggregate == MIN:
                if not has[r, tg] or w < out[r, tg]:
                    out[r, tg] = w
            elif aggregate == MAX:
                if not has[r, tg] or w > out[r, tg]:
                    out[r, tg] = w
            else:
                out[r, tg] += w
            has[r, tg] = True


@nb.njit(cache=True)
def _predict_serial(x, roots, nodes, threshold, members, w_target, w_value, aggregate, out, has):
    """Walk every tree for every row on the calling thread.

    x (N, F) float, out (N, T) float64 zeros, has (N, T) bool False.
    """
    for r in range(x.shape[0]):
        _walk_row(x, r, roots, nodes, threshold, members, w_target, w_value, aggregate, out, has)


@nb.njit(parallel=True, cache=True)
def _predict_parallel(x, roots, nodes, threshold, members, w_target, w_value, aggregate, out, has):
    """_predict_serial with rows spread over numba's threads."""
    for r in nb.prange(x.shape[0]):  # each r writes only out[r], has[r]: no races
        _walk_row(x, r, roots, nodes, threshold, members, w_target, w_value, aggregate, out, has)


def predict_forest(forest: Forest, x: np.ndarray, aggregate: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) rows -> (scores (N, T) float64, has_score (N, T) bool), before averaging.

    SUM/AVERAGE add leaf weights, MIN/MAX keep the extreme; `has_score` marks the
    targets some reached leaf contributed to (onnxruntime's ScoreValue.has_score).
    """
    if x.ndim != 2:
        raise ValueError(f"expected (N, F) rows, got shape {list(x.shape)}")
    if x.dtype != np.float32 and x.dtype != np.float64:
        x = x.astype(np.float64)
    if aggregate not in (AVERAGE, SUM, MIN, MAX):
        raise ValueError(f"unknown aggregate function {aggregate}")
    if x.shape[1] < forest.n_features:
        raise ValueError(
            f"trees read feature {forest.n_features - 1}, input has {x.shape[1]} features"
        )
    n = x.shape[0]
    out = np.zeros((n, forest.n_targets), dtype=np.float64)
    has = np.zeros((n, forest.n_targets), dtype=np.bool_)
    f = forest
    kernel = (
        _predict_parallel
        if n > 1 and n * f.roots.shape[0] >= PARALLEL_MIN_WORK and nb.get_num_threads() > 1
        else _predict_serial
    )
    kernel(
        x if x.flags.c_contiguous else np.ascontiguousarray(x),
        f.roots,
        f.packed,
        f.threshold,
        f.members,
        f.weight_target,
        f.weight_value,
        aggregate,
        out,
        has,
    )
    return out, has
