"""Random window-op graphs, what fold_pad and fuse_activation match on CNNs: an optional
producer (a graph input, a Resize, a Relu), an optional explicit Pad (zero, -inf or
another value; spatial, channel or negative pads; opset 18's axes input), then Conv
(dense or depthwise) / AveragePool / MaxPool, then an activation after a Conv.

Near misses keep the Pad: a nonzero value before a Conv or AveragePool, a 0 before a
MaxPool, batch or negative pads, ceil_mode, an AveragePool with its own pads that
does not count them, a second reader of the Pad's output."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.differential._gen_linear import _activation
from tests.differential._sub import Sub, values

_FOLDED_ACTS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish"}


def _producer(data: st.DataObject, sub: Sub, x: str, opset: int) -> str:
    kind = data.draw(st.sampled_from(["input", "resize", "relu"]), label="producer")
    if kind == "relu":
        return sub.add("Relu", [x], "px")
    if kind == "resize":  # an FPN head's upsampling: nearest, x2 on the spatial axes
        scales = sub.const("scales", np.array([1, 1, 2, 2], np.float32))
        return sub.add("Resize", [x, "", scales], "up", mode="nearest")
    return x


def _pad(data: st.DataObject, sub: Sub, x: str, window: str, opset: int) -> tuple[str, bool]:
    """(the Pad's output, whether fold_pad must fold it)."""
    kind = data.draw(
        st.sampled_from(["zero", "zero", "axes", "value", "batch", "negative"]), label="pad"
    )
    if kind == "axes" and opset < 18:
        kind = "zero"
    sp = [data.draw(st.integers(0, 2), label="pad_amount") for _ in range(4)]
    if not any(sp):
        sp[0] = 1  # a zero Pad is a no-op eliminated anyway: make this one real
    value = -np.inf if window == "MaxPool" else 0.0
    ok = True
    if kind == "value":
        value = 0.0 if window == "MaxPool" else data.draw(st.sampled_from([1.0, -np.inf]))
        ok = False
    full = [0, 0, sp[0], sp[1], 0, 0, sp[2], sp[3]]
    if kind == "batch":  # a padded batch row (channels would not fit the weight)
        full[4] = 1
        ok = False
    if kind == "negative":  # crop one row at the end (after one padded at the start)
        full[2], full[6] = max(full[2], 1), -1
        ok = False
    ins = [x]
    if kind == "axes":
        ins += [sub.const_i64("pads", sp), sub.const("pv", np.float32(value))]
        ins.append(sub.const_i64("axes", [2, 3] if data.draw(st.booleans()) else [-2, -1]))
    else:
        ins += [sub.const_i64("pads", full), sub.const("pv", np.float32(value))]
    y = sub.add("Pad", ins, "pad", mode="constant")
    if data.draw(st.integers(0, 5), label="pad_reader") == 0:
        sub.outputs.append(y)  # the padded tensor is read elsewhere: the Pad stays
        ok = False
    return y, ok


def conv(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("conv", prefix)
    n, c = data.draw(st.integers(1, 2), label="N"), data.draw(st.sampled_from([1, 3, 4, 8]))
    h, w = data.draw(st.integers(3, 9), label="H"), data.draw(st.integers(3, 9), label="W")
    x = sub.input("x", values(data, (n, c, h, w), special=False), data)
    x = _producer(data, sub, x, opset)
    window = data.draw(st.sampled_from(["Conv", "Conv", "AveragePool", "MaxPool"]))
    padded = data.draw(st.booleans(), label="padded")
    folds = False
    if padded:
        x, folds = _pad(data, sub, x, window, opset)
    k = data.draw(st.sampled_from([1, 3]), label="kernel")
    s = data.draw(st.sampled_from([1, 2]), label="stride")
    own = [data.draw(st.integers(0, 1), label="own_pad") for _ in range(4)] if k > 1 else [0] * 4
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": own}
    if window == "Conv":
        depthwise = c > 1 and data.draw(st.booleans(), label="depthwise")
        m = c * data.draw(st.sampled_from([1, 2])) if depthwise else data.draw(st.integers(1, 6))
        wt = sub.const("w", values(data, (m, 1 if depthwise else c, k, k), special=False))
        ins = [x, wt]
        if data.draw(st.booleans(), label="bias"):
            ins.append(sub.const("b", values(data, (m,), special=False)))
        y = sub.add("Conv", ins, "y", group=c if depthwise else 1, **attrs)
        sub.tol = (1e-4, 2e-5 * c * k * k)
        reader = data.draw(st.integers(0, 4), label="conv_reader") == 0
        if reader:
            sub.outputs.append(y)
        act = _activation(data, sub, y)
        sub.outputs.append(act)
        sub.must.add("FusedConv")
        last = sub.nodes[-1].op_type
        earlier = {nd.op_type for nd in sub.nodes[:-1]}  # a Relu producer stays a Relu
        if act != y and not reader and last in _FOLDED_ACTS and last not in earlier:
            sub.must_not.add(last)
    else:
        ceil = data.draw(st.integers(0, 3), label="ceil_mode") == 0
        attrs["ceil_mode"] = int(ceil)
        if window == "AveragePool":
            cip = data.draw(st.integers(0, 1), label="count_include_pad")
            attrs["count_include_pad"] = cip
            if any(own) and not cip:
                folds = False
        if ceil:
            folds = False
        sub.outputs.append(sub.add(window, [x], "y", **attrs))
        sub.tol = (1e-5, 1e-6)
    if padded:
        (sub.must_not if folds else sub.must).add("Pad")
    return sub
