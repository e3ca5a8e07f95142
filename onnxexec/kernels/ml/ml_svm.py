"""Support-vector machine scoring for ai.onnx.ml SVMClassifier / SVMRegressor.

Kernel values are computed in float64 from float32 inputs and rounded to float32
(the RBF exponential is taken in float32, as onnxruntime does),
pair scores accumulate in float64, and the Platt probabilities and their coupling
(Wu, Lin & Weng 2004, libsvm's multiclass_probability) run in float32 operation by
operation, as onnxruntime's svmclassifier.cc does: the coupling iterates to a
tolerance, so its arithmetic type decides when each row stops.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb

# Kernel codes: index into KERNELS.
KERNELS: Final = ("LINEAR", "POLY", "RBF", "SIGMOID")
LINEAR: Final = 0
POLY: Final = 1
RBF: Final = 2
SIGMOID: Final = 3

_F1: Final = np.float32(1)
_F2: Final = np.float32(2)
_P_MIN: Final = np.float32(1e-7)
_P_MAX: Final = np.float32(1 - 1e-7)


@nb.njit(cache=True)
def _power(b, e):
    """b ** e; small whole exponents (the usual degree 2, 3...) by multiplication,
    which is within an ulp of pow() in float64 and many times faster."""
    if e == np.floor(e) and 0 <= e <= 32:
        acc = 1.0
        base = b
        n = int(e)
        while n:
            if n & 1:
                acc *= base
            base *= base
            n >>= 1
        return acc
    return b**e


@nb.njit(cache=True)
def _kernel_row(x, r, sv, kind, gamma, coef0, degree, linear_c, out):
    """out[v] = K(x[r], sv[v]) rounded to float32; x (N, F) float32, sv (V, F) float64.

    LINEAR adds `linear_c` (rho[0] of a liblinear model), as onnxruntime does.
    """
    n_feat = x.shape[1]
    for v in range(sv.shape[0]):
        if kind == RBF:
            d2 = 0.0
            for f in range(n_feat):
                d = np.float64(x[r, f]) - sv[v, f]
                d2 += d * d
            # float32 exp, as onnxruntime's float kernel (and ~2x cheaper than float64)
            out[v] = np.exp(np.float32(-gamma * d2))
            continue
        dot = 0.0
        for f in range(n_feat):
            dot += np.float64(x[r, f]) * sv[v, f]
        if kind == LINEAR:
            out[v] = np.float32(dot + linear_c)
            continue
        dot = gamma * dot + coef0
        if kind == POLY:
            out[v] = np.float32(_power(dot, degree))
        else:
            out[v] = np.float32(np.tanh(dot))


@nb.njit(cache=True)
def _kernel_values(x, sv, kind, gamma, coef0, degree, linear_c, out):
    """out[r] = _kernel_row(x, r, ...) for every row."""
    for r in range(x.shape[0]):
        _kernel_row(x, r, sv, kind, gamma, coef0, degree, linear_c, out[r])


@nb.njit(cache=True)
def _svr(x, sv, kind, gamma, coef0, degree, coef, rho0, out):
    """out[r] = float32(sum_v K(x[r], sv[v]) * coef[v] + rho0), K rounded to float32
    and the sum taken in float64."""
    kern = np.empty(sv.shape[0], np.float32)
    for r in range(x.shape[0]):
        _kernel_row(x, r, sv, kind, gamma, coef0, degree, 0.0, kern)
        acc = 0.0
        for v in range(sv.shape[0]):
            acc += np.float64(kern[v]) * coef[v]
        out[r] = np.float32(acc + rho0)


@nb.njit(cache=True)
def _logistic32(t):
    """float32 logistic from |t| (ml_common.logistic, one value)."""
    v = _F1 / (_F1 + np.exp(-np.abs(t)))
    return _F1 - v if t < 0 else v


@nb.njit(cache=True, error_model="numpy")
def _couple(rm, q, p, qp):
    """p <- class probabilities from pairwise ones rm (K, K), float32 throughout.

    libsvm's multiclass_probability: at most 100 sweeps, stopping once every
    |(Qp)_i - p'Qp| < 0.005 / K. q (K, K) and qp (K,) are scratch.
    """
    k = rm.shape[0]
    for i in range(k):
        q[i, i] = 0
        for j in range(i):
            q[i, i] += rm[j, i] * rm[j, i]
            q[i, j] = q[j, i]
        for j in range(i + 1, k):
            q[i, i] += rm[j, i] * rm[j, i]
            q[i, j] = -rm[j, i] * rm[i, j]
    for i in range(k):
        p[i] = _F1 / np.float32(k)
    eps = np.float32(0.005) / np.float32(k)
    for _ in range(100):
        pqp = np.float32(0)
        for i in range(k):
            acc = np.float32(0)
            for j in range(k):
                acc += q[i, j] * p[j]
            qp[i] = acc
            pqp += p[i] * qp[i]
        err = np.float32(0)
        for i in range(k):
            e = np.abs(qp[i] - pqp)
            if e > err or np.isnan(e):
                err = e
        if err < eps:
            break
        for i in range(k):
            diff = (-qp[i] + pqp) / q[i, i]
            p[i] += diff
            scale = _F1 + diff
            pqp = (pqp + diff * (diff * q[i, i] + _F2 * qp[i])) / scale / scale
            for j in range(k):
                qp[j] = (qp[j] + diff * q[i, j]) / scale
            for j in range(k):
                p[j] = p[j] / scale


@nb.njit(cache=True, error_model="numpy")
def _svc(x, sv, kind, gamma, coef0, degree, coef, rho, starts, prob_a, prob_b, pairs, best, probs):
    """One-vs-one scores, votes and (when prob_a is not empty) coupled probabilities.

    x (N, F) float32 rows, sv (V, F) float64 support vectors; coef (K-1, V) float64
    (class i's vectors use row j-1 against class j, class j's use row i); rho (P,)
    float64; starts (K+1,) vector offsets per class. Writes pairs (N, P) float32 in
    libsvm's pair order (0,1), (0,2)..., best (N,) the most voted class (first on
    ties), probs (N, K).
    """
    k = starts.shape[0] - 1
    votes = np.zeros(k, np.int64)
    kern = np.empty(sv.shape[0], np.float32)
    rm = np.zeros((k, k), np.float32)
    q = np.zeros((k, k), np.float32)
    qp = np.zeros(k, np.float32)
    for r in range(x.shape[0]):
        _kernel_row(x, r, sv, kind, gamma, coef0, degree, 0.0, kern)
        votes[:] = 0
        col = 0
        for i in range(k - 1):
            for j in range(i + 1, k):
                s = 0.0
                for v in range(starts[i], starts[i + 1]):
                    s += np.float64(kern[v]) * coef[j - 1, v]
                s2 = 0.0
                for v in range(starts[j], starts[j + 1]):
                    s2 += np.float64(kern[v]) * coef[i, v]
                pairs[r, col] = np.float32(s + s2 + rho[col])
                if pairs[r, col] > 0:
                    votes[i] += 1
                else:
                    votes[j] += 1
                col += 1
        top = 0
        for i in range(1, k):
            if votes[i] > votes[top]:
                top = i
        best[r] = top
        if prob_a.shape[0] == 0:
            continue
        col = 0
        for i in range(k - 1):
            for j in range(i + 1, k):
                # Platt: P(i beats j) = 1 - logistic(s * A + B), kept inside (0, 1)
                pr = _F1 - _logistic32(pairs[r, col] * prob_a[col] + prob_b[col])
                pr = min(max(pr, _P_MIN), _P_MAX)
                rm[i, j] = pr
                rm[j, i] = _F1 - pr
                col += 1
        _couple(rm, q, probs[r], qp)


def _rows32(x: np.ndarray) -> np.ndarray:
    """Rows of any numeric type rounded to float32 (the ops score in float32), C order."""
    if x.dtype != np.float32:
        x = x.astype(np.float32)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def _check_features(x: np.ndarray, vectors: np.ndarray) -> None:
    if x.shape[1] != vectors.shape[1]:
        raise ValueError(f"input has {x.shape[1]} features, the support vectors {vectors.shape[1]}")


def kernel_values(
    x: np.ndarray,
    vectors: np.ndarray,
    kind: int,
    gamma: float = 0.0,
    coef0: float = 0.0,
    degree: float = 0.0,
    linear_c: float = 0.0,
) -> np.ndarray:
    """(N, F) rows x (V, F) float64 vectors -> (N, V) float32 kernel values."""
    _check_features(x, vectors)
    out = np.empty((x.shape[0], vectors.shape[0]), np.float32)
    _kernel_values(_rows32(x), vectors, kind, gamma, coef0, degree, linear_c, out)
    return out


def svr_scores(
    x: np.ndarray,
    vectors: np.ndarray,
    kind: int,
    gamma: float,
    coef0: float,
    degree: float,
    coef: np.ndarray,
    rho0: float,
) -> np.ndarray:
    """(N,) float32 regression scores sum_v K(x, sv[v]) * coef[v] + rho0; coef float64."""
    _check_features(x, vectors)
    if coef.shape[0] != vectors.shape[0]:
        raise ValueError(f"{coef.shape[0]} coefficients for {vectors.shape[0]} support vectors")
    out = np.empty(x.shape[0], np.float32)
    _svr(_rows32(x), vectors, kind, gamma, coef0, degree, coef, rho0, out)
    return out


def svc_scores(
    x: np.ndarray,
    vectors: np.ndarray,
    kind: int,
    gamma: float,
    coef0: float,
    degree: float,
    coef: np.ndarray,
    rho: np.ndarray,
    starts: np.ndarray,
    prob_a: np.ndarray,
    prob_b: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(pair scores (N, P) float32, winning class (N,) int64, probabilities (N, K) or None).

    vectors (V, F) float64, coef (K-1, V) float64, rho (P,) float64, starts (K+1,)
    int64, prob_a/prob_b (P,) float32 or empty (then no probabilities).
    """
    _check_features(x, vectors)
    n = x.shape[0]
    k = starts.shape[0] - 1
    n_pairs = k * (k - 1) // 2
    short = prob_a.shape[0] and min(prob_a.shape[0], prob_b.shape[0]) < n_pairs
    if rho.shape[0] < n_pairs or short:
        raise ValueError(f"SVM: rho / prob_a / prob_b need {n_pairs} values (one per class pair)")
    pairs = np.empty((n, n_pairs), np.float32)
    best = np.empty(n, np.int64)
    probs = np.zeros((n, k), np.float32)
    _svc(
        _rows32(x),
        vectors,
        kind,
        gamma,
        coef0,
        degree,
        coef,
        rho,
        starts,
        prob_a,
        prob_b,
        pairs,
        best,
        probs,
    )
    return pairs, best, probs if prob_a.shape[0] else None
