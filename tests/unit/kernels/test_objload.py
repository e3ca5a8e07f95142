"""kernels/objload: numba kernels run from recorded object code without importing numba.

- the ELF loader links objects LLVM emits (large code model, as numba compiles, and
  small-model PIC for the PC-relative, PLT and GOT relocations) and the linked code
  computes what the IR says;
- the numba-free call key of a value equals the key of the type numba's own `typeof`
  gives it, for every kind of argument the kernels take;
- end to end, in fresh processes: a process that used numba records the kernels it
  ran, the next one runs them without loading numba or LLVM and gets the numpy
  reference's numbers; a call with another layout, a damaged record and
  ONNXEXEC_OBJLOAD=0 all go to numba and stay correct.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from onnxexec.kernels.objload.argkey import call_key, raw_key, signature_key
from onnxexec.kernels.objload.elf import ObjectLoadError, load_object

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64",
    reason="the object loader links x86-64 ELF objects only",
)


def _emit(codemodel: str, reloc: str) -> bytes:
    """Object code of: kernel(i, x) = ext_add(table[i], x), counting its calls in a
    writable global."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    i64 = ir.IntType(64)
    mod = ir.Module("t")
    mod.triple = llvm.get_process_triple()
    table = ir.GlobalVariable(mod, ir.ArrayType(i64, 4), "table")
    table.initializer = ir.Constant(ir.ArrayType(i64, 4), [3, 5, 7, 11])
    table.global_constant = True
    table.linkage = "internal"
    counter = ir.GlobalVariable(mod, i64, "counter")
    counter.initializer = ir.Constant(i64, 0)
    ext = ir.Function(mod, ir.FunctionType(i64, [i64, i64]), "ext_add")
    fn = ir.Function(mod, ir.FunctionType(i64, [i64, i64]), "kernel")
    b = ir.IRBuilder(fn.append_basic_block())
    i, x = fn.args
    t = b.load(b.gep(table, [ir.Constant(i64, 0), i]))
    b.store(b.add(b.load(counter), ir.Constant(i64, 1)), counter)
    b.ret(b.call(ext, [t, x]))
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(codemodel=codemodel, reloc=reloc, opt=2)
    return tm.emit_object(llvm.parse_assembly(str(mod)))


_BINOP = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


@pytest.mark.parametrize(("codemodel", "reloc"), [("large", "static"), ("small", "pic")])
def test_elf_loader_links_llvm_objects(codemodel: str, reloc: str) -> None:
    ext_add = _BINOP(lambda a, b: a + b)
    ext_addr = ctypes.cast(ext_add, ctypes.c_void_p).value
    obj = load_object(_emit(codemodel, reloc), {"ext_add": ext_addr}.get)
    kernel = _BINOP(obj.address("kernel"))
    assert [kernel(i, 100) for i in range(4)] == [103, 105, 107, 111]
    assert ctypes.c_int64.from_address(obj.address("counter")).value == 4


def test_elf_loader_rejects_what_it_cannot_link() -> None:
    code = _emit("large", "static")
    with pytest.raises(ObjectLoadError, match="unresolved symbol 'ext_add'"):
        load_object(code, lambda name: None)
    with pytest.raises(ObjectLoadError, match="not an ELF"):
        load_object(b"MZ" + bytes(100), lambda name: None)
    with pytest.raises(ObjectLoadError, match="not a little-endian x86-64"):
        load_object(code[:18] + bytes([183, 0]) + code[20:], lambda name: 1)  # aarch64


_C = np.zeros((3, 4), np.float32)
_READONLY = np.zeros(5, np.int64)
_READONLY.flags.writeable = False


