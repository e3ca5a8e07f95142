"""Per-op checks validate.py runs on every node: attribute ranges a kernel relies on
and shape agreements known before running. Each yields messages (no raising), so one
error can list every problem of a model.

Ranges follow onnx's convPoolShapeInference, which onnxruntime runs at load:
kernel_shape, strides and dilations positive, pads non-negative, each of the length
the spatial rank implies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from onnxexec.ir.graph import ONNX_DOMAIN, Node
from onnxexec.passes.shape_inference import Facts

# op -> index of the weight input (None: a pool, whose kernel is an attribute)
CONV_POOL: dict[str, int | None] = {
    "Conv": 1,
    "ConvTranspose": 1,
    "ConvInteger": 1,
    "QLinearConv": 3,
    "DeformConv": 1,
    "MaxPool": None,
    "AveragePool": None,
    "LpPool": None,
    "MaxUnpool": None,
    "MaxRoiPool": None,
}
_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_BN_PARAMS = ("scale", "B", "input_mean", "input_var")


def _shape(facts: dict[str, Facts], n: Node, k: int) -> tuple[Any, ...] | None:
    if k >= len(n.inputs) or not n.inputs[k]:
        return None
    f = facts.get(n.inputs[k])
    return None if f is None else f.shape


def _int(d: Any) -> int | None:
    return d if isinstance(d, int) else None


def _ints(v: Any) -> Sequence[int] | None:
    if isinstance(v, tuple | list) and all(isinstance(x, int) for x in v):
        return v
    return None


def check_attributes(n: Node, facts: dict[str, Facts]) -> Iterable[str]:
    if n.domain != ONNX_DOMAIN or n.op_type not in CONV_POOL:
        return
    a = n.attrs
    w_index = CONV_POOL[n.op_type]
    rank: int | None = None  # spatial rank
    kernel = _ints(a.get("kernel_shape"))
    if kernel is not None:
        rank = len(kernel)
    for k, why in ((w_index, "weight"), (0, "input")):
        if k is None:
            continue
        shape = _shape(facts, n, k)
        if shape is not None and len(shape) >= 2:
            r = len(shape) - 2
            if rank is None:
                rank = r
            elif r != rank and n.op_type != "MaxRoiPool":
                yield (
                    f"attribute kernel_shape has incorrect size {rank}: the {why} "
                    f"'{n.inputs[k]}' has {r} spatial dimension(s)"
                )
    for name, lo, length in (
        ("kernel_shape", 1, 1),
        ("strides", 1, 1),
        ("dilations", 1, 1),
        ("pads", 0, 2),
        ("output_padding", 0, 1),
    ):
        v = _ints(a.get(name))
        if v is None:
            continue
        if any(x < lo for x in v):
            what = "positive" if lo else "non-negative"
            yield f"attribute {name} must only contain {what} values, got {list(v)}"
        if rank is not None and len(v) != length * rank and name != "kernel_shape":
            yield (
                f"attribute {name} has incorrect size {len(v)}: {length * rank} for "
                f"{rank} spatial dimension(s)"
            )
    pad = a.get("auto_pad")
    if isinstance(pad, bytes):
        pad = pad.decode()
    if pad is not None and pad not in _AUTO_PAD:
        yield f"attribute auto_pad is '{pad}', not one of {list(_AUTO_PAD)}"
    group = a.get("group")
    if isinstance(group, int) and group < 1:
        yield f"attribute group must be positive, got {group}"


def check_shapes(n: Node, facts: dict[str, Facts]) -> Iterable[str]:
    if n.domain != ONNX_DOMAIN:
        return
    if n.op_type in ("Conv", "ConvTranspose"):
        yield from _conv_shapes(n, facts)
    elif n.op_type == "BatchNormalization":
        yield from _batchnorm_shapes(n, facts)
    elif n.op_type == "Reshape" and len(n.inputs) == 2:
        yield from _reshape_size(n, facts)


def _reshape_size(n: Node, facts: dict[str, Facts]) -> Iterable[str]:
    """A constant target shape for a static input must keep the element count (onnx's
    inference lets this through; onnxruntime fails the run)."""
    x, s = facts.get(n.inputs[0]), facts.get(n.inputs[1])
    if x is None or s is None or x.shape is None or s.value is None:
        return
    dims = [_int(d) for d in x.shape]
    target = s.ints()
    if target is None or any(d is None for d in dims):
        return
    size = 1
    for d in dims:
        size *= d  # type: ignore[operator]
    keep_zero = bool(n.attrs.get("allowzero", 0))
    out = [
        dims[i] if t == 0 and not keep_zero and i < len(dims) else t for i, t in enumerate(target)
    ]
    known = 1
    for t in out:
        if t is not None and t != -1:
            known *= t
    if out.count(-1) == 1 and known and size % known == 0:
        return
    if -1 not in out and known == size:
        return
    if out.count(-1) > 1:
        yield f"input shape '{n.inputs[1]}' = {list(target)} has more than one -1"
        return
    yield (
        f"input shape '{n.inputs[1]}' = {list(target)} cannot hold the {size} elements "
        f"of data '{n.inputs[0]}' {dims}"
    )


def _conv_shapes(n: Node, facts: dict[str, Facts]) -> Iterable[str]:
    x, w, b = (_shape(facts, n, k) for k in range(3))
    if w is None or len(w) < 3:
        return
    group = n.attrs.get("group", 1)
    if not isinstance(group, int) or group < 1:
        return
    c = _int(x[1]) if x is not None and len(x) >= 2 else None
    w0, w1 = _int(w[0]), _int(w[1])
    if n.op_type == "Conv":
        m = w0
        if c is not None and w1 is not None and w1 * group != c:
            yield (
                f"input W '{n.inputs[1]}' has {w1} input channel(s) per group; "
                f"X '{n.inputs[0]}' has {c} channels and group={group} (expects {c // group})"
            )
        if m is not None and m % group:
            yield f"input W '{n.inputs[1]}' has {m} output channels, not divisible by group={group}"
    else:
        m = None if w1 is None else w1 * group
        if c is not None and w0 is not None and w0 != c:
            yield f"input W '{n.inputs[1]}' has {w0} input channels, X '{n.inputs[0]}' has {c}"
    if b is not None and m is not None:
        if len(b) != 1 or (_int(b[0]) is not None and b[0] != m):
            yield f"input B '{n.inputs[2]}' has shape {list(b)}; the output has {m} channels"


def _batchnorm_shapes(n: Node, facts: dict[str, Facts]) -> Iterable[str]:
    if n.attrs.get("spatial", 1) == 0:
        return  # opsets 7-8: per-element parameters of X's non-batch shape
    x = _shape(facts, n, 0)
    c = _int(x[1]) if x is not None and len(x) >= 2 else None
    src = f"X '{n.inputs[0]}'"
    for k, param in enumerate(_BN_PARAMS, start=1):
        s = _shape(facts, n, k)
        if s is None:
            continue
        if len(s) != 1:
            yield f"input {param} '{n.inputs[k]}' must be 1-D (a value per channel): {list(s)}"
            continue
        size = _int(s[0])
        if size is None:
            continue
        if c is None:
            c, src = size, f"{param} '{n.inputs[k]}'"
        elif size != c:
            yield f"input {param} '{n.inputs[k]}' has {size} values; {src} has {c} channels"
