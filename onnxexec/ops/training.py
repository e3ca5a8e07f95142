"""The ai.onnx.preview.training domain (opset 1): optimizers and Gradient.

Multi-tensor form: inputs are R, T, then all X, then all G, then the state
tensors (V / H...) grouped by kind; outputs are all X_new then the new states.
Results keep each X's dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from onnxexec.ir.graph import Graph
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


# --- Gradient ---------------------------------------------------------------
# The planner's lower_gradient pass turns ai.onnx.preview.training::Gradient into
# onnxexec::Gradient carrying `forward`, the slice of the enclosing graph that
# computes y from xs + zs. The handler runs it and back-propagates with the
# vector-Jacobian products below (reverse-mode, one rule per op type).

Vjp = Callable[[Mapping[str, Any], list[Any], list[Any], np.ndarray], list[Any]]


def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back down to `shape`."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    axes = tuple(i for i, (gd, sd) in enumerate(zip(g.shape, shape, strict=True)) if sd == 1 != gd)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _vjp_matmul(
    attrs: Mapping[str, Any], ins: list[Any], outs: list[Any], g: np.ndarray
) -> list[Any]:
    a, b = ins
    a2 = a[None] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g.reshape(*a2.shape[:-1], b2.shape[-1]) if a.ndim == 1 or b.ndim == 1 else g
    ga = np.matmul(g2, np.swapaxes(b2, -1, -2))
    gb = np.matmul(np.swapaxes(a2, -1, -2), g2)
    return [
        _unbroadcast(ga, a2.shape).reshape(a.shape),
        _unbroadcast(gb, b2.shape).reshape(b.shape),
    ]


def _vjp_gemm(
    attrs: Mapping[str, Any], ins: list[Any], outs: list[Any], g: np.ndarray
) -> list[Any]:
    a, b = ins[0], ins[1]
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    at = a.T if attrs.get("transA", 0) else a
    bt = b.T if attrs.get("transB", 0) else b
    ga, gb = alpha * g @ bt.T, alpha * at.T @ g
    grads = [ga.T if attrs.get("transA", 0) else ga, gb.T if attrs.get("transB", 0) else gb]
    if len(ins) > 2 and ins[2] is not None:
        grads.append(_unbroadcast(beta * g, ins[2].shape))
    return grads


def _reduce_axes(attrs: Mapping[str, Any], ins: list[Any]) -> tuple[int, ...] | None:
    axes = attrs.get("axes")
    if axes is None and len(ins) > 1 and ins[1] is not None and ins[1].size:
        axes = ins[1].reshape(-1).tolist()
    if not axes:
        return () if attrs.get("noop_with_empty_axes", 0) else None
    return tuple(int(a) % ins[0].ndim for a in axes)


def _vjp_reduce(mean: bool) -> Vjp:
    def vjp(attrs: Mapping[str, Any], ins: list[Any], outs: list[Any], g: np.ndarray) -> list[Any]:
        x = ins[0]
        axes = _reduce_axes(attrs, ins)
        axes = tuple(range(x.ndim)) if axes is None else axes
        if not attrs.get("keepdims", 1):
            g = np.expand_dims(g, axes)
        gx = np.broadcast_to(g, x.shape)
        if mean:
            gx = gx / max(1, int(np.prod([x.shape[a] for a in axes])))
        return [gx, None]

    return vjp


_VJP: dict[str, Vjp] = {
    "Add": lambda at, i, o, g: [_unbroadcast(g, i[0].shape), _unbroadcast(g, i[1].shape)],
    "Sub": lambda at, i, o, g: [_unbroadcast(g, i[0].shape), _unbroadcast(-g, i[1].shape)],
    "Mul": lambda at, i, o, g: [
        _unbroadcast(g * i[1], i[0].shape),
        _unbroadcast(g * i[0], i[1].shape),
    ],
    "Div": lambda at, i, o, g: [
        _unbroadcast(g / i[1], i[0].shape),
        _unbroadcast(-g * i[0] / (i[1] * i[1]), i[1].shape),
    ],
    "Pow": lambda at, i, o, g: [
        _unbroadcast(g * i[1] * np.power(i[0], i[1] - 1), i[0].shape),
        _unbroadcast(g * o[0] * np.log(i[0]), i[1].shape),
    ],
    "Neg": lambda at, i, o, g: [-g],
    "Identity": lambda at, i, o, g: [g],
    "Relu": lambda at, i, o, g: [g * (i[0] > 0)],
    "Tanh": lambda at, i, o, g: [g * (1 - o[0] * o[0])],
    "Sigmoid": lambda at, i, o, g: [g * o[0] * (1 - o[0])],
    "Exp": lambda at, i, o, g: [g * o[0]],
    "Log": lambda at, i, o, g: [g / i[0]],
    "Sqrt": lambda at, i, o, g: [g / (2 * o[0])],
    "MatMul": _vjp_matmul,
    "Gemm": _vjp_gemm,
    "Reshape": lambda at, i, o, g: [g.reshape(i[0].shape), None],
    "Flatten": lambda at, i, o, g: [g.reshape(i[0].shape)],
    "Squeeze": lambda at, i, o, g: [g.reshape(i[0].shape), None],
    "Unsqueeze": lambda at, i, o, g: [g.reshape(i[0].shape), None],
    "Transpose": lambda at, i, o, g: [
        np.transpose(g, np.argsort(at.get("perm") or tuple(range(g.ndim))[::-1]))
    ],
    "ReduceSum": _vjp_reduce(mean=False),
    "ReduceMean": _vjp_reduce(mean=True),
}


@op("Gradient", since=1, domain="onnxexec", wants=("run_graph",))
def gradient(
    *inputs: np.ndarray,
    forward: Graph,
    xs: tuple[str, ...],
    y: str,
    zs: tuple[str, ...] = (),
    run_graph: Callable[..., list[Any]],
) -> tuple[np.ndarray, ...]:
    """dy/dx for each x in xs at the given values of xs + zs (zs are held constant)."""
    names = [v.name for v in forward.outputs]
    values = dict(zip(names, run_graph(forward, *inputs), strict=True))
    grads: dict[str, np.ndarray] = {y: np.ones_like(values[y])}
    for node in reversed(forward.nodes):
        g_out = grads.get(node.outputs[0]) if node.outputs else None
        if g_out is None:
            continue
        rule = _VJP.get(node.op_type)
        if rule is None or any(grads.get(o) is not None for o in node.outputs[1:]):
            raise NotImplementedError(f"Gradient: no derivative rule for {node.op_type}")
        ins = [values.get(i) if i else None for i in node.inputs]
        outs = [values.get(o) if o else None for o in node.outputs]
        for name, gi, x in zip(node.inputs, rule(node.attrs, ins, outs, g_out), ins, strict=False):
            if gi is None or not name or name in zs:
                continue
            gi = np.asarray(gi).astype(x.dtype, copy=False)
            grads[name] = grads[name] + gi if name in grads else gi
    return tuple(grads.get(x, np.zeros_like(values[x])) for x in xs)
