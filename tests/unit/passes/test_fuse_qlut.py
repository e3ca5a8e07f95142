"""fuse_qlut: DQ -> per-channel float chain -> Q becomes one ChannelLut; the fused
levels must give level 0's codes exactly (the table is the chain run on every code),
and stay within one code of onnxruntime. Chains it must not take stay unfused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.unit.passes._levels import fused_ops, model, run_levels

RNG = np.random.default_rng(41)
C = 6


def _chain_model(
    xt: int, zdt: type, tail: list, tail_inits: dict, src: str = "bn", q_params: bool = False
):
    # x -> Q -> DQ -> BatchNormalization -> tail -> Q (codes as the output); with
    # q_params BN's scale and bias are DQ(int8 constants), as QDQ quantizers leave them
    pre = []
    if q_params:
        pre = [
            helper.make_node("DequantizeLinear", ["gq", "ps", "pz"], ["g"]),
            helper.make_node("DequantizeLinear", ["bq", "ps", "pz"], ["b"]),
        ]
    nodes = [
        *pre,
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("BatchNormalization", ["xd", "g", "b", "mu", "var"], ["bn"]),
        *tail,
        helper.make_node("QuantizeLinear", [src, "ys", "yz"], ["yq"]),
    ]
    inits = {
        "xs": np.array(0.04, np.float32),
        "xz": np.array(3, zdt),
        "g": RNG.uniform(0.5, 2.0, C).astype(np.float32),
        "b": RNG.normal(0, 1, C).astype(np.float32),
        "mu": RNG.normal(0, 0.5, C).astype(np.float32),
        "var": RNG.uniform(0.2, 3.0, C).astype(np.float32),
        "ys": np.array(0.03, np.float32),
        "yz": np.array(-5 if zdt is np.int8 else 10, zdt),
        **tail_inits,
    }
    if q_params:
        inits["ps"], inits["pz"] = np.array(0.02, np.float32), np.array(0, np.int8)
        inits["gq"] = RNG.integers(25, 100, C).astype(np.int8)
        inits["bq"] = RNG.integers(-100, 100, C).astype(np.int8)
        del inits["g"], inits["b"]
    return model(nodes, [("x", (2, C, 5, 7))], [("yq", xt)], inits)


TAILS = {
    "bn only": ([], {}, "bn"),
    "bn relu": ([helper.make_node("Relu", ["bn"], ["r"])], {}, "r"),
    "bn mul add clip": (
        [
            helper.make_node("Mul", ["bn", "k"], ["m"]),
            helper.make_node("Add", ["m", "a"], ["s"]),
            helper.make_node("Clip", ["s", "lo", "hi"], ["c"]),
        ],
        {
            "k": np.array(1.7, np.float32),
            "a": np.array([-0.25], np.float32),
            "lo": np.array(-1.0, np.float32),
            "hi": np.array(2.5, np.float32),
        },
        "c",
    ),
    "bn leakyrelu": ([helper.make_node("LeakyRelu", ["bn"], ["r"], alpha=0.2)], {}, "r"),
}


@pytest.mark.parametrize("q_params", [False, True])
@pytest.mark.parametrize("zdt", [np.uint8, np.int8])
@pytest.mark.parametrize("tail", list(TAILS))
def test_chain_becomes_channel_lut_exact_vs_level0(tail, zdt, q_params):
    xt = TensorProto.UINT8 if zdt is np.uint8 else TensorProto.INT8
    m = _chain_model(xt, zdt, *TAILS[tail], q_params=q_params)
    ops = fused_ops(m)
    assert "ChannelLut" in ops and "BatchNormalization" not in ops, ops
    assert "DequantizeLinear" not in ops, ops
    x = RNG.normal(0, 3, (2, C, 5, 7)).astype(np.float32)  # saturates some codes
    got = run_levels(m, {"x": x})
    for lv, (y,) in got.items():
        assert y.dtype == zdt
        np.testing.assert_array_equal(y, got[0][0], err_msg=f"level {lv}")
    ort = pytest.importorskip("onnxruntime")
    (want,) = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    diff = np.abs(got[99][0].astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1


def test_chains_it_must_not_take_stay():
    # a per-element (non-scalar) Mul constant and a second reader of the BN output
    mul = _chain_model(
        TensorProto.UINT8,
        np.uint8,
        [helper.make_node("Mul", ["bn", "k"], ["m"])],
        {"k": RNG.uniform(1, 2, (5, 7)).astype(np.float32)},
        "m",
    )
    assert "ChannelLut" not in fused_ops(mul)
    shared = _chain_model(TensorProto.UINT8, np.uint8, [], {}, "bn")
    g = shared.graph
    g.node.append(helper.make_node("Relu", ["bn"], ["extra"]))
    g.output.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, None))
    assert "ChannelLut" not in fused_ops(shared)
