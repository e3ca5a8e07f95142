"""ai.onnx.ml SVMClassifier and SVMRegressor (libsvm / liblinear models).

With support vectors (SVC mode) the classifier scores every one-vs-one class
pair and votes; with prob_a/prob_b it turns the pair scores into Platt
probabilities and couples them (Wu, Lin & Weng 2004, libsvm's
multiclass_probability). Without support vectors (linear mode) coefficients are
one row per class. The float32 arithmetic and the binary expansions follow
onnxruntime's svmclassifier.cc, as the iterative coupling stops on a tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from onnxexec.ops.ml_common import (
    as_rows,
    check_post_transform,
    class_labels,
    expand_binary,
    logistic,
    probit,
    transform_scores,
)
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"
_KERNELS: Final = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _kernel(
    x: np.ndarray,
    vectors: np.ndarray,
    kernel_type: str,
    params: Sequence[float] | None,
    linear_c: float = 0.0,
) -> np.ndarray:
    """(N, F) x (V, F) -> (N, V) kernel values, float32.

    kernel_params = (gamma, coef0, degree). LINEAR adds `linear_c` (rho[0] in
    linear mode), as onnxruntime's batched_kernel_dot does.
    """
    if kernel_type not in _KERNELS:
        raise ValueError(f"unknown kernel_type '{kernel_type}', expected one of {_KERNELS}")
    gamma, coef0, degree = (*tuple(params or ()), 0.0, 0.0, 0.0)[:3]
    x64 = x.astype(np.float64)
    v64 = vectors.astype(np.float64)
    if kernel_type == "RBF":
        d2 = ((x64[:, None, :] - v64[None, :, :]) ** 2).sum(axis=2)
        return np.exp(-gamma * d2).astype(np.float32)
    dot = x64 @ v64.T
    if kernel_type == "LINEAR":
        return (dot + linear_c).astype(np.float32)
    dot = gamma * dot + coef0
    if kernel_type == "POLY":
        return np.power(dot, degree).astype(np.float32)
    return np.tanh(dot).astype(np.float32)


def _couple(r: np.ndarray) -> np.ndarray:
    """Pairwise probabilities r (N, K, K) -> class probabilities (N, K), float32.

    libsvm's multiclass_probability, vectorised over rows: each row iterates
    until its own stopping test passes (at most 100 sweeps).
    """
    f = np.float32
    n, k, _ = r.shape
    q = np.zeros((n, k, k), dtype=np.float32)
    for i in range(k):
        for j in range(i):
            q[:, i, i] += r[:, j, i] * r[:, j, i]
            q[:, i, j] = q[:, j, i]
        for j in range(i + 1, k):
            q[:, i, i] += r[:, j, i] * r[:, j, i]
            q[:, i, j] = -r[:, j, i] * r[:, i, j]
    p = np.full((n, k), f(1) / f(k), dtype=np.float32)
    qp = np.zeros((n, k), dtype=np.float32)
    eps = f(0.005) / f(k)
    active = np.ones(n, dtype=bool)
    for _ in range(100):
        pqp = np.zeros(n, dtype=np.float32)
        for i in range(k):
            acc = np.zeros(n, dtype=np.float32)
            for j in range(k):
                acc += q[:, i, j] * p[:, j]
            qp[:, i] = np.where(active, acc, qp[:, i])
            pqp += p[:, i] * qp[:, i]
        err = np.abs(qp - pqp[:, None]).max(axis=1)
        active &= ~(err < eps)
        if not active.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(k):
                diff = (-qp[:, i] + pqp) / q[:, i, i]
                diff = np.where(active, diff, f(0))
                p[:, i] += diff
                pqp = (
                    (pqp + diff * (diff * q[:, i, i] + f(2) * qp[:, i]))
                    / (f(1) + diff)
                    / (f(1) + diff)
                )
                qp = (qp + diff[:, None] * q[:, i, :]) / (f(1) + diff)[:, None]
                p = p / (f(1) + diff)[:, None]
    return p


def _pair_scores(
    kernels: np.ndarray, coef: np.ndarray, rho: np.ndarray, per_class: Sequence[int]
) -> np.ndarray:
    """One-vs-one decision values (N, K(K-1)/2) in libsvm's pair order (0,1), (0,2)..."""
    k = len(per_class)
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(np.int64)
    out = []
    idx = 0
    for i in range(k - 1):
        si, ei = starts[i], starts[i + 1]
        for j in range(i + 1, k):
            sj, ej = starts[j], starts[j + 1]
            # class i's vectors use coefficient row j-1, class j's use row i
            s = kernels[:, si:ei].astype(np.float64) @ coef[j - 1, si:ei].astype(np.float64)
            s += kernels[:, sj:ej].astype(np.float64) @ coef[i, sj:ej].astype(np.float64)
            out.append(s + rho[idx])
            idx += 1
    return np.stack(out, axis=1).astype(np.float32)


