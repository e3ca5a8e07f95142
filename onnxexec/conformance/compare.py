"""Compare outputs as onnx's backend runner does (onnx/backend/test/runner).

Output count, then per output: sequences element by element, shape, dtype, then
strings exactly and numbers with allclose(rtol, atol); bfloat16 is widened to
float32 with rtol raised to two bfloat16 ULPs (2**-6), as onnx's runner does.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Mismatch(AssertionError):
    """First difference between expected and actual outputs, in one line."""


def _first_diff(out: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> str:
    o = out.astype(np.float64) if out.dtype.kind not in "OUb" else out
    r = ref.astype(np.float64) if ref.dtype.kind not in "OUb" else ref
    if o.dtype.kind == "f":
        bad = ~np.isclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = o != r
    idx = np.argwhere(np.asarray(bad))
    n = len(idx)
    if not n:
        return "values differ"
    first = tuple(int(i) for i in idx[0])
    return (
        f"{n}/{out.size} values differ; first at {list(first)}: "
        f"got {out[first]!r}, expected {ref[first]!r}"
    )


def compare(ref: Any, out: Any, rtol: float, atol: float, where: str = "output") -> None:
    """Raise Mismatch describing the first difference between `out` and `ref`."""
    if isinstance(ref, list | tuple):
        if not isinstance(out, list | tuple):
            raise Mismatch(f"{where}: expected a sequence, got {type(out).__name__}")
        if len(out) != len(ref):
            raise Mismatch(f"{where}: sequence length {len(out)}, expected {len(ref)}")
        for j, (r, o) in enumerate(zip(ref, out, strict=True)):
            compare(r, o, rtol, atol, f"{where}[{j}]")
        return
    if ref is None:
        if out is not None:
            raise Mismatch(f"{where}: expected an empty optional, got {type(out).__name__}")
        return
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            raise Mismatch(f"{where}: map keys differ")
        for k in ref:
            compare(ref[k], out[k], rtol, atol, f"{where}[{k!r}]")
        return
    ref = np.asarray(ref)
    if not isinstance(out, np.ndarray | np.generic):
        raise Mismatch(f"{where}: expected an array, got {type(out).__name__}")
    out = np.asarray(out)
    if out.shape != ref.shape:
        raise Mismatch(f"{where}: shape {list(out.shape)}, expected {list(ref.shape)}")
    if ref.dtype == object:
        if not np.array_equal(out.astype(object), ref):
            raise Mismatch(f"{where}: " + _first_diff(out.astype(object), ref, 0, 0))
        return
    if out.dtype != ref.dtype:
        raise Mismatch(f"{where}: dtype {out.dtype}, expected {ref.dtype}")
    if out.dtype.name == "bfloat16":
        rtol = max(rtol, 2**-6)
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    elif out.dtype.kind == "V" or out.dtype.name.startswith(("float8", "float4", "float6")):
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    elif out.dtype.name in ("int4", "uint4", "int2", "uint2"):
        out, ref = out.astype(np.int32), ref.astype(np.int32)
    try:
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
    except AssertionError:
        raise Mismatch(f"{where}: " + _first_diff(out, ref, rtol, atol)) from None


def compare_outputs(refs: list[Any], outs: list[Any], rtol: float, atol: float) -> None:
    if len(outs) != len(refs):
        raise Mismatch(f"{len(outs)} outputs, expected {len(refs)}")
    for i, (r, o) in enumerate(zip(refs, outs, strict=True)):
        compare(r, o, rtol, atol, f"output {i}")
