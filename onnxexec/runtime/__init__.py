"""Plan-once executor and the onnxruntime-compatible session API."""

from __future__ import annotations

from typing import Any

# Names -> defining module, imported on first use: `onnxexec.runtime.executor` (the GGUF
# path) must not load the ONNX session and with it onnx.
_OPT = "onnxexec.runtime.options"
_DEV = "onnxexec.runtime.devices"
_MOD = "onnxexec.runtime.module_api"
_LOGS = "onnxexec.runtime.logs"
_LAZY = {
    "ExecutionMode": _OPT,
    "GraphOptimizationLevel": _OPT,
    "ModelMetadata": _OPT,
    "NodeArg": _OPT,
    "RunOptions": _OPT,
    "SessionOptions": _OPT,
    "InferenceSession": "onnxexec.runtime.session",
    "get_device": "onnxexec.runtime.session",
    "get_all_providers": "onnxexec.runtime.providers",
    "get_available_providers": "onnxexec.runtime.providers",
    "OrtValue": "onnxexec.runtime.ortvalue",
    "OrtValueVector": "onnxexec.runtime.ortvalue",
    "SparseTensor": "onnxexec.runtime.sparse",
    "IOBinding": "onnxexec.runtime.iobinding",
    "AdapterFormat": "onnxexec.runtime.adapters",
    "LoraAdapter": "onnxexec.runtime.adapters",
    "ExecutionOrder": _DEV,
    "OrtAllocatorType": _DEV,
    "OrtArenaCfg": _DEV,
    "OrtDevice": _DEV,
    "OrtDeviceMemoryType": _DEV,
    "OrtDeviceVendorId": _DEV,
    "OrtMemType": _DEV,
    "OrtMemoryInfo": _DEV,
    "OrtMemoryInfoDeviceType": _DEV,
    "OrtSparseFormat": _DEV,
    "create_and_register_allocator": _DEV,
    "create_and_register_allocator_v2": _DEV,
    "disable_telemetry_events": _MOD,
    "enable_telemetry_events": _MOD,
    "get_build_info": _MOD,
    "get_version_string": _MOD,
    "set_global_thread_pool_sizes": _MOD,
    "set_seed": _MOD,
    "set_default_logger_callback": _LOGS,
    "set_default_logger_severity": _LOGS,
    "set_default_logger_verbosity": _LOGS,
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'onnxexec.runtime' has no attribute '{name}'")


__all__ = sorted(_LAZY)