@pytest.mark.parametrize(
    "value",
    [
        _C,
        np.asfortranarray(_C),
        _C[:, ::2],
        _C[0],
        _READONLY,
        np.zeros(4, np.bool_),
        np.zeros((2, 2, 2), np.complex64),
        np.zeros(3, np.uint8),
        np.zeros((), np.float64),
        7,
        -(1 << 62),
        2.5,
        True,
        1 + 2j,
        np.float32(1.5),
        np.int32(3),
        np.bool_(False),
        (1, 2, 3),
        (1, 2.0),
        None,
    ],
    ids=repr,
)
def test_call_key_matches_numba_typeof(value: object) -> None:
    from numba import typeof

    assert call_key((value,)) == signature_key((typeof(value),))


@pytest.mark.parametrize(
    ("a", "b"),
    [((1, 2), (1.0, 2.0)), ((1, 2), (1, 2, 3)), (np.zeros(3, np.float32), np.zeros(3))],
    ids=["tuple-types", "tuple-length", "dtype"],
)
def test_raw_key_separates_what_call_key_separates(a: object, b: object) -> None:
    # every call is dispatched on raw_key: two arguments numba types differently must
    # never share one, or the second would run the first one's overload
    assert call_key((a,)) != call_key((b,))
    assert raw_key((a,)) != raw_key((b,))


