"""native/launch.py: a FusedConv node's one native job recorded on its first call and
replayed on later calls with new input / output / residual addresses, checked against
a float64 numpy conv on every call; the calls that must not replay (a temporary input
copy, a KxK direct conv's scratch planes, several jobs, an input also read as the
residual, one thread, another thread count, the same weight under other attributes).
The recordings live in the node's prepared state (ops/fused_linear.ConvState), which a
session's plan owns: built here with the op's prepare hook, as the planner does."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest

from onnxexec.kernels.conv import direct_job
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_taps import to_ohwi
from onnxexec.native import parallel
from onnxexec.native.launch import Replay, recording
from onnxexec.ops.fused_linear import ConvState, fused_conv, prepare_conv
from tests.unit.kernels.conv.test_conv_taps import _reference


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def two_threads():
    old = parallel.num_threads()
    parallel.set_num_threads(2)
    yield
    parallel.set_num_threads(old)


def _want(x, w, b, s, p, group, act, z=None):
    ref, _ = _reference(x, w, b, s, p, (1, 1), group)
    if z is not None:
        ref = ref + z
    return np.clip(ref, 0.0, 6.0) if act == "Clip" else ref


def _state(w, b) -> ConvState:
    return prepare_conv((None, w, b), {})


def _conv(x, w, b, s, p, group, act, z=None, st=None):
    k = w.shape[2:]
    return fused_conv(
        x, w, b, z, group=group, kernel_shape=k, pads=p, strides=s, dilations=(1, 1),
        activation=act, alpha=0.0, beta=6.0, prepared=st,
    )  # fmt: skip


# KxK convs are one native job only on the AVX-512 direct path (direct_job): below that
# ISA level (ONNXEXEC_ISA=avx2 / generic, or such a host) they take im2col / tap paths
# made of several jobs or Python-side work, which by design never replay.
_NEEDS_DIRECT = "the KxK direct conv job needs AVX-512 (avx512f); other paths don't replay"

# (input shape, weight shape, strides, pads, group): MobileNetV2's kinds of node
NODES = [
    ((1, 96, 14, 14), (96, 1, 3, 3), (1, 1), (1, 1, 1, 1), 96),  # depthwise job
    ((1, 144, 28, 28), (144, 1, 3, 3), (2, 2), (1, 1, 1, 1), 144),  # stride-2 depthwise
    ((1, 64, 14, 14), (384, 64, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # packed 1x1 job
    ((1, 160, 7, 7), (960, 160, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # pixel x channel 1x1 job
    ((1, 32, 56, 56), (24, 32, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # direct 1x1 job
    ((1, 320, 28, 28), (320, 320, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # OpenBLAS 1x1 job
    ((1, 64, 20, 20), (96, 64, 3, 3), (1, 1), (1, 1, 1, 1), 1),  # direct 3x3: refilled planes
    ((1, 3, 64, 64), (32, 3, 7, 7), (2, 2), (3, 3, 3, 3), 1),  # the 7x7 stride-2 stem
]


@pytest.mark.parametrize("xs,ws,s,p,group", NODES)
@pytest.mark.parametrize("residual", [False, True])
def test_replayed_node_matches_reference(two_threads, xs, ws, s, p, group, residual):
    w, b = _rand(*ws, seed=1), _rand(ws[0], seed=2)
    if ws[2] > 1 and group == 1:  # stored OHWI, as passes/conv_layout.py does
        w = to_ohwi(w)
    out_shape = _want(_rand(*xs), w, b, s, p, group, "").shape
    st = _state(w, b)
    for call in range(3):  # record, then replay twice with new arrays
        x = _rand(*xs, seed=10 + call)
        z = _rand(*out_shape, seed=20 + call) if residual else None
        got = _conv(x, w, b, s, p, group, "Clip", z, st)
        np.testing.assert_allclose(got, _want(x, w, b, s, p, group, "Clip", z), atol=2e-4)
    if ws[2] > 1 and group == 1 and not direct_job.AVAILABLE:
        pytest.skip(_NEEDS_DIRECT)  # the results above were still checked
    hit = st.replays[xs]
    assert hit is not None
    assert (hit.slots[2] >= 0) == residual


@pytest.mark.parametrize(
    "xs,ws,s,p,group",
    [
        ((1, 64, 28, 28), (128, 64, 1, 1), (2, 2), (0, 0, 0, 0), 1),  # subsampled copy
        # (an OIHW 3x3 weight is no longer a case: its ConvState makes a one-time OHWI
        # copy, ops/fused_linear.py weight_for, so it takes the replayable direct path)
        ((2, 96, 14, 14), (96, 1, 3, 3), (1, 1), (1, 1, 1, 1), 96),  # a job per image
    ],
)
def test_unreplayable_nodes_stay_on_their_path(two_threads, xs, ws, s, p, group):
    w, b = _rand(*ws, seed=1), _rand(ws[0], seed=2)
    st = _state(w, b)
    for call in range(2):
        x = _rand(*xs, seed=10 + call)
        got = _conv(x, w, b, s, p, group, "Clip", None, st)
        np.testing.assert_allclose(got, _want(x, w, b, s, p, group, "Clip"), atol=2e-4)
    assert st.replays.get(xs) is None  # absent (no native job ran) or not replayable


def test_input_also_the_residual_is_not_replayed(two_threads):
    x, w, b = _rand(1, 64, 14, 14), _rand(64, 1, 3, 3, seed=1), _rand(64, seed=2)
    st = _state(w, b)
    for _ in range(2):
        got = _conv(x, w, b, (1, 1), (1, 1, 1, 1), 64, "", x, st)
        np.testing.assert_allclose(got, _want(x, w, b, (1, 1), (1, 1, 1, 1), 64, "", x), atol=2e-4)
    assert x.shape in st.replays and st.replays[x.shape] is None


def test_same_weight_other_attributes(two_threads):
    """Two nodes sharing one weight: each has its own state, so the second's activation
    is not the first's replayed."""
    x, w, b = _rand(1, 160, 7, 7), _rand(960, 160, 1, 1, seed=1), _rand(960, seed=2)
    p = (0, 0, 0, 0)
    states = {"Clip": _state(w, b), "": _state(w, b)}
    for act in ("Clip", "", "Clip", ""):
        got = _conv(x, w, b, (1, 1), p, 1, act, None, states[act])
        np.testing.assert_allclose(got, _want(x, w, b, (1, 1), p, 1, act), atol=2e-4)


