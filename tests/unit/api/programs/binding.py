"""OrtValue + IOBinding, the way serving code pre-allocates outputs. Usage: binding.py MODEL"""

import json
import sys

import numpy as np
import onnxruntime as ort

sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
x = ort.OrtValue.ortvalue_from_numpy(np.arange(8, dtype=np.float32).reshape(2, 4))
out = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
binding = sess.io_binding()
binding.bind_ortvalue_input(sess.get_inputs()[0].name, x)
binding.bind_ortvalue_output(sess.get_outputs()[0].name, out)
sess.run_with_iobinding(binding)
by_name = sess.io_binding()
by_name.bind_cpu_input(sess.get_inputs()[0].name, np.ones((2, 4), np.float32))
by_name.bind_output(sess.get_outputs()[0].name)
sess.run_with_iobinding(by_name)
vals = sess.run_with_ort_values(None, {sess.get_inputs()[0].name: x})
print(
    json.dumps(
        {
            "engine": "onnxexec" if "onnxexec" in ort.get_build_info() else "onnxruntime",
            "prealloc": np.round(out.numpy(), 5).tolist(),
            "by_name": np.round(by_name.copy_outputs_to_cpu()[0], 5).tolist(),
            "ortvalues": [v.data_type() for v in vals] + [vals[0].shape()],
        }
    )
)
