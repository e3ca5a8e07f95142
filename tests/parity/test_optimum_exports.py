"""optimum's exports (models/build_optimum.py, built with its own venv because
optimum-onnx pins transformers<4.58): level 0 and level 99 give onnxruntime's outputs,
and the attention blocks fuse. Runs when ONNXEXEC_OPTIMUM_DIR names the directory
build_optimum.py wrote (tiny size); skipped otherwise, since the test venv cannot
build these exports itself."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import onnxexec

pytestmark = pytest.mark.slow

# name -> FusedAttention nodes the tiny export must have (2 layers; Whisper's decoder
# has self- and cross-attention per layer)
ATTENTION = {
    "bert": 2,
    "gpt2": 2,
    "gpt2_past": 2,
    "llama": 2,
    "llama_past": 2,
    "vit": 2,
    "whisper_enc": 2,
    "whisper_dec": 4,
}


def _dir() -> Path:
    d = os.environ.get("ONNXEXEC_OPTIMUM_DIR")
    if not d or not Path(d).is_dir():
        pytest.skip("ONNXEXEC_OPTIMUM_DIR unset: run models/build_optimum.py (own venv) first")
    return Path(d)


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_optimum_export_fuses_and_matches_onnxruntime(name: str, ort) -> None:
    path = _dir() / f"{name}_optimum.onnx"
    if not path.exists():
        pytest.skip(f"{path.name} not built (build_optimum.py --only failed or was narrowed)")
    with np.load(path.with_name(path.stem + ".inputs.npz")) as z:
        feeds = {k: z[k] for k in z.files}
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = ref.run(None, feeds)
    for level in (0, 99):
        so = onnxexec.SessionOptions(graph_optimization_level=level)
        sess = onnxexec.InferenceSession(str(path), so)
        got = sess.run(None, feeds)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            label = f"{name} level {level} output {i}"
            assert g.shape == w.shape, label
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=label)
        if level == 99:
            ops = [n.op_type for n in sess.optimized_graph.nodes]
            assert ops.count("FusedAttention") == ATTENTION[name], (name, sorted(set(ops)))
