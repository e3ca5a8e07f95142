"""Validation reads onnx.defs from onnx's C extension without importing the onnx
package (0.6 s); onnx imported afterwards must still work, since the extension
(nanobind) can be initialised only once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from onnx import TensorProto, helper


def test_session_validates_without_onnx_and_onnx_still_imports(tmp_path: Path) -> None:
    bad = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["a", "b"], ["y"], name="add0")],
            "g",
            [
                helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
                helper.make_tensor_value_info("b", TensorProto.DOUBLE, [2]),
            ],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    path = tmp_path / "bad.onnx"
    path.write_bytes(bad.SerializeToString())
    code = (
        "import json, sys\n"
        "import onnxexec\n"
        "try:\n"
        f"    onnxexec.InferenceSession({str(path)!r})\n"
        "    refused = ''\n"
        "except onnxexec.errors.InvalidGraphError as e:\n"
        "    refused = str(e)\n"
        "before = 'onnx' in sys.modules\n"
        "import onnx, onnx.checker, onnx.defs, onnx.shape_inference\n"
        f"m = onnx.load({str(path)!r})\n"
        "onnx.checker.check_model(m)\n"
        "try:\n"
        "    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)\n"
        "    strict = ''\n"
        "except onnx.shape_inference.InferenceError as e:\n"
        "    strict = 'refused'\n"
        "print(json.dumps({'refused': refused, 'onnx_before': before, 'strict': strict,\n"
        "  'since': onnx.defs.get_schema('Add', 17).since_version}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert "type parameter T is bound to tensor(float)" in res["refused"]
    assert res["onnx_before"] is False
    assert res == {**res, "strict": "refused", "since": 14}
