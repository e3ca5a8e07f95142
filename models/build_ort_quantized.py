"""Quantize our own torch exports with onnxruntime's quantization tools, offline.

    python models/build_ort_quantized.py OUT_DIR [--size tiny|full] [--only NAME ...]

Base models (random weights, exported with the TorchScript exporter at opset 17): the
BERT encoder, MobileNetV2 and ResNet of models/_specs.py, a small CNN that uses every
QLinear op the static quantizer emits (LeakyRelu, SiLU, Concat, AveragePool,
GlobalAveragePool, Gemm, Softmax), and an LSTM tagger. Each is put through
onnxruntime.quantization: quantize_dynamic (QOperator, per tensor / per channel, LSTM
-> DynamicQuantizeLSTM), quantize_static (QDQ with ai.onnx or com.microsoft Q/DQ, and
QOperator, calibrated on a few seeded random batches) and the MatMulNBits 4-bit
quantizer (block 32/64/128, symmetric or not, accuracy_level 0/4, Gather ->
GatherBlockQuantized). OUT_DIR/manifest.json lists each file with its feeds
(OUT_DIR/NAME.npz); existing files are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _onnx_export
import _specs

OPSET = 17
CALIB_BATCHES = 4


class QOpsNet(nn.Module):
    """A CNN whose static quantization uses QLinearConv, LeakyRelu, Sigmoid, Mul, Add,
    Concat, AveragePool, GlobalAveragePool, Gemm and Softmax."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, width, 3, padding=1)
        self.c2 = nn.Conv2d(width, width, 3, padding=1)
        self.c3 = nn.Conv2d(width, width, 1)
        self.pool = nn.AvgPool2d(2)
        self.fc = nn.Linear(2 * width, 10)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        a = nn.functional.leaky_relu(self.c1(pixel_values), 0.1)
        b = self.c2(a)
        b = b * torch.sigmoid(b)  # SiLU as Sigmoid + Mul
        c = self.c3(a) + b
        y = self.pool(torch.cat([b, c], dim=1))
        y = torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1)
        return torch.softmax(self.fc(y), dim=-1)


class LstmTagger(nn.Module):
    """Features (B, T, F) -> per-step class scores through a bidirectional LSTM."""

    def __init__(self, features: int, hidden: int) -> None:
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, 16)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(torch.tanh(self.inp(features)))
        return self.out(y)


