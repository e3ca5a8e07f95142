"""Train small seeded scikit-learn models and convert them with skl2onnx.

    python models/sklearn_models.py OUT_DIR [--only NAME ...]

Writes OUT_DIR/<name>.onnx and OUT_DIR/<name>.inputs.npz (seeded test rows; string
columns are stored as numpy unicode arrays) plus OUT_DIR/manifest.json listing
every model, its inputs and the ONNX ops it uses. Needs scikit-learn and skl2onnx;
the data sets are sklearn's bundled ones or generated, nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SEED = 0


@dataclass
class Built:
    model: Any  # fitted estimator
    initial_types: list[tuple[str, Any]]
    inputs: dict[str, np.ndarray]  # test rows, as the ONNX model takes them
    options: dict[Any, Any] | None = None
    rewrite: Callable[[Any], Any] | None = None  # ModelProto -> ModelProto after conversion


def to_tree_ensemble_v5(model: Any) -> Any:
    """Replace each TreeEnsembleRegressor node by the equivalent TreeEnsemble (ai.onnx.ml 5).

    Interior nodes keep their attribute order; each LEAF becomes one leaf entry per
    target weight (skl2onnx writes one weight per leaf for single-target forests).
    """
    import onnx
    from onnx import helper

    modes = {
        "BRANCH_LEQ": 0,
        "BRANCH_LT": 1,
        "BRANCH_GTE": 2,
        "BRANCH_GT": 3,
        "BRANCH_EQ": 4,
        "BRANCH_NEQ": 5,
    }
    aggregates = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
    graph = model.graph
    for i, node in enumerate(graph.node):
        if node.op_type != "TreeEnsembleRegressor":
            continue
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        keys = list(zip(a["nodes_treeids"], a["nodes_nodeids"], strict=True))
        modes_in = [m.decode() for m in a["nodes_modes"]]
        weights = {}
        for t, nid, tid, w in zip(
            a["target_treeids"],
            a["target_nodeids"],
            a["target_ids"],
            a["target_weights"],
            strict=True,
        ):
            weights.setdefault((t, nid), []).append((tid, w))
        inner = [k for k, m in zip(keys, modes_in, strict=True) if m != "LEAF"]
        leaves = [k for k, m in zip(keys, modes_in, strict=True) if m == "LEAF"]
        inner_pos = {k: j for j, k in enumerate(inner)}
        leaf_pos = {k: j for j, k in enumerate(leaves)}
        if any(v != 0 for v in a.get("base_values", ())):
            raise ValueError("to_tree_ensemble_v5 does not carry base_values over")
        if any(len(weights.get(k, ())) != 1 for k in leaves):
            raise ValueError("to_tree_ensemble_v5 handles one weight per leaf only")
        attrs: dict[str, list[Any]] = {
            k: []
            for k in (
                "nodes_modes",
                "nodes_featureids",
                "nodes_splits",
                "nodes_truenodeids",
                "nodes_trueleafs",
                "nodes_falsenodeids",
                "nodes_falseleafs",
            )
        }
        for j, (k, m) in enumerate(zip(keys, modes_in, strict=True)):
            if m == "LEAF":
                continue
            attrs["nodes_modes"].append(modes[m])
            attrs["nodes_featureids"].append(a["nodes_featureids"][j])
            attrs["nodes_splits"].append(a["nodes_values"][j])
            for side in ("true", "false"):
                child = (k[0], a[f"nodes_{side}nodeids"][j])
                is_leaf = child in leaf_pos
                attrs[f"nodes_{side}nodeids"].append(
                    leaf_pos[child] if is_leaf else inner_pos[child]
                )
                attrs[f"nodes_{side}leafs"].append(int(is_leaf))
        roots = sorted({k[0] for k in keys})
        first = {}
        for k in inner:
            first.setdefault(k[0], inner_pos[k])
        new = helper.make_node(
            "TreeEnsemble",
            list(node.input),
            list(node.output),
            domain="ai.onnx.ml",
            n_targets=a["n_targets"],
            aggregate_function=aggregates[a.get("aggregate_function", b"SUM").decode()],
            post_transform=0,
            tree_roots=[first[t] for t in roots],
            nodes_modes=helper.make_tensor(
                "m", onnx.TensorProto.UINT8, (len(inner),), attrs["nodes_modes"]
            ),
            nodes_featureids=attrs["nodes_featureids"],
            nodes_splits=helper.make_tensor(
                "s", onnx.TensorProto.FLOAT, (len(inner),), attrs["nodes_splits"]
            ),
            nodes_truenodeids=attrs["nodes_truenodeids"],
            nodes_trueleafs=attrs["nodes_trueleafs"],
            nodes_falsenodeids=attrs["nodes_falsenodeids"],
            nodes_falseleafs=attrs["nodes_falseleafs"],
            leaf_targetids=[weights[k][0][0] for k in leaves],
            leaf_weights=helper.make_tensor(
                "w", onnx.TensorProto.FLOAT, (len(leaves),), [weights[k][0][1] for k in leaves]
            ),
        )
        graph.node.remove(node)
        graph.node.insert(i, new)
    for o in model.opset_import:
        if o.domain == "ai.onnx.ml":
            o.version = 5
        elif o.domain in ("", "ai.onnx"):
            o.version = max(o.version, 21)
    model.ir_version = max(model.ir_version, 10)
    return model


def _iris() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def _float_input(n_features: int) -> list[tuple[str, Any]]:
    from skl2onnx.common.data_types import FloatTensorType

    return [("X", FloatTensorType([None, n_features]))]


def _test_rows(x: np.ndarray, n: int = 25) -> np.ndarray:
    rng = np.random.default_rng(SEED + 1)
    rows = x[rng.choice(x.shape[0], size=n, replace=False)]
    return (rows + rng.normal(scale=0.05, size=rows.shape)).astype(np.float32)


def rf_classifier() -> Built:
    """RandomForestClassifier, 3 classes -> TreeEnsembleClassifier, probabilities as a tensor."""
    from sklearn.ensemble import RandomForestClassifier

    x, y = _iris()
    m = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=SEED).fit(x, y)
    return Built(m, _float_input(4), {"X": _test_rows(x)}, {id(m): {"zipmap": False}})


def rf_classifier_zipmap() -> Built:
    """RandomForestClassifier with string labels and the default ZipMap output."""
    from sklearn.ensemble import RandomForestClassifier

    x, y = _iris()
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    m = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=SEED).fit(x, names)
    return Built(m, _float_input(4), {"X": _test_rows(x)})


def gb_regressor() -> Built:
    """GradientBoostingRegressor -> TreeEnsembleRegressor with a base value."""
    from sklearn.datasets import make_regression
    from sklearn.ensemble import GradientBoostingRegressor

    x, y = make_regression(n_samples=200, n_features=6, noise=5.0, random_state=SEED)
    x = x.astype(np.float32)
    m = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=SEED).fit(x, y)
    return Built(m, _float_input(6), {"X": _test_rows(x)})


def gb_classifier_binary() -> Built:
    """GradientBoostingClassifier, binary -> one weight column, LOGISTIC, ZipMap."""
    from sklearn.datasets import make_classification
    from sklearn.ensemble import GradientBoostingClassifier

    x, y = make_classification(n_samples=200, n_features=5, random_state=SEED)
    x = x.astype(np.float32)
    m = GradientBoostingClassifier(n_estimators=20, max_depth=2, random_state=SEED).fit(x, y)
    return Built(m, _float_input(5), {"X": _test_rows(x)})


def tree_regressor_multi() -> Built:
    """DecisionTreeRegressor with two targets -> TreeEnsembleRegressor n_targets=2."""
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(150, 4)).astype(np.float32)
    y = np.stack([x[:, 0] * 2 + x[:, 1], np.sin(x[:, 2]) - x[:, 3]], axis=1)
    m = DecisionTreeRegressor(max_depth=6, random_state=SEED).fit(x, y)
    return Built(m, _float_input(4), {"X": _test_rows(x)})


def rf_regressor_v5() -> Built:
    """RandomForestRegressor, rewritten from TreeEnsembleRegressor to TreeEnsemble-5."""
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(150, 3)).astype(np.float32)
    y = x[:, 0] - 2 * x[:, 1] * x[:, 2]
    m = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=SEED).fit(x, y)
    return Built(m, _float_input(3), {"X": _test_rows(x)}, rewrite=to_tree_ensemble_v5)


def logistic_regression() -> Built:
    """Multinomial LogisticRegression -> LinearClassifier + softmax normalisation."""
    from sklearn.linear_model import LogisticRegression

    x, y = _iris()
    m = LogisticRegression(max_iter=500).fit(x, y)
    return Built(m, _float_input(4), {"X": _test_rows(x)}, {id(m): {"zipmap": False}})


def linear_regression() -> Built:
    """LinearRegression -> LinearRegressor."""
    from sklearn.datasets import make_regression
    from sklearn.linear_model import LinearRegression

    x, y = make_regression(n_samples=100, n_features=5, noise=1.0, random_state=SEED)
    x = x.astype(np.float32)
    return Built(LinearRegression().fit(x, y), _float_input(5), {"X": _test_rows(x)})


def scaler_pipeline() -> Built:
    """StandardScaler + binary LogisticRegression -> Scaler, LinearClassifier, ZipMap."""
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = make_classification(n_samples=200, n_features=6, random_state=SEED)
    x = (x * 3 + 1).astype(np.float32)
    m = make_pipeline(StandardScaler(), LogisticRegression()).fit(x, y)
    return Built(m, _float_input(6), {"X": _test_rows(x)})


def svc_probability() -> Built:
    """SVC(probability=True), RBF, 3 classes -> SVMClassifier with prob_a/prob_b."""
    from sklearn.svm import SVC

    x, y = _iris()
    m = SVC(probability=True, random_state=SEED).fit(x, y)
    return Built(m, _float_input(4), {"X": _test_rows(x)}, {id(m): {"zipmap": False}})


def svc_binary_poly() -> Built:
    """SVC, polynomial kernel, 2 classes, decision scores -> SVMClassifier without probabilities."""
    from sklearn.datasets import make_classification
    from sklearn.svm import SVC

    x, y = make_classification(n_samples=120, n_features=4, random_state=SEED)
    x = x.astype(np.float32)
    m = SVC(kernel="poly", degree=3, random_state=SEED).fit(x, y)
    return Built(m, _float_input(4), {"X": _test_rows(x)}, {id(m): {"zipmap": False}})


def svr() -> Built:
    """SVR, RBF kernel -> SVMRegressor."""
    from sklearn.datasets import make_regression
    from sklearn.svm import SVR

    x, y = make_regression(n_samples=120, n_features=4, noise=2.0, random_state=SEED)
    x = x.astype(np.float32)
    return Built(SVR(C=10.0).fit(x, y / 10), _float_input(4), {"X": _test_rows(x)})


def onehot_pipeline() -> Built:
    """OneHotEncoder on two string columns + LogisticRegression, unknown categories ignored."""
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(SEED)
    n = 200
    colour = rng.choice(["red", "green", "blue"], size=n)
    size = rng.choice(["S", "M", "L", "XL"], size=n)
    y = (colour == "red").astype(np.int64) + (size == "XL") + (size == "S") * (colour == "blue")
    x = np.stack([colour, size], axis=1).astype(object)
    m = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=500))
    m.fit(x, y)
    test = x[:20].copy()
    test[-1, 0] = "purple"  # unseen category: all-zero one-hot block
    types = [("X", StringTensorType([None, 2]))]
    return Built(m, types, {"X": test.astype(str)}, {id(m): {"zipmap": False}})


def normalizer_binarizer() -> Built:
    """Normalizer(l2) + Binarizer -> ai.onnx.ml Normalizer and Binarizer."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Binarizer, Normalizer

    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(50, 4)).astype(np.float32)
    m = make_pipeline(Normalizer(norm="l2"), Binarizer(threshold=0.3)).fit(x)
    return Built(m, _float_input(4), {"X": _test_rows(x)})


