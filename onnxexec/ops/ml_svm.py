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
from dataclasses import dataclass
from typing import Final

import numpy as np

from onnxexec.kernels.ml.ml_svm import KERNELS, LINEAR, kernel_values, svc_scores, svr_scores
from onnxexec.ops.ml_common import (
    as_rows,
    check_post_transform,
    class_labels,
    expand_binary,
    memo,
    probit,
    transform_scores,
)
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"


def _kernel_spec(
    kernel_type: str, params: Sequence[float] | None
) -> tuple[int, float, float, float]:
    """(kernel code, gamma, coef0, degree); kernel_params = (gamma, coef0, degree)."""
    if kernel_type not in KERNELS:
        raise ValueError(f"unknown kernel_type '{kernel_type}', expected one of {KERNELS}")
    gamma, coef0, degree = (*tuple(params or ()), 0.0, 0.0, 0.0)[:3]
    return KERNELS.index(kernel_type), float(gamma), float(coef0), float(degree)


@dataclass(frozen=True)
class _Classifier:
    """SVMClassifier attributes as arrays, built once per node."""

    labels: np.ndarray
    coef: np.ndarray  # flat float32 coefficients
    coef_all_positive: bool
    rho: np.ndarray  # float32
    rho64: np.ndarray  # the same values as float64, for the pair-score kernel
    linear: bool  # liblinear: no support vectors, one coefficient row per class
    weights: np.ndarray  # linear: (K, F) float64; SVC: (K-1, V) float64
    vectors: np.ndarray  # SVC: (V, F) float64 support vectors
    starts: np.ndarray  # SVC: (K+1,) int64 first vector of each class
    prob_a: np.ndarray  # float32, empty without probabilities
    prob_b: np.ndarray
    kernel: tuple[int, float, float, float]  # (kernel code, gamma, coef0, degree)


def _classifier(
    ints: Sequence[int] | None,
    strings: Sequence[str] | None,
    coefficients: Sequence[float] | None,
    rho: Sequence[float] | None,
    support_vectors: Sequence[float] | None,
    vectors_per_class: Sequence[int] | None,
    prob_a: Sequence[float] | None,
    prob_b: Sequence[float] | None,
    kernel_type: str,
    kernel_params: Sequence[float] | None,
) -> _Classifier:
    labels = class_labels(ints, strings, "SVMClassifier")
    k = labels.shape[0]
    coef = np.asarray(coefficients or (), dtype=np.float32)
    per_class = tuple(vectors_per_class or ())
    n_vec = sum(per_class)
    empty = np.zeros((0, 0))
    a = np.asarray(prob_a or (), dtype=np.float32)
    b = np.asarray(prob_b or (), dtype=np.float32) if a.size else np.zeros(0, np.float32)
    rho_a = np.asarray(rho or (), dtype=np.float32)
    common = dict(
        labels=labels,
        coef=coef,
        coef_all_positive=bool((coef >= 0).all()),
        rho=rho_a,
        rho64=rho_a.astype(np.float64),
        prob_a=a,
        prob_b=b,
        kernel=_kernel_spec(kernel_type, kernel_params),
    )
    if n_vec == 0:
        w = coef.reshape(k, -1).astype(np.float64)
        return _Classifier(**common, linear=True, weights=w, vectors=empty, starts=empty)
    if len(per_class) != k:
        raise ValueError(
            f"SVMClassifier: vectors_per_class has {len(per_class)} entries for {k} classes"
        )
    sv = np.asarray(support_vectors or (), dtype=np.float32).reshape(n_vec, -1)
    return _Classifier(
        **common,
        linear=False,
        weights=coef.reshape(k - 1, n_vec).astype(np.float64),
        vectors=sv.astype(np.float64),
        starts=np.concatenate([[0], np.cumsum(per_class)]).astype(np.int64),
    )


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
    m = memo(
        _classifier,
        classlabels_ints,
        classlabels_strings,
        coefficients,
        rho,
        support_vectors,
        vectors_per_class,
        prob_a,
        prob_b,
        kernel_type,
        kernel_params,
    )
    rows = as_rows(x, "SVMClassifier")
    k = m.labels.shape[0]
    have_proba = m.prob_a.size > 0
    if m.linear:
        s = kernel_values(rows, m.weights, LINEAR, linear_c=float(m.rho[0]) if m.rho.size else 0.0)
        best = np.argmax(s, axis=1)
        weight = s[np.arange(s.shape[0]), best]
        return _binary_or_multi(m, best, weight, s, have_proba, post_transform, None)
    pairs, best, probs = svc_scores(
        rows, m.vectors, *m.kernel, m.weights, m.rho64, m.starts, m.prob_a, m.prob_b
    )
    if probs is not None:
        return _binary_or_multi(m, best, None, probs, True, post_transform, None)
    second = (2 if post_transform == "NONE" else 0) if k <= 2 else None
    return _binary_or_multi(m, best, None, pairs, False, post_transform, second)


def _binary_or_multi(
    m: _Classifier,
    best: np.ndarray,
    weight: np.ndarray | None,
    scores: np.ndarray,
    have_proba: bool,
    post_transform: str,
    second: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's ChooseClass for two classes, argmax label otherwise; then scores."""
    labels = m.labels
    if labels.shape[0] == 2 and not have_proba and weight is not None:
        pick_pos = (weight >= 0.5) if m.coef_all_positive else (weight > 0)
        lab = np.where(pick_pos, labels[1], labels[best]).astype(labels.dtype)
    else:
        # SVC mode passes no weight: onnxruntime's ChooseClass sees 0 there, which
        # never picks the positive class, so the vote decides.
        lab = labels[best]
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
    coef, vectors = memo(_regressor, coefficients, support_vectors, n_supports)
    r0 = float(np.float32(rho[0])) if rho else 0.0
    rows = as_rows(x, "SVMRegressor")
    if n_supports > 0:
        kind, gamma, coef0, degree = memo(_kernel_spec, kernel_type, kernel_params)
        s = svr_scores(rows, vectors, kind, gamma, coef0, degree, coef, r0)
    else:
        s = kernel_values(rows, coef.reshape(1, -1), LINEAR, linear_c=r0)[:, 0]
    s = s.reshape(-1, 1)
    if one_class:
        s = np.where(s > 0, np.float32(1), np.float32(-1))
    return probit(s) if post_transform == "PROBIT" else s


def _regressor(
    coefficients: Sequence[float] | None, support_vectors: Sequence[float] | None, n_supports: int
) -> tuple[np.ndarray, np.ndarray]:
    """(coefficients float64 of the float32 values, (n_supports, F) float64 vectors)."""
    coef = np.asarray(coefficients or (), dtype=np.float32).astype(np.float64)
    if n_supports <= 0:
        return coef, np.zeros((0, 0))
    sv = np.asarray(support_vectors or (), dtype=np.float32).reshape(n_supports, -1)
    return coef, sv.astype(np.float64)