def _attention_model(path: Path, size: str) -> dict[str, np.ndarray]:
    """A com.microsoft Attention layer + output projection as onnx.helper builds it
    (what the transformer optimizer fuses BERT's attention into); returns its feeds."""
    from onnx import TensorProto, helper, numpy_helper

    d, heads, seq = (32, 4, 8) if size == "tiny" else (768, 12, 128)
    rng = np.random.default_rng(0)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.normal(size=shape) * 0.1).astype(np.float32), name)

    nodes = [
        helper.make_node(
            "Attention", ["x", "qkv_w", "qkv_b", "mask"], ["a"], domain="com.microsoft",
            num_heads=heads,
        ),
        helper.make_node("MatMul", ["a", "out_w"], ["y"]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "attention",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])],
        [init("qkv_w", d, 3 * d), init("qkv_b", 3 * d), init("out_w", d, d)],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    mask = np.ones((2, seq), np.int32)
    mask[1, seq // 2 :] = 0  # right padding on the second row
    return {"x": rng.normal(size=(2, seq, d)).astype(np.float32), "mask": mask}


def _spec(name: str, size: str) -> _specs.ModelSpec:
    torch.manual_seed(0)
    tiny = size == "tiny"
    if name == "qops_cnn":
        img = _specs.TINY_IMAGE if tiny else _specs.FULL_IMAGE
        spec = _specs.ModelSpec(
            name, QOpsNet(8 if tiny else 32), ("pixel_values",), ("probs",),
            {"pixel_values": {0: "batch"}, "probs": {0: "batch"}}, _specs.image_inputs(img), 0,
        )  # fmt: skip
    elif name == "lstm":
        feats, hid, seq = (20, 16, 12) if tiny else (80, 256, 100)

        def make(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
            rng = np.random.default_rng(seed)
            return {"features": rng.normal(size=(batch, seq, feats)).astype(np.float32)}

        dyn = {0: "batch", 1: "seq"}
        spec = _specs.ModelSpec(
            name, LstmTagger(feats, hid), ("features",), ("scores",),
            {"features": dyn, "scores": dyn}, make, seq,
        )  # fmt: skip
    else:
        return _specs.make_spec(name, size)
    spec.module.eval()
    return spec


def _quiet() -> contextlib.AbstractContextManager:
    logging.getLogger().setLevel(logging.ERROR)
    return contextlib.redirect_stdout(io.StringIO())


class _Reader:
    """onnxruntime CalibrationDataReader over seeded random batches of the spec's feeds."""

    def __init__(self, spec: _specs.ModelSpec) -> None:
        self.batches = iter([spec.feeds(2, seed=100 + i) for i in range(CALIB_BATCHES)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


def _dynamic(per_channel: bool, ops: list[str] | None = None) -> Callable:
    def run(src: Path, dst: Path, spec: _specs.ModelSpec | None) -> None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(
            src, dst, op_types_to_quantize=ops, per_channel=per_channel,
            weight_type=QuantType.QInt8 if per_channel else QuantType.QUInt8,
            # contrib ops (Attention) have no onnx shape inference: say float
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )  # fmt: skip

    return run


def _static(fmt: str, per_channel: bool, contrib_qdq: bool = False) -> Callable:
    def run(src: Path, dst: Path, spec: _specs.ModelSpec | None) -> None:
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        qdq = fmt == "qdq"
        quantize_static(
            src, dst, _Reader(spec),
            quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
            per_channel=per_channel,
            # QOperator wants uint8 activations with int8 weights (onnxruntime's check)
            activation_type=QuantType.QInt8 if qdq else QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            extra_options={"UseQDQContribOps": contrib_qdq},
        )  # fmt: skip

    return run


def _nbits(block: int, symmetric: bool, accuracy_level: int, gather: bool = False) -> Callable:
    def run(src: Path, dst: Path, spec: _specs.ModelSpec | None) -> None:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        ops = ("MatMul", "Gather") if gather else ("MatMul",)
        q = MatMulNBitsQuantizer(
            onnx.load(src), bits=4, block_size=block, is_symmetric=symmetric,
            accuracy_level=accuracy_level, op_types_to_quantize=ops,
            quant_axes=(("MatMul", 0), ("Gather", 1)),
        )  # fmt: skip
        q.process()
        onnx.save(q.model.model, dst)

    return run


# name -> (base model, quantizer, op types the result must contain as domain::op)
VARIANTS: dict[str, tuple[str, Callable, tuple[str, ...]]] = {
    "bert.dynamic": (
        "bert", _dynamic(False), ("::DynamicQuantizeLinear", "::MatMulInteger"),
    ),
    "bert.dynamic_per_channel": (
        "bert", _dynamic(True), ("::DynamicQuantizeLinear", "::MatMulInteger"),
    ),
    "attention.dynamic": (
        "attention", _dynamic(True), ("com.microsoft::QAttention", "::MatMulInteger"),
    ),
    "lstm.dynamic": (
        "lstm", _dynamic(False, ["LSTM", "MatMul"]), ("com.microsoft::DynamicQuantizeLSTM",),
    ),
    "lstm.dynamic_per_channel": (
        "lstm", _dynamic(True, ["LSTM", "MatMul"]), ("com.microsoft::DynamicQuantizeLSTM",),
    ),
    "mobilenetv2.static_qdq": (
        "mobilenetv2", _static("qdq", False), ("::QuantizeLinear", "::DequantizeLinear"),
    ),
    "mobilenetv2.static_qdq_per_channel": (
        "mobilenetv2", _static("qdq", True), ("::QuantizeLinear", "::DequantizeLinear"),
    ),
    "resnet.static_qdq_contrib": (
        "resnet", _static("qdq", True, contrib_qdq=True),
        ("com.microsoft::QuantizeLinear", "com.microsoft::DequantizeLinear"),
    ),
    "mobilenetv2.static_qoperator": (
        "mobilenetv2", _static("qoperator", False),
        ("::QLinearConv", "com.microsoft::QLinearAdd"),
    ),
    "resnet.static_qoperator_per_channel": (
        "resnet", _static("qoperator", True), ("::QLinearConv", "com.microsoft::QLinearAdd"),
    ),
    "qops_cnn.static_qoperator": (
        "qops_cnn", _static("qoperator", False),
        (
            "::QLinearConv", "com.microsoft::QLinearLeakyRelu", "com.microsoft::QLinearSigmoid",
            "com.microsoft::QLinearMul", "com.microsoft::QLinearAdd",
            "com.microsoft::QLinearConcat", "com.microsoft::QLinearAveragePool",
            "com.microsoft::QLinearGlobalAveragePool", "com.microsoft::QGemm",
            "com.microsoft::QLinearSoftmax",
        ),
    ),
    "qops_cnn.static_qdq": (
        "qops_cnn", _static("qdq", True), ("::QuantizeLinear", "::DequantizeLinear"),
    ),
    "bert.int4_b32_sym_acc0": ("bert", _nbits(32, True, 0), ("com.microsoft::MatMulNBits",)),
    "bert.int4_b64_asym_acc4": ("bert", _nbits(64, False, 4), ("com.microsoft::MatMulNBits",)),
    "bert.int4_b128_asym_acc0_gather": (
        "bert", _nbits(128, False, 0, gather=True),
        ("com.microsoft::MatMulNBits", "com.microsoft::GatherBlockQuantized"),
    ),
    "bert.int4_b128_sym_acc4": ("bert", _nbits(128, True, 4), ("com.microsoft::MatMulNBits",)),
}  # fmt: skip


def op_types(path: Path) -> set[str]:
    """'domain::op' of every node in the model's main graph ('' for ai.onnx)."""
    model = onnx.load(path, load_external_data=False)
    return {f"{'' if n.domain == 'ai.onnx' else n.domain}::{n.op_type}" for n in model.graph.node}


def build(out: Path, size: str = "tiny", only: list[str] | None = None) -> dict[str, dict]:
    """Build the asked-for variants (default all) into `out`; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    names = only or list(VARIANTS)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    specs: dict[str, _specs.ModelSpec] = {}
    for name in names:
        base, quantize, expect = VARIANTS[name]
        dst = out / f"{name}.{size}.onnx"
        feeds = out / f"{base}.{size}.npz"
        if dst.exists() and feeds.exists() and name in manifest:
            continue
        src = out / f"{base}.{size}.float.onnx"
        spec = None
        if base == "attention":
            np.savez(feeds, **_attention_model(src, size))
        else:
            spec = specs.get(base) or specs.setdefault(base, _spec(base, size))
            if not src.exists():
                _onnx_export.export(spec, "torchscript", src, OPSET)
            np.savez(feeds, **spec.feeds(2, seed=7))
        with _quiet():
            quantize(src, dst, spec)
        manifest[name] = {
            "file": dst.name, "float": src.name, "feeds": feeds.name,
            "expect_ops": list(expect), "ops": sorted(op_types(dst)),
        }  # fmt: skip
        manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", choices=("tiny", "full"), default="tiny")
    ap.add_argument("--only", nargs="*", choices=sorted(VARIANTS))
    args = ap.parse_args(argv)
    manifest = build(args.out, args.size, args.only)
    for name, entry in manifest.items():
        missing = set(entry["expect_ops"]) - set(entry["ops"])
        print(f"{name}: {entry['file']}" + (f"  MISSING {sorted(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
