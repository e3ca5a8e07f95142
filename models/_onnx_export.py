"""Export a ModelSpec with either torch exporter, and check the result with onnxruntime.

TorchScript: torch.onnx.export(..., dynamo=False) traces the module; symbolic axes
come from `dynamic_axes`. Dynamo: torch.onnx.export(..., dynamo=True) goes through
torch.export; symbolic axes come from `dynamic_shapes` built from the same names, so
both exports of a model declare the same dim names ("batch", "seq").
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _specs import ModelSpec

EXPORTERS = ("torchscript", "dynamo")
EXTRA_EXPORTERS = ("nhwc",)  # built only when asked for (--only NAME:nhwc)
TRACE_BATCH = 2  # >= 2: torch.export specializes size-1 dims to constants


def trace_inputs(spec: ModelSpec) -> tuple[torch.Tensor, ...]:
    feeds = spec.feeds(TRACE_BATCH, seed=0)
    return tuple(torch.from_numpy(feeds[n]) for n in spec.input_names)


def _param_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


@contextlib.contextmanager
def _quiet():
    """Silence tracer warnings and the dynamo exporter's progress lines (errors still raise)."""
    out = io.StringIO()
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(out):
            warnings.simplefilter("ignore")
            yield out
    finally:
        for lg, lvl in zip(loggers, levels, strict=True):
            lg.setLevel(lvl)


def export_torchscript(spec: ModelSpec, path: Path, opset: int | None) -> None:
    # PRESERVE on an eval-mode module exports inference-mode BatchNormalization nodes
    # instead of folding them into the Conv weights (what EVAL, the default, does).
    mode = torch.onnx.TrainingMode.PRESERVE if spec.keep_batchnorm else torch.onnx.TrainingMode.EVAL
    with _quiet(), torch.no_grad():
        torch.onnx.export(
            spec.module,
            trace_inputs(spec),
            str(path),
            dynamo=False,
            input_names=list(spec.input_names),
            output_names=list(spec.output_names),
            dynamic_axes=spec.dynamic,
            opset_version=opset,
            training=mode,
        )


def export_dynamo(spec: ModelSpec, path: Path, opset: int | None) -> None:
    dims: dict[str, torch.export.Dim] = {}
    shapes = {}
    for name in spec.input_names:
        axes = spec.dynamic.get(name, {})
        shapes[name] = {a: dims.setdefault(d, torch.export.Dim(d)) for a, d in axes.items()}
    external = _param_bytes(spec.module) > 1_800_000_000  # protobuf's 2 GB limit
    with _quiet(), torch.no_grad():
        program = torch.onnx.export(
            spec.module,
            trace_inputs(spec),
            dynamo=True,
            input_names=list(spec.input_names),
            output_names=list(spec.output_names),
            dynamic_shapes=shapes,
            opset_version=opset,
            external_data=external,
        )
        program.save(str(path), external_data=external)


def export(spec: ModelSpec, exporter: str, path: Path, opset: int | None = None) -> None:
    """Write `spec` as ONNX to `path` with the named exporter."""
    if exporter == "torchscript":
        export_torchscript(spec, path, opset)
    elif exporter == "dynamo":
        export_dynamo(spec, path, opset)
    elif exporter == "nhwc":
        export_nhwc(spec, path, opset)
    else:
        raise ValueError(f"unknown exporter {exporter!r}; expected one of {EXPORTERS}")


