"""Per-node overhead: chains of tiny ops at the top level, in an If branch and in a
Loop body, onnxexec vs onnxruntime in the same run (interleaved, 2 threads).

    python benchmarks/bench_overhead.py [--sizes 100,1000] [--rounds 5] [--levels 0,99]
        [--where top,if,loop,scan] [--stateful-levels 0,99] [--clock wall|cpu]

Each chain applies Add (a [4] float32 constant), Relu and Mul in turn to x: float32[4],
so every node is a kernel of well under a microsecond and the time is dispatch. Level 0
keeps the chain as built on both engines (no elementwise fusion), 99 is the default
level of both; the If variant runs the chain in its then-branch, the Loop variant in a
body run once, the Scan variant in a body run over one element. The table gives
microseconds per node (median over rounds) and onnxexec / onnxruntime. A second table
times models/build_stateful.py's detector (LSTM + If chain) per frame.

`--clock cpu` times with time.process_time (CPU time of all the process's threads):
on a machine shared with other jobs a run of a few ms is preempted in most rounds,
which wall time counts against the longer-running engine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_OPS = ("Add", "Relu", "Mul")


def _chain_nodes(n: int, src: str, dst: str, tag: str) -> tuple[list, list]:
    nodes, inits = [], []
    prev = src
    for i in range(n):
        out = dst if i == n - 1 else f"{tag}v{i}"
        op = _OPS[i % len(_OPS)]
        if op == "Relu":
            nodes.append(helper.make_node(op, [prev], [out], name=f"{tag}n{i}"))
        else:
            c = np.full((4,), 0.5 if op == "Mul" else 0.25, np.float32)
            inits.append(numpy_helper.from_array(c, f"{tag}c{i}"))
            nodes.append(helper.make_node(op, [prev, f"{tag}c{i}"], [out], name=f"{tag}n{i}"))
        prev = out
    return nodes, inits


def _io(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4])


def chain_model(n: int, where: str) -> onnx.ModelProto:
    """`n` tiny ops on x -> y at the top level ("top"), in an If branch or a Loop body."""
    if where == "top":
        nodes, inits = _chain_nodes(n, "x", "y", "")
        g = helper.make_graph(nodes, "chain", [_io("x")], [_io("y")], inits)
    elif where == "if":
        # the branch reads x from the outer scope; its constants live in the branch
        tn, ti = _chain_nodes(n, "x", "ty", "t")
        then_g = helper.make_graph(tn, "then", [], [_io("ty")], ti)
        else_g = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["ey"])], "else", [], [_io("ey")]
        )
        cond = numpy_helper.from_array(np.array(True), "cond")
        node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
        g = helper.make_graph([node], "if_chain", [_io("x")], [_io("y")], [cond])
    elif where == "scan":
        # state xin -> xout through the chain, one scan element (unused by the chain)
        bn, bi = _chain_nodes(n, "xin", "xout", "s")
        bn.append(helper.make_node("Identity", ["e"], ["eout"]))
        body = helper.make_graph(
            bn, "scan_body", [_io("xin"), _io("e")], [_io("xout"), _io("eout")], bi
        )
        inits = [numpy_helper.from_array(np.zeros((1, 4), np.float32), "elems")]
        node = helper.make_node("Scan", ["x", "elems"], ["y", "es"], body=body, num_scan_inputs=1)
        g = helper.make_graph([node], "scan_chain", [_io("x")], [_io("y")], inits)
    else:
        bn, bi = _chain_nodes(n, "xin", "xout", "b")
        bn.append(helper.make_node("Identity", ["cin"], ["cout"]))
        body = helper.make_graph(
            bn,
            "body",
            [
                helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
                _io("xin"),
            ],
            [helper.make_tensor_value_info("cout", TensorProto.BOOL, []), _io("xout")],
            bi,
        )
        inits = [
            numpy_helper.from_array(np.array(1, np.int64), "trip"),
            numpy_helper.from_array(np.array(True), "cond"),
        ]
        node = helper.make_node("Loop", ["trip", "cond", "x"], ["y"], body=body)
        g = helper.make_graph([node], "loop_chain", [_io("x")], [_io("y")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _sessions(model: bytes, level: int) -> tuple[Callable, Callable]:
    import onnxruntime as ort

    import onnxexec

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.graph_optimization_level = {
        0: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        1: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        2: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    }.get(level, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    ort_s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ox_s = onnxexec.InferenceSession(
        model,
        onnxexec.SessionOptions(intra_op_num_threads=2, graph_optimization_level=level),
    )
    feed = {"x": np.linspace(-1, 1, 4, dtype=np.float32)}
    a, b = ox_s.run(None, feed)[0], ort_s.run(None, feed)[0]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return (lambda: ox_s.run(None, feed)), (lambda: ort_s.run(None, feed))


_CLOCK: Callable[[], float] = time.perf_counter


def _per_call(fn: Callable, reps: int) -> float:
    t = _CLOCK()
    for _ in range(reps):
        fn()
    return (_CLOCK() - t) / reps


def measure(n: int, where: str, rounds: int, level: int) -> tuple[float, float]:
    """(onnxexec, onnxruntime) microseconds per node, medians over interleaved rounds."""
    ox, ort_run = _sessions(chain_model(n, where).SerializeToString(), level)
    reps = max(3, 20000 // n)
    for f in (ox, ort_run):  # warm up
        _per_call(f, 3)
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(ox, reps))
        b.append(_per_call(ort_run, reps))
    return statistics.median(a) * 1e6 / n, statistics.median(b) * 1e6 / n


def stateful(rounds: int, level: int) -> tuple[float, float]:
    """(onnxexec, onnxruntime) ms per call of models/build_stateful.py's detector, the
    state fed back each call as a user's streaming loop does."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    import onnxruntime as ort
    from build_stateful import stateful_model

    import onnxexec

    model = stateful_model().SerializeToString()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    ort_s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ox_s = onnxexec.InferenceSession(
        model, onnxexec.SessionOptions(intra_op_num_threads=2, graph_optimization_level=level)
    )
    rng = np.random.default_rng(1)
    frames = [rng.standard_normal((1, 1, 64)).astype(np.float32) for _ in range(50)]

    def stream(sess: object) -> list:
        h = c = np.zeros((1, 1, 64), np.float32)
        probs = []
        for x in frames:
            p, h, c = sess.run(None, {"x": x, "h": h, "c": c})  # type: ignore[attr-defined]
            probs.append(p)
        return probs

    np.testing.assert_allclose(stream(ox_s), stream(ort_s), rtol=1e-4, atol=1e-5)
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(lambda: stream(ox_s), 3) / len(frames))
        b.append(_per_call(lambda: stream(ort_s), 3) / len(frames))
    return statistics.median(a) * 1e3, statistics.median(b) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--where", default="top,if,loop,scan")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--levels", default="0,99")
    ap.add_argument("--stateful-levels", default="0,99", help="'': skip that model")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args(argv)
    global _CLOCK
    _CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    levels = [int(v) for v in args.levels.split(",") if v]
    if levels:
        print(f"clock: {args.clock}\n")
        print("| chain | nodes | level | onnxexec us/node | ort us/node | ratio |")
        print("|---|---:|---:|---:|---:|---:|")
    for where in args.where.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            for level in levels:
                ox, rt = measure(n, where, args.rounds, level)
                print(
                    f"| {where} | {n} | {level} | {ox:.2f} | {rt:.2f} | {ox / rt:.2f} |", flush=True
                )
    st_levels = [int(v) for v in args.stateful_levels.split(",") if v]
    if st_levels:
        # onnxruntime at its default level in every row (what a user runs)
        print("\n| stateful (LSTM + 20 If x 30 ops) | level | onnxexec ms | ort ms | ratio |")
        print("|---|---:|---:|---:|---:|")
    for level in st_levels:
        ox, rt = stateful(args.rounds, level)
        print(f"| frame | {level} | {ox:.3f} | {rt:.3f} | {ox / rt:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
