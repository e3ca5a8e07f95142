"""Shape rules for the neural-network ops (products, convolutions, pooling, reductions,
normalizations) and onnxexec's fused ops; see shape_rules.py for the rest."""

from __future__ import annotations

from onnxexec.ir.graph import Graph
from onnxexec.ir.onnx_pb import TensorProto
from onnxexec.ir.types import TensorType
from onnxexec.ops.common import norm_axis
from onnxexec.passes import symdim
from onnxexec.passes.shape_inference import Facts, rule
from onnxexec.passes.shape_rules import UNKNOWN_AXES, axes_of
from onnxexec.passes.symdim import Dim

BOOL = TensorProto.BOOL
INT64 = TensorProto.INT64


def _matmul_shape(a: tuple[Dim, ...] | None, b: tuple[Dim, ...] | None):
    if a is None or b is None or not a or not b:
        return None
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    batch = symdim.broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


_REDUCE = (
    "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 "
    "ReduceLogSum ReduceLogSumExp ReduceSumSquare"
).split()


def _bcast(facts: list[Facts]) -> tuple[Dim, ...] | None:
    shapes = [f.shape for f in facts if f.shape is not None]
    if not shapes or len(shapes) < len(facts):
        return None
    return symdim.broadcast_shapes(*shapes)


# Inputs each fused op's result broadcasts over (numpy rules), by op: an operand that is
# not the first may still expand the result ((56,) + (1, T, 56) is (1, T, 56)). Scale and
# bias of the norms are (D,) on the last axis and cannot expand it.
_BROADCAST_INPUTS = {
    "FusedElementwise": None,  # all of them
    "FusedRotary": None,
    "FusedGelu": None,
    "FusedLayerNorm": (0, 3, 4),  # X, skip, skip_bias
    "FusedRMSNorm": (0, 2),  # X, skip
}


@rule(*_BROADCAST_INPUTS, domain="onnxexec")
def _broadcasting(n, ins):
    which = _BROADCAST_INPUTS[n.op_type]
    used = [f for k, f in enumerate(ins) if n.inputs[k] and (which is None or k in which)]
    return [Facts(ins[0].elem, _bcast(used)) for _ in n.outputs]


@rule("FusedAttention", domain="onnxexec")
def _fused_attention(n, ins):
    q, kt, v = ins[0], ins[1], ins[2]
    if q.shape is None or kt.shape is None or v.shape is None:
        return [Facts(q.elem)]
    # scores (B, H, T, S) = Q K^T (+ mask): batch axes broadcast like MatMul's, the mask's
    # too; grouped K/V heads (Hkv | H) are repeated, so only B broadcasts there
    scores = (*symdim.broadcast_shapes(q.shape[:1], kt.shape[:1], v.shape[:1]), *q.shape[1:3])
    scores = (*scores, kt.shape[3])
    if len(ins) > 3 and n.inputs[3]:
        m = ins[3].shape
        if m is None:
            return [Facts(q.elem)]
        scores = symdim.broadcast_shapes(scores, m)
    return [Facts(q.elem, (*scores[:3], v.shape[3]))]


@rule("Dropout")
def _dropout(n, ins):
    x = ins[0]
    return [Facts(x.elem, x.shape), Facts(BOOL, x.shape)]


@rule("Tile")
def _tile(n, ins):
    """Tile-13: output dim i = input dim i * repeats[i]; repeats the facts cannot name
    give a fresh dim of the known rank (an encoder-decoder's mask is a Tile of runtime
    lengths, and an unknown rank would hide every attention after it)."""
    x, r = ins[0], ins[1]
    if x.shape is None:
        return [Facts(x.elem)]
    reps = r.sym if r.sym is not None else r.ints()
    if reps is None or len(reps) != len(x.shape):
        return [Facts(x.elem, tuple(symdim.fresh() for _ in x.shape))]
    return [Facts(x.elem, tuple(symdim.mul(d, k) for d, k in zip(x.shape, reps, strict=True)))]


@rule("LayerNormalization", "BatchNormalization", "GroupNormalization", "RMSNormalization")
def _norm(n, ins):
    x = ins[0]
    return [Facts(x.elem, x.shape)]


@rule("MatMul")
def _matmul(n, ins):
    return [Facts(ins[0].elem, _matmul_shape(ins[0].shape, ins[1].shape))]


@rule("FusedMatMul", domain="onnxexec")
def _fused_matmul(n, ins):
    b = ins[1].shape
    if b is not None and n.attrs.get("packed", 0):  # (P, K, 16) holding (K, N)
        b = (b[1], n.attrs["packed"])
    elif b is not None and n.attrs.get("transB", 0):
        b = (*b[:-2], b[-1], b[-2])
    y = _matmul_shape(ins[0].shape, b)
    if y is not None and len(ins) > 2 and n.inputs[2]:
        y = _bcast([Facts(shape=y), ins[2]])  # the bias is added with numpy broadcasting
    return [Facts(ins[0].elem, y)]


