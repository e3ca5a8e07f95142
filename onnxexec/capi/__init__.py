"""onnxruntime's import paths, backed by onnxexec.

Programs written for onnxruntime import from `onnxruntime.capi.onnxruntime_pybind11_state`
(exception classes, OrtValue, RunOptions), `onnxruntime.capi._pybind_state` and
`onnxruntime.capi.onnxruntime_inference_collection`. The modules here offer the same
names; `onnxexec.as_onnxruntime` maps those import paths onto them, and
`ort_module` stands for the top-level `onnxruntime` package.
"""
