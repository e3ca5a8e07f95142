"""Fused kernels compute what the graph they replace computes, overflow, NaN and inf
included: each pattern at every level against level 0 and onnxruntime (no fusions)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import ModelProto, helper
from onnx.reference import ReferenceEvaluator

from tests.unit.passes._levels import fused_ops, model, run_levels

node = helper.make_node
D = 8


def c(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


SC, B = c(np.linspace(0.5, 1.5, D)), c(np.linspace(-1.0, 1.0, D))
ROWS = c(
    [
        [1, 2, 3, 4, 5, 6, 7, 8],
        [3e19, -3e19, 1, 2, 3, 4, 5, 6],  # d^2 overflows: variance inf, y = bias
        [1e19, 2e19, -1e19, 5, 1, 1, 1, 1],
        [3e38, 3e38, 1, 1, 1, 1, 1, 1],  # the sum overflows: mean inf, y NaN
        [-3e38, -3e38, 1, 1, 1, 1, 1, 1],
        [np.inf, 1, 2, 3, 4, 5, 6, 7],
        [np.nan, 1, 2, 3, 4, 5, 6, 7],
        [1e18, 2e18, 3e18, 4e18, -1e18, 0, 0, 0],  # large but finite statistics
    ]
)
_BIG = [-3e38, -1e30, -1e20, -7e12, -10, -1, 0, 1, 10, 7e12, 1e20, 1e30, 2e38, 3e38]
GELU_X = c([-np.inf, *_BIG, np.inf, np.nan]).reshape(1, -1)


def _layernorm_op() -> ModelProto:
    return model(
        [node("LayerNormalization", ["x", "sc", "b"], ["y"], axis=-1)],
        [("x", ROWS.shape)],
        ["y"],
        {"sc": SC, "b": B},
    )


def _layernorm_decomposed(reciprocal: bool) -> ModelProto:
    tail = (
        [node("Reciprocal", ["sd"], ["inv"]), node("Mul", ["d", "inv"], ["nrm"])]
        if reciprocal
        else [node("Div", ["d", "sd"], ["nrm"])]
    )
    return model(
        [
            node("ReduceMean", ["x"], ["m"], axes=[-1]),
            node("Sub", ["x", "m"], ["d"]),
            node("Pow", ["d", "two"], ["d2"]),
            node("ReduceMean", ["d2"], ["v"], axes=[-1]),
            node("Add", ["v", "eps"], ["ve"]),
            node("Sqrt", ["ve"], ["sd"]),
            *tail,
            node("Mul", ["nrm", "sc"], ["s1"]),
            node("Add", ["s1", "b"], ["y"]),
        ],
        [("x", ROWS.shape)],
        ["y"],
        {"sc": SC, "b": B, "two": c(2.0), "eps": c(1e-5)},
    )


def _rmsnorm_decomposed() -> ModelProto:
    return model(
        [
            node("Pow", ["x", "two"], ["x2"]),
            node("ReduceMean", ["x2"], ["v"], axes=[-1]),
            node("Add", ["v", "eps"], ["ve"]),
            node("Sqrt", ["ve"], ["sd"]),
            node("Div", ["one", "sd"], ["inv"]),
            node("Mul", ["x", "inv"], ["nrm"]),
            node("Mul", ["sc", "nrm"], ["y"]),
        ],
        [("x", ROWS.shape)],
        ["y"],
        {"sc": SC, "two": c(2.0), "eps": c(1e-6), "one": c(1.0)},
    )


def _skip_layernorm() -> ModelProto:
    return model(
        [
            node("Add", ["x", "r"], ["s"]),
            node("LayerNormalization", ["s", "sc", "b"], ["y"], axis=-1),
            node("Identity", ["s"], ["s_out"]),
        ],
        [("x", ROWS.shape), ("r", ROWS.shape)],
        ["y", "s_out"],
        {"sc": SC, "b": B},
    )


def _gelu(form: str) -> ModelProto:
    erf = [
        node("Div", ["x", "s2"], ["a"]),
        node("Erf", ["a"], ["e"]),
        node("Add", ["e", "one"], ["p"]),
    ]
    half = {
        "x_p_half": [node("Mul", ["x", "p"], ["q"]), node("Mul", ["q", "half"], ["y"])],
        "p_half_x": [node("Mul", ["p", "half"], ["q"]), node("Mul", ["q", "x"], ["y"])],
        "x_half_p": [node("Mul", ["x", "half"], ["q"]), node("Mul", ["q", "p"], ["y"])],
    }
    if form != "tanh":
        return model(
            [*erf, *half[form]],
            [("x", GELU_X.shape)],
            ["y"],
            {"s2": c(1.4142135), "one": c(1.0), "half": c(0.5)},
        )
    if form == "tanh":
        nodes = [
            node("Pow", ["x", "three"], ["x3"]),
            node("Mul", ["x3", "k"], ["kx3"]),
            node("Add", ["x", "kx3"], ["in"]),
            node("Mul", ["in", "r"], ["ri"]),
            node("Tanh", ["ri"], ["t"]),
            node("Add", ["t", "one"], ["p"]),
            *half["x_p_half"],
        ]
        inits = {"three": c(3.0), "k": c(0.044715), "r": c(0.7978845608), "one": c(1.0)}
        inits["half"] = c(0.5)
    return model(nodes, [("x", GELU_X.shape)], ["y"], inits)


def _matmul_gelu() -> ModelProto:
    # the Gelu becomes FusedMatMul's epilogue: the same semantics must hold there
    # (x0 (n, 1) @ [[1]]: one element per row, so inf / NaN stay where they are)
    m = _gelu("x_p_half")
    g = m.graph
    g.node.insert(0, node("MatMul", ["x0", "w"], ["x"]))
    g.input[0].CopyFrom(helper.make_tensor_value_info("x0", 1, [GELU_X.size, 1]))
    g.initializer.append(helper.make_tensor("w", 1, (1, 1), [1.0]))
    return m


def _attention() -> ModelProto:
    return model(
        [
            node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            node("MatMul", ["q", "kt"], ["s"]),
            node("Mul", ["s", "scale"], ["ss"]),
            node("Add", ["ss", "mask"], ["sm"]),
            node("Softmax", ["sm"], ["p"], axis=-1),
            node("MatMul", ["p", "v"], ["y"]),
        ],
        [("q", [1, 2, 4, 8]), ("k", [1, 2, 4, 8]), ("v", [1, 2, 4, 8]), ("mask", [1, 1, 4, 4])],
        ["y"],
        {"scale": c(0.35355339)},
    )


def _attention_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(3))
    q[0, 0, 1] *= 1e19  # scores overflow to +-inf in float32
    q[0, 1, 2, 0] = np.nan
    k[0, 1, 3] = np.inf
    mask = np.zeros((1, 1, 4, 4), np.float32)
    mask[0, 0, 3] = -np.inf  # a fully masked row: NaN
    mask[0, 0, 0, 1:] = -np.inf
    return {"q": q, "k": k, "v": v, "mask": mask}


EXP_X = c([[-np.inf, -200, -87, -1, 0, 1, 88, 88.5, 88.7228, 88.7229, 89, np.inf, np.nan]])


def _exp_chain() -> ModelProto:
    # the fused chain's vectorized exp saturated at exp(88) (finite) where Exp is inf
    return model(
        [node("Exp", ["x"], ["e"]), node("Abs", ["e"], ["y"])],
        [("x", EXP_X.shape)],
        ["y"],
    )


def _attention_scaled_qk() -> ModelProto:
    # Q and K^T scaled separately (torch's SDPA export): Q K^T alone overflows
    return model(
        [
            node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            node("Mul", ["q", "s"], ["qs"]),
            node("Mul", ["kt", "s"], ["ks"]),
            node("MatMul", ["qs", "ks"], ["sc"]),
            node("Softmax", ["sc"], ["p"], axis=-1),
            node("MatMul", ["p", "v"], ["y"]),
        ],
        [("q", [1, 1, 2, 1]), ("k", [1, 1, 2, 1]), ("v", [1, 1, 2, 1])],
        ["y"],
        {"s": c(0.01)},
    )


def _scaled_qk_feeds() -> dict[str, np.ndarray]:
    q = c([1e20, np.nan]).reshape(1, 1, 2, 1)
    return {"q": q, "k": c([1e19, 1.0]).reshape(1, 1, 2, 1), "v": c([2.0, 3.0]).reshape(1, 1, 2, 1)}


SIG_X = c([[-103.0, -100, -95, -90, -88, -50, -1, 0, 3, 100, np.inf, np.nan]])


def _sigmoid_ratio() -> ModelProto:
    # sigmoid(x) * 1e38 is ~0.6 at x = -88: the fused sigmoid must not underflow to 0
    # before the unfused one does (x > -103: subnormal results)
    return model(
        [node("Sigmoid", ["x"], ["s"]), node("Mul", ["s", "big"], ["y"])],
        [("x", SIG_X.shape)],
        ["y"],
        {"big": c(1e38)},
    )


def _silu_matmul() -> ModelProto:
    # the SiLU epilogue of FusedMatMul: x * Sigmoid(x), as the graph writes it
    return model(
        [
            node("MatMul", ["x0", "w"], ["x"]),
            node("Sigmoid", ["x"], ["s"]),
            node("Mul", ["x", "s"], ["m"]),
            node("Div", ["m", "x"], ["y"]),
        ],
        [("x0", [SIG_X.size, 1])],
        ["y"],
        {"w": c([[1.0]])},
    )


CASES = {
    "sigmoid_ratio": (_sigmoid_ratio, lambda: {"x": SIG_X}, "FusedElementwise"),
    "silu_matmul": (_silu_matmul, lambda: {"x0": SIG_X.reshape(-1, 1)}, "FusedMatMul"),
    "attention_scaled_qk": (_attention_scaled_qk, _scaled_qk_feeds, "FusedAttention"),
    "exp_chain": (_exp_chain, lambda: {"x": EXP_X}, "FusedElementwise"),
    "layernorm_op": (_layernorm_op, lambda: {"x": ROWS}, "FusedLayerNorm"),
    "layernorm_div": (lambda: _layernorm_decomposed(False), lambda: {"x": ROWS}, "FusedLayerNorm"),
    "layernorm_recip": (lambda: _layernorm_decomposed(True), lambda: {"x": ROWS}, "FusedLayerNorm"),
    "rmsnorm": (_rmsnorm_decomposed, lambda: {"x": ROWS}, "FusedRMSNorm"),
    "skip_layernorm": (
        _skip_layernorm,
        lambda: {"x": ROWS, "r": ROWS[::-1].copy()},
        "FusedLayerNorm",
    ),
    "gelu_x_p_half": (lambda: _gelu("x_p_half"), lambda: {"x": GELU_X}, "FusedGelu"),
    "gelu_p_half_x": (lambda: _gelu("p_half_x"), lambda: {"x": GELU_X}, "FusedGelu"),
    "gelu_x_half_p": (lambda: _gelu("x_half_p"), lambda: {"x": GELU_X}, "FusedGelu"),
    "gelu_tanh": (lambda: _gelu("tanh"), lambda: {"x": GELU_X}, "FusedGelu"),
    "matmul_gelu": (_matmul_gelu, lambda: {"x0": GELU_X.reshape(-1, 1)}, "FusedMatMul"),
    "attention": (_attention, _attention_feeds, "FusedAttention"),
}


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    """float64 sigmoid rounded to float32 (subnormal where float32 has it)."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(np.float32)


