"""A typical onnxruntime program: CUDA-first providers, session options, list feeds,
model metadata. Prints a JSON summary. Usage: classify.py MODEL"""

import json
import sys

import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.intra_op_num_threads = 1
so.log_severity_level = 3
sess = ort.InferenceSession(
    sys.argv[1], so, providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
)
inp = sess.get_inputs()[0]
probs = sess.run(None, {inp.name: [[0.5, -1.0, 2.0, 0.25]]})[0]
try:
    sess.run(None, {inp.name: np.zeros((1, 4), np.float64)})
    wrong = "accepted"
except InvalidArgument:
    wrong = "InvalidArgument"
try:
    sess.run(None, {})
    missing = "accepted"
except ValueError:
    missing = "ValueError"
print(
    json.dumps(
        {
            "engine": "onnxexec" if "onnxexec" in ort.get_build_info() else "onnxruntime",
            "providers": sess.get_providers(),
            "input": [inp.name, inp.type, inp.shape],
            "probs": np.round(probs, 5).tolist(),
            "meta": sess.get_modelmeta().custom_metadata_map,
            "producer": sess.get_modelmeta().producer_name,
            "wrong_dtype": wrong,
            "missing": missing,
        }
    )
)
