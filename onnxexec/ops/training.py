"""Optimizers of the ai.onnx.preview.training domain (opset 1).

Multi-tensor form: inputs are R, T, then all X, then all G, then the state
tensors (V / H...) grouped by kind; outputs are all X_new then the new states.
Results keep each X's dtype.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.registry import op

_DOMAIN = "ai.onnx.preview.training"


def _groups(data: tuple[np.ndarray, ...], kinds: int, name: str) -> list[tuple[np.ndarray, ...]]:
    """Split X1..Xn, G1..Gn, S1..Sn... into n tuples (X, G, S...)."""
    if len(data) % kinds:
        raise ValueError(f"{name}: {len(data)} tensor inputs is not a multiple of {kinds}")
    n = len(data) // kinds
    return [tuple(data[k * n + i] for k in range(kinds)) for i in range(n)]


def _cast(values: list[np.ndarray], like: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(v).astype(like.dtype, copy=False) for v in values]


@op("Adagrad", since=1, domain=_DOMAIN)
def adagrad(
    r: np.ndarray,
    t: np.ndarray,
    *data: np.ndarray,
    decay_factor: float = 0.0,
    epsilon: float = 1e-6,
    norm_coefficient: float = 0.0,
) -> tuple[np.ndarray, ...]:
    """X_new = X - r * Gr / (sqrt(H_new) + eps), H_new = H + Gr^2, r = R / (1 + T*decay)."""
    rate = r / (1 + t * decay_factor)
    xs, hs = [], []
    for x, g, h in _groups(data, 3, "Adagrad"):
        g_reg = norm_coefficient * x + g
        h_new = h + g_reg * g_reg
        xs += _cast([x - rate * g_reg / (np.sqrt(h_new) + epsilon)], x)
        hs += _cast([h_new], h)
    return (*xs, *hs)


@op("Momentum", since=1, domain=_DOMAIN)
def momentum(
    r: np.ndarray,
    t: np.ndarray,
    *data: np.ndarray,
    alpha: float,
    beta: float,
    mode: str,
    norm_coefficient: float,
) -> tuple[np.ndarray, ...]:
    """V_new = alpha*V + beta'*Gr (beta' = 1 at T == 0); standard: X -= R*V_new,
    nesterov: X -= R*(Gr + alpha*V_new)."""
    if mode not in ("standard", "nesterov"):
        raise ValueError(f"Momentum: unknown mode '{mode}'")
    beta_adj = beta if int(t) > 0 else 1.0
    xs, vs = [], []
    for x, g, v in _groups(data, 3, "Momentum"):
        g_reg = norm_coefficient * x + g
        v_new = alpha * v + beta_adj * g_reg
        step = v_new if mode == "standard" else g_reg + alpha * v_new
        xs += _cast([x - r * step], x)
        vs += _cast([v_new], v)
    return (*xs, *vs)


@op("Adam", since=1, domain=_DOMAIN)
def adam(
    r: np.ndarray,
    t: np.ndarray,
    *data: np.ndarray,
    alpha: float = 0.9,
    beta: float = 0.999,
    epsilon: float = 1e-6,
    norm_coefficient: float = 0.0,
    norm_coefficient_post: float = 0.0,
) -> tuple[np.ndarray, ...]:
    """V/H exponential averages of Gr and Gr^2; bias-corrected rate when T > 0;
    X_final = (1 - norm_coefficient_post) * (X - R' * V_new / (sqrt(H_new) + eps))."""
    step = int(t)
    rate = r * np.sqrt(1 - beta**step) / (1 - alpha**step) if step > 0 else r
    xs, vs, hs = [], [], []
    for x, g, v, h in _groups(data, 4, "Adam"):
        g_reg = norm_coefficient * x + g
        v_new = alpha * v + (1 - alpha) * g_reg
        h_new = beta * h + (1 - beta) * (g_reg * g_reg)
        x_new = x - rate * (v_new / (np.sqrt(h_new) + epsilon))
        xs += _cast([(1 - norm_coefficient_post) * x_new], x)
        vs += _cast([v_new], v)
        hs += _cast([h_new], h)
    return (*xs, *vs, *hs)
