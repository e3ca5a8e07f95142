"""Random MatMul / Gemm (+ bias) (+ activation) graphs, what fuse_matmul and
fuse_activation match: 1-D, [1], scalar, [N], [1, N], [M, N] biases on either side,
Gemm's transB / alpha / beta / C shapes, activations after, and near misses (a second
reader of the product or of the biased sum keeps those nodes)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.differential._sub import Sub, values

ACTS = ("", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid", "Silu", "Gelu")


def _activation(data: st.DataObject, sub: Sub, y: str) -> str:
    act = data.draw(st.sampled_from(ACTS), label="activation")
    if act == "":
        return y
    if act == "LeakyRelu":
        return sub.add(act, [y], "act", alpha=data.draw(st.sampled_from([0.01, 0.2])))
    if act == "HardSigmoid":
        return sub.add(act, [y], "act", alpha=0.2, beta=0.5)
    if act == "Clip":
        lo, hi = sub.const("lo", -0.5), sub.const("hi", 6.0)
        return sub.add(act, [y, lo, hi], "act")
    if act == "Silu":
        s = sub.add("Sigmoid", [y], "sig")
        return sub.add("Mul", [y, s] if data.draw(st.booleans()) else [s, y], "act")
    if act == "Gelu":  # the TorchScript export's erf form: (x * (1 + erf(x / sqrt2))) * 0.5
        a = sub.add("Div", [y, sub.const("sqrt2", 1.4142135)], "ga")
        e = sub.add("Erf", [a], "ge")
        p = sub.add("Add", [e, sub.const("one", 1.0)], "gp")
        q = sub.add("Mul", [y, p], "gq")
        return sub.add("Mul", [q, sub.const("half", 0.5)], "act")
    return sub.add(act, [y], "act")


def linear(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("linear", prefix)
    m = data.draw(st.integers(1, 4), label="M")
    k = data.draw(st.sampled_from([1, 3, 8, 17, 256]), label="K")
    n = data.draw(st.sampled_from([1, 3, 8, 17, 256]), label="N")
    gemm = data.draw(st.booleans(), label="gemm")
    if gemm:
        trans_b = data.draw(st.integers(0, 1), label="transB")
        w = sub.const("w", values(data, (n, k) if trans_b else (k, n), special=False))
        x = sub.input("x", values(data, (m, k)), data)
        attrs = {"transB": trans_b}
        if data.draw(st.booleans(), label="alpha"):
            attrs["alpha"] = data.draw(st.sampled_from([0.5, 2.0]))
        ins = [x, w]
        c_shape = data.draw(st.sampled_from([None, (n,), (1, n), (m, n), (1,), (), (m, 1)]))
        if c_shape is not None:
            ins.append(sub.const("c", values(data, c_shape, special=False)))
            attrs["beta"] = data.draw(st.sampled_from([1.0, 1.0, 0.5]))
        y = sub.add("Gemm", ins, "y", **attrs)
    else:
        lead = data.draw(st.sampled_from([(), (2,), (2, 1)]), label="batch")
        x = sub.input("x", values(data, (*lead, m, k)), data)
        w = sub.const("w", values(data, (k, n), special=False))
        y = sub.add("MatMul", [x, w], "y")
        b_shape = data.draw(st.sampled_from([None, (n,), (1,), (), (1, n), (m, n), (1, 1, n)]))
        if b_shape is not None:
            if data.draw(st.integers(0, 4), label="extra_reader") == 0:
                sub.outputs.append(y)  # the product has a second reader: no bias fusion
            b = sub.const("b", values(data, b_shape, special=False))
            y = sub.add("Add", [b, y] if data.draw(st.booleans()) else [y, b], "yb")
    if data.draw(st.integers(0, 4), label="extra_reader2") == 0:
        sub.outputs.append(y)
    sub.outputs.append(_activation(data, sub, y))
    # a different summation order: error ~ K ulps of the largest partial sum
    sub.tol = (1e-4, 2e-5 * k)
    return sub