def test_another_weight_than_the_planned_one_is_not_replayed(two_threads):
    """A state only serves the constants it was prepared for."""
    x, w, b = _rand(1, 160, 7, 7), _rand(960, 160, 1, 1, seed=1), _rand(960, seed=2)
    st, p = _state(w, b), (0, 0, 0, 0)
    _conv(x, w, b, (1, 1), p, 1, "Clip", None, st)
    w2 = _rand(960, 160, 1, 1, seed=7)
    got = _conv(x, w2, b, (1, 1), p, 1, "Clip", None, st)
    np.testing.assert_allclose(got, _want(x, w2, b, (1, 1), p, 1, "Clip"), atol=2e-4)


def test_thread_count_change_takes_the_full_path(two_threads):
    x, w, b = _rand(1, 160, 7, 7), _rand(960, 160, 1, 1, seed=1), _rand(960, seed=2)
    p = (0, 0, 0, 0)
    st = _state(w, b)
    _conv(x, w, b, (1, 1), p, 1, "Clip", None, st)
    assert st.replays[x.shape] is not None
    for n in (1, 3):
        parallel.set_num_threads(n)
        got = _conv(x, w, b, (1, 1), p, 1, "Clip", None, st)
        np.testing.assert_allclose(got, _want(x, w, b, (1, 1), p, 1, "Clip"), atol=2e-4)