def _oracle(case: str, m: ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    if case in ("sigmoid_ratio", "silu_matmul"):
        # onnxruntime's logistic clamps x to [-18, 18] (no 0 below): the spec's sigmoid
        # in float64, rounded to float32, is the oracle here
        x = next(iter(feeds.values()))
        s = _sigmoid64(x)
        with np.errstate(all="ignore"):
            return [s * c(1e38) if case == "sigmoid_ratio" else (x * s) / x]
    if case == "layernorm_op":
        # onnxruntime's LayerNormalization kernel sums x in a wider type (a float32 sum
        # that overflows gives it a finite mean); the spec's reference sums in float32
        # (stash_type 1), as level 0 and the fused kernel do
        return list(ReferenceEvaluator(m).run(None, feeds))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return list(ref.run(None, feeds))


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_equals_unfused_on_special_values(case: str) -> None:
    build, feeds_of, fused = CASES[case]
    m, feeds = build(), feeds_of()
    assert fused in fused_ops(m, 99)
    outs = run_levels(m, feeds)
    for k, r in enumerate(_oracle(case, m, feeds)):
        assert np.isnan(r).any() or np.isinf(r).any() or case.startswith("layernorm")
        for lv, ys in outs.items():
            # NaN and inf exactly where onnxruntime has them; numbers within float32 noise
            np.testing.assert_allclose(ys[k], r, rtol=2e-5, atol=1e-5, err_msg=f"level {lv}")
