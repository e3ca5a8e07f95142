"""RNN, GRU and LSTM (ONNX Operators.md), one shared driver for all three.

Layout 0: X (T, B, I), Y (T, D, B, H), Y_h/Y_c (D, B, H); layout 1 (opset 14+):
X (B, T, I), Y (B, T, D, H), Y_h/Y_c (B, D, H). D = 2 for bidirectional.
Gate order in W/R/B: RNN i; GRU z r h; LSTM i o f c; peepholes P: i o f.
X @ W^T for all time steps is one batched matmul; only the recurrence loops over T.
Rows past a batch entry's sequence_lens give zeros in Y and leave the state unchanged
(onnxruntime's behaviour); the reverse direction runs over each entry's valid prefix.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.ops import rnn_fast
from onnxexec.ops.registry import op

Act = Callable[[np.ndarray], np.ndarray]

# name -> (number of alpha, beta parameters it takes, defaults, function)
_ACTIVATIONS: dict[str, tuple[int, tuple[float, float], Callable[..., np.ndarray]]] = {
    "relu": (0, (0.0, 0.0), lambda x, a, b: np.maximum(x, 0)),
    "tanh": (0, (0.0, 0.0), lambda x, a, b: np.tanh(x)),
    "sigmoid": (0, (0.0, 0.0), lambda x, a, b: 1 / (1 + np.exp(-x))),
    "affine": (2, (1.0, 0.0), lambda x, a, b: a * x + b),
    "leakyrelu": (1, (0.01, 0.0), lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (1, (1.0, 0.0), lambda x, a, b: np.where(x > a, x, 0)),
    "scaledtanh": (2, (1.0, 1.0), lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (2, (0.2, 0.5), lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "elu": (1, (1.0, 0.0), lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1))),
    "softsign": (0, (0.0, 0.0), lambda x, a, b: x / (1 + np.abs(x))),
    "softplus": (0, (0.0, 0.0), lambda x, a, b: np.log1p(np.exp(x))),
}


def rnn_activations(
    names: tuple[str, ...] | None,
    alphas: tuple[float, ...] | None,
    betas: tuple[float, ...] | None,
    default: tuple[str, ...],
    n_dirs: int,
) -> list[list[Act]]:
    """Per direction, the activation callables (f, g, h...).

    alpha/beta are consumed in order by the functions that take them (as
    onnxruntime does); a list given for one direction is reused for the other.
    """
    names = tuple(names) if names else default * n_dirs
    if n_dirs == 2 and len(names) == len(default):
        names = names * 2
    alpha_it = iter(alphas or ())
    beta_it = iter(betas or ())
    acts: list[Act] = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise ValueError(f"unsupported RNN activation '{name}'")
        n_params, (a0, b0), fn = _ACTIVATIONS[key]
        a = next(alpha_it, a0) if n_params >= 1 else a0
        b = next(beta_it, b0) if n_params >= 2 else b0
        acts.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    per = len(default)
    return [acts[d * per : (d + 1) * per] for d in range(n_dirs)]


def clipper(clip: float | None) -> Act:
    if clip is None:
        return lambda x: x
    return lambda x: np.clip(x, -clip, clip)


def reverse_valid(x: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """x (T, B, ...) with each column b's first lens[b] rows reversed."""
    t_len = x.shape[0]
    t = np.arange(t_len)[:, None]
    idx = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)  # (T, B)
    return np.take_along_axis(x, idx.reshape(idx.shape + (1,) * (x.ndim - 2)), axis=0)


