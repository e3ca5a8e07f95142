"""One com.microsoft (or onnxruntime-only) node run by onnxexec and by onnxruntime."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import node_model

ort = pytest.importorskip("onnxruntime")


def both(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    domain: str = MS_DOMAIN,
    opset: int | None = None,
    **attrs: Any,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    if opset is None:
        opset = 1 if domain else 13
    """(onnxexec's outputs, onnxruntime's) of one node; the default domain at `opset`
    (13: below LayerNormalization-17, 17 for STFT...)."""
    model, feeds = node_model(op_type, inputs, n_outputs, opset=opset, domain=domain, **attrs)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return InferenceSession(model).run(None, feeds), ref.run(None, feeds)


def assert_like_ort(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    domain: str = MS_DOMAIN,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    **attrs: Any,
) -> list[np.ndarray]:
    got, want = both(op_type, inputs, n_outputs, domain, **attrs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, f"output {i}: {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"output {i}: {g.shape} != {w.shape}"
        np.testing.assert_allclose(
            g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"output {i}"
        )
    return got
