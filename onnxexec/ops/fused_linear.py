"""onnxexec::FusedMatMul and onnxexec::FusedConv: a product with its bias and
activation applied in one pass (graph passes fuse_matmul_add / fuse_activation);
onnxexec::FusedMatMulGroup: sibling products of one input as one (fuse_qkv).

float32 runs the threaded kernels (kernels/linalg/gemm.py, kernels/math/activations.py); other
dtypes take the plain numpy path, so a fused graph computes what the unfused one did.
Activation names and parameters: kernels.math.activations.ACT ("Clip" alpha/beta = min/max,
"LeakyRelu" alpha, "HardSigmoid" alpha/beta).
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_direct import use_direct
from onnxexec.kernels.conv.conv_rows import use_rows
from onnxexec.kernels.conv.conv_taps import to_ohwi, use_taps
from onnxexec.kernels.conv.layout import WeightLayout, layout_of
from onnxexec.kernels.conv.pointwise_small import Panels
from onnxexec.kernels.linalg.gemm import batched, linear, linear_packed
from onnxexec.kernels.linalg.sgemm_packed import unpack
from onnxexec.kernels.math.activations import epilogue, epilogue_reference
from onnxexec.native.launch import Replay, recording
from onnxexec.ops import _window as win
from onnxexec.ops.conv import compute_dtype, conv_geometry, conv_nd
from onnxexec.ops.registry import op

D = "onnxexec"
F32 = np.dtype(np.float32)


def _code(activation: str) -> int:
    try:
        return ACT[activation]
    except KeyError:
        raise ValueError(f"unknown fused activation '{activation}'") from None


def activate(y: np.ndarray, activation: str, alpha: float, beta: float) -> np.ndarray:
    """`y` after the activation, in place when float32 C-contiguous (y must be fresh)."""
    code = _code(activation)
    if code == 0:
        return y
    if y.dtype == F32 and y.flags.c_contiguous and y.size:
        epilogue(
            y.reshape(-1, y.shape[-1]) if y.ndim else y.reshape(1, 1),
            0,
            y.shape[-1] if y.ndim else 1,
            None,
            code,
            alpha,
            beta,
        )
        return y
    return epilogue_reference(y, None, code, alpha, beta)


@op("FusedMatMul", 1, domain=D)
def fused_matmul(
    a: np.ndarray,
    b: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    transB: int = 0,
    activation: str = "",
    alpha: float = 0.0,
    beta: float = 0.0,
    packed: int = 0,
) -> np.ndarray:
    """act(A @ B' + bias): numpy matmul broadcasting, B' = B or (transB) B with its last
    two axes swapped, bias broadcast along the last axis. packed = N: B is a (K, N)
    weight packed by pass pack_weights (kernels/linalg/sgemm_packed.py)."""
    # The kernels read bias[j] for every output column j: only an exact (N,) float32
    # vector may go to them; any other bias takes numpy's broadcasting below.
    n = packed or (0 if b.ndim < 2 else b.shape[-2] if transB else b.shape[-1])
    vec = bias is None or (bias.dtype == F32 and bias.shape == (n,))
    if packed:
        if a.dtype == F32 and a.ndim >= 1 and vec:
            return linear_packed(a, b, packed, bias, _code(activation), alpha, beta)
        b = unpack(b, packed)
    w = np.swapaxes(b, -1, -2) if transB else b
    fast = a.dtype == F32 and w.dtype == F32
    if fast and vec and w.ndim == 2 and a.ndim >= 1:
        return linear(a, w, bias, _code(activation), alpha, beta)
    if fast and a.ndim >= 3 and w.ndim >= 3:
        y = batched(a, w)
    else:
        y = np.matmul(a, w)
    if bias is not None:
        y = y + bias  # not in place: a bias may broadcast y to a larger shape
    # np.ascontiguousarray makes a 0-d product (1-D @ 1-D) 1-D: only copy what needs it
    y = y if y.flags.c_contiguous else np.ascontiguousarray(y)
    return activate(y, activation, alpha, beta)


@op("FusedMatMulGroup", 1, domain=D)
def fused_matmul_group(
    a: np.ndarray,
    b: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    splits: tuple[int, ...],
    activation: str = "",
    alpha: float = 0.0,
    beta: float = 0.0,
    activated: int = 0,
    packed: int = 0,
) -> tuple[np.ndarray, ...]:
    """Several products of one input as one (graph pass fuse_qkv): y = A @ B + bias with
    B (K, N) the column-wise concatenation of the members' weights, the activation on
    the first `activated` members only; output i is column block i of y (splits[i]
    wide), a view into y. packed = N: B packed by pass pack_weights."""
    n = packed or (b.shape[1] if b.ndim == 2 else -1)
    vec = bias is None or (bias.dtype == F32 and bias.shape == (n,))  # what the kernels read
    if packed and not (a.dtype == F32 and a.ndim and vec):
        b, packed = unpack(b, packed), 0
    if sum(splits) != n or activated > len(splits):
        raise ValueError(f"FusedMatMulGroup: weight {list(b.shape)} does not match {splits}")
    edges = np.concatenate([[0], np.cumsum(splits)]).tolist()
    act_hi = edges[activated]
    code = _code(activation) if activated else 0
    if a.dtype == F32 and b.dtype == F32 and vec and a.ndim:
        if packed:
            y = linear_packed(a, b, n, bias, code, alpha, beta, act_cols=(0, act_hi))
        else:
            y = linear(a, b, bias, code, alpha, beta, act_cols=(0, act_hi))
    else:
        y = np.matmul(a, b)
        if bias is not None:
            y = y + bias
        if code:
            y[..., :act_hi] = epilogue_reference(y[..., :act_hi], None, code, alpha, beta)
    return tuple(y[..., edges[i] : edges[i + 1]] for i in range(len(splits)))


_MAX_SHAPES = 64  # input shapes one node remembers (a dynamic-shape model cycles them)


class ConvState:
    """A FusedConv node's prepared state (ops/registry.py `prepare`), owned by its plan
    step and freed with the session: the node's constant weight and bias, its 1x1
    weight's packed panels (kernels/conv/pointwise_small.py), and per input shape the
    geometry and the recorded native job (native/launch.py; None: not replayable),
    which skip the geometry, path rules and job set-up that cost a small conv more
    than its kernel."""

    __slots__ = ("__weakref__", "b", "geometry", "layout", "panels", "replays", "w", "w_ohwi")

    def __init__(self, w: np.ndarray | None, b: np.ndarray | None) -> None:
        self.w, self.b = w, b
        # the weight's storage (passes/conv_layout.py), decided here once for conv2d
        self.layout = None if w is None else layout_of(w)
        self.w_ohwi: np.ndarray | None = None
        one = w is not None and w.ndim == 4 and w.shape[2:] == (1, 1) and w.dtype == F32
        self.panels = Panels(w) if one and w is not None else None
        self.geometry: dict[tuple[tuple[int, ...], tuple[int, ...]], win.Geometry] = {}
        self.replays: dict[tuple[int, ...], Replay | None] = {}

    def weight_for(
        self, x: np.ndarray, g: win.Geometry, group: int
    ) -> tuple[np.ndarray, WeightLayout | None]:
        """The weight to hand conv2d for input x and its layout: an OHWI copy, made once,
        when conv2d would take a path that reads OHWI weights (conv_direct, conv_rows, conv_taps)
        and the plan's weight is still OIHW. passes/conv_layout re-stores such weights
        in place when their shapes are known at planning; this covers the rest (a
        conv after an op whose output shape is known only at run time)."""
        w = self.w
        assert w is not None
        if self.w_ohwi is not None:
            return self.w_ohwi, WeightLayout.OHWI
        m, cg, kh, kw = w.shape
        if kh * kw == 1 or cg == 1 or self.layout is WeightLayout.OHWI or len(g.out) != 2:
            return w, self.layout
        oh, ow = g.out
        h, wd = x.shape[2], x.shape[3]
        if (
            use_rows(cg, m // group, oh * ow, kh, kw)
            or use_taps(cg, ow, kh, kw)
            or use_direct(cg, kh, kw, g.strides[0], g.strides[1], h, wd)
        ):
            self.w_ohwi = to_ohwi(w)
            return self.w_ohwi, WeightLayout.OHWI
        return w, self.layout

    def owns(self, w: np.ndarray, b: np.ndarray | None) -> bool:
        """Whether this call's weight and bias are the plan's constants (replays and
        panels hold their addresses)."""
        return w is self.w and b is self.b


def prepare_conv(consts: tuple[np.ndarray | None, ...], attrs: dict) -> ConvState:
    """FusedConv's prepare hook: the state for constant W (and B) as planned."""
    return ConvState(consts[1], consts[2] if len(consts) > 2 else None)


def _replay(r: Replay, x: np.ndarray, z: np.ndarray | None) -> np.ndarray | None:
    """The recorded job on new input / residual / output addresses, or None when this
    call does not fit it (native/launch.py Replay.run checks the rest)."""
    if x.dtype != F32 or not x.flags.c_contiguous:
        return None
    if (z is None) != (r.slots[2] < 0):
        return None
    if z is not None and (z.dtype != F32 or not z.flags.c_contiguous or z.shape != r.out_shape):
        return None
    y = np.empty(r.out_shape, dtype=F32)
    return y if r.run(x, y, z) else None


@op("FusedConv", 1, domain=D, prepare=prepare_conv)
def fused_conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    z: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
    activation: str = "",
    alpha: float = 0.0,
    beta: float = 0.0,
    prepared: ConvState | None = None,
) -> np.ndarray:
    """act(Conv(X, W, B) + Z) with Conv's attributes: X (N, C, D...), W (M, C/group, K...),
    Z an optional residual of the output's shape."""
    st = prepared if prepared is not None and prepared.owns(w, b) else None
    if st is not None:
        hit = st.replays.get(x.shape)
        if hit is not None:
            y = _replay(hit, x, z)
            if y is not None:
                return y
        key = (x.shape, w.shape)
        g = st.geometry.get(key)
        if g is None:
            if len(st.geometry) >= _MAX_SHAPES:
                st.geometry.clear()
            g = st.geometry[key] = conv_geometry(
                x, w, kernel_shape, strides, dilations, pads, auto_pad
            )
    else:
        g = conv_geometry(x, w, kernel_shape, strides, dilations, pads, auto_pad)
    if (
        x.ndim == 4
        and x.dtype == F32
        and w.dtype == F32
        and (b is None or b.dtype == F32)
        and x.shape[1] == w.shape[1] * group
        and w.shape[0] % group == 0
        and (z is None or (z.dtype == F32 and z.shape == (x.shape[0], w.shape[0], *g.out)))
    ):
        panels = None if st is None else st.panels
        wk, layout = (
            (w, None) if st is None or w.ndim != 4 or w.dtype != F32 else st.weight_for(x, g, group)
        )
        with recording() as jobs:
            y = conv2d(
                x, wk, b, g.strides, g.pads_begin, g.dilations, group, g.out,
                _code(activation), alpha, beta, z, panels, layout,
            )  # fmt: skip
        if jobs and st is not None:
            if len(st.replays) >= _MAX_SHAPES:
                st.replays.clear()
            st.replays[x.shape] = Replay.of(jobs, x, y, z)
        return y
    y = conv_nd(x, w, b, group=group, g=g, dt=compute_dtype(x.dtype))
    y = np.ascontiguousarray(y.astype(x.dtype, copy=False))
    if z is not None:
        y = y + z
    return activate(y, activation, alpha, beta)
