"""Shape-dependent folding from symbolic shape inference.

- A node whose integer outputs are fully known numbers (Shape of a static tensor,
  Gather / Concat / arithmetic over such shapes) becomes initializers.
- Reshape whose target is computed at run time but known symbolically gets a
  constant target: a symbolic entry equal to the input's dimension at the same
  position becomes 0 ("copy", allowzero=0) and at most one other becomes -1.
  `Reshape(x, Concat(Gather(Shape(x), 0), Gather(Shape(x), 1), [12], [64]))` turns
  into `Reshape(x, [0, 0, 12, 64])` and the whole Shape chain then dies.
- Expand to a target the input already has, and Reshape to the input's own shape,
  become Identity (removed by eliminate).
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import facts_of
from onnxexec.passes.fold_constants import NONDETERMINISTIC
from onnxexec.passes.shape_inference import Facts
from onnxexec.passes.symdim import Dim, is_static

_INT_TYPES = (6, 7, 12, 13)  # INT32, INT64, UINT32, UINT64


def _known_output(f: Facts) -> np.ndarray | None:
    if f.sym is None or f.elem not in _INT_TYPES or f.shape is None or len(f.shape) > 1:
        return None
    if not is_static(f.sym) or (f.shape == () and len(f.sym) != 1):
        return None
    return np.array(f.sym, dtype=np_dtype(f.elem)).reshape(f.shape if f.shape == () else -1)


def _reshape_target(x: Facts, target: tuple[Dim, ...], allowzero: int) -> np.ndarray | None:
    """Constant target for allowzero=0 (0 copies the input dim), or None.

    Copying a symbolic entry equal to the input's dim gives the same size under either
    allowzero, so allowzero=1 targets convert too unless they hold a literal 0.
    """
    if x.shape is None or (allowzero and 0 in target):
        return None
    out: list[int] = []
    free = 0
    for i, d in enumerate(target):
        if isinstance(d, int):
            if d == -1:
                free += 1
            elif d == 0 and i >= len(x.shape):
                return None
            out.append(d)
        elif i < len(x.shape) and x.shape[i] == d:
            out.append(0)
        else:
            free += 1
            out.append(-1)
    if free > 1:
        return None
    return np.array(out, dtype=np.int64)


def fold_shapes(g: Graph) -> Graph:
    """`g` with shape computations folded using symbolic shapes (`g` if nothing folds)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if (
            n.op_type in NONDETERMINISTIC
            or n.op_type == "Constant"
            or any(True for _ in n.subgraphs())
        ):
            continue
        found = [facts.get(o) for o in n.outputs if o]
        outs = [f for f in found if f is not None]
        if outs and len(outs) == len(found):
            values = [_known_output(f) for f in outs]
            if all(v is not None for v in values) and not all(
                ed.const(i) is not None for i in n.inputs if i
            ):
                for o, v in zip((o for o in n.outputs if o), values, strict=True):
                    ed.inits[o] = v
                ed.remove(n)
                continue
        _simplify(ed, n, facts)
    return ed.build() if ed.changed else g


def _simplify(ed: GraphEditor, n: Node, facts: dict[str, Facts]) -> None:
    if n.domain or len(n.inputs) < 2:
        return
    x = facts.get(n.inputs[0])
    y = facts.get(n.outputs[0])
    if x is None or y is None:
        return
    if n.op_type in ("Reshape", "Expand") and x.shape is not None and x.shape == y.shape:
        ed.replace([n], n, Node("Identity", n.inputs[:1], n.outputs, {}, n.name))
        return
    if n.op_type == "Reshape" and ed.const(n.inputs[1]) is None:
        s = facts.get(n.inputs[1])
        if s is None or s.sym is None:
            return
        target = _reshape_target(x, s.sym, n.attrs.get("allowzero", 0))
        if target is not None:
            name = ed.add_const(f"{n.outputs[0]}__shape", target)
            attrs = {k: v for k, v in n.attrs.items() if k != "allowzero"}
            ed.replace([n], n, Node("Reshape", (n.inputs[0], name), n.outputs, attrs, n.name))
