"""Which onnxexec module defines each name onnxruntime's capi modules export."""

from __future__ import annotations

import importlib
from typing import Any

import onnxexec.errors as _errors
import onnxexec.runtime as _runtime

# onnxruntime's exception classes by their capi names (NotImplemented is not a name
# a Python module can define with `class`, so it is mapped here).
ERRORS: dict[str, type[Exception]] = {
    "Fail": _errors.Fail,
    "InvalidArgument": _errors.InvalidArgument,
    "NoSuchFile": _errors.NoSuchFile,
    "NoModel": _errors.NoModel,
    "EngineError": _errors.EngineError,
    "RuntimeException": _errors.RuntimeException,
    "InvalidProtobuf": _errors.InvalidProtobuf,
    "ModelLoaded": _errors.ModelLoaded,
    "NotImplemented": _errors.NotImplementedStatus,
    "InvalidGraph": _errors.InvalidGraph,
    "EPFail": _errors.EPFail,
    "ModelLoadCanceled": _errors.ModelLoadCanceled,
    "ModelRequiresCompilation": _errors.ModelRequiresCompilation,
    "NotFound": _errors.NotFound,
}

# name -> (module, attribute) beyond onnxexec.runtime's public names
EXTRA = {
    "SessionIOBinding": ("onnxexec.runtime.iobinding", "IOBinding"),
    "InferenceSession": ("onnxexec.runtime.session", "InferenceSession"),
    "Session": ("onnxexec.runtime.session", "InferenceSession"),
    "check_and_normalize_provider_args": (
        "onnxexec.runtime.providers",
        "check_and_normalize_provider_args",
    ),
    "is_dlpack_uint8_tensor": ("onnxexec.runtime.ortvalue", "is_dlpack_uint8_tensor"),
    "get_default_session_options": ("onnxexec.runtime.module_api", "get_default_session_options"),
    "get_ep_devices": ("onnxexec.runtime.module_api", "get_ep_devices"),
    "OrtEpAssignedNode": ("onnxexec.runtime.session_api", "OrtEpAssignedNode"),
    "OrtEpAssignedSubgraph": ("onnxexec.runtime.session_api", "OrtEpAssignedSubgraph"),
}

PUBLIC = sorted({*ERRORS, *EXTRA, *_runtime.__all__})


def lookup(name: str, module_name: str) -> Any:
    """The object onnxruntime's capi module `module_name` has as `name`."""
    if name in ERRORS:
        return ERRORS[name]
    if name in EXTRA:
        mod, attr = EXTRA[name]
        return getattr(importlib.import_module(mod), attr)
    if name in _runtime.__all__:
        return getattr(_runtime, name)
    raise AttributeError(f"module '{module_name}' has no attribute '{name}'")