def _run(
    step: Callable[..., tuple[np.ndarray, ...]],
    n_gates: int,
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None,
    sequence_lens: np.ndarray | None,
    initial: list[np.ndarray | None],
    per_dir: list[dict[str, Any]],
    *,
    hidden_size: int | None,
    direction: str,
    layout: int,
) -> tuple[np.ndarray, ...]:
    """Shared driver: returns (Y, Y_h[, Y_c]) in the node's dtype and layout."""
    out_dtype = x.dtype
    work = np.float64 if out_dtype == np.float64 else np.float32
    if layout:
        x = np.swapaxes(x, 0, 1)
        initial = [None if s is None else np.swapaxes(s, 0, 1) for s in initial]
    x = x.astype(work, copy=False)
    t_len, batch = x.shape[:2]
    n_dirs = 2 if direction == "bidirectional" else 1
    hid = hidden_size or r.shape[-1]
    lens = (
        np.full(batch, t_len, np.int64)
        if sequence_lens is None
        else np.asarray(sequence_lens).astype(np.int64)
    )
    ys, finals = [], []
    for d in range(n_dirs):
        reverse = direction == "reverse" or d == 1
        wd = w[d].astype(work, copy=False)  # (G*H, I)
        rd = r[d].astype(work, copy=False)  # (G*H, H)
        if b is None:
            wb = rb = np.zeros(n_gates * hid, work)
        else:
            wb, rb = np.split(b[d].astype(work, copy=False), 2)
        xs = reverse_valid(x, lens) if reverse else x
        xw = np.matmul(xs, wd.T) + wb  # (T, B, G*H)
        states = [np.zeros((batch, hid), work) if s is None else s[d].astype(work) for s in initial]
        y = np.zeros((t_len, batch, hid), work)
        for t in range(t_len):
            live = (t < lens)[:, None]  # (B, 1)
            new = step(xw[t], states, rd, rb, **per_dir[d])
            states = [np.where(live, n, s) for n, s in zip(new, states, strict=True)]
            y[t] = np.where(live, states[0], 0)
        ys.append(reverse_valid(y, lens) if reverse else y)
        finals.append(states)
    y_all = np.stack(ys, axis=1)  # (T, D, B, H)
    outs = [np.stack([f[k] for f in finals]) for k in range(len(initial))]  # (D, B, H)
    if layout:
        y_all = np.transpose(y_all, (2, 0, 1, 3))
        outs = [np.swapaxes(o, 0, 1) for o in outs]
    return tuple(np.ascontiguousarray(v).astype(out_dtype, copy=False) for v in (y_all, *outs))


def _rnn_step(
    xw: np.ndarray, states: list[np.ndarray], r: np.ndarray, rb: np.ndarray, *, f: Act, clip: Act
) -> tuple[np.ndarray]:
    (h,) = states
    return (f(clip(xw + h @ r.T + rb)),)


def _gru_step(
    xw: np.ndarray,
    states: list[np.ndarray],
    r: np.ndarray,
    rb: np.ndarray,
    *,
    f: Act,
    g: Act,
    clip: Act,
    linear_before_reset: int,
) -> tuple[np.ndarray]:
    (h,) = states
    hid = h.shape[1]
    xz, xr, xh = np.split(xw, 3, axis=1)
    rz, rr, rh = r[:hid], r[hid : 2 * hid], r[2 * hid :]
    bz, br, bh = np.split(rb, 3)
    z = f(clip(xz + h @ rz.T + bz))
    rt = f(clip(xr + h @ rr.T + br))
    if linear_before_reset:
        hh = g(clip(xh + rt * (h @ rh.T + bh)))
    else:
        hh = g(clip(xh + (rt * h) @ rh.T + bh))
    return ((1 - z) * hh + z * h,)


def _lstm_step(
    xw: np.ndarray,
    states: list[np.ndarray],
    r: np.ndarray,
    rb: np.ndarray,
    *,
    f: Act,
    g: Act,
    h: Act,
    clip: Act,
    p: np.ndarray | None,
    input_forget: int,
) -> tuple[np.ndarray, np.ndarray]:
    hprev, cprev = states
    gates = xw + hprev @ r.T + rb
    gi, go, gf, gc = np.split(gates, 4, axis=1)
    pi, po, pf = (0, 0, 0) if p is None else np.split(p, 3)
    i = f(clip(gi + pi * cprev))
    fg = 1 - i if input_forget else f(clip(gf + pf * cprev))
    c = fg * cprev + i * g(clip(gc))
    o = f(clip(go + po * c))
    return o * h(c), c


def _n_dirs(direction: str) -> int:
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ValueError(f"unknown direction '{direction}'")
    return 2 if direction == "bidirectional" else 1


