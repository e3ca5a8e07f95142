"""Models as onnxruntime's quantizers emit them, run by onnxexec and by onnxruntime.

models/build_ort_quantized.py quantizes our own torch exports (BERT encoder, MobileNetV2,
ResNet, a CNN using every QLinear op, an LSTM tagger, a com.microsoft Attention layer)
with quantize_dynamic, quantize_static (QDQ and QOperator) and the MatMulNBits 4-bit
quantizer. Each result must contain the quantized ops the quantizer is expected to
emit (so the test notices when it stops emitting them), and its outputs must match
onnxruntime's at its default optimization level:

- dynamic and 4-bit models (float math on exactly reproduced integer products):
  rtol 1e-4, atol 1e-4 x the largest output magnitude;
- static models (uint8/int8 activations): within one quantization step of the
  output's DequantizeLinear scale (onnxruntime fuses QDQ groups into integer kernels
  whose rounding can differ from the float QDQ path by one step).

Models are built once per session into a temporary directory (~30 s), or reused from
ONNXEXEC_PARITY_MODELS/ort_quantized when that variable is set.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import onnxexec

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "models" / "build_ort_quantized.py"
VARIANTS = (
    "bert.dynamic",
    "bert.dynamic_per_channel",
    "attention.dynamic",
    "lstm.dynamic",
    "lstm.dynamic_per_channel",
    "mobilenetv2.static_qdq",
    "mobilenetv2.static_qdq_per_channel",
    "resnet.static_qdq_contrib",
    "mobilenetv2.static_qoperator",
    "resnet.static_qoperator_per_channel",
    "qops_cnn.static_qoperator",
    "qops_cnn.static_qdq",
    "bert.int4_b32_sym_acc0",
    "bert.int4_b64_asym_acc4",
    "bert.int4_b128_asym_acc0_gather",
    "bert.int4_b128_sym_acc4",
)


@pytest.fixture(scope="module")
def quantized(ort: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"the quantized models are built from torch exports; {mod} is missing")
    env = os.environ.get("ONNXEXEC_PARITY_MODELS")
    root = Path(env) / "ort_quantized" if env else tmp_path_factory.mktemp("ort_quantized")
    proc = subprocess.run(
        [sys.executable, str(BUILD), str(root)], capture_output=True, text=True, check=False
    )
    if proc.returncode:
        pytest.fail(f"build_ort_quantized.py failed:\n{proc.stderr[-3000:]}")
    return root, json.loads((root / "manifest.json").read_text())


def _output_step(model: onnx.ModelProto, name: str) -> float:
    """Scale of the DequantizeLinear producing graph output `name` (0 if none)."""
    inits = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if name in n.output and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            return float(np.max(numpy_helper.to_array(inits[n.input[1]])))
    return 0.0


@pytest.mark.parametrize("variant", [v for v in VARIANTS if "static_qdq" in v])
def test_qdq_groups_run_as_integer_ops(variant, quantized, tmp_path):
    # as onnxruntime's QDQ transformers: no float Conv / Gemm / MatMul is left between
    # DequantizeLinear and QuantizeLinear (passes/fuse_qdq.py)
    root, manifest = quantized
    opts = onnxexec.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    onnxexec.InferenceSession(str(root / manifest[variant]["file"]), opts)
    ops = {n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node}
    assert "QLinearConv" in ops and not ops & {"Conv", "Gemm", "MatMul", "FusedConv"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_quantized_model_matches_onnxruntime(variant, quantized, ort):
    root, manifest = quantized
    entry = manifest[variant]
    missing = set(entry["expect_ops"]) - set(entry["ops"])
    assert not missing, f"{variant}: the quantizer no longer emits {sorted(missing)}"
    path = root / entry["file"]
    with np.load(root / entry["feeds"]) as z:
        feeds = {k: z[k] for k in z.files}
    so = ort.SessionOptions()
    # onnxruntime's DynamicQuantizeLSTM quantizes per chunk of batch rows, one chunk per
    # thread (see ops/contrib/quant_rnn.py); onnxexec follows its one-thread result
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    want = ref.run(None, feeds)
    got = onnxexec.InferenceSession(str(path)).run(None, feeds)
    model = onnx.load(path, load_external_data=False)
    for out, g, w in zip(model.graph.output, got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, out.name
        if ".static" in variant:
            step = _output_step(model, out.name)
            assert step > 0, f"{variant}: output {out.name} is not dequantized"
            np.testing.assert_allclose(g, w, rtol=0, atol=step * 1.0001, err_msg=out.name)
        else:
            atol = 1e-4 * float(np.abs(w).max())
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=out.name)
