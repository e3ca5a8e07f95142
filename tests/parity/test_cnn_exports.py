"""The CNN exports of issue 26 against onnxruntime, at onnxexec's default level (99)
and at level 0: transformers' MobileNetV2 (explicit Pad + Clip nodes), a head whose
convs read Resize outputs, and tf2onnx-style NHWC rewrites (Transposes around every
Conv) of four CNNs; each from TorchScript, dynamo and (where made) the nhwc rewrite.
Also that the fusions fired: no Pad, Clip or Transpose between convs is left.

Models are built by models/build_models.py once per session (tests/parity/conftest.py).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import onnxexec
from tests.parity.test_models_ort import assert_outputs_close

pytestmark = pytest.mark.slow

CASES = [
    (name, exporter)
    for name in ("mobilenetv2_hf", "upsample_head")
    for exporter in ("torchscript", "dynamo", "nhwc")
] + [("mobilenetv2", "nhwc"), ("resnet", "nhwc")]


def _session(path, level: int):
    o = onnxexec.SessionOptions()
    o.graph_optimization_level = level  # type: ignore[assignment]
    return onnxexec.InferenceSession(str(path), o)


@pytest.mark.parametrize(("model_name", "exporter"), CASES)
def test_cnn_export_matches_onnxruntime(
    model_name: str, exporter: str, tiny_models, ort, parity_report
) -> None:
    m = tiny_models.get(model_name, exporter)
    ref = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    for level in (99, 0):
        sess = _session(m.path, level)
        worst = 0.0
        for feed in (m.inputs, m.alt_inputs):
            want = ref.run(None, feed)
            got = sess.run(None, feed)
            worst = max(worst, assert_outputs_close(names, got, want, f"{m.path.name} L{level}"))
            assert max(float(np.abs(w).max()) for w in want) > 1e-3  # not a vanishing output
        parity_report(f"{model_name}/{exporter}/level{level}", max_abs_diff=worst)
        if level == 99:
            kinds = Counter(n.op_type for n in sess.optimized_graph.nodes)
            assert kinds["Pad"] == kinds["Clip"] == kinds["Add"] == 0, kinds
            assert kinds["Transpose"] <= 1, kinds  # the NHWC input's own
            assert kinds["FusedConv"] > 0 and kinds["Conv"] == 0, kinds