@op("RNN", since=14)
def rnn(
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    *,
    activation_alpha: tuple[float, ...] | None = None,
    activation_beta: tuple[float, ...] | None = None,
    activations: tuple[str, ...] | None = None,
    clip: float | None = None,
    direction: str = "forward",
    hidden_size: int | None = None,
    layout: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb). Returns Y, Y_h."""
    nd = _n_dirs(direction)
    acts = rnn_activations(activations, activation_alpha, activation_beta, ("Tanh",), nd)
    per = [{"f": a[0], "clip": clipper(clip)} for a in acts]
    return _run(
        _rnn_step,
        1,
        x,
        w,
        r,
        b,
        sequence_lens,
        [initial_h],
        per,
        hidden_size=hidden_size,
        direction=direction,
        layout=layout,
    )


@op("GRU", since=14, prepare=rnn_fast.prepare_gru)
def gru(
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    *,
    activation_alpha: tuple[float, ...] | None = None,
    activation_beta: tuple[float, ...] | None = None,
    activations: tuple[str, ...] | None = None,
    clip: float | None = None,
    direction: str = "forward",
    hidden_size: int | None = None,
    layout: int = 0,
    linear_before_reset: int = 0,
    prepared: rnn_fast.Prepared | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """zt, rt gates; ht from (rt * Ht-1) R^T, or rt * (Ht-1 R^T + Rb) when
    linear_before_reset; Ht = (1 - zt) ht + zt Ht-1. Returns Y, Y_h."""
    nd = _n_dirs(direction)
    if rnn_fast.applies(prepared, x, w, r, b, sequence_lens):
        assert prepared is not None
        return rnn_fast.run(  # type: ignore[return-value]
            "GRU",
            prepared,
            x,
            [initial_h],
            direction=direction,
            layout=layout,
            linear_before_reset=linear_before_reset,
        )
    acts = rnn_activations(activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh"), nd)
    per = [
        {"f": a[0], "g": a[1], "clip": clipper(clip), "linear_before_reset": linear_before_reset}
        for a in acts
    ]
    return _run(
        _gru_step,
        3,
        x,
        w,
        r,
        b,
        sequence_lens,
        [initial_h],
        per,
        hidden_size=hidden_size,
        direction=direction,
        layout=layout,
    )


@op("LSTM", since=14, prepare=rnn_fast.prepare_lstm)
def lstm(
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    initial_c: np.ndarray | None = None,
    p: np.ndarray | None = None,
    *,
    activation_alpha: tuple[float, ...] | None = None,
    activation_beta: tuple[float, ...] | None = None,
    activations: tuple[str, ...] | None = None,
    clip: float | None = None,
    direction: str = "forward",
    hidden_size: int | None = None,
    input_forget: int = 0,
    layout: int = 0,
    prepared: rnn_fast.Prepared | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gates i o f c with optional peepholes P (i o f); input_forget couples
    f = 1 - i. Returns Y, Y_h, Y_c."""
    nd = _n_dirs(direction)
    if rnn_fast.applies(prepared, x, w, r, b, sequence_lens, p):
        assert prepared is not None
        return rnn_fast.run(  # type: ignore[return-value]
            "LSTM", prepared, x, [initial_h, initial_c], direction=direction, layout=layout
        )
    acts = rnn_activations(
        activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh", "Tanh"), nd
    )
    work = np.float64 if x.dtype == np.float64 else np.float32
    per = [
        {
            "f": a[0],
            "g": a[1],
            "h": a[2],
            "clip": clipper(clip),
            "p": None if p is None else p[d].astype(work),
            "input_forget": input_forget,
        }
        for d, a in enumerate(acts)
    ]
    return _run(
        _lstm_step,
        4,
        x,
        w,
        r,
        b,
        sequence_lens,
        [initial_h, initial_c],
        per,
        hidden_size=hidden_size,
        direction=direction,
        layout=layout,
    )


def _register_older(
    fn: Callable[..., Any],
    op_type: str,
    since: int,
    *,
    drop: tuple[str, ...],
    add: tuple[str, ...] = (),
    prepare: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None = None,
) -> None:
    """Register `fn` for an older opset whose attribute set differs.

    Opsets before 14 have no `layout` (always 0), GRU-1 no `linear_before_reset`;
    opset 1 also has `output_sequence`, which changes nothing here: Y is computed
    either way and a node that does not want it omits the output.
    """
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name not in drop]
    params += [inspect.Parameter(a, inspect.Parameter.KEYWORD_ONLY, default=0) for a in add]

    def older(*args: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        for a in add:
            kwargs.pop(a, None)
        return fn(*args, **kwargs)

    older.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    older.__doc__ = f"{op_type}-{since}: {fn.__name__} without {', '.join(drop)}."
    op(op_type, since, prepare=prepare)(older)


_v1 = {"drop": ("layout",), "add": ("output_sequence",)}
_register_older(rnn, "RNN", 1, **_v1)
_register_older(rnn, "RNN", 7, drop=("layout",))
_gru1 = {"drop": ("layout", "linear_before_reset"), "add": ("output_sequence",)}
_register_older(gru, "GRU", 1, **_gru1, prepare=rnn_fast.prepare_gru)  # type: ignore[arg-type]
_register_older(gru, "GRU", 3, **_v1, prepare=rnn_fast.prepare_gru)  # type: ignore[arg-type]
_register_older(gru, "GRU", 7, drop=("layout",), prepare=rnn_fast.prepare_gru)
_register_older(lstm, "LSTM", 1, **_v1, prepare=rnn_fast.prepare_lstm)  # type: ignore[arg-type]
_register_older(lstm, "LSTM", 7, drop=("layout",), prepare=rnn_fast.prepare_lstm)
