"""Rows/s of `onnxexec batch` on Ray Data against a plain in-process loop, same data.

    python benchmarks/bench_batch.py [--rows 40000] [--batch 64] [--rounds 2]
        [--concurrency 1,2] [--hidden 512]

The model is an MLP (256 -> hidden -> hidden -> 16, float32, random weights) built in
a temp folder; the data one Parquet file of `rows` rows with a 256-float list column.
The loop reads the file, runs the session on batches of `batch` rows (one intra-op
thread) and writes the outputs to Parquet: what a user writes without Ray. The Ray
job (`onnxexec.ray.run_batch`, Ray started locally once, before timing) does the same
per shard in its actors (one thread each). Rounds are interleaved; the best of each
is reported; time/loop is the overhead (1.00x = as fast as the loop), and "w/o fixed"
the same without the per-job fixed cost (a one-batch job's time: Ray Data's start, actor
start, model load), i.e. the overhead of a long job.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_mlp(path: Path, hidden: int) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    dims = [256, hidden, hidden, 16]
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        inits.append(numpy_helper.from_array(np.zeros(dims[i + 1], np.float32), f"b{i}"))
        out = "y" if i == 2 else f"h{i}"
        nodes.append(
            helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}" if i < 2 else out])
        )
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def write_data(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    x = np.random.default_rng(1).standard_normal((rows, 256)).astype(np.float32)
    col = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 256)
    pq.write_table(pa.table({"x": col}), path, row_group_size=4096)


def plain_loop(model: Path, data: Path, out: Path, batch: int) -> float:
    """Seconds for read -> run in batches -> write, all in this process."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import onnxexec

    t0 = time.perf_counter()
    so = onnxexec.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxexec.InferenceSession(str(model), sess_options=so)
    x = pq.read_table(data).column("x").combine_chunks()
    flat = x.flatten().to_numpy().reshape(len(x), -1)
    ys = [sess.run(None, {"x": flat[i : i + batch]})[0] for i in range(0, len(flat), batch)]
    y = np.concatenate(ys)
    col = pa.FixedSizeListArray.from_arrays(pa.array(y.ravel()), y.shape[1])
    pq.write_table(pa.table({"x": x, "y": col}), out)
    return time.perf_counter() - t0


def ray_job(
    model: Path, data: Path, out: Path, batch: int, concurrency: int, shard_rows: int | None
) -> float:
    from onnxexec.ray import run_batch

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    s = run_batch(
        str(model), str(data), str(out), batch_size=batch, concurrency=concurrency,
        threads_per_worker=1, shard_rows=shard_rows,
    )  # fmt: skip
    if s.errors:
        raise RuntimeError(s.errors[0])
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=40000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", default="1,2")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--shard-rows", type=int, default=None, help="default: run_batch's")
    args = ap.parse_args(argv)
    import ray

    from onnxexec.ray.batch import connect

    conc = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench_batch") as tmp:
        d = Path(tmp)
        build_mlp(d / "mlp.onnx", args.hidden)
        write_data(d / "data.parquet", args.rows)
        write_data(d / "small.parquet", args.batch)
        t0 = time.perf_counter()
        connect(None)
        ray.data.DataContext.get_current().enable_progress_bars = False
        startup = time.perf_counter() - t0
        best: dict[str, float] = {}
        for _ in range(args.rounds):  # interleaved: the machine's load hits both
            t = plain_loop(d / "mlp.onnx", d / "data.parquet", d / "loop.parquet", args.batch)
            best["loop"] = min(best.get("loop", 1e9), t)
            for c in conc:
                t = ray_job(
                    d / "mlp.onnx",
                    d / "data.parquet",
                    d / f"out{c}",
                    args.batch,
                    c,
                    args.shard_rows,
                )
                best[f"ray c={c}"] = min(best.get(f"ray c={c}", 1e9), t)
            # a one-batch job: Ray Data's start, actor start, model load (per job, not per row)
            t = ray_job(d / "mlp.onnx", d / "small.parquet", d / "small", args.batch, 1, None)
            best["fixed"] = min(best.get("fixed", 1e9), t)
        ray.shutdown()
    print(f"rows {args.rows}, batch {args.batch}, MLP 256-{args.hidden}-{args.hidden}-16, "
          f"best of {args.rounds}; Ray local start {startup:.1f} s (not counted)")  # fmt: skip
    fixed = best.pop("fixed")
    print(f"{'run':<10} {'seconds':>8} {'rows/s':>10} {'time/loop':>10} {'w/o fixed':>10}")
    for name, t in best.items():
        steady = max(t - fixed, 1e-9) if name != "loop" else t
        print(f"{name:<10} {t:>8.2f} {args.rows / t:>10.0f} {t / best['loop']:>9.2f}x "
              f"{steady / best['loop']:>9.2f}x")  # fmt: skip
    print(f"fixed cost per Ray job (a {args.batch}-row job): {fixed:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
