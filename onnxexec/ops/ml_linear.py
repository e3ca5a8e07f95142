"""ai.onnx.ml LinearClassifier and LinearRegressor.

Inputs of any numeric type are scored in float32 (the spec types Z/Y as float);
label choice and the binary two-column expansion follow onnxruntime's
linearclassifier.cc, where the spec is silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from onnxexec.ops.ml_common import (
    POST_TRANSFORMS,
    as_rows,
    check_post_transform,
    expand_binary,
    memo,
    probit,
    transform_scores,
)
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"


def _as_f32(values: Sequence[float] | None) -> np.ndarray | None:
    return np.asarray(values, dtype=np.float32) if values else None


def _scores(
    x: np.ndarray,
    coef: np.ndarray,
    intercepts: np.ndarray | None,
    n_targets: int,
    op_name: str,
) -> np.ndarray:
    """(N, F) @ coef(n_targets, F)^T + intercepts -> (N, n_targets) float32."""
    rows = as_rows(x, op_name)
    if rows.dtype != np.float32:
        rows = rows.astype(np.float32)
    if n_targets <= 0 or coef.size != n_targets * rows.shape[1]:
        raise ValueError(
            f"{op_name}: {coef.size} coefficients do not fit {n_targets} target(s) x "
            f"{rows.shape[1]} features"
        )
    s = rows @ coef.reshape(n_targets, rows.shape[1]).T
    if intercepts is not None:
        s += intercepts
    return s


@op("LinearClassifier", since=1, domain=ML)
def linear_classifier(
    x: np.ndarray,
    *,
    classlabels_ints: Sequence[int] | None = None,
    classlabels_strings: Sequence[str] | None = None,
    coefficients: Sequence[float],
    intercepts: Sequence[float] | None = None,
    multi_class: int = 0,
    post_transform: str = "NONE",
) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) -> labels (N,), scores (N, C) float32.

    C = number of intercepts (onnxruntime's class count; coefficients supply it
    when intercepts are absent). One score column with two labels is binary:
    label = labels[1] when the raw score > 0, scores expanded to [1 - s, s].
    """
    check_post_transform(post_transform, "LinearClassifier")
    rows = as_rows(x, "LinearClassifier")
    n_features = rows.shape[1]
    m = memo(_classifier, coefficients, intercepts, classlabels_ints, classlabels_strings)
    n_targets = m.n_intercepts or m.coef.size // max(n_features, 1)
    if n_targets <= 0 or m.coef.size != n_targets * n_features:
        raise ValueError(
            f"LinearClassifier: {m.coef.size} coefficients do not fit {n_targets} target(s) x "
            f"{n_features} features"
        )
    if n_targets > 1 and m.labels.shape[0] < n_targets:
        raise ValueError(
            f"LinearClassifier: {n_targets} score columns but {m.labels.shape[0]} class labels"
        )
    from onnxexec.kernels.ml.ml_scores import linear_classify

    s, best = linear_classify(
        rows if rows.dtype == np.float32 else rows.astype(np.float32),
        m.coef.reshape(n_targets, n_features),
        m.bias if m.n_intercepts else np.zeros(n_targets, np.float32),
        POST_TRANSFORMS.index(post_transform),
    )
    if n_targets == 1:
        lab = m.neg_pos[(s[:, 0] > 0).view(np.uint8)]
        if m.labels.shape[0] == 2:
            return lab, expand_binary(s[:, 0], post_transform, 1)
        return lab, probit(s) if post_transform == "PROBIT" else s
    return m.labels[best], s


@dataclass(frozen=True)
class _Classifier:
    coef: np.ndarray  # flat float32
    bias: np.ndarray  # float32 intercepts
    n_intercepts: int  # 0 when absent: the class count then comes from the coefficients
    labels: np.ndarray  # int64 or object
    neg_pos: np.ndarray  # labels of a lone score column: [<= 0, > 0]


def _classifier(
    coefficients: Sequence[float],
    intercepts: Sequence[float] | None,
    ints: Sequence[int] | None,
    strings: Sequence[str] | None,
) -> _Classifier:
    is_str = bool(strings)
    labels = list(strings) if is_str else list(ints or ())
    dtype = object if is_str else np.int64
    if len(labels) == 2:
        neg_pos = [labels[0], labels[1]]
    else:
        neg_pos = ["0", "1"] if is_str else [0, 1]
    return _Classifier(
        coef=np.asarray(coefficients, dtype=np.float32),
        bias=np.asarray(intercepts or (), dtype=np.float32),
        n_intercepts=len(intercepts or ()),
        labels=np.array(labels, dtype=dtype),
        neg_pos=np.array(neg_pos, dtype=dtype),
    )


@op("LinearRegressor", since=1, domain=ML)
def linear_regressor(
    x: np.ndarray,
    *,
    coefficients: Sequence[float] | None = None,
    intercepts: Sequence[float] | None = None,
    post_transform: str = "NONE",
    targets: int = 1,
) -> np.ndarray:
    """(N, F) -> (N, targets) float32 = X @ coefficients^T + intercepts.

    A single target takes only PROBIT, as in onnxruntime; several targets take
    any post_transform row-wise.
    """
    check_post_transform(post_transform, "LinearRegressor")
    coef = memo(_as_f32, coefficients)
    s = _scores(
        x,
        np.zeros(0, np.float32) if coef is None else coef,
        memo(_as_f32, intercepts),
        targets,
        "LinearRegressor",
    )
    if targets == 1:
        return probit(s) if post_transform == "PROBIT" else s
    return transform_scores(s, post_transform)
