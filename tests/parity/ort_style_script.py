"""Run an ONNX model the way onnxruntime users write it, and save the outputs.

    python ort_style_script.py MODEL.onnx OUT.npz

Nothing in here knows about onnxexec. test_models_ort.py runs this file unchanged
twice: once with the real onnxruntime, once with `import onnxruntime` resolving to
onnxexec, and compares what the two runs saved.
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort

NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def make_feed(sess: ort.InferenceSession, batch: int = 2, seq: int = 12) -> dict:
    """Random inputs for every graph input: symbolic dims become batch, then seq."""
    rng = np.random.default_rng(1234)
    feed = {}
    for inp in sess.get_inputs():
        shape = [
            d if isinstance(d, int) else (batch if i == 0 else seq) for i, d in enumerate(inp.shape)
        ]
        dtype = NUMPY_TYPES[inp.type]
        if inp.name == "attention_mask":
            x = np.ones(shape, dtype=dtype)
            x[-1, -3:] = 0  # the last sequence is padded
        elif inp.name.endswith("_ids"):
            x = rng.integers(0, 2 if "type" in inp.name else 100, size=shape).astype(dtype)
        else:
            x = rng.standard_normal(shape).astype(dtype)
        feed[inp.name] = x
    return feed


def main(model_path: str, out_path: str) -> None:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = 2
    providers = [p for p in ["CPUExecutionProvider"] if p in ort.get_available_providers()]
    sess = ort.InferenceSession(model_path, sess_options=opts, providers=providers)

    names = [i.name for i in sess.get_inputs()]
    output_names = [o.name for o in sess.get_outputs()]
    feed = make_feed(sess)
    outputs = sess.run(None, {name: feed[name] for name in names})

    # Ask again for the outputs by name, last first, with run options.
    run_options = ort.RunOptions()
    run_options.log_severity_level = 3
    again = sess.run(output_names[::-1], feed, run_options)
    for a, b in zip(outputs, again[::-1], strict=True):
        assert np.array_equal(a, b), "the same run gave different results"

    meta = sess.get_modelmeta()
    print(f"{model_path} ({meta.producer_name}) on {sess.get_providers()[0]}")
    for name, value in zip(output_names, outputs, strict=True):
        print(f"  {name}: {value.dtype} {value.shape} mean {value.mean():.4f}")
    np.savez(out_path, **dict(zip(output_names, outputs, strict=True)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
