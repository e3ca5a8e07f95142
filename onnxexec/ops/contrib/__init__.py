"""com.microsoft contrib ops (onnxruntime's docs/ContribOperators.md), one module per family."""
