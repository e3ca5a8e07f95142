"""Models made by onnxruntime's transformer optimizer (bert, gpt2, vit, bart and t5
encoders: com.microsoft Attention, EmbedLayerNormalization, SkipLayerNormalization,
SkipSimplifiedLayerNormalization, BiasGelu, FastGelu...) run in onnxexec
with onnxruntime's outputs (rtol 1e-4), at onnxexec's default graph optimization level
and at level 0. The models come from models/build_ort_optimized.py (our torch exports,
random weights), built once per session; ONNXEXEC_PARITY_MODELS=DIR keeps them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onnxexec

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-4, 1e-5
# job -> contrib ops the optimizer must have fused (the test fails if it stops fusing)
JOBS = {
    "bert@default": {"Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu"},
    "bert@0": {"Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu"},
    "gpt2@default": {"SkipLayerNormalization", "FastGelu"},
    "gpt2@0": {"SkipLayerNormalization", "FastGelu"},
    "vit@default": {"SkipLayerNormalization", "BiasGelu"},
    "bart@default": {"SkipLayerNormalization", "BiasGelu"},
    # SimplifiedLayerNormalization: onnxruntime's default-domain RMS norm
    "t5@default": {"SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization"},
    # onnxruntime's own extended-level rewrites (only_onnxruntime=True)
    "bart@ort": {"FusedMatMul", "BiasGelu"},
    "gpt2@ort": {"FusedMatMul", "FastGelu"},
    # FusionOptions use_multi_head_attention + enable_gelu_approximation
    "bert@mha": {"MultiHeadAttention", "EmbedLayerNormalization", "FastGelu"},
}


@pytest.fixture(scope="session")
def ort_optimized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("onnxruntime.transformers.optimizer")
    env = os.environ.get("ONNXEXEC_PARITY_MODELS")
    root = Path(env) / "ort_optimized" if env else tmp_path_factory.mktemp("ort_optimized")
    cmd = [sys.executable, str(REPO / "models" / "build_ort_optimized.py"), str(root)]
    proc = subprocess.run([*cmd, "--only", *JOBS], capture_output=True, text=True, cwd=REPO)
    manifest = json.loads((root / "manifest.json").read_text())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root, manifest


@pytest.mark.parametrize("job", sorted(JOBS))
def test_optimized_model_matches_onnxruntime(job: str, ort_optimized) -> None:
    ort = pytest.importorskip("onnxruntime")
    root, manifest = ort_optimized
    entry = manifest[f"{job}:tiny"]
    path = root / entry["file"]
    fused = {k.removeprefix("com.microsoft::") for k in entry["op_types"]}
    assert JOBS[job] <= fused, f"{job}: the optimizer no longer emits {JOBS[job] - fused}"
    with np.load(root / entry["inputs"]) as z:
        feeds = {k: z[k] for k in z.files}
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = ref.run(None, feeds)
    for level in (None, 0):
        so = onnxexec.SessionOptions()
        if level is not None:
            so.graph_optimization_level = level
        got = onnxexec.InferenceSession(str(path), so).run(None, feeds)
        for out, g, w in zip(ref.get_outputs(), got, want, strict=True):
            label = f"{job} onnxexec level {level or 'default'} {out.name}"
            assert g.dtype == w.dtype and g.shape == w.shape, label
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=label)
