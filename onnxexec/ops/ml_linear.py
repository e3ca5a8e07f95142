"""ai.onnx.ml LinearClassifier and LinearRegressor.

Inputs of any numeric type are scored in float32 (the spec types Z/Y as float);
label choice and the binary two-column expansion follow onnxruntime's
linearclassifier.cc, where the spec is silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from onnxexec.ops.ml_common import (
    as_rows,
    check_post_transform,
    expand_binary,
    probit,
    transform_scores,
)
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"


def _scores(
    x: np.ndarray,
    coefficients: Sequence[float],
    intercepts: Sequence[float] | None,
    n_targets: int,
    op_name: str,
) -> np.ndarray:
    """(N, F) @ coefficients(n_targets, F)^T + intercepts -> (N, n_targets) float32."""
    rows = as_rows(x, op_name).astype(np.float32)
    coef = np.asarray(coefficients, dtype=np.float32)
    if n_targets <= 0 or coef.size != n_targets * rows.shape[1]:
        raise ValueError(
            f"{op_name}: {coef.size} coefficients do not fit {n_targets} target(s) x "
            f"{rows.shape[1]} features"
        )
    s = rows @ coef.reshape(n_targets, rows.shape[1]).T
    if intercepts:
        s = s + np.asarray(intercepts, dtype=np.float32)
    return s.astype(np.float32)


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
    n_features = as_rows(x, "LinearClassifier").shape[1]
    n_targets = len(intercepts) if intercepts else len(coefficients) // max(n_features, 1)
    s = _scores(x, coefficients, intercepts, n_targets, "LinearClassifier")
    strings = bool(classlabels_strings)
    labels = list(classlabels_strings) if strings else list(classlabels_ints or ())
    if n_targets == 1:
        if len(labels) == 2:
            pos, neg = labels[1], labels[0]
        else:
            pos, neg = ("1", "0") if strings else (1, 0)
        win = s[:, 0] > 0
        lab = np.where(win, np.array(pos, dtype=object), np.array(neg, dtype=object))
        lab = lab.astype(object) if strings else lab.astype(np.int64)
        if len(labels) == 2:
            return lab, expand_binary(s[:, 0], post_transform, 1)
        return lab, probit(s) if post_transform == "PROBIT" else s
    if len(labels) < n_targets:
        raise ValueError(
            f"LinearClassifier: {n_targets} score columns but {len(labels)} class labels"
        )
    best = np.argmax(s, axis=1)
    lab = np.array(labels, dtype=object if strings else np.int64)[best]
    return lab, transform_scores(s, post_transform)


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
    s = _scores(x, coefficients or (), intercepts, targets, "LinearRegressor")
    if targets == 1:
        return probit(s) if post_transform == "PROBIT" else s
    return transform_scores(s, post_transform)
