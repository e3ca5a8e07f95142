"""Random LayerNorm / RMSNorm / GELU / attention subgraphs in the forms exporters write,
and near misses that must NOT fuse: normalizing another axis, a second reader of an
intermediate, a wrong constant; the epsilon varies (it must be carried over exactly)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.differential._sub import Sub, values

EPS = (1e-5, 1e-6, 1e-12, 1e-3)


def _mean(sub: Sub, x: str, out: str, axis: int, opset: int) -> str:
    if opset >= 18:  # axes became an input
        return sub.add("ReduceMean", [x, _axes(sub, out, axis)], out)
    return sub.add("ReduceMean", [x], out, axes=[axis])


def _axes(sub: Sub, out: str, axis: int) -> str:
    name = sub.name(f"{out}_axes")
    sub.inits[name] = np.array([axis], np.int64)
    return name


def norm(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("norm", prefix)
    sub.opset = opset
    shape = tuple(
        data.draw(st.integers(1, 4), label="dim") for _ in range(data.draw(st.integers(2, 3)))
    )
    d = data.draw(st.sampled_from([1, 4, 16, 64]), label="D")
    shape = (*shape[:-1], d)
    x = sub.input("x", values(data, shape), data)
    miss = data.draw(st.sampled_from(["", "", "", "axis", "reader", "op_axis"]), label="near_miss")
    axis = -1 if miss != "axis" else -2
    eps = data.draw(st.sampled_from(EPS), label="eps")
    rms = data.draw(st.booleans(), label="rms")
    scale = sub.const(
        "scale", values(data, data.draw(st.sampled_from([(d,), (1,)])), special=False)
    )
    bias = sub.const("bias", values(data, (d,), special=False))
    if data.draw(st.booleans(), label="skip"):  # a residual Add first (skip norm)
        x = sub.add("Add", [x, sub.input("r", values(data, shape), data)], "sum")
        if data.draw(st.booleans(), label="sum_read"):
            sub.outputs.append(x)
    if data.draw(st.integers(0, 3), label="op_form") == 0:  # LayerNormalization-17
        ax = -1 if miss != "op_axis" else len(shape) - 2
        y = sub.add("LayerNormalization", [x, scale, bias], "y", axis=ax, epsilon=eps)
        sub.outputs.append(y)
        sub.tol = (1e-4, 1e-5)
        (sub.must_not if miss == "op_axis" else sub.must).add("FusedLayerNorm")
        return sub
    if rms:
        sq = (
            sub.add("Pow", [x, sub.const("two", 2.0)], "sq")
            if data.draw(st.booleans())
            else (sub.add("Mul", [x, x], "sq"))
        )
        base = x
    else:
        m = _mean(sub, x, "m", axis, sub.opset)
        base = sub.add("Sub", [x, m], "dev")
        sq = (
            sub.add("Pow", [base, sub.const("two", 2.0)], "sq")
            if data.draw(st.booleans())
            else (sub.add("Mul", [base, base], "sq"))
        )
    v = _mean(sub, sq, "var", axis, sub.opset)
    if miss == "reader":
        sub.outputs.append(v)  # the variance is read elsewhere: the pattern must stay
    ve = sub.add("Add", [v, sub.const("eps", eps)], "ve")
    sd = sub.add("Sqrt", [ve], "sd")
    form = data.draw(st.sampled_from(["div", "recip", "one_div"]), label="inv_form")
    if form == "div":
        nrm = sub.add("Div", [base, sd], "nrm")
    else:
        inv = (
            sub.add("Reciprocal", [sd], "inv")
            if form == "recip"
            else (sub.add("Div", [sub.const("one", 1.0), sd], "inv"))
        )
        nrm = sub.add("Mul", [base, inv], "nrm")
    y = sub.add("Mul", [nrm, scale], "scaled")
    if not rms:
        y = sub.add("Add", [y, bias], "y")
    sub.outputs.append(y)
    sub.tol = (1e-4, 1e-5)
    fused = "FusedRMSNorm" if rms else "FusedLayerNorm"
    (sub.must_not if miss in ("axis", "reader") else sub.must).add(fused)
    return sub


def gelu(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("gelu", prefix)
    shape = tuple(
        data.draw(st.integers(1, 5), label="dim") for _ in range(data.draw(st.integers(1, 3)))
    )
    x = sub.input("x", values(data, shape), data)
    if data.draw(st.booleans(), label="bias"):
        x = sub.add("Add", [x, sub.const("b", values(data, shape[-1:], special=False))], "xb")
    if opset >= 20 and data.draw(st.booleans(), label="gelu_op"):
        approx = data.draw(st.sampled_from(["none", "tanh"]), label="approximate")
        sub.outputs.append(sub.add("Gelu", [x], "y", approximate=approx))
        sub.tol = (1e-5, 2e-6)
        return sub  # a lone Gelu-20 keeps its exact handler: no fusion promised
    miss = data.draw(st.sampled_from(["", "", "const", "reader"]), label="near_miss")
    half = 0.5 if miss != "const" else 0.6
    if data.draw(st.booleans(), label="tanh"):
        cube = sub.add("Pow", [x, sub.const("three", 3.0)], "x3")
        inner = sub.add("Add", [x, sub.add("Mul", [cube, sub.const("k", 0.044715)], "kx3")], "in")
        p = sub.add("Tanh", [sub.add("Mul", [inner, sub.const("r", 0.7978845608)], "ri")], "t")
    else:
        p = sub.add("Erf", [sub.add("Div", [x, sub.const("sqrt2", 1.4142135)], "a")], "e")
    if miss == "reader":
        sub.outputs.append(p)
    p = sub.add("Add", [p, sub.const("one", 1.0)], "p")
    order = data.draw(st.sampled_from(["x_p_half", "p_half_x", "x_half_p"]), label="order")
    h = sub.const("half", half)
    if order == "x_p_half":
        y = sub.add("Mul", [sub.add("Mul", [x, p], "q"), h], "y")
    elif order == "p_half_x":
        y = sub.add("Mul", [sub.add("Mul", [p, h], "q"), x], "y")
    else:
        y = sub.add("Mul", [sub.add("Mul", [x, h], "q"), p], "y")
    sub.outputs.append(y)
    sub.tol = (1e-5, 2e-6)  # the kernel's erf / tanh: |error| < 1e-6
    (sub.must_not if miss else sub.must).add("FusedGelu")
    return sub


def attention(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("attention", prefix)
    b, h = data.draw(st.integers(1, 2), label="B"), data.draw(st.integers(1, 3), label="H")
    t, s, dh = (data.draw(st.integers(1, 5), label=n) for n in ("T", "S", "Dh"))
    q = sub.input("q", values(data, (b, h, t, dh)), data)
    k = sub.input("k", values(data, (b, h, s, dh)), data)
    v = sub.input("v", values(data, (b, h, s, dh)), data)
    kt = sub.add("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    miss = data.draw(st.sampled_from(["", "", "", "axis", "reader"]), label="near_miss")
    scale = float(np.float32(1.0 / np.sqrt(dh)))
    if data.draw(st.booleans(), label="scale_qk"):
        q = sub.add("Mul", [q, sub.const("sq", np.sqrt(scale))], "qs")
        kt = sub.add("Mul", [kt, sub.const("sk", np.sqrt(scale))], "kts")
        sc = sub.add("MatMul", [q, kt], "s")
    else:
        sc = sub.add("MatMul", [q, kt], "s0")
        if data.draw(st.booleans(), label="div"):
            sc = sub.add("Div", [sc, sub.const("c", 1.0 / scale)], "s")
        else:
            sc = sub.add("Mul", [sc, sub.const("c", scale)], "s")
    mshape = data.draw(st.sampled_from([None, (1, 1, t, s), (b, 1, 1, s), (t, s), (s,)]))
    if mshape is not None:
        mv = values(data, mshape, special=False)
        mv[mv < -1.0] = -np.inf  # masked positions (whole rows sometimes)
        sc = sub.add("Add", [sc, sub.input("mask", mv, data)], "sm")
    if miss == "reader":
        sub.outputs.append(sc)
    p = sub.add("Softmax", [sc], "p", axis=-1 if miss != "axis" else 2)
    sub.outputs.append(sub.add("MatMul", [p, v], "y"))
    sub.tol = (1e-4, 1e-5)
    (sub.must_not if miss else sub.must).add("FusedAttention")
    return sub
