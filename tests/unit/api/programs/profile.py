"""Profiling as programs use it: enable, run, end_profiling, read the trace.

Usage: profile.py MODEL OUT_DIR
"""

import json
import os
import sys

import numpy as np
import onnxruntime as ort

so = ort.SessionOptions()
so.enable_profiling = True
so.profile_file_prefix = os.path.join(sys.argv[2], "trace")
sess = ort.InferenceSession(sys.argv[1], so)
start = sess.get_profiling_start_time_ns()
for _ in range(3):
    sess.run(None, {"x": np.ones((1, 4), np.float32)})
path = sess.end_profiling()
with open(path) as f:
    events = json.load(f)
print(
    json.dumps(
        {
            "engine": "onnxexec" if "onnxexec" in ort.get_build_info() else "onnxruntime",
            "start_positive": start > 0,
            "in_dir": os.path.dirname(path) == sys.argv[2],
            "fields": sorted({"ph", "name", "ts", "dur", "args"} & set(events[0])),
            "has_model_run": sum(e["name"] == "model_run" for e in events),
        }
    )
)
