"""ir.dtypes.TensorProto is our copy of onnx.TensorProto.DataType (so the IR and the
GGUF path never import onnx): it must agree with onnx's enum name for name."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx

from onnxexec.ir.dtypes import TensorProto


def test_element_type_values_match_onnx() -> None:
    ours = {m.name: m.value for m in TensorProto}
    theirs = dict(onnx.TensorProto.DataType.items())
    assert set(theirs) <= set(ours), f"onnx has types we lack: {set(theirs) - set(ours)}"
    assert ours == theirs


def test_gguf_path_and_cli_do_not_import_onnx() -> None:
    code = (
        "import sys\n"
        "import onnxexec.cli.main, onnxexec.llm.model, onnxexec.runtime.executor\n"
        "print(sorted(m for m in ('onnx', 'onnxexec.runtime.session') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_top_level_names_still_resolve() -> None:
    import onnxexec
    import onnxexec.runtime

    for name in onnxexec.runtime.__all__:
        assert getattr(onnxexec, name) is getattr(onnxexec.runtime, name)


def test_type_names_and_cast_v1_names() -> None:
    from onnxexec.ir.dtypes import type_name
    from onnxexec.ops.cast import cast_v1

    assert type_name(onnx.TensorProto.FLOAT8E4M3FN) == "float8e4m3fn"
    assert type_name(onnx.TensorProto.INT64) == "int64"
    assert cast_v1(np.array([1.5], np.float32), to="DOUBLE").dtype == np.float64
