"""Build one model from many subgraphs, run it at every level, compare with level 0."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from onnxexec.runtime.options import SessionOptions
from onnxexec.runtime.session import InferenceSession
from tests.differential._sub import Sub

LEVELS = (0, 1, 2, 99)
STATS: Counter[str] = Counter()  # graphs / models / fusions seen, for the summary


def build(subs: Sequence[Sub], opset: int) -> ModelProto:
    nodes = [n for s in subs for n in s.nodes]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
        for s in subs
        for name, shape, _ in s.inputs
    ]
    outputs = [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for s in subs for o in s.outputs
    ]
    inits = [numpy_helper.from_array(v, k) for s in subs for k, v in s.inits.items()]
    g = helper.make_graph(nodes, "differential", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def feeds(subs: Sequence[Sub]) -> dict[str, np.ndarray]:
    return {name: v for s in subs for name, _, v in s.inputs}


def session(m: ModelProto | bytes, level: int) -> InferenceSession:
    o = SessionOptions()
    o.graph_optimization_level = level  # type: ignore[assignment]
    return InferenceSession(m if isinstance(m, bytes) else m.SerializeToString(), o)


def _static(s: Sub) -> bool:
    return all(isinstance(d, int) for _, shape, _ in s.inputs for d in shape)


def check_fusions(s: Sub, op_types: set[str]) -> None:
    """`op_types`: the ops of the optimized nodes writing a value of `s`."""
    bad = s.must_not & op_types
    assert not bad, f"{s.family} {s.prefix}: near miss fused into {sorted(bad)}"
    if _static(s):  # a symbolic width may legitimately keep a pattern unfused
        missing = s.must - op_types
        assert not missing, (
            f"{s.family} {s.prefix}: expected {sorted(missing)}, got {sorted(op_types)}"
        )
    STATS["fusions asserted"] += len(s.must) + len(s.must_not)


def compare(label: str, got: np.ndarray, ref: np.ndarray, tol: tuple[float, float]) -> None:
    """Same dtype and shape; NaN and inf where level 0 has them; numbers bit-equal or
    within (rtol, atol)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, (
        f"{label}: {got.dtype}{list(got.shape)} vs level 0 {ref.dtype}{list(ref.shape)}"
    )
    if tol == (0.0, 0.0):
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        assert same.all(), f"{label}: not bit-equal at {np.argwhere(~same)[:5].tolist()}"
    else:
        np.testing.assert_allclose(got, ref, rtol=tol[0], atol=tol[1], err_msg=label)


def run_differential(subs: Sequence[Sub], opset: int) -> None:
    m = build(subs, opset).SerializeToString()
    fd = feeds(subs)
    names = [o for s in subs for o in s.outputs]
    owner = {o: s for s in subs for o in s.outputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf / NaN inputs on purpose
        ref = session(m, 0).run(None, fd)
        for lv in LEVELS[1:]:
            sess = session(m, lv)
            outs = sess.run(None, fd)
            for name, got, r in zip(names, outs, ref, strict=True):
                try:
                    compare(f"level {lv} output {name}", got, r, owner[name].tol)
                except AssertionError as e:
                    STATS["mismatches"] += 1
                    raise AssertionError(f"{e}\n{describe(owner[name], fd)}") from None
            if lv >= 2:
                _fusions(sess, subs)
    STATS["models"] += 1
    STATS["graphs"] += len(subs)
    for s in subs:
        STATS[f"graphs: {s.family}"] += 1


def _fusions(sess: Any, subs: Sequence[Sub]) -> None:
    by_prefix: dict[str, set[str]] = {s.prefix: set() for s in subs}
    for n in sess.optimized_graph.nodes:
        for o in n.outputs:
            p = o.split("_", 1)[0] + "_"
            if p in by_prefix:
                by_prefix[p].add(n.op_type)
    for s in subs:
        check_fusions(s, by_prefix[s.prefix])


def describe(s: Sub, fd: dict[str, np.ndarray]) -> str:
    """The subgraph as text: its nodes, inputs (declared shape) and constants."""
    shapes = {k: f"{list(v.shape)} {v.reshape(-1)[:6].tolist()}" for k, v in s.inits.items()}
    lines = [f"{s.family} subgraph {s.prefix}:"]
    lines += [
        f"  input {n} declared {d} fed {fd[n].reshape(-1)[:6].tolist()}" for n, d, _ in s.inputs
    ]
    lines += [f"  const {k} {v}" for k, v in shapes.items()]
    for n in s.nodes:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        lines.append(f"  {list(n.output)} = {n.op_type}({', '.join(n.input)}) {attrs or ''}")
    return "\n".join(lines)