@rule("FusedMatMulGroup", domain="onnxexec")
def _fused_matmul_group(n, ins):
    x = ins[0].shape
    return [Facts(ins[0].elem, None if x is None else (*x[:-1], s)) for s in n.attrs["splits"]]


@rule("Gemm")
def _gemm(n, ins):
    a, b = ins[0].shape, ins[1].shape
    if a is None or b is None:
        return [Facts(ins[0].elem)]
    m = a[1] if n.attrs.get("transA", 0) else a[0]
    k = b[0] if n.attrs.get("transB", 0) else b[1]
    return [Facts(ins[0].elem, (m, k))]


@rule(*_REDUCE)
def _reduce(n, ins):
    x = ins[0]
    axes = axes_of(n, ins, 1)
    keep = n.attrs.get("keepdims", 1)
    if x.shape is None or axes is UNKNOWN_AXES:
        return [Facts(x.elem)]
    r = len(x.shape)
    if not axes:
        if n.attrs.get("noop_with_empty_axes", 0):
            return [Facts(x.elem, x.shape)]
        ax = set(range(r))
    else:
        ax = {norm_axis(a, r) for a in axes}
    shape = tuple(1 if i in ax else d for i, d in enumerate(x.shape) if keep or i not in ax)
    return [Facts(x.elem, shape)]


@rule("ArgMax", "ArgMin")
def _arg(n, ins):
    x = ins[0]
    if x.shape is None:
        return [Facts(INT64)]
    a = norm_axis(n.attrs.get("axis", 0), len(x.shape))
    keep = n.attrs.get("keepdims", 1)
    shape = tuple(1 if i == a else d for i, d in enumerate(x.shape) if keep or i != a)
    return [Facts(INT64, shape)]


@rule("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(n, ins):
    x = ins[0]
    if x.shape is None:
        return [Facts(x.elem)]
    return [Facts(x.elem, x.shape[:2] + (1,) * (len(x.shape) - 2))]


@rule("Conv", "MaxPool", "AveragePool")
@rule("FusedConv", domain="onnxexec")
def _window(n, ins):
    x = ins[0]
    if x.shape is None or n.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return [Facts(x.elem)]
    nd = len(x.shape) - 2
    if n.op_type in ("Conv", "FusedConv"):
        w = ins[1].shape
        if w is None:
            return [Facts(x.elem)]
        kernel, c_out = w[2:], w[0]
    else:
        kernel, c_out = n.attrs["kernel_shape"], x.shape[1]
    strides = n.attrs.get("strides") or (1,) * nd
    dil = n.attrs.get("dilations") or (1,) * nd
    pads = n.attrs.get("pads") or (0,) * (2 * nd)
    if n.attrs.get("auto_pad", "NOTSET") == "VALID":
        pads = (0,) * (2 * nd)
    ceil = n.attrs.get("ceil_mode", 0)
    out: list[Dim] = []
    for i in range(nd):
        d, k = x.shape[2 + i], kernel[i]
        if not isinstance(d, int) or not isinstance(k, int):
            out.append(symdim.fresh())
            continue
        span = d + pads[i] + pads[i + nd] - dil[i] * (k - 1) - 1
        o = (-(-span // strides[i]) if ceil else span // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= d + pads[i]:
            o -= 1  # the spec drops a last window starting in the end padding (_window.py)
        out.append(o)
    return [Facts(x.elem, (x.shape[0], c_out, *out))]


@rule("LSTM", "GRU", "RNN")
def _recurrent(n, ins):
    """Y (T, dirs, B, H), Y_h and Y_c (dirs, B, H); layout=1 puts B first (Operators.md)."""
    x = ins[0]
    hidden = n.attrs.get("hidden_size")
    dirs = 2 if n.attrs.get("direction") == "bidirectional" else 1
    if x.shape is None or len(x.shape) != 3 or hidden is None:
        return [Facts(x.elem) for _ in n.outputs]
    if n.attrs.get("layout", 0):
        b, t = x.shape[0], x.shape[1]
        y, state = (b, t, dirs, hidden), (b, dirs, hidden)
    else:
        t, b = x.shape[0], x.shape[1]
        y, state = (t, dirs, b, hidden), (dirs, b, hidden)
    return [Facts(x.elem, y), *(Facts(x.elem, state) for _ in n.outputs[1:])]


@rule("If")
def _if(n, ins):
    """Each output's element type when both branches declare the same tensor type. No
    shape: the branches may produce different ones, and declared shapes are only hints."""
    then_g, else_g = n.attrs.get("then_branch"), n.attrs.get("else_branch")
    malformed = not isinstance(then_g, Graph) or not isinstance(else_g, Graph)
    if malformed or len(then_g.outputs) != len(else_g.outputs):
        return [Facts() for _ in n.outputs]  # validation names the bad attribute
    outs = []
    for a, b in zip(then_g.outputs, else_g.outputs, strict=True):
        same = isinstance(a.type, TensorType) and isinstance(b.type, TensorType)
        same = same and a.type.elem_type == b.type.elem_type
        outs.append(Facts(a.type.elem_type) if same else Facts())
    return outs
