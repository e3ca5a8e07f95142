"""If / Loop / Scan through the executor: outer-scope reads, sequence and optional
loop state, scan outputs, old-opset Scan-8. Expected values are numpy written out."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxexec.runtime.session import InferenceSession

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name: str, elem: int = F, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def seq_vi(name: str, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_sequence_value_info(name, elem, None)


def opt_vi(name: str, elem: int = F) -> onnx.ValueInfoProto:
    tp = helper.make_optional_type_proto(helper.make_tensor_type_proto(elem, None))
    return helper.make_value_info(name, tp)


def run(nodes, inputs, outputs, feeds, opset=17, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return InferenceSession(model).run(None, feeds)


def const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node(
        "Constant",
        [],
        [name],
        value=helper.make_tensor(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape, value.reshape(-1)
        ),
    )


def test_if_branches_read_outer_scope():
    # `bias` is computed in the outer graph and read only inside the branches.
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["t"])], "then", [], [vi("t")]
    )
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "bias"], ["e"])], "else", [], [vi("e")]
    )
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["bias"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for c, expected in ((True, x + x * x), (False, x - x * x)):
        (y,) = run(nodes, [vi("x", F, [3]), vi("c", B, [])], [vi("y")], {"x": x, "c": np.array(c)})
        np.testing.assert_allclose(y, expected)


def test_loop_reads_outer_scope_and_collects_scan_output():
    # acc_{i+1} = acc_i + step (step from the outer graph); scan output = acc_{i+1} * i.
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
            helper.make_node("Cast", ["i"], ["i_f"], to=F),
            helper.make_node("Mul", ["acc_out", "i_f"], ["scan"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [2])],
        [vi("cond_out", B, []), vi("acc_out", F, [2]), vi("scan", F, [2])],
    )
    nodes = [
        helper.make_node("Add", ["s0", "s0"], ["step"]),
        helper.make_node("Loop", ["m", "", "acc0"], ["acc", "scans"], body=body),
    ]
    s0 = np.array([0.5, -1.0], np.float32)
    acc0 = np.array([1.0, 2.0], np.float32)
    acc, scans = run(
        nodes,
        [vi("m", I64, []), vi("s0", F, [2]), vi("acc0", F, [2])],
        [vi("acc"), vi("scans")],
        {"m": np.array(3, np.int64), "s0": s0, "acc0": acc0},
    )
    step = 2 * s0
    expected_scans = np.stack([(acc0 + (i + 1) * step) * i for i in range(3)])
    np.testing.assert_allclose(acc, acc0 + 3 * step)
    np.testing.assert_allclose(scans, expected_scans)
    assert scans.shape == (3, 2) and scans.dtype == np.float32


def test_loop_cond_only_stops_when_body_says_so():
    # No M: run while i + 1 < 4, i.e. exactly 4 iterations.
    body = helper.make_graph(
        [
            const("one", np.array(1, np.int64)),
            const("four", np.array(4, np.int64)),
            helper.make_node("Add", ["i", "one"], ["next"]),
            helper.make_node("Less", ["next", "four"], ["cond_out"]),
            helper.make_node("Add", ["n_in", "one"], ["n_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("n_in", I64, [])],
        [vi("cond_out", B, []), vi("n_out", I64, [])],
    )
    nodes = [helper.make_node("Loop", ["", "c", "n0"], ["n"], body=body)]
    (n,) = run(
        nodes,
        [vi("c", B, []), vi("n0", I64, [])],
        [vi("n", I64)],
        {"c": np.array(True), "n0": np.array(10, np.int64)},
    )
    assert n == 14


def test_loop_zero_trips_gives_initial_state_and_empty_scan():
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
            helper.make_node("Identity", ["v_in"], ["scan"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
        [vi("cond_out", B, []), vi("v_out", F, [3]), vi("scan", F, [3])],
    )
    nodes = [helper.make_node("Loop", ["m", "", "v0"], ["v", "scans"], body=body)]
    v0 = np.arange(3, dtype=np.float32)
    v, scans = run(
        nodes,
        [vi("m", I64, []), vi("v0", F, [3])],
        [vi("v"), vi("scans")],
        {"m": np.array(0, np.int64), "v0": v0},
    )
    np.testing.assert_array_equal(v, v0)
    assert scans.shape == (0, 3) and scans.dtype == np.float32


def test_loop_with_sequence_state():
    # seq_{i+1} = SequenceInsert(seq_i, float(i) * ones(2)); starts from SequenceEmpty.
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["i_f"], to=F),
            helper.make_node("Mul", ["i_f", "ones"], ["elem"]),
            helper.make_node("SequenceInsert", ["seq_in", "elem"], ["seq_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), seq_vi("seq_in")],
        [vi("cond_out", B, []), seq_vi("seq_out")],
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["seq0"], dtype=F),
        helper.make_node("Loop", ["m", "", "seq0"], ["seq"], body=body),
        helper.make_node("ConcatFromSequence", ["seq"], ["stacked"], axis=0, new_axis=1),
    ]
    seq, stacked = run(
        nodes,
        [vi("m", I64, []), vi("ones", F, [2])],
        [seq_vi("seq"), vi("stacked")],
        {"m": np.array(3, np.int64), "ones": np.ones(2, np.float32)},
    )
    assert isinstance(seq, list) and len(seq) == 3
    np.testing.assert_array_equal(stacked, [[0, 0], [1, 1], [2, 2]])


def test_loop_with_optional_state():
    # opt starts empty; each trip counts whether it had an element, then stores float(i).
    body = helper.make_graph(
        [
            helper.make_node("OptionalHasElement", ["opt_in"], ["has"]),
            helper.make_node("Cast", ["has"], ["has_i"], to=I64),
            helper.make_node("Add", ["n_in", "has_i"], ["n_out"]),
            helper.make_node("Cast", ["i"], ["i_f"], to=F),
            helper.make_node("Optional", ["i_f"], ["opt_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), opt_vi("opt_in"), vi("n_in", I64, [])],
        [vi("cond_out", B, []), opt_vi("opt_out"), vi("n_out", I64, [])],
    )
    empty_t = helper.make_tensor_type_proto(F, None)
    nodes = [
        helper.make_node("Optional", [], ["opt0"], type=empty_t),
        helper.make_node("Loop", ["m", "", "opt0", "n0"], ["opt", "n"], body=body),
    ]
    for trips in (0, 3):
        opt, n = run(
            nodes,
            [vi("m", I64, []), vi("n0", I64, [])],
            [opt_vi("opt"), vi("n", I64)],
            {"m": np.array(trips, np.int64), "n0": np.array(0, np.int64)},
        )
        if trips == 0:
            assert opt is None and n == 0
        else:
            np.testing.assert_array_equal(opt, np.float32(trips - 1))
            assert n == trips - 1


def test_nested_if_in_loop_reads_top_level_value():
    # The If two scopes down reads `w` from the top-level graph.
    then_g = helper.make_graph(
        [helper.make_node("Add", ["v_in", "w"], ["t"])], "then", [], [vi("t")]
    )
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["v_in", "w"], ["e"])], "else", [], [vi("e")]
    )
    body = helper.make_graph(
        [
            const("two", np.array(2, np.int64)),
            helper.make_node("Mod", ["i", "two"], ["r"]),
            helper.make_node("Cast", ["r"], ["even_not"], to=B),
            helper.make_node("Not", ["even_not"], ["even"]),
            helper.make_node("If", ["even"], ["v_out"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [2])],
        [vi("cond_out", B, []), vi("v_out", F, [2])],
    )
    nodes = [helper.make_node("Loop", ["m", "", "v0"], ["v"], body=body)]
    w = np.array([1.0, 10.0], np.float32)
    (v,) = run(
        nodes,
        [vi("m", I64, []), vi("v0", F, [2]), vi("w", F, [2])],
        [vi("v")],
        {"m": np.array(5, np.int64), "v0": np.zeros(2, np.float32), "w": w},
    )
    np.testing.assert_allclose(v, w)  # +w -w +w -w +w


def _scan_body(outer: str | None = None) -> onnx.GraphProto:
    """state, x_t -> state + x_t (+ outer), and the new state as the scan output."""
    nodes = [helper.make_node("Add", ["s_in", "x_t"], ["s_mid"])]
    if outer:
        nodes.append(helper.make_node("Add", ["s_mid", outer], ["s_out"]))
    else:
        nodes.append(helper.make_node("Identity", ["s_mid"], ["s_out"]))
    nodes.append(helper.make_node("Identity", ["s_out"], ["y_t"]))
    return helper.make_graph(
        nodes,
        "body",
        [vi("s_in", F, [2]), vi("x_t", F, [2])],
        [vi("s_out", F, [2]), vi("y_t", F, [2])],
    )


def test_scan9_axes_directions_and_outer_scope():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)  # scan over axis 1 (3 steps of (2,))
    off = np.array([100.0, 200.0], np.float32)
    node = helper.make_node(
        "Scan",
        ["s0", "x"],
        ["s", "ys"],
        body=_scan_body("off"),
        num_scan_inputs=1,
        scan_input_axes=[1],
        scan_input_directions=[1],
        scan_output_axes=[-1],
        scan_output_directions=[1],
    )
    s, ys = run(
        [node],
        [vi("s0", F, [2]), vi("x", F, [2, 3]), vi("off", F, [2])],
        [vi("s"), vi("ys")],
        {"s0": np.zeros(2, np.float32), "x": x, "off": off},
    )
    state, steps = np.zeros(2, np.float32), []
    for t in (2, 1, 0):  # reversed input
        state = state + x[:, t] + off
        steps.append(state)
    expected = np.stack(steps[::-1], axis=1)  # reversed output, stacked on the last axis
    np.testing.assert_allclose(s, state)
    np.testing.assert_allclose(ys, expected)


def test_scan8_batch_axis_and_sequence_lens():
    # Opset 8: batch axis 0, sequence axis 1; the second batch entry stops after 1 step.
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    node = helper.make_node(
        "Scan", ["lens", "s0", "x"], ["s", "ys"], body=_scan_body(), num_scan_inputs=1
    )
    s, ys = run(
        [node],
        [vi("lens", I64, [2]), vi("s0", F, [2, 2]), vi("x", F, [2, 3, 2])],
        [vi("s"), vi("ys")],
        {"lens": np.array([3, 1], np.int64), "s0": np.zeros((2, 2), np.float32), "x": x},
        opset=8,
    )
    np.testing.assert_allclose(s, [x[0].sum(0), x[1, 0]])
    np.testing.assert_allclose(ys[0], np.cumsum(x[0], axis=0))
    np.testing.assert_allclose(ys[1, 0], x[1, 0])
    assert ys.shape == (2, 3, 2)
