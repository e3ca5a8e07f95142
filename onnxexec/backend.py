"""onnx.backend.base.Backend for onnxexec, so onnx's backend test tooling can drive it.

import onnxexec.backend as backend
rep = backend.prepare(model)
outputs = rep.run([x])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from onnxexec.runtime.session import InferenceSession


class OnnxExecRep(BackendRep):
    """A prepared model: inputs positional (runtime inputs in declaration order) or by name."""

    def __init__(self, session: InferenceSession) -> None:
        self.session = session
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            feed = inputs
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feed = dict(zip(self.input_names, inputs, strict=False))
        outs = self.session.run(None, feed)
        return namedtupledict("Outputs", self.output_names)(*outs)


class OnnxExecBackend(Backend):
    @classmethod
    def is_compatible(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> OnnxExecRep:
        if not cls.supports_device(device):
            raise ValueError(f"onnxexec runs on CPU only, not {device}")
        return OnnxExecRep(InferenceSession(model))

    @classmethod
    def run_model(
        cls, model: ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[Any, Any]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node: a one-node model is built with typed inputs from `inputs`."""
        if not cls.supports_device(device):
            raise ValueError(f"onnxexec runs on CPU only, not {device}")
        vals = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
        names = [n for n in node.input if n]
        graph_inputs = [
            helper.make_tensor_value_info(
                n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.asarray(v).shape
            )
            for n, v in zip(names, vals, strict=False)
        ]
        graph_outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        g = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        domain = node.domain or ""
        opsets = [helper.make_opsetid("", opset)]
        if domain not in ("", "ai.onnx"):
            opsets.append(helper.make_opsetid(domain, 1))
        model = helper.make_model(g, opset_imports=opsets)
        rep = OnnxExecRep(InferenceSession(model))
        outs = rep.session.run(None, dict(zip(names, vals, strict=False)))
        return namedtupledict("Outputs", [o for o in node.output if o])(*outs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = OnnxExecBackend.prepare
run_model = OnnxExecBackend.run_model
run_node = OnnxExecBackend.run_node
supports_device = OnnxExecBackend.supports_device
