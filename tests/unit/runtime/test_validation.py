"""Invalid models end in one clear OnnxExecError at session creation, and onnxruntime
refuses each of them too (the oracle: we are no stricter than it on these families,
and no more lenient). Valid near misses load in both."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnxexec
from onnxexec.errors import OnnxExecError
from tests.unit.runtime.invalid_models import FAMILIES, INFERRED, ORT_FAILS_AT_RUN, VALID

ort.set_default_logger_severity(4)  # the expected refusals would flood the log


def _feeds(model: bytes) -> dict[str, np.ndarray]:
    """Zeros of each graph input's declared type and shape."""
    m = onnx.load_from_string(model)
    inits = {t.name for t in m.graph.initializer}
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        feeds[vi.name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
    return feeds


def _ort_refuses(name: str, model: bytes) -> None:
    if name not in ORT_FAILS_AT_RUN:
        with pytest.raises(Exception):  # noqa: B017 - any onnxruntime error
            ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        return
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):  # noqa: B017
        sess.run(None, _feeds(model))


@pytest.mark.parametrize("name", sorted(FAMILIES) + sorted(INFERRED))
def test_invalid_model_is_refused_by_both(name: str) -> None:
    build, words = FAMILIES.get(name) or INFERRED[name]
    model = build()
    _ort_refuses(name, model)
    with pytest.raises(OnnxExecError) as info:
        onnxexec.InferenceSession(model)
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{name}: {w!r} missing from: {msg}"
    for n in onnx.load_from_string(model).graph.node:
        if f"node '{n.name}' (" in msg:  # a node's problem names its op and opset
            assert f"node '{n.name}' ({n.op_type}, opset " in msg, msg


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_near_miss_loads_in_both(name: str) -> None:
    model = VALID[name]()
    feeds = _feeds(model)
    if "n" in feeds:
        feeds["n"] = np.array(3, np.int64)
    expected = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxexec.InferenceSession(model).run(None, feeds)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("as_proto", [False, True])
def test_inference_also_checks_files_and_protos(tmp_path, as_proto: bool) -> None:
    """The strict-inference step reads the model's bytes from a path or a ModelProto
    too (the other families are caught on the loaded graph, whatever the source)."""
    model = INFERRED["gather_axis_out_of_range"][0]()
    path = tmp_path / "bad.onnx"
    path.write_bytes(model)
    source = onnx.load_from_string(model) if as_proto else str(path)
    with pytest.raises(OnnxExecError, match=r"node 'g0' \(Gather, opset 17\).*axis"):
        onnxexec.InferenceSession(source)