MODELS: dict[str, Callable[[], Built]] = {
    "rf_classifier": rf_classifier,
    "rf_classifier_zipmap": rf_classifier_zipmap,
    "gb_regressor": gb_regressor,
    "gb_classifier_binary": gb_classifier_binary,
    "tree_regressor_multi": tree_regressor_multi,
    "rf_regressor_v5": rf_regressor_v5,
    "logistic_regression": logistic_regression,
    "linear_regression": linear_regression,
    "scaler_pipeline": scaler_pipeline,
    "svc_probability": svc_probability,
    "svc_binary_poly": svc_binary_poly,
    "svr": svr,
    "onehot_pipeline": onehot_pipeline,
    "normalizer_binarizer": normalizer_binarizer,
}


def build(out_dir: Path, only: list[str] | None = None) -> dict[str, Any]:
    """Train, convert and save the models; returns (and writes) the manifest."""
    from skl2onnx import to_onnx

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {}
    for name, make in MODELS.items():
        if only and name not in only:
            continue
        entry: dict[str, Any] = {"file": f"{name}.onnx", "inputs": f"{name}.inputs.npz"}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                b = make()
                kwargs: dict[str, Any] = {"initial_types": b.initial_types}
                if b.options:
                    kwargs["options"] = b.options
                onx = to_onnx(b.model, **kwargs)
                if b.rewrite is not None:
                    onx = b.rewrite(onx)
            (out_dir / entry["file"]).write_bytes(onx.SerializeToString())
            np.savez(out_dir / entry["inputs"], **b.inputs)
            entry["ops"] = sorted({f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in onx.graph.node})
            entry["opsets"] = {o.domain or "ai.onnx": o.version for o in onx.opset_import}
        except Exception as e:  # recorded, so one failing converter does not hide the rest
            entry["error"] = f"{type(e).__name__}: {e}"
        manifest[name] = entry
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS))
    args = ap.parse_args(argv)
    manifest = build(args.out_dir, args.only)
    for name, entry in manifest.items():
        status = entry.get("error") or ", ".join(entry["ops"])
        sys.stdout.write(f"{name}: {status}\n")
    return 1 if any("error" in e for e in manifest.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
