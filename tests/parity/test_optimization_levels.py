"""Every graph optimization level gives onnxruntime's outputs (rtol 1e-4) on the tiny
BERT and GPT-2 exports, at the sidecar and the alternative batch / sequence length, and
the optimized model saved through SessionOptions.optimized_model_filepath runs again."""

from __future__ import annotations

import numpy as np
import pytest

import onnxexec

pytestmark = pytest.mark.slow

LEVELS = (0, 1, 2, 99)
RTOL, ATOL = 1e-4, 1e-5


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
@pytest.mark.parametrize("model_name", ["bert", "gpt2"])
def test_levels_match_onnxruntime(
    model_name: str, exporter: str, tiny_models, ort, tmp_path
) -> None:
    m = tiny_models.get(model_name, exporter)
    ref = ort.InferenceSession(str(m.path), providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    for feeds in (m.inputs, m.alt_inputs):
        want = ref.run(None, feeds)
        for level in LEVELS:
            saved = tmp_path / f"l{level}.onnx"
            so = onnxexec.SessionOptions(
                graph_optimization_level=level, optimized_model_filepath=str(saved)
            )
            got = onnxexec.InferenceSession(str(m.path), so).run(None, feeds)
            same = onnxexec.SessionOptions(graph_optimization_level=level)
            again = onnxexec.InferenceSession(str(saved), same).run(None, feeds)
            for name, g, a, w in zip(names, got, again, want, strict=True):
                label = f"{model_name}/{exporter} level {level} {name}"
                assert g.dtype == w.dtype and g.shape == w.shape, label
                np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=label)
                np.testing.assert_allclose(a, g, rtol=1e-6, atol=1e-7, err_msg=label + " saved")
    fused = onnxexec.InferenceSession(str(m.path)).optimized_graph
    assert any(n.op_type == "FusedAttention" for n in fused.nodes)
