"""Per-op shape rules for shape_inference: shapes, element types and the symbolic
elements of shape tensors. Formulas follow the ONNX operator spec of each op."""

from __future__ import annotations

import numpy as np

from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.ir.graph import Node
from onnxexec.ir.onnx_pb import TensorProto
from onnxexec.ops.common import norm_axis
from onnxexec.passes import symdim
from onnxexec.passes.shape_inference import Facts, const_facts, rule
from onnxexec.passes.symdim import Dim

BOOL = TensorProto.BOOL
INT64 = TensorProto.INT64

_UNARY = (
    "Abs Acos Acosh Asin Asinh Atan Atanh Ceil Celu Clip Cos Cosh Elu Erf Exp Floor Gelu "
    "HardSigmoid HardSwish Identity LeakyRelu Log LogSoftmax LpNormalization Mish Neg "
    "Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softmax Softplus Softsign Sqrt "
    "Swish Tan Tanh ThresholdedRelu Trilu CumSum Hardmax InstanceNormalization "
    "MeanVarianceNormalization LRN BitwiseNot"
).split()
_BINARY = "Add Sub Mul Div Pow Mod BitShift BitwiseAnd BitwiseOr BitwiseXor PRelu".split()
_VARIADIC = "Max Min Sum Mean".split()
_COMPARE = "Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor".split()


UNKNOWN_AXES = ("?",)


def axes_of(n: Node, ins: list[Facts], k: int) -> tuple | None:
    """Axes from the attribute or input k; None when absent, UNKNOWN_AXES when given
    by an input whose value is not known here."""
    if "axes" in n.attrs:
        return tuple(n.attrs["axes"])
    if len(ins) > k and n.inputs[k]:
        v = ins[k].ints()
        return UNKNOWN_AXES if v is None else v
    return None


@rule(*_UNARY)
def _unary(n, ins):
    x = ins[0]
    return [Facts(x.elem, x.shape)]


@rule("IsNaN", "IsInf", "Not")
def _is(n, ins):
    return [Facts(BOOL, ins[0].shape)]


