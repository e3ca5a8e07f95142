"""ai.onnx.ml tree ensembles: the numba kernel against a plain-Python walk of the raw
attributes, the handlers against onnxruntime, TreeEnsemble-5 against the spec."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import numpy_helper

from onnxexec.kernels.ml.trees import predict_forest
from onnxexec.ops import ml_tree
from onnxexec.ops.ml_tree_build import cached_forest, forest_from_ids
from tests.unit.ops._ml_helpers import _assert_same, _both, _model, _ti

# ---------------------------------------------------------------- tree ensembles


def _random_trees(rng, n_trees, n_feat, n_out, depth=3, modes=("BRANCH_LEQ",), one_target=False):
    """TreeEnsembleRegressor-style attributes of random trees, nodes in pre-order."""
    a = {
        k: []
        for k in (
            "nodes_treeids",
            "nodes_nodeids",
            "nodes_featureids",
            "nodes_modes",
            "nodes_values",
            "nodes_truenodeids",
            "nodes_falsenodeids",
            "nodes_missing_value_tracks_true",
        )
    }
    w = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t in range(n_trees):
        count = [0]

        def build(d, t=t, count=count):
            nid = count[0]
            count[0] += 1
            i = len(a["nodes_treeids"])
            for k, v in (
                ("nodes_treeids", t),
                ("nodes_nodeids", nid),
                ("nodes_featureids", int(rng.integers(n_feat))),
                ("nodes_values", float(np.float32(rng.normal()))),
                ("nodes_truenodeids", 0),
                ("nodes_falsenodeids", 0),
                ("nodes_missing_value_tracks_true", int(rng.integers(2))),
            ):
                a[k].append(v)
            if d == 0 or rng.random() < 0.2:
                a["nodes_modes"].append("LEAF")
                targets = (
                    [0] if one_target else rng.choice(n_out, int(rng.integers(1, n_out + 1)), False)
                )
                for k in targets:
                    for key, v in (
                        ("treeids", t),
                        ("nodeids", nid),
                        ("ids", int(k)),
                        ("weights", float(rng.normal())),
                    ):
                        w[key].append(v)
            else:
                a["nodes_modes"].append(str(rng.choice(modes)))
                a["nodes_truenodeids"][i] = build(d - 1)
                a["nodes_falsenodeids"][i] = build(d - 1)
            return nid

        build(depth)
    return a, w


def _reference_walk(a, w, x, n_out, aggregate):
    """Walk each tree by (tree id, node id) lookups; aggregate like the spec says."""
    ids = zip(a["nodes_treeids"], a["nodes_nodeids"], strict=True)
    index = {(t, n): i for i, (t, n) in enumerate(ids)}
    weights: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for t, n, k, v in zip(w["treeids"], w["nodeids"], w["ids"], w["weights"], strict=True):
        weights.setdefault((t, n), []).append((k, v))
    cmp = {
        "BRANCH_LEQ": np.less_equal,
        "BRANCH_LT": np.less,
        "BRANCH_GTE": np.greater_equal,
        "BRANCH_GT": np.greater,
        "BRANCH_EQ": np.equal,
        "BRANCH_NEQ": np.not_equal,
    }
    out = np.zeros((x.shape[0], n_out))
    has = np.zeros((x.shape[0], n_out), dtype=bool)
    for r, row in enumerate(x):
        for t in sorted(set(a["nodes_treeids"])):
            i = index[(t, 0)]
            while a["nodes_modes"][i] != "LEAF":
                v = row[a["nodes_featureids"][i]]
                go = bool(cmp[a["nodes_modes"][i]](v, a["nodes_values"][i]))
                go = go or (np.isnan(v) and a["nodes_missing_value_tracks_true"][i] == 1)
                nxt = a["nodes_truenodeids"][i] if go else a["nodes_falsenodeids"][i]
                i = index[(t, nxt)]
            for k, v in weights.get((t, a["nodes_nodeids"][i]), []):
                if aggregate in (0, 1):
                    out[r, k] += v
                elif not has[r, k] or (v < out[r, k] if aggregate == 2 else v > out[r, k]):
                    out[r, k] = v
                has[r, k] = True
    return out, has


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_forest_kernel_matches_reference_walk(aggregate):
    rng = np.random.default_rng(aggregate)
    modes = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
    a, w = _random_trees(rng, 4, 3, 3, depth=4, modes=modes)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    x[:5, 0] = a["nodes_values"][0]  # hit the EQ / NEQ thresholds exactly
    forest = forest_from_ids(
        a["nodes_treeids"],
        a["nodes_nodeids"],
        a["nodes_featureids"],
        a["nodes_modes"],
        np.asarray(a["nodes_values"], np.float32),
        a["nodes_truenodeids"],
        a["nodes_falsenodeids"],
        a["nodes_missing_value_tracks_true"],
        w["treeids"],
        w["nodeids"],
        w["ids"],
        np.asarray(w["weights"], np.float32),
        3,
    )
    got, got_has = predict_forest(forest, x, aggregate)
    ref, ref_has = _reference_walk(
        a, {**w, "weights": list(np.float32(w["weights"]))}, x, 3, aggregate
    )
    np.testing.assert_array_equal(got_has, ref_has)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_forest_is_flattened_once_per_attribute_set():
    rng = np.random.default_rng(0)
    a, w = _random_trees(rng, 2, 2, 1, one_target=True)
    args = (*a.values(), w["treeids"], w["nodeids"], w["ids"], tuple(w["weights"]), 1)
    first = cached_forest(forest_from_ids, *args)
    assert cached_forest(forest_from_ids, *args) is first
    assert cached_forest(forest_from_ids, *args[:-1], 2) is not first


@pytest.mark.parametrize("seed", range(12))
def test_tree_ensemble_regressor_matches_onnxruntime(seed):
    rng = np.random.default_rng(seed)
    n_out = [1, 1, 2, 3][seed % 4]
    agg = ["SUM", "AVERAGE", "MIN", "MAX"][seed // 3 % 4]
    post = ["NONE", "PROBIT", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"][seed % 5]
    a, w = _random_trees(rng, 3, 3, n_out, one_target=n_out == 1)
    attrs = dict(
        a,
        target_treeids=w["treeids"],
        target_nodeids=w["nodeids"],
        target_ids=w["ids"],
        target_weights=w["weights"],
        n_targets=n_out,
        aggregate_function=agg,
        post_transform=post,
    )
    if seed % 2:
        attrs["base_values"] = [float(v) for v in rng.normal(size=n_out)]
    x = rng.normal(size=(30, 3)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    ref, out = _both(_model("TreeEnsembleRegressor", [_ti("X")], [_ti("Y")], **attrs), {"X": x})
    _assert_same(ref, out)


CLASSIFIER_CASES = [  # (n classes, class weight columns, base values, post, positive weights)
    (2, "single", 0, "LOGISTIC", False),
    (2, "single", 1, "NONE", False),
    (2, "single", 2, "LOGISTIC", True),
    (2, "single", 0, "NONE", True),
    (2, "single", 1, "SOFTMAX", True),
    (2, "all", 0, "NONE", True),
    (2, "all", 2, "SOFTMAX", False),
    (3, "all", 0, "SOFTMAX", True),
    (3, "some", 3, "SOFTMAX_ZERO", False),
    (3, "all", 0, "PROBIT", True),
    (4, "some", 0, "LOGISTIC", False),
    (2, "some", 1, "NONE", False),
]


@pytest.mark.parametrize(("n_cls", "cols", "n_base", "post", "positive"), CLASSIFIER_CASES)
def test_tree_ensemble_classifier_matches_onnxruntime(n_cls, cols, n_base, post, positive):
    """Binary models with one weight column are the subtle part: the second score
    column is derived (1 - p, -s or logistic(-s)) and the label threshold is 0.5 or 0."""
    rng = np.random.default_rng(n_cls * 100 + n_base * 10 + len(post))
    a, w = _random_trees(rng, 3, 3, n_cls, one_target=cols == "single")
    if cols == "all":  # every leaf carries every class
        a, w = _random_trees(rng, 3, 3, 1, one_target=True)
        w = {k: [v for v in vs for _ in range(n_cls)] for k, vs in w.items()}
        w["ids"] = [i % n_cls for i in range(len(w["ids"]))]
        w["weights"] = [float(v) for v in rng.normal(size=len(w["ids"]))]
    if positive:
        w["weights"] = [abs(v) / 3 for v in w["weights"]]
    labels = [int(v) for v in rng.choice([0, 1, 3, 7, 9], n_cls, replace=False)]
    attrs = dict(
        a,
        class_treeids=w["treeids"],
        class_nodeids=w["nodeids"],
        class_ids=w["ids"],
        class_weights=w["weights"],
        classlabels_int64s=labels,
        post_transform=post,
    )
    if n_base:
        attrs["base_values"] = [float(v) for v in rng.normal(size=n_base)]
    x = rng.normal(size=(40, 3)).astype(np.float32)
    outs = [_ti("Y", T.INT64), _ti("Z")]
    ref, out = _both(_model("TreeEnsembleClassifier", [_ti("X")], outs, **attrs), {"X": x})
    if cols == "some" and n_cls == 2:
        # rows whose leaves gave class 1 no weight leave onnxruntime's Z[:, 1] unwritten
        ref[1], out[1] = ref[1][:, :1], out[1][:, :1]
    _assert_same(ref, out)


def test_tree_ensemble_v1_string_labels_matches_onnxruntime():
    rng = np.random.default_rng(5)
    a, w = _random_trees(rng, 2, 2, 3)
    attrs = dict(
        a,
        class_treeids=w["treeids"],
        class_nodeids=w["nodeids"],
        class_ids=w["ids"],
        class_weights=w["weights"],
        classlabels_strings=["x", "y", "z"],
    )
    x = rng.normal(size=(10, 2)).astype(np.float32)
    model = _model(
        "TreeEnsembleClassifier", [_ti("X")], [_ti("Y", T.STRING), _ti("Z")], ml_opset=1, **attrs
    )
    ref, out = _both(model, {"X": x})
    _assert_same(ref, out)
    attrs = dict(
        a,
        target_treeids=w["treeids"],
        target_nodeids=w["nodeids"],
        target_ids=w["ids"],
        target_weights=w["weights"],
        n_targets=3,
    )
    ref, out = _both(
        _model("TreeEnsembleRegressor", [_ti("X")], [_ti("Y")], ml_opset=1, **attrs), {"X": x}
    )
    _assert_same(ref, out)


def _v5(x, post_transform=0, aggregate=1, **over):
    """One tree: x0 <= 0.5 ? (x1 in {1, 2.5} ? leaf0 : leaf1) : leaf2; targets 0,1,1."""
    attrs = dict(
        n_targets=2,
        aggregate_function=aggregate,
        post_transform=post_transform,
        tree_roots=[0],
        nodes_modes=np.array([0, 6], np.uint8),
        nodes_featureids=[0, 1],
        nodes_splits=np.array([0.5, np.nan], x.dtype),
        nodes_truenodeids=[1, 0],
        nodes_trueleafs=[0, 1],
        nodes_falsenodeids=[2, 1],
        nodes_falseleafs=[1, 1],
        nodes_missing_value_tracks_true=[0, 1],
        leaf_targetids=[0, 1, 1],
        leaf_weights=np.array([1.0, 2.0, 3.0], x.dtype),
        membership_values=np.array([1.0, 2.5, np.nan], x.dtype),
    )
    attrs.update(over)
    return ml_tree.tree_ensemble(x, **attrs)


def test_tree_ensemble_v5_membership_and_missing():
    x = np.array([[0.0, 2.5], [0.0, 2.6], [0.0, np.nan], [1.0, 1.0], [np.nan, 1.0]], np.float64)
    y = _v5(x)
    # NaN in a BRANCH_MEMBER feature follows missing_value_tracks_true=1; NaN x0 fails <= 0.5
    np.testing.assert_array_equal(y, [[1, 0], [0, 2], [1, 0], [0, 3], [0, 3]])
    assert y.dtype == np.float64
    assert _v5(x.astype(np.float32)).dtype == np.float32


def test_tree_ensemble_v5_post_transform_follows_the_spec_numbering():
    """TreeEnsemble-5 numbers SOFTMAX 1 and LOGISTIC 2 (onnxruntime 1.2x swaps them)."""
    x = np.array([[0.0, 2.5], [1.0, 0.0]], np.float32)
    raw = _v5(x)
    soft = _v5(x, post_transform=1)
    e = np.exp(raw - raw.max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(_v5(x, post_transform=2), 1 / (1 + np.exp(-raw)), rtol=1e-6)


def test_tree_ensemble_v5_rejects_missing_membership_values():
    with pytest.raises(ValueError, match="membership_values"):
        _v5(np.zeros((1, 2), np.float32), membership_values=None)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_prepared_runs_match_unprepared_bits_at_every_row_count(kind):
    """One session (its nodes' prepared TreeRunner) over 1, 3, 40 and 5000 rows (the
    last over the threading threshold) against a fresh session's first run (the
    unprepared path) and onnxruntime."""
    from onnxexec import InferenceSession

    rng = np.random.default_rng(11)
    a, w = _random_trees(rng, 40, 4, 3)
    pre = "target" if kind == "regressor" else "class"
    attrs = dict(
        a,
        **{f"{pre}_treeids": w["treeids"], f"{pre}_nodeids": w["nodeids"],
           f"{pre}_ids": w["ids"], f"{pre}_weights": w["weights"]},
    )  # fmt: skip
    if kind == "regressor":
        attrs.update(n_targets=3, aggregate_function="AVERAGE")
        model = _model("TreeEnsembleRegressor", [_ti("X")], [_ti("Y")], **attrs)
    else:
        attrs.update(classlabels_int64s=[4, 5, 6], post_transform="SOFTMAX")
        outs = [_ti("Y", T.INT64), _ti("Z")]
        model = _model("TreeEnsembleClassifier", [_ti("X")], outs, **attrs)
    sess = InferenceSession(model)
    for n in (1, 3, 40, 5000, 1):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        got = sess.run(None, {"X": x})
        fresh = InferenceSession(model).run(None, {"X": x})
        for g, f in zip(got, fresh, strict=True):
            np.testing.assert_array_equal(g, f)
        ref, _ = _both(model, {"X": x})
        _assert_same(ref, got)


def _random_v5_forest(rng, n_trees, n_feat, n_targets, depth):
    """TreeEnsemble-5 attributes of full random trees: interior nodes numbered in
    pre-order across the forest, a child is a node index or (leaf flag) a leaf index."""
    a = {k: [] for k in ("roots", "feat", "split", "t", "tl", "f", "fl", "tid", "w")}

    def grow(d):
        if d == depth:  # a leaf
            a["tid"].append(int(rng.integers(n_targets)))
            a["w"].append(float(rng.normal()))
            return len(a["w"]) - 1, 1
        i = len(a["feat"])
        a["feat"].append(int(rng.integers(n_feat)))
        a["split"].append(float(rng.normal()))
        for k in ("t", "tl", "f", "fl"):
            a[k].append(0)
        a["t"][i], a["tl"][i] = grow(d + 1)
        a["f"][i], a["fl"][i] = grow(d + 1)
        return i, 0

    for _ in range(n_trees):
        a["roots"].append(grow(0)[0])
    n = len(a["feat"])
    return dict(
        n_targets=n_targets,
        tree_roots=a["roots"],
        nodes_modes=np.zeros(n, np.uint8),  # BRANCH_LEQ
        nodes_featureids=a["feat"],
        nodes_splits=np.array(a["split"], np.float32),
        nodes_truenodeids=a["t"],
        nodes_trueleafs=a["tl"],
        nodes_falsenodeids=a["f"],
        nodes_falseleafs=a["fl"],
        leaf_targetids=a["tid"],
        leaf_weights=np.array(a["w"], np.float32),
    )


@pytest.mark.parametrize("aggregate,n_targets", [(0, 3), (1, 1), (2, 2), (3, 3)])
def test_tree_ensemble_v5_prepared_runs_match_unprepared_bits_and_onnxruntime(aggregate, n_targets):
    """TreeEnsemble-5's prepared ForestRunner over 1, 3, 40 and 5000 rows against a
    fresh session's first run (the unprepared path, bit for bit) and onnxruntime."""
    from onnxexec import InferenceSession

    rng = np.random.default_rng(17 + aggregate)
    attrs = _random_v5_forest(rng, 30, 5, n_targets, depth=4)
    for k in ("nodes_modes", "nodes_splits", "leaf_weights"):  # TENSOR attributes
        attrs[k] = numpy_helper.from_array(attrs[k])
    model = _model(
        "TreeEnsemble", [_ti("X")], [_ti("Y")], ml_opset=5, aggregate_function=aggregate, **attrs
    )
    sess = InferenceSession(model)
    for n in (1, 3, 40, 5000, 1):
        x = rng.normal(size=(n, 5)).astype(np.float32)
        got = sess.run(None, {"X": x})
        fresh = InferenceSession(model).run(None, {"X": x})
        np.testing.assert_array_equal(got[0], fresh[0])
        ref, _ = _both(model, {"X": x})
        _assert_same(ref, got)
