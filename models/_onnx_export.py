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

import numpy as np
import torch
from _specs import ModelSpec

EXPORTERS = ("torchscript", "dynamo")
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
