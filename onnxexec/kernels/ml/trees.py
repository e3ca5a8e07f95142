"""Tree-ensemble evaluation: every tree flattened into parallel node arrays.

A `Forest` is built once per model (see ops/ml_tree_build.py) from either attribute
layout (TreeEnsembleRegressor/Classifier's (tree id, node id) tables or
TreeEnsemble-5's index-based nodes + leaves). Leaves are nodes with mode LEAF whose
weights live in [weight_start, weight_end) of the (target, value) arrays.

Two walkers share the leaf aggregation:
- forests whose branch nodes all use one comparison (what scikit-learn, XGBoost and
  LightGBM converters write) walk four rows through a tree at once with that
  comparison fixed: the four independent chains of dependent loads overlap;
- any other forest (mixed modes, BRANCH_MEMBER sets) decides every node by its mode,
  reading the node's fields from one packed row (`Forest.packed`).
Rows go to numba's threads only when there is enough work to pay for waking them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels import tuning

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
PARALLEL_MIN_WORK: Final = tuning.TREES_PARALLEL_MIN_WORK
_ROWS_PER_TASK: Final = 64


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
    # The one comparison every branch node uses (LEQ..NEQ), or -1 when they differ.
    uniform_mode: int = field(init=False)
    branch_feature: np.ndarray = field(init=False, repr=False)  # feature, -1 at leaves

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
        modes = np.unique(self.mode[self.mode != LEAF])
        uniform = int(modes[0]) if modes.shape[0] == 1 and modes[0] < MEMBER else -1
        object.__setattr__(self, "uniform_mode", uniform if modes.shape[0] else LEQ)
        leaf = self.mode == LEAF
        object.__setattr__(self, "branch_feature", np.where(leaf, -1, self.feature))

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])


@nb.njit(cache=True, inline="always")
def _add_leaf(r, i, w_start, w_end, w_target, w_value, aggregate, out, has):
    """Aggregate leaf i's weights into out[r], has[r]."""
    for k in range(w_start[i], w_end[i]):
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


@nb.njit(cache=True, inline="always")
def _compare(v, th, m):
    """Branch test of mode m (LEQ..NEQ)."""
    if m == LEQ:
        return v <= th
    if m == LT:
        return v < th
    if m == GTE:
        return v >= th
    if m == GT:
        return v > th
    if m == EQ:
        return v == th
    return v != th


@nb.njit(cache=True)
def _uniform_rows(
    x,
    r0,
    r1,
    roots,
    m,
    feat,
    thr,
    tc,
    fc,
    miss,
    w_start,
    w_end,
    w_target,
    w_value,
    aggregate,
    out,
    has,
):
    """Rows [r0, r1) through every tree, all branch nodes testing with mode m.

    Four rows walk a tree together: their chains of dependent loads are independent,
    so the CPU overlaps them. feat is -1 at leaves; NaN follows missing_true. (The
    step is written out four times: as a helper function numba made it 3x slower.)
    """
    r = r0
    while r + 4 <= r1:
        for t in range(roots.shape[0]):
            a = b = c = d = roots[t]
            while True:
                fa = feat[a]
                fb = feat[b]
                f_c = feat[c]
                fd = feat[d]
                if fa < 0 and fb < 0 and f_c < 0 and fd < 0:
                    break
                if fa >= 0:
                    v = x[r, fa]
                    a = tc[a] if (_compare(v, thr[a], m) or (miss[a] and np.isnan(v))) else fc[a]
                if fb >= 0:
                    v = x[r + 1, fb]
                    b = tc[b] if (_compare(v, thr[b], m) or (miss[b] and np.isnan(v))) else fc[b]
                if f_c >= 0:
                    v = x[r + 2, f_c]
                    c = tc[c] if (_compare(v, thr[c], m) or (miss[c] and np.isnan(v))) else fc[c]
                if fd >= 0:
                    v = x[r + 3, fd]
                    d = tc[d] if (_compare(v, thr[d], m) or (miss[d] and np.isnan(v))) else fc[d]
            _add_leaf(r, a, w_start, w_end, w_target, w_value, aggregate, out, has)
            _add_leaf(r + 1, b, w_start, w_end, w_target, w_value, aggregate, out, has)
            _add_leaf(r + 2, c, w_start, w_end, w_target, w_value, aggregate, out, has)
            _add_leaf(r + 3, d, w_start, w_end, w_target, w_value, aggregate, out, has)
        r += 4
    for rr in range(r, r1):
        for t in range(roots.shape[0]):
            i = roots[t]
            while feat[i] >= 0:
                v = x[rr, feat[i]]
                i = tc[i] if (_compare(v, thr[i], m) or (miss[i] and np.isnan(v))) else fc[i]
            _add_leaf(rr, i, w_start, w_end, w_target, w_value, aggregate, out, has)