def _arith_sym(op: str, a: Facts, b: Facts) -> tuple[Dim, ...] | None:
    if a.sym is None or b.sym is None:
        return None
    la, lb = len(a.sym), len(b.sym)
    if la != lb and min(la, lb) != 1:
        return None
    out = []
    for x, y in zip(a.sym * (lb if la == 1 else 1), b.sym * (la if lb == 1 else 1), strict=True):
        if op == "Mul":
            out.append(symdim.mul(x, y))
        elif op == "Div" and isinstance(x, int) and isinstance(y, int) and y:
            out.append(x // y if (x >= 0) == (y > 0) or x % y == 0 else -(-x // y))
        elif op == "Div":
            q = symdim.div(x, y)
            if q is None:
                return None
            out.append(q)
        elif isinstance(x, int) and isinstance(y, int):
            out.append(x + y if op == "Add" else x - y)
        elif op in ("Add", "Sub") and y == 0:
            out.append(x)
        else:
            out.append(symdim.fresh())
    return tuple(out)


@rule(*_BINARY)
def _binary(n, ins):
    a, b = ins[0], ins[1]
    shape = None
    if a.shape is not None and b.shape is not None:
        shape = a.shape if n.op_type == "PRelu" else symdim.broadcast_shapes(a.shape, b.shape)
    sym = None
    if (
        n.op_type in ("Add", "Sub", "Mul", "Div")
        and a.elem == INT64
        and shape is not None
        and len(shape) <= 1
    ):
        sym = _arith_sym(n.op_type, a, b)
    return [Facts(a.elem, shape, sym)]


def _bcast_all(ins: list[Facts]) -> tuple[Dim, ...] | None:
    shapes = [f.shape for f in ins if f.shape is not None]
    if len(shapes) != len(ins) or not shapes:
        return None
    return symdim.broadcast_shapes(*shapes)


@rule(*_VARIADIC)
def _variadic(n, ins):
    return [Facts(ins[0].elem, _bcast_all(ins))]


def _pairs(a: Facts, b: Facts) -> list[tuple[Dim, Dim]] | None:
    if a.sym is None or b.sym is None:
        return None
    la, lb = len(a.sym), len(b.sym)
    if la != lb and min(la, lb) != 1:
        return None
    n = max(la, lb)
    return list(zip(a.sym * (n if la == 1 else 1), b.sym * (n if lb == 1 else 1), strict=True))


def _equal(x: Dim, y: Dim) -> int | None:
    if x == y:
        return 1
    if isinstance(x, int) and isinstance(y, int):
        return 0
    if (isinstance(x, int) and x < 0) or (isinstance(y, int) and y < 0):
        return 0  # a dimension is never negative
    return None


@rule(*_COMPARE)
def _compare(n, ins):
    shape = _bcast_all(ins[:2])
    sym = None
    pairs = _pairs(ins[0], ins[1]) if n.op_type == "Equal" else None
    if pairs is not None and shape is not None and len(shape) <= 1:
        eq = [_equal(x, y) for x, y in pairs]
        sym = None if None in eq else tuple(eq)
    return [Facts(BOOL, shape, sym)]


@rule("Where")
def _where(n, ins):
    shape = _bcast_all(ins)
    c, a, b = ins
    sym = None
    if c.sym is not None and symdim.is_static(c.sym) and shape is not None and len(shape) <= 1:
        pa, pb = _pairs(a, b) or [], _pairs(c, c) or []
        if pa and len(pa) in (1, len(pb)):
            pa = pa * (len(pb) if len(pa) == 1 else 1)
            cs = c.sym * (len(pa) if len(c.sym) == 1 else 1)
            if len(cs) == len(pa):
                sym = tuple(x if k else y for k, (x, y) in zip(cs, pa, strict=True))
    return [Facts(a.elem, shape, sym)]


@rule("Cast")
def _cast(n, ins):
    x = ins[0]
    to = int(n.attrs["to"])
    int_types = (TensorProto.INT32, TensorProto.INT64, TensorProto.UINT32, TensorProto.UINT64)
    sym = x.sym if to in int_types else None
    return [Facts(to, x.shape, sym)]


@rule("CastLike")
def _castlike(n, ins):
    return [Facts(ins[1].elem, ins[0].shape)]


@rule("Shape")
def _shape(n, ins):
    x = ins[0]
    if x.shape is None:
        return [Facts(INT64, None)]
    r = len(x.shape)
    start = n.attrs.get("start", 0)
    end = n.attrs.get("end", r)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    dims = x.shape[start:end]
    return [Facts(INT64, (len(dims),), tuple(dims))]


@rule("Size")
def _size(n, ins):
    x = ins[0]
    sym = None if x.shape is None else (symdim.prod(x.shape),)
    return [Facts(INT64, (), sym)]


@rule("Gather")
def _gather(n, ins):
    data, idx = ins[0], ins[1]
    axis = n.attrs.get("axis", 0)
    shape = None
    if data.shape is not None and idx.shape is not None:
        a = norm_axis(axis, len(data.shape))
        shape = data.shape[:a] + idx.shape + data.shape[a + 1 :]
    sym = None
    ii = idx.ints()
    if data.sym is not None and ii is not None and idx.shape is not None and len(idx.shape) <= 1:
        sym = tuple(data.sym[i] for i in ii)
    return [Facts(data.elem, shape, sym)]


@rule("GatherND")
def _gather_nd(n, ins):
    data, idx = ins[0], ins[1]
    bd = n.attrs.get("batch_dims", 0)
    if data.shape is None or idx.shape is None or not idx.shape:
        return [Facts(data.elem)]
    k = idx.shape[-1]
    if not isinstance(k, int):
        return [Facts(data.elem)]
    return [Facts(data.elem, idx.shape[:-1] + data.shape[bd + k :])]


@rule("Unsqueeze")
def _unsqueeze(n, ins):
    x = ins[0]
    axes = axes_of(n, ins, 1)
    if x.shape is None or axes is None or axes is UNKNOWN_AXES:
        return [Facts(x.elem)]
    r = len(x.shape) + len(axes)
    ax = sorted(norm_axis(a, r) for a in axes)
    it = iter(x.shape)
    shape = tuple(1 if i in ax else next(it) for i in range(r))
    sym = x.sym if x.sym is not None and len(shape) <= 1 else None
    return [Facts(x.elem, shape, sym)]


@rule("Squeeze")
def _squeeze(n, ins):
    x = ins[0]
    axes = axes_of(n, ins, 1)
    if x.shape is None or axes is UNKNOWN_AXES:
        return [Facts(x.elem)]
    if axes is None:
        if not symdim.is_static(x.shape):
            return [Facts(x.elem)]
        ax = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        ax = {norm_axis(a, len(x.shape)) for a in axes}
    shape = tuple(d for i, d in enumerate(x.shape) if i not in ax)
    sym = x.sym if x.sym is not None and len(shape) <= 1 else None
    return [Facts(x.elem, shape, sym)]


@rule("Concat")
def _concat(n, ins):
    if any(f.shape is None for f in ins):
        return [Facts(ins[0].elem)]
    r = len(ins[0].shape)
    a = norm_axis(n.attrs["axis"], r)
    total: Dim = 0
    for f in ins:
        d = f.shape[a]
        total = total + d if isinstance(total, int) and isinstance(d, int) else symdim.fresh()
    shape = (*ins[0].shape[:a], total, *ins[0].shape[a + 1 :])
    sym = None
    if r == 1 and all(f.sym is not None for f in ins):
        sym = tuple(d for f in ins for d in f.sym)
        shape = (len(sym),)
    return [Facts(ins[0].elem, shape, sym)]


def reshape_target(
    in_shape: tuple[Dim, ...] | None, target: tuple[Dim, ...], allowzero: int = 0
) -> tuple[Dim, ...] | None:
    """Output shape of Reshape (0 copies the input dim unless allowzero, -1 is inferred)."""
    out: list[Dim] = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if in_shape is None or i >= len(in_shape):
                return None
            out.append(in_shape[i])
        else:
            out.append(d)
    if -1 in out:
        if in_shape is None:
            return None
        known = symdim.prod([d for d in out if d != -1])
        rest = symdim.div(symdim.prod(in_shape), known)
        out = [(rest if rest is not None else symdim.fresh()) if d == -1 else d for d in out]
    return tuple(out)


@rule("Reshape")
def _reshape(n, ins):
    x, s = ins[0], ins[1]
    target = s.sym
    if target is None:
        v = s.ints()
        target = v
    if target is None:
        rank = s.shape[0] if s.shape and isinstance(s.shape[0], int) else None
        return [Facts(x.elem, None if rank is None else tuple(symdim.fresh() for _ in range(rank)))]
    shape = reshape_target(x.shape, tuple(target), n.attrs.get("allowzero", 0))
    sym = x.sym if x.sym is not None and shape is not None and len(shape) <= 1 else None
    return [Facts(x.elem, shape, sym)]


@rule("Flatten")
def _flatten(n, ins):
    x = ins[0]
    if x.shape is None:
        return [Facts(x.elem)]
    a = n.attrs.get("axis", 1)
    a = a + len(x.shape) if a < 0 else a
    return [Facts(x.elem, (symdim.prod(x.shape[:a]), symdim.prod(x.shape[a:])))]


@rule("Transpose")
def _transpose(n, ins):
    x = ins[0]
    if x.shape is None:
        return [Facts(x.elem)]
    perm = n.attrs.get("perm") or tuple(reversed(range(len(x.shape))))
    return [Facts(x.elem, tuple(x.shape[p] for p in perm))]


def _slice_dim(d: Dim, start: Dim, end: Dim, step: int) -> Dim:
    if isinstance(d, int) and isinstance(start, int) and isinstance(end, int):
        return len(range(*slice(start, end, step).indices(d)))
    if step == 1 and start == 0 and (end == d or (isinstance(end, int) and end >= 2**62)):
        return d
    if step == 1 and start == 0 and not isinstance(end, int) and isinstance(d, int):
        return end  # a symbolic bound taken as in range: a larger one would fail downstream
    return symdim.fresh()


def _slice_args(f: Facts) -> tuple[Dim, ...] | None:
    return f.sym if f.sym is not None else f.ints()


@rule("Slice")
def _slice(n, ins):
    x = ins[0]
    if "starts" in n.attrs:
        starts, ends = n.attrs["starts"], n.attrs["ends"]
        axes, steps = tuple(n.attrs.get("axes", ())), ()
    else:
        starts, ends = _slice_args(ins[1]), _slice_args(ins[2])
        axes = ins[3].ints() if len(ins) > 3 and n.inputs[3] else ()
        steps = ins[4].ints() if len(ins) > 4 and n.inputs[4] else ()
    if x.shape is None or starts is None or ends is None or axes is None or steps is None:
        return [Facts(x.elem)]  # (an axes / steps input whose value is unknown: None)
    r = len(x.shape)
    axes = axes or tuple(range(len(starts)))
    steps = steps or (1,) * len(starts)
    shape = list(x.shape)
    sym = list(x.sym) if x.sym is not None and r == 1 else None
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        a = norm_axis(a, r)
        shape[a] = _slice_dim(shape[a], s, e, st)
        if sym is not None and a == 0:
            sym = sym[slice(s, e, st)] if isinstance(s, int) and isinstance(e, int) else None
    return [Facts(x.elem, tuple(shape), tuple(sym) if sym is not None else None)]


@rule("Expand")
def _expand(n, ins):
    x, s = ins[0], ins[1]
    target = s.sym if s.sym is not None else s.ints()
    if x.shape is None or target is None:
        return [Facts(x.elem)]
    return [Facts(x.elem, symdim.broadcast_shapes(x.shape, tuple(target)))]


@rule("ConstantOfShape")
def _constant_of_shape(n, ins):
    v = n.attrs.get("value")
    elem = TensorProto.FLOAT
    if isinstance(v, np.ndarray):
        elem = onnx_dtype(v.dtype)
    s = ins[0]
    target = s.sym if s.sym is not None else s.ints()
    sym = None
    if (
        target is not None
        and len(target) == 1
        and isinstance(target[0], int)
        and target[0] <= 64
        and isinstance(v, np.ndarray)
        and v.dtype.kind in "iub"
    ):
        sym = (int(v.reshape(-1)[0]),) * target[0]
    return [Facts(elem, None if target is None else tuple(target), sym)]


@rule("Range")
def _range(n, ins):
    start, limit, delta = (f.sym[0] if f.sym and len(f.sym) == 1 else None for f in ins[:3])
    length: Dim = symdim.fresh()
    if start == 0 and delta == 1 and limit is not None:
        length = limit if not isinstance(limit, int) else max(limit, 0)
    elif isinstance(start, int) and isinstance(limit, int) and isinstance(delta, int) and delta:
        length = max(-(-(limit - start) // delta), 0)
    return [Facts(ins[0].elem, (length,))]


@rule("Split")
def _split(n, ins):
    x = ins[0]
    k = len(n.outputs)
    unknown = [Facts(x.elem)] * k
    if x.shape is None:
        return unknown
    a = norm_axis(n.attrs.get("axis", 0), len(x.shape))
    sizes = n.attrs.get("split")
    if sizes is None and len(ins) > 1 and n.inputs[1]:
        sizes = ins[1].ints()
        if sizes is None:
            return unknown  # run-time split sizes
    d = x.shape[a]
    if sizes is None:
        if not isinstance(d, int):
            return unknown
        part = -(-d // k)
        sizes = [min(part, d - i * part) for i in range(k)]
    if len(sizes) != k:
        return unknown
    return [Facts(x.elem, (*x.shape[:a], s, *x.shape[a + 1 :])) for s in sizes]


@rule("Constant")
def _constant(n, ins):
    v = n.attrs.get("value")
    if isinstance(v, np.ndarray):
        return [const_facts(v)]
    for key, dt in (("value_int", np.int64), ("value_float", np.float32)):
        if key in n.attrs:
            return [const_facts(np.array(n.attrs[key], dtype=dt))]
    for key, dt in (("value_ints", np.int64), ("value_floats", np.float32)):
        if key in n.attrs:
            return [const_facts(np.array(n.attrs[key], dtype=dt))]
    return [Facts()]
