"""Flatten tree-ensemble attributes into a kernels.ml.trees.Forest, once per model.

Handlers call `cached_forest(build, *attrs)` (ml_common.memo): the plan binds the
same attribute objects to every run, so a cache keyed on their identities makes
flattening a first-call cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from onnxexec.kernels.ml.trees import LEAF, MEMBER, Forest
from onnxexec.ops.ml_common import memo

_MODES: Final = {
    "BRANCH_LEQ": 0,
    "BRANCH_LT": 1,
    "BRANCH_GTE": 2,
    "BRANCH_GT": 3,
    "BRANCH_EQ": 4,
    "BRANCH_NEQ": 5,
    "BRANCH_MEMBER": MEMBER,
    "LEAF": LEAF,
}
# Forests are memoised on the identity of their attribute objects (see ml_common.memo).
cached_forest = memo


def _i64(v: Sequence[int] | np.ndarray | None, n: int | None = None) -> np.ndarray:
    a = np.asarray(v if v is not None else (), dtype=np.int64).reshape(-1)
    if n is not None and a.shape[0] != n:
        raise ValueError(f"attribute has {a.shape[0]} entries, expected {n}")
    return a


def _finish(
    roots: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    mode: np.ndarray,
    true_child: np.ndarray,
    false_child: np.ndarray,
    missing: np.ndarray,
    member_start: np.ndarray,
    member_end: np.ndarray,
    members: np.ndarray,
    weight_node: np.ndarray,
    weight_target: np.ndarray,
    weight_value: np.ndarray,
    n_targets: int,
) -> Forest:
    n = mode.shape[0]
    inner = mode != LEAF
    for name, child in (("true", true_child), ("false", false_child)):
        bad = inner & ((child < 0) | (child >= n))
        if bad.any():
            raise ValueError(f"node {int(np.argmax(bad))} has an invalid {name} child")
    if ((weight_target < 0) | (weight_target >= n_targets)).any():
        raise ValueError(f"a leaf weight targets a class/target outside [0, {n_targets})")
    # Leaf weights grouped by node: a stable sort keeps their attribute order.
    perm = np.argsort(weight_node, kind="stable")
    by_node = weight_node[perm]
    nodes = np.arange(n)
    return Forest(
        roots=roots.astype(np.int64),
        feature=np.where(inner, feature, 0).astype(np.int64),
        threshold=threshold.astype(np.float64),
        mode=mode.astype(np.int64),
        true_child=np.where(inner, true_child, 0).astype(np.int64),
        false_child=np.where(inner, false_child, 0).astype(np.int64),
        missing_true=missing.astype(np.bool_),
        member_start=member_start.astype(np.int64),
        member_end=member_end.astype(np.int64),
        members=members.astype(np.float64),
        weight_start=np.searchsorted(by_node, nodes, "left").astype(np.int64),
        weight_end=np.searchsorted(by_node, nodes, "right").astype(np.int64),
        weight_target=weight_target[perm].astype(np.int64),
        weight_value=np.asarray(weight_value, dtype=np.float64)[perm],
        n_targets=int(n_targets),
        n_features=int(feature[inner].max(initial=-1)) + 1,
    )


def forest_from_ids(
    nodes_treeids: Sequence[int],
    nodes_nodeids: Sequence[int],
    nodes_featureids: Sequence[int],
    nodes_modes: Sequence[str],
    nodes_values: np.ndarray,
    nodes_truenodeids: Sequence[int],
    nodes_falsenodeids: Sequence[int],
    nodes_missing_value_tracks_true: Sequence[int] | None,
    w_treeids: Sequence[int],
    w_nodeids: Sequence[int],
    w_ids: Sequence[int],
    w_weights: np.ndarray,
    n_targets: int,
) -> Forest:
    """TreeEnsembleRegressor/Classifier layout: nodes named by (tree id, node id).

    Each tree's root is its first node in attribute order (as in onnxruntime);
    children are node ids within the same tree; leaves carry mode LEAF.
    """
    tree = _i64(nodes_treeids)
    n = tree.shape[0]
    nid = _i64(nodes_nodeids, n)
    if n == 0:
        raise ValueError("the ensemble has no nodes")
    if (nid < 0).any() or (nid >= 2**31).any():
        raise ValueError("node ids must lie in [0, 2**31)")
    keys = (tree << 32) + nid
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if (sorted_keys[1:] == sorted_keys[:-1]).any():
        raise ValueError("a (tree id, node id) pair appears twice")

    def lookup(t: np.ndarray, i: np.ndarray, what: str, check: np.ndarray) -> np.ndarray:
        k = (t << 32) + i
        pos = np.minimum(np.searchsorted(sorted_keys, k), n - 1)
        missing = check & (sorted_keys[pos] != k)
        if missing.any():
            j = int(np.argmax(missing))
            raise ValueError(
                f"{what} refers to node {int(i[j])} of tree {int(t[j])}, which does not exist"
            )
        return order[pos]

    try:
        mode = np.array([_MODES[m] for m in nodes_modes], dtype=np.int64)
    except KeyError as e:
        raise ValueError(f"unknown node mode {e}") from None
    if mode.shape[0] != n or (mode == MEMBER).any():
        raise ValueError("nodes_modes must give one BRANCH_*/LEAF mode per node")
    inner = mode != LEAF
    true_child = lookup(tree, _i64(nodes_truenodeids, n), "nodes_truenodeids", inner)
    false_child = lookup(tree, _i64(nodes_falsenodeids, n), "nodes_falsenodeids", inner)
    missing = np.zeros(n, dtype=np.bool_)
    tracks = _i64(nodes_missing_value_tracks_true)
    missing[: min(n, tracks.shape[0])] = tracks[:n] == 1
    _, first = np.unique(tree, return_index=True)
    wt = _i64(w_treeids)
    weight_node = lookup(
        wt, _i64(w_nodeids, wt.shape[0]), "leaf weights", np.ones(wt.shape[0], bool)
    )
    values = np.asarray(nodes_values, dtype=np.float64).reshape(-1)
    if values.shape[0] != n:
        raise ValueError(f"nodes_values has {values.shape[0]} entries, expected {n}")
    zeros = np.zeros(n, dtype=np.int64)
    return _finish(
        np.sort(first),
        _i64(nodes_featureids, n),
        values,
        mode,
        true_child,
        false_child,
        missing,
        zeros,
        zeros,
        np.zeros(0),
        weight_node,
        _i64(w_ids, wt.shape[0]),
        np.asarray(w_weights).reshape(-1),
        n_targets,
    )


def forest_from_indices(
    tree_roots: Sequence[int],
    nodes_modes: np.ndarray,
    nodes_featureids: Sequence[int],
    nodes_splits: np.ndarray,
    nodes_truenodeids: Sequence[int],
    nodes_trueleafs: Sequence[int],
    nodes_falsenodeids: Sequence[int],
    nodes_falseleafs: Sequence[int],
    nodes_missing_value_tracks_true: Sequence[int] | None,
    membership_values: np.ndarray | None,
    leaf_targetids: Sequence[int],
    leaf_weights: np.ndarray,
    n_targets: int,
) -> Forest:
    """TreeEnsemble-5 layout: interior nodes and leaves in separate index spaces.

    Leaf i becomes node n_nodes + i. BRANCH_MEMBER nodes take, in nodes_modes
    order, consecutive NaN-terminated runs of membership_values (spec wording).
    """
    mode = _i64(nodes_modes)
    n = mode.shape[0]
    if ((mode < 0) | (mode > MEMBER)).any():
        raise ValueError("nodes_modes values must lie in [0, 6]")
    leaf_t = _i64(leaf_targetids)
    n_leaves = leaf_t.shape[0]

    def child(ids: Sequence[int], leafs: Sequence[int], what: str) -> np.ndarray:
        i = _i64(ids, n)
        is_leaf = _i64(leafs, n).astype(bool)
        bad = np.where(is_leaf, (i < 0) | (i >= n_leaves), (i < 0) | (i >= n))
        if bad.any():
            raise ValueError(f"{what}[{int(np.argmax(bad))}] is out of range")
        return np.where(is_leaf, n + i, i)

    true_child = np.concatenate(
        [
            child(nodes_truenodeids, nodes_trueleafs, "nodes_truenodeids"),
            np.zeros(n_leaves, np.int64),
        ]
    )
    false_child = np.concatenate(
        [
            child(nodes_falsenodeids, nodes_falseleafs, "nodes_falsenodeids"),
            np.zeros(n_leaves, np.int64),
        ]
    )
    missing = np.zeros(n + n_leaves, dtype=np.bool_)
    tracks = _i64(nodes_missing_value_tracks_true)
    missing[: min(n, tracks.shape[0])] = tracks[:n] != 0
    member_start = np.zeros(n + n_leaves, np.int64)
    member_end = np.zeros(n + n_leaves, np.int64)
    members = np.zeros(0)
    member_nodes = np.flatnonzero(mode == MEMBER)
    if member_nodes.size:
        if membership_values is None:
            raise ValueError("BRANCH_MEMBER nodes need membership_values")
        members = np.asarray(membership_values, dtype=np.float64).reshape(-1)
        ends = np.flatnonzero(np.isnan(members))
        if ends.shape[0] < member_nodes.size:
            raise ValueError(
                "membership_values needs one NaN-terminated run per BRANCH_MEMBER node"
            )
        starts = np.concatenate([[0], ends[:-1] + 1])
        member_start[member_nodes] = starts[: member_nodes.size]
        member_end[member_nodes] = ends[: member_nodes.size]
    roots = _i64(tree_roots)
    if ((roots < 0) | (roots >= n)).any():
        raise ValueError("tree_roots must index nodes")
    splits = np.asarray(nodes_splits, dtype=np.float64).reshape(-1)
    if splits.shape[0] != n:
        raise ValueError(f"nodes_splits has {splits.shape[0]} entries, expected {n}")
    all_modes = np.concatenate([mode, np.full(n_leaves, LEAF, np.int64)])
    feature = np.concatenate([_i64(nodes_featureids, n), np.zeros(n_leaves, np.int64)])
    weights = np.asarray(leaf_weights).reshape(-1)
    if weights.shape[0] != n_leaves:
        raise ValueError(f"leaf_weights has {weights.shape[0]} entries, expected {n_leaves}")
    return _finish(
        roots,
        feature,
        np.concatenate([splits, np.zeros(n_leaves)]),
        all_modes,
        true_child,
        false_child,
        missing,
        member_start,
        member_end,
        members,
        n + np.arange(n_leaves),
        leaf_t,
        weights,
        n_targets,
    )