def torch_outputs(spec: ModelSpec, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        out = spec.module(*(torch.from_numpy(feeds[n]) for n in spec.input_names))
    if isinstance(out, torch.Tensor):
        out = (out,)
    return [o.numpy() for o in out]


def max_abs_diff_onnxruntime(
    path: Path, cases: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]
) -> float:
    """Max abs difference between onnxruntime on `path` and (feeds, expected outputs) pairs."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for feeds, expected in cases:
        got = sess.run(list(expected), feeds)
        for (name, want), g in zip(expected.items(), got, strict=True):
            if g.shape != want.shape:
                raise AssertionError(f"{path.name}:{name}: shape {g.shape} != torch {want.shape}")
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - want))))
    return worst


# tf2onnx-style layout: what a Keras / TF CNN looks like after tf2onnx without its
# transpose optimizer (and what remains of it around convs in many real exports): an
# NHWC graph input, each Conv between Transposes to and from NCHW, and the elementwise
# ops between convs working on NHWC tensors.
_NHWC_TO_NCHW, _NCHW_TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]
_LAYOUT_FREE = {"Relu", "Clip", "Sigmoid", "HardSwish", "HardSigmoid", "Add", "Mul", "Sub"}


def to_nhwc(model: Any, image_inputs: tuple[str, ...]) -> Any:
    """`model` (an NCHW CNN export) rewritten tf2onnx-style (see above); the named 4-D
    inputs become NHWC. Elementwise ops stay on NHWC only when their other operands are
    scalars; everything else gets its NCHW input back through a Transpose."""
    import onnx
    from onnx import helper

    g = model.graph
    scalars = {t.name for t in g.initializer if np.prod(t.dims) == 1}
    nhwc: set[str] = set()
    as_nchw: dict[str, str] = {}
    nodes: list[onnx.NodeProto] = []

    def nchw(name: str) -> str:
        if name not in nhwc:
            return name
        if name not in as_nchw:
            as_nchw[name] = f"{name}__nchw"
            nodes.append(helper.make_node("Transpose", [name], [as_nchw[name]], perm=_NHWC_TO_NCHW))
        return as_nchw[name]

    for vi in g.input:
        if vi.name in image_inputs:
            d = vi.type.tensor_type.shape.dim
            dims = [d[0], d[2], d[3], d[1]]
            dims = [_copy(x) for x in dims]
            vi.type.tensor_type.shape.ClearField("dim")
            for x in dims:
                vi.type.tensor_type.shape.dim.add().CopyFrom(x)
            nhwc.add(vi.name)
    for n in g.node:
        data = [i for i in n.input if i and i not in scalars]
        if n.op_type == "Conv":
            n.input[0] = nchw(n.input[0])
            y = n.output[0]
            n.output[0] = f"{y}__conv"
            nodes.append(n)
            nodes.append(helper.make_node("Transpose", [n.output[0]], [y], perm=_NCHW_TO_NHWC))
            nhwc.add(y)
        elif n.op_type in _LAYOUT_FREE and data and all(i in nhwc for i in data):
            nodes.append(n)
            nhwc.update(n.output)
        else:
            for k, i in enumerate(n.input):
                if i in nhwc:
                    n.input[k] = nchw(i)
            nodes.append(n)
    for o in g.output:  # outputs keep the NCHW layout (and name) of the original
        if o.name in nhwc:
            src = f"{o.name}__nhwc"
            for n in nodes:
                n.output[:] = [src if v == o.name else v for v in n.output]
                n.input[:] = [src if v == o.name else v for v in n.input]
            nodes.append(helper.make_node("Transpose", [src], [o.name], perm=_NHWC_TO_NCHW))
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(model)
    return model


def _copy(dim: Any) -> Any:  # a TensorShapeProto.Dimension detached from its shape
    out = type(dim)()
    out.CopyFrom(dim)
    return out


def export_nhwc(spec: ModelSpec, path: Path, opset: int | None) -> None:
    import onnx

    export_torchscript(spec, path, opset)
    images = tuple(n for n in spec.input_names if n == "pixel_values")
    onnx.save(to_nhwc(onnx.load(str(path)), images), str(path))


def nhwc_feeds(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The sidecar inputs of an nhwc export: pixel_values as (B, H, W, C)."""
    return {
        k: np.ascontiguousarray(v.transpose(0, 2, 3, 1)) if k == "pixel_values" else v
        for k, v in feeds.items()
    }