def test_values_without_a_key() -> None:
    assert call_key(("text",)) == (None,)
    assert call_key((1 << 64,)) == (None,)
    assert call_key((np.zeros(2, ">f4"),)) == (None,)


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from onnxexec.kernels.ml import ml_scores

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    if sys.argv[1] == "strided":
        x = np.asfortranarray(x)[:, :]
        xs = np.zeros((6, 10), np.float32)
        xs[:, ::2] = x
        x = xs[:, ::2]  # layout 'A': no record was made for it
        scores = np.empty((6, 3), np.float32)
        best = np.empty(6, np.int64)
        ml_scores._linear_classify(x, w, b, ml_scores.NONE, scores, best)
    else:
        scores, best = ml_scores.linear_classify(x, w, b, ml_scores.NONE)
    top = ml_scores.argmax_row(scores[2])
    maps = open("/proc/self/maps").read()
    print(json.dumps({
        "numba": "numba" in sys.modules,
        "llvm": "libllvmlite" in maps,
        "scores": scores.tolist(), "best": best.tolist(), "top": top,
        "x": x.tolist(), "w": w.tolist(), "b": b.tolist(),
    }))
    """
)


def _run(cache: Path, mode: str = "plain", **env: str) -> dict:
    environ = dict(os.environ, ONNXEXEC_CACHE_DIR=str(cache), **env)
    environ.pop("NUMBA_DISABLE_JIT", None)  # CI's coverage pass sets it; this needs the JIT
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=environ
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _check_numbers(res: dict) -> None:
    x, w, b = (np.array(res[k], np.float32) for k in ("x", "w", "b"))
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_allclose(res["scores"], ref, rtol=1e-5, atol=1e-5)
    assert res["best"] == np.argmax(ref, axis=1).tolist()
    assert res["top"] == int(np.argmax(res["scores"][2]))


def test_recorded_kernels_run_without_numba(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first["numba"]  # nothing recorded yet: numba compiled, and recorded at exit
    _check_numbers(first)
    records = list((tmp_path / "objload").rglob("*.oxk"))
    # the kernels called from Python and those numba compiled for their calls
    names = {p.name.rsplit("-", 1)[0].rsplit(".", 1)[1] for p in records}
    assert {"_linear_classify", "argmax_row", "transform_row", "logistic32"} <= names

    second = _run(tmp_path)
    assert not second["numba"] and not second["llvm"]
    _check_numbers(second)
    assert second["scores"] == first["scores"]

    strided = _run(tmp_path, "strided")
    assert strided["numba"]  # another overload: numba compiles it
    _check_numbers(strided)

    assert _run(tmp_path, ONNXEXEC_OBJLOAD="0")["numba"]

    for record in records:
        record.write_bytes(b"not a record")
    damaged = _run(tmp_path)
    assert damaged["numba"]
    _check_numbers(damaged)


KERNEL_MODULE = textwrap.dedent(
    """
    import numpy as np

    from onnxexec.kernels import objload as nb


    @nb.njit(cache=True)
    def doubled(x):
        if x < 0:
            raise ValueError("negative input")
        return x * 2


    @nb.njit(cache=True)
    def ramp(n, step):
        return np.arange(n) * step  # a new array: boxed with a dtype from the environment
    """
)

KERNEL_RUN = textwrap.dedent(
    """
    import json, sys
    import objload_probe as k

    res = {"doubled": k.doubled(21), "ramp": k.ramp(4, 0.5).tolist()}
    res["numba_before_raise"] = "numba" in sys.modules
    # the linked overload, for callers that keep it (once numba compiled the kernel,
    # the module holds numba's dispatcher instead)
    linked = getattr(k.doubled, "linked", None)
    fn = None if linked is None else linked((21,))
    res["linked"] = None if fn is None else fn(5)
    try:
        k.doubled(-1)
    except ValueError as e:
        res["error"] = str(e)
    import numba  # kernels compiled from now on see numba dispatchers, not LazyKernels

    @numba.njit
    def caller(x):
        return k.doubled(x) + 1

    res["caller"] = caller(4)
    print(json.dumps(res))
    """
)


def test_native_kernels_box_arrays_and_raise(tmp_path: Path) -> None:
    (tmp_path / "objload_probe.py").write_text(KERNEL_MODULE)
    env = dict(os.environ, ONNXEXEC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_DISABLE_JIT", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", KERNEL_RUN],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout))
    first, second = runs
    assert first["numba_before_raise"] and not second["numba_before_raise"]
    assert first["linked"] is None and second["linked"] == 10  # numba's own in the first
    for res in runs:
        assert res["doubled"] == 42
        assert res["ramp"] == [0.0, 0.5, 1.0, 1.5]
        assert res["error"] == "negative input"  # numba's exception, raised from native code
        assert res["caller"] == 9


CONV_RUN = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import onnxexec

    so = onnxexec.SessionOptions(intra_op_num_threads=2)
    s = onnxexec.InferenceSession(sys.argv[1], so)
    x = np.random.default_rng(0).standard_normal((1, 16, 32, 32)).astype(np.float32)
    ys = [s.run(None, {"x": x})[0] for _ in range(3)]  # record, then replay
    states = [st.kwargs["prepared"] for st in s._plan.steps if st.node.op_type == "FusedConv"]
    fast = [bool(r.fns) for st in states for r in st.replays.values() if r is not None]
    print(json.dumps({
        "numba": "numba" in sys.modules, "y": ys[0].tolist(), "y3": ys[2].tolist(),
        "replays": len(fast), "linked": sum(fast),
    }))
    """
)


def _conv_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),  # 1x1 expand: pool + packed
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], group=64, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["y"], transB=1),
    ]
    inits = [
        init("w1", 64, 16, 1, 1), init("b1", 64), init("w2", 64, 1, 3, 3),
        init("w3", 32, 64, 3, 3), init("b3", 32), init("w4", 10, 32), init("b4", 10),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_conv_session_runs_without_numba(tmp_path: Path) -> None:
    """A convolution network's kernels, the pool's native jobs (cfunc addresses) and
    its intrinsics included, run from records in the second process."""
    ort = pytest.importorskip("onnxruntime")

    model = tmp_path / "convnet.onnx"
    _conv_model(model)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", CONV_RUN, str(model)], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout))
    assert not runs[1]["numba"]
    # the replayed nodes of the numba-free process call their linked _replay directly
    assert runs[1]["replays"] > 0 and runs[1]["linked"] == runs[1]["replays"]
    x = np.random.default_rng(0).standard_normal((1, 16, 32, 32)).astype(np.float32)
    ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for res in runs:
        np.testing.assert_allclose(res["y"], ref[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(res["y3"], ref[0], rtol=1e-4, atol=1e-5)