def test_recording_sees_every_job_and_only_marked_ones_replay(two_threads):
    """Every native job is recorded (None unless its site marks it replayable), nested
    recordings pass theirs on, and Replay.of wants exactly one job with the call's
    addresses."""
    x, w = _rand(1, 160, 7, 7), _rand(960, 160, 1, 1, seed=1)
    y = np.empty((1, 960, 7, 7), dtype=np.float32)
    with recording() as outer:
        with recording() as jobs:
            y = conv2d(x, w, None, (1, 1), (0, 0), (1, 1), 1, (7, 7))
            conv2d(x, w, None, (1, 1), (0, 0), (1, 1), 1, (7, 7))
    assert len(jobs) == 2 and all(j is not None for j in jobs)
    assert len(outer) == 2
    assert Replay.of(jobs, x, y, None) is None  # two jobs
    assert Replay.of([None], x, y, None) is None
    assert Replay.of([jobs[0]], x, y, None) is not None
    assert Replay.of([jobs[1]], x, y, None) is None  # another output's address


@pytest.mark.skipif(not direct_job.AVAILABLE, reason=_NEEDS_DIRECT)
def test_a_direct_kxk_job_replays_from_its_own_planes(two_threads):
    ws = to_ohwi(_rand(32, 16, 3, 3, seed=1))
    x = _rand(1, 16, 20, 20)
    with recording() as jobs:  # a KxK direct conv: its job reads its own phase planes
        y = conv2d(x, ws, None, (1, 1), (1, 1), (1, 1), 1, (20, 20))
    assert len(jobs) == 1 and jobs[0].prep is not None
    replay = Replay.of(jobs, x, y, None)
    assert replay is not None and replay.slots[0] == -1  # x itself is not read
    y2 = np.empty_like(y)
    x2 = _rand(1, 16, 20, 20, seed=5)
    assert replay.run(x2, y2, None)
    want, _ = _reference(x2, ws, None, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    np.testing.assert_allclose(y2, want, atol=2e-4)
    conv2d(x, ws, None, (1, 1), (1, 1), (1, 1), 1, (20, 20))  # unrecorded: thread scratch
    with recording() as jobs:
        conv2d(x, ws, None, (1, 1), (1, 1), (1, 1), 1, (20, 20))
    assert jobs[0].args[0] != replay.args[0]  # a recorded call splits into planes of its own


def _conv_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(_rand(32, 16, 1, 1, seed=1), "w")
    b = numpy_helper.from_array(_rand(32, seed=2), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["c"])
    relu = helper.make_node("Relu", ["c"], ["y"])
    graph = helper.make_graph(
        [node, relu],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 7, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 7, 7])],
        [w, b],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_sessions_conv_state_goes_with_the_session(two_threads, tmp_path):
    """The plan owns each FusedConv's state (recorded job, packed panels): a discarded
    session frees it and the weights it holds; no module-level cache keeps them."""
    import onnxexec

    _conv_model(tmp_path / "c.onnx")
    s = onnxexec.InferenceSession(str(tmp_path / "c.onnx"))
    x = _rand(1, 16, 7, 7, seed=3)
    for _ in range(2):
        y = s.run(None, {"x": x})[0]
    w, b = _rand(32, 16, 1, 1, seed=1), _rand(32, seed=2)
    want, _ = _reference(x, w, b, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    np.testing.assert_allclose(y, np.maximum(want, 0), atol=2e-4)
    states = [st.kwargs["prepared"] for st in s._plan.steps if st.node.op_type == "FusedConv"]
    assert len(states) == 1 and isinstance(states[0], ConvState)
    gone = weakref.ref(states[0])
    weight = weakref.ref(states[0].w)
    del s, states
    gc.collect()
    assert gone() is None and weight() is None
