"""The parity zoo in the differential harness (tests/differential): every tiny model of
models/build_models.py, and the BERT-base-shaped and MiniLM-L6 sentence-embedding
TorchScript exports (once stopped at levels >= 2 by a wrong fused shape rule), run at
level 0 and at levels 1, 2, 99 with ONNXEXEC_CHECK_SHAPES=1: each level gives level 0's
outputs and onnxruntime's within rtol 1e-4, atol 1e-5 (other kernels, other summation
orders), on the sidecar inputs and at another batch / sequence length."""

from __future__ import annotations

import numpy as np
import pytest

import onnxexec
from onnxexec.runtime import shape_check

pytestmark = pytest.mark.slow

LEVELS = (1, 2, 99)
RTOL, ATOL = 1e-4, 1e-5
ZOO = [
    (m, e)
    for m in ("bert", "gpt2", "llama", "vit", "resnet", "mobilenetv2")
    for e in ("torchscript", "dynamo")
] + [("bert_base", "torchscript"), ("minilm", "torchscript")]


def _run(path: str, level: int, feeds: dict[str, np.ndarray]) -> tuple[list, object]:
    sess = onnxexec.InferenceSession(path, onnxexec.SessionOptions(graph_optimization_level=level))
    return sess.run(None, feeds), sess


@pytest.mark.parametrize(("model_name", "exporter"), ZOO)
def test_levels_match_level_0(
    model_name: str, exporter: str, tiny_models, ort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(shape_check.ENV, "1")
    m = tiny_models.get(model_name, exporter)
    path = str(m.path)
    ref_sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref_sess.get_outputs()]
    for feeds in (m.inputs, m.alt_inputs):
        want = ref_sess.run(None, feeds)
        base, _ = _run(path, 0, feeds)
        for name, b, w in zip(names, base, want, strict=True):
            np.testing.assert_allclose(b, w, rtol=RTOL, atol=ATOL, err_msg=f"level 0 {name}")
        for level in LEVELS:
            got, sess = _run(path, level, feeds)
            for name, g, b, w in zip(names, got, base, want, strict=True):
                label = f"{model_name}/{exporter} level {level} {name}"
                assert g.dtype == b.dtype and g.shape == b.shape, label
                np.testing.assert_allclose(g, b, rtol=RTOL, atol=ATOL, err_msg=label)
                np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=label + " vs ort")
    fused = {n.op_type for n in sess.optimized_graph.nodes}
    if model_name == "bert_base":
        assert {"FusedAttention", "FusedLayerNorm", "FusedElementwise"} <= fused, sorted(fused)
    if model_name == "minilm":  # its attention is not matched (yet): no FusedAttention
        assert {"FusedLayerNorm", "FusedElementwise"} <= fused, sorted(fused)