@op("SVMClassifier", since=1, domain=ML)
def svm_classifier(
    x: np.ndarray,
    *,
    classlabels_ints: Sequence[int] | None = None,
    classlabels_strings: Sequence[str] | None = None,
    coefficients: Sequence[float] | None = None,
    kernel_params: Sequence[float] | None = None,
    kernel_type: str = "LINEAR",
    post_transform: str = "NONE",
    prob_a: Sequence[float] | None = None,
    prob_b: Sequence[float] | None = None,
    rho: Sequence[float] | None = None,
    support_vectors: Sequence[float] | None = None,
    vectors_per_class: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(N, F) -> labels (N,), scores (N, C) float32.

    Scores are per class (linear mode, or SVC with probabilities) or per class
    pair (SVC without probabilities; two columns [-s, s] for a binary model).
    """
    check_post_transform(post_transform, "SVMClassifier")
    labels = class_labels(classlabels_ints, classlabels_strings, "SVMClassifier")
    rows = as_rows(x, "SVMClassifier").astype(np.float32)
    k = labels.shape[0]
    coef = np.asarray(coefficients or (), dtype=np.float32)
    rho_a = np.asarray(rho or (), dtype=np.float32)
    per_class = tuple(vectors_per_class or ())
    have_proba = bool(prob_a)
    if sum(per_class) == 0:
        # liblinear: one coefficient row per class, the LINEAR kernel plus rho[0].
        w = coef.reshape(k, -1)
        s = _kernel(rows, w, "LINEAR", None, float(rho_a[0]) if rho_a.size else 0.0)
        best = np.argmax(s, axis=1)
        weight = s[np.arange(s.shape[0]), best]
        return _binary_or_multi(labels, best, weight, s, have_proba, coef, post_transform, None)
    if len(per_class) != k:
        raise ValueError(
            f"SVMClassifier: vectors_per_class has {len(per_class)} entries for {k} classes"
        )
    n_vec = sum(per_class)
    sv = np.asarray(support_vectors or (), dtype=np.float32).reshape(n_vec, -1)
    kern = _kernel(rows, sv, kernel_type, kernel_params)
    pairs = _pair_scores(kern, coef.reshape(k - 1, n_vec), rho_a, per_class)
    votes = np.zeros((rows.shape[0], k), dtype=np.int64)
    col = 0
    for i in range(k - 1):
        for j in range(i + 1, k):
            win = pairs[:, col] > 0
            votes[:, i] += win
            votes[:, j] += ~win
            col += 1
    best = np.argmax(votes, axis=1)
    weight = np.zeros(rows.shape[0], dtype=np.float32)
    if have_proba:
        a = np.asarray(prob_a, dtype=np.float32)
        b = np.asarray(prob_b or (), dtype=np.float32)
        r = np.zeros((rows.shape[0], k, k), dtype=np.float32)
        col = 0
        for i in range(k - 1):
            for j in range(i + 1, k):
                # Platt: P(i beats j) = 1 - logistic(s * A + B), clipped away from 0 and 1
                p = np.float32(1) - logistic(pairs[:, col] * a[col] + b[col])
                p = np.clip(p, np.float32(1e-7), np.float32(1 - 1e-7))
                r[:, i, j] = p
                r[:, j, i] = np.float32(1) - p
                col += 1
        return _binary_or_multi(labels, best, weight, _couple(r), True, coef, post_transform, None)
    second = (2 if post_transform == "NONE" else 0) if k <= 2 else None
    return _binary_or_multi(labels, best, weight, pairs, False, coef, post_transform, second)


def _binary_or_multi(
    labels: np.ndarray,
    best: np.ndarray,
    weight: np.ndarray,
    scores: np.ndarray,
    have_proba: bool,
    coef: np.ndarray,
    post_transform: str,
    second: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's ChooseClass for two classes, argmax label otherwise; then scores."""
    if labels.shape[0] == 2 and not have_proba:
        all_pos = bool((coef >= 0).all())
        pick_pos = (weight >= 0.5) if all_pos else (weight > 0)
        lab = np.where(pick_pos, labels[1], labels[best])
    else:
        lab = labels[best]
    lab = lab.astype(labels.dtype)
    if scores.shape[1] == 1:
        if second is not None:
            return lab, expand_binary(scores[:, 0], post_transform, second)
        return lab, probit(scores) if post_transform == "PROBIT" else scores
    return lab, transform_scores(scores, post_transform)


@op("SVMRegressor", since=1, domain=ML)
def svm_regressor(
    x: np.ndarray,
    *,
    coefficients: Sequence[float] | None = None,
    kernel_params: Sequence[float] | None = None,
    kernel_type: str = "LINEAR",
    n_supports: int = 0,
    one_class: int = 0,
    post_transform: str = "NONE",
    rho: Sequence[float] | None = None,
    support_vectors: Sequence[float] | None = None,
) -> np.ndarray:
    """(N, F) -> (N, 1) float32: sum_v coef[v] * K(x, sv[v]) + rho[0].

    one_class maps the score to +1 / -1. Like onnxruntime, post_transform is not
    applied to the single score except PROBIT.
    """
    check_post_transform(post_transform, "SVMRegressor")
    rows = as_rows(x, "SVMRegressor").astype(np.float32)
    coef = np.asarray(coefficients or (), dtype=np.float32)
    r0 = float(np.float32(rho[0])) if rho else 0.0
    if n_supports > 0:
        sv = np.asarray(support_vectors or (), dtype=np.float32).reshape(n_supports, -1)
        kern = _kernel(rows, sv, kernel_type, kernel_params)
        s = (kern.astype(np.float64) @ coef.astype(np.float64) + r0).astype(np.float32)
    else:
        s = _kernel(rows, coef.reshape(1, -1), "LINEAR", None, r0)[:, 0]
    s = s.reshape(-1, 1)
    if one_class:
        s = np.where(s > 0, np.float32(1), np.float32(-1))
    return probit(s) if post_transform == "PROBIT" else s
