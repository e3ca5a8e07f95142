"""Side-by-side benchmarks against the anchor engines (onnxruntime, llama.cpp).

The anchors are imported only here, lazily, when a benchmark asks for them.
"""
