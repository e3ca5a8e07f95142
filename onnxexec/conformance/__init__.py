"""ONNX backend conformance: suites, comparison and runner."""