@nb.njit(cache=True)
def _general_rows(
    x, r0, r1, roots, nodes, threshold, members, w_target, w_value, aggregate, out, has
):
    """Rows [r0, r1) through every tree, each node tested by its own mode."""
    w_start = nodes[:, _W_START]
    w_end = nodes[:, _W_END]
    for r in range(r0, r1):
        for t in range(roots.shape[0]):
            i = roots[t]
            while nodes[i, _MODE] != LEAF:
                v = x[r, nodes[i, _FEATURE]]
                m = nodes[i, _MODE]
                if m == MEMBER:
                    go = False
                    for k in range(nodes[i, _M_START], nodes[i, _M_END]):
                        if v == members[k]:
                            go = True
                            break
                else:
                    go = _compare(v, threshold[i], m)
                if not go and nodes[i, _MISSING] != 0 and np.isnan(v):
                    go = True
                i = nodes[i, _TRUE] if go else nodes[i, _FALSE]
            _add_leaf(r, i, w_start, w_end, w_target, w_value, aggregate, out, has)


@nb.njit(cache=True)
def predict(
    x, roots, m, feat, thr, tc, fc, miss, nodes, members, w_target, w_value, aggregate, out, has
):
    """Every row on the calling thread; m < 0 picks the general walker."""
    n = x.shape[0]
    if m >= 0:
        w_start = nodes[:, _W_START]
        w_end = nodes[:, _W_END]
        _uniform_rows(
            x,
            0,
            n,
            roots,
            m,
            feat,
            thr,
            tc,
            fc,
            miss,
            w_start,
            w_end,
            w_target,
            w_value,
            aggregate,
            out,
            has,
        )
    else:
        _general_rows(x, 0, n, roots, nodes, thr, members, w_target, w_value, aggregate, out, has)


@nb.njit(parallel=True, cache=True)
def _predict_parallel(
    x, roots, m, feat, thr, tc, fc, miss, nodes, members, w_target, w_value, aggregate, out, has
):
    """predict with blocks of rows spread over numba's threads."""
    n = x.shape[0]
    n_tasks = (n + _ROWS_PER_TASK - 1) // _ROWS_PER_TASK
    w_start = nodes[:, _W_START]
    w_end = nodes[:, _W_END]
    for task in nb.prange(n_tasks):  # each task writes only its rows of out/has
        r0 = task * _ROWS_PER_TASK
        r1 = min(n, r0 + _ROWS_PER_TASK)
        if m >= 0:
            _uniform_rows(
                x,
                r0,
                r1,
                roots,
                m,
                feat,
                thr,
                tc,
                fc,
                miss,
                w_start,
                w_end,
                w_target,
                w_value,
                aggregate,
                out,
                has,
            )
        else:
            _general_rows(
                x, r0, r1, roots, nodes, thr, members, w_target, w_value, aggregate, out, has
            )


def checked_rows(forest: Forest, x: np.ndarray) -> np.ndarray:
    """x checked against the forest, as a C-ordered float32/float64 (N, F) array."""
    if x.ndim != 2:
        raise ValueError(f"expected (N, F) rows, got shape {list(x.shape)}")
    if x.dtype != np.float32 and x.dtype != np.float64:
        x = x.astype(np.float64)
    if x.shape[1] < forest.n_features:
        raise ValueError(
            f"trees read feature {forest.n_features - 1}, input has {x.shape[1]} features"
        )
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def wants_parallel(forest: Forest, n: int) -> bool:
    return (
        n > _ROWS_PER_TASK
        and n * forest.roots.shape[0] >= PARALLEL_MIN_WORK
        and nb.get_num_threads() > 1
    )


def predict_forest(forest: Forest, x: np.ndarray, aggregate: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) rows -> (scores (N, T) float64, has_score (N, T) bool), before averaging.

    SUM/AVERAGE add leaf weights, MIN/MAX keep the extreme; `has_score` marks the
    targets some reached leaf contributed to (onnxruntime's ScoreValue.has_score).
    """
    if aggregate not in (AVERAGE, SUM, MIN, MAX):
        raise ValueError(f"unknown aggregate function {aggregate}")
    x = checked_rows(forest, x)
    n = x.shape[0]
    out = np.zeros((n, forest.n_targets), dtype=np.float64)
    has = np.zeros((n, forest.n_targets), dtype=np.bool_)
    f = forest
    kernel = _predict_parallel if wants_parallel(forest, n) else predict
    kernel(
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
        out,
        has,
    )
    return out, has
