"""ir.dtypes.TensorProto is our copy of onnx.TensorProto.DataType (so the IR and the
GGUF path never import onnx): it must agree with onnx's enum name for name."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

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


def _fresh(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout.strip()


def test_gguf_path_imports_neither_ml_dtypes_nor_scipy_linalg() -> None:
    # ml_dtypes' import takes ~0.5 s; numba's BLAS probe imports scipy.linalg
    # (0.1-0.5 s, 16-29 MB) on the first compile or cache load (kernels/__init__.py).
    code = (
        "import sys\n"
        "import numba, numpy as np\n"
        "import onnxexec.cli.main, onnxexec.llm.model\n"
        "f = numba.njit(lambda x: x.sum())\n"
        "assert f(np.ones(3)) == 3.0\n"
        "print(sorted(m for m in ('ml_dtypes', 'scipy.linalg') if m in sys.modules))\n"
    )
    assert _fresh(code) == "[]"


def test_numba_blas_still_works_after_the_deferred_check() -> None:
    # numba's np.dot needs scipy's BLAS: without scipy there is nothing to check
    pytest.importorskip("scipy")
    code = (
        "import sys, numba, numpy as np\n"
        "import onnxexec.kernels\n"
        "import numba.np.arraymath as am\n"
        "f = numba.njit(lambda a, b: np.dot(a, b))\n"
        "a = np.arange(4.0).reshape(2, 2)\n"
        "assert (f(a, a) == a @ a).all()\n"
        "print(am._HAVE_BLAS, 'scipy.linalg' in sys.modules)\n"
    )
    assert _fresh(code) == "True True"


def test_exotic_dtypes_resolve_without_importing_ml_dtypes_first() -> None:
    code = (
        "import sys\n"
        "from onnxexec.ir.dtypes import TensorProto, np_dtype, onnx_dtype\n"
        "assert 'ml_dtypes' not in sys.modules\n"
        "assert onnx_dtype(np_dtype(TensorProto.FLOAT)) == 1\n"
        "assert 'ml_dtypes' not in sys.modules\n"
        "bf = np_dtype(TensorProto.BFLOAT16)\n"
        "print(bf, onnx_dtype(bf), 'ml_dtypes' in sys.modules)\n"
    )
    assert _fresh(code) == "bfloat16 16 True"
    code = (
        "import ml_dtypes\n"
        "from onnxexec.ir.dtypes import onnx_dtype\n"
        "print(onnx_dtype(ml_dtypes.float8_e4m3fn), onnx_dtype(ml_dtypes.int4))\n"
    )
    assert _fresh(code) == "17 22"
