"""ORT_ENABLE_ALL layout pass: the constant weights of FusedMatMul / FusedMatMulGroup
packed once for kernels/linalg/sgemm_packed.py (as onnxruntime's MLAS packs MatMul weights at
session creation), so no call repacks them the way BLAS does.

A 2-D float32 weight W (K, N) (transB folded in) becomes its packed (ceil(N/NR), K, NR)
copy (NR = 32 on AVX-512 hosts, 16 on AVX2) and the node gets attribute packed = N.
Only weights that nothing else reads are packed, and the original is dropped (a tied
embedding / output projection stays with BLAS); weights under _MIN_SIZE values stay
with BLAS too (packing gains nothing there, and a small model then need not import
numba). While the pass runs, the loaded graph still holds every original, so a packed
copy doubles the resident weights at the peak. A caller that owns the weights (a
session that loaded the model itself, see WeightOwnership) lets the pass pack a weight
over its own bytes instead, when no other tensor shares its buffer and its N is a
multiple of NR: one scratch copy of the largest weight is then all the pass adds.

On by default where the AVX-512 tiles run: at transformer shapes they reach 1.2-1.5x
the throughput of OpenBLAS's sgemm on the same threads (benchmarks/
bench_sgemm_packed.py), and packing BERT-base's 340 MB costs ~50-70 ms of a ~1.7 s
session creation. ONNXEXEC_PACK_WEIGHTS=1 / 0 forces it on / off (on AVX2 hosts it
stays opt-in: the 16-wide kernels were not measured faster than BLAS there).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from onnxexec.errors import OnnxExecError
from onnxexec.ir.graph import Graph, Node
from onnxexec.kernels import tuning
from onnxexec.passes._editor import GraphEditor

D = "onnxexec"
_OPS = ("FusedMatMul", "FusedMatMulGroup")
_MIN_SIZE = tuning.PACK_WEIGHTS_MIN_SIZE  # K * N below which a weight stays unpacked


@dataclass
class WeightOwnership:
    """Handed to optimize() by a caller whose graph's weights no one else can see: the
    pass may then overwrite them in place. `consumed` counts the weights overwritten;
    when it is non-zero the caller must not read the graph it passed in again."""

    consumed: int = 0


class WeightsSpentError(OnnxExecError):
    """Packing in place failed after it had started overwriting the graph's weights:
    the graph it was given can't be used, so the failure must not be skipped."""


_OWNER: ContextVar[WeightOwnership | None] = ContextVar("onnxexec_weight_owner", default=None)


@contextmanager
def owned_weights(owner: WeightOwnership | None) -> Iterator[None]:
    token = _OWNER.set(owner)
    try:
        yield
    finally:
        _OWNER.reset(token)


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _root_uses(g: Graph) -> Counter[int]:
    """How many initializers (nested graphs' included) view each root buffer."""
    uses: Counter[int] = Counter()

    def walk(gr: Graph) -> None:
        for v in gr.initializers.values():
            if isinstance(v, np.ndarray):
                uses[id(_root(v))] += 1
        for n in gr.nodes:
            for sg in n.subgraphs():
                walk(sg)

    walk(g)
    return uses


def _writable_bytes(src: np.ndarray, uses: Counter[int]) -> np.ndarray | None:
    """A writable flat float32 view of exactly `src`'s bytes when the pass may pack over
    them: src C-contiguous with N % nr == 0 (checked by the caller), its buffer
    allocated by numpy and viewed by no other initializer."""
    root = _root(src)
    if not (src.flags.c_contiguous and root.flags.owndata and uses[id(root)] == 1):
        return None
    offset = src.ctypes.data - root.ctypes.data
    if offset < 0 or offset + src.nbytes > root.nbytes or not root.flags.c_contiguous:
        return None
    root.flags.writeable = True
    return np.ndarray(src.size, np.float32, buffer=root, offset=offset)


def _packable(ed: GraphEditor, n: Node) -> tuple[np.ndarray, bool] | None:
    """(the stored weight, whether the node reads it transposed) of a node to pack."""
    if n.domain != D or n.op_type not in _OPS or n.attrs.get("packed", 0) or len(n.inputs) < 2:
        return None
    w = ed.const(n.inputs[1])
    if w is None or w.ndim != 2 or w.dtype != np.float32 or n.attrs.get("transB", 0) not in (0, 1):
        return None
    if w.size < _MIN_SIZE:
        return None
    if (
        ed.n_uses(n.inputs[1]) != 1
        or n.inputs[1] in ed.subgraph_reads
        or n.inputs[0] == n.inputs[1]
    ):
        return None
    return w, bool(n.attrs.get("transB", 0))


def pack_weights(g: Graph) -> Graph:
    """`g` with its FusedMatMul(Group) weights packed (`g` if none applies)."""
    force = os.environ.get("ONNXEXEC_PACK_WEIGHTS", "")
    if force == "0":
        return g
    ed = GraphEditor(g)
    todo = [(n, w) for n in ed.nodes if (w := _packable(ed, n)) is not None]
    if not todo:
        return g  # the kernel module (numba) is then never imported
    from onnxexec.kernels.linalg import sgemm_packed

    if not sgemm_packed.AVAILABLE or not (sgemm_packed.AVX512 or force == "1"):
        return g
    todo = [(n, w) for n, w in todo if ed.claim([n])]
    nr = sgemm_packed.NR
    owner = _OWNER.get()
    uses = _root_uses(g) if owner is not None else Counter()
    in_place: list[tuple[int, np.ndarray]] = []
    for i, (_, (src, trans)) in enumerate(todo):
        if owner is not None and (src.shape[0] if trans else src.shape[1]) % nr == 0:
            dst = _writable_bytes(src, uses)
            if dst is not None:
                in_place.append((i, dst))
    packed: dict[int, np.ndarray] = {}  # index in todo -> packed weight
    # Two threads (numpy's copy releases the GIL): for a copy most of the cost is the
    # first touch of its fresh pages, which ran 0.4 GB/s on one thread of this VM and
    # twice that on two.
    with ThreadPoolExecutor(min(2, os.cpu_count() or 1)) as ex:
        if in_place and owner is not None:  # (in_place is empty without an owner)
            scratch = np.empty(max(todo[i][1][0].size for i, _ in in_place), np.float32)
            owner.consumed += len(in_place)
            try:
                for i, dst in in_place:
                    src, trans = todo[i][1]
                    wp = sgemm_packed.pack_in_place(dst, src, trans, scratch, nr, ex)
                    wp.flags.writeable = False
                    packed[i] = wp
            except Exception as e:
                # the pipeline skips a pass that fails, but `g` is no longer intact
                raise WeightsSpentError(f"packing weights in place failed: {e}") from e
            del scratch
        rest = [i for i in range(len(todo)) if i not in packed]
        copies = ex.map(lambda i: sgemm_packed.pack(_as_kn(*todo[i][1])), rest)
        for i, wp in zip(rest, copies, strict=True):
            packed[i] = wp
    for i, (n, (src, trans)) in enumerate(todo):
        name = ed.add_const(f"{n.inputs[1]}__packed{nr}", packed[i])
        ed.inits.pop(n.inputs[1], None)
        attrs = dict(n.attrs, packed=int(src.shape[0] if trans else src.shape[1]))
        if n.op_type == "FusedMatMul":
            attrs["transB"] = 0
        ins = (n.inputs[0], name, *n.inputs[2:])
        ed.replace([n], n, Node(n.op_type, ins, n.outputs, attrs, n.name, D))
    return ed.build() if ed.changed else g


def _as_kn(src: np.ndarray, trans: bool) -> np.ndarray:
    return src.T if trans else src
