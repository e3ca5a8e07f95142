"""Batch inference on Ray Data: `batch_predict` (a Dataset of results) and `run_batch`
(what `onnxexec batch` runs: write every shard, return a summary).

The pipeline is a Ray Data `map_batches` over shard descriptors with an actor pool:
each actor builds its predictor once (model loaded with its own thread count), reads its
shard's rows itself, runs them and writes `OUT/part-NNNNNN.parquet` atomically (a temp
file in OUT, then `os.replace`), so a shard file is either complete or absent. A resumed
job (same model, input and shard size, checked against OUT/_plan.json) skips the shards
already on disk: an interrupted job loses and duplicates nothing. A crashed actor is
restarted and its shard retried by Ray Data (its actor pools default to unlimited
`max_restarts` / `max_task_retries`).
OUT must be a directory every node can write (local for one machine, a shared file
system on a cluster), and MODEL a path every node can read.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from onnxexec.ray.predictors import ERROR_COLUMN, JobSpec, make_predictor, model_kind
from onnxexec.ray.sources import (
    BatchInputError,
    Shard,
    input_files,
    plan_shards,
    read_shard,
    write_manifest,
)


@dataclass
class BatchSummary:
    """What a finished `run_batch` did."""

    output: str
    rows: int = 0  # rows written by this run
    shards_written: int = 0
    shards_skipped: int = 0  # already complete from an earlier run (--resume)
    errors: list[str] = field(default_factory=list)  # "row N: ..." for each poisoned row
    seconds: float = 0.0


def write_atomic(table: Any, path: Path) -> None:
    """Write a Parquet file so that `path` is either absent or complete."""
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


class ShardWorker:
    """Ray Data actor: one predictor, one shard per call."""

    def __init__(self, spec: JobSpec, out: str, return_rows: bool) -> None:
        self.predictor = make_predictor(spec)
        self.out = Path(out)
        self.return_rows = return_rows

    def run_shard(self, shard: Shard) -> tuple[Any, bool]:
        """(result table, written now?) for one shard; a complete shard is read back."""
        import pyarrow.parquet as pq

        path = self.out / shard.name
        if path.exists():
            return pq.read_table(path), False
        table = self.predictor.run_table(read_shard(shard), shard.row_offset)
        write_atomic(table, path)
        return table, True

    def __call__(self, batch: dict[str, np.ndarray]) -> Any:
        import pyarrow as pa

        tables, summary = [], []
        for item in batch["shard"]:
            shard = Shard(**json.loads(str(item)))
            table, written = self.run_shard(shard)
            tables.append(table)
            errors = [e for e in table.column(ERROR_COLUMN).to_pylist() if e is not None]
            summary.append((shard.index, table.num_rows, written, json.dumps(errors)))
        if self.return_rows:
            return pa.concat_tables(tables, promote_options="permissive")
        idx, rows, written_, errs = zip(*summary, strict=True)
        return {
            "shard": np.array(idx, np.int64),
            "rows": np.array(rows, np.int64),
            "written": np.array(written_, np.bool_),
            "errors": np.array(errs, dtype=object),
        }


def connect(address: str | None = None) -> None:
    """Connect to Ray at `address` ("auto", "ray://host:10001", "host:port"); without
    one, start Ray locally. Nothing happens when Ray is already initialized."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False)


def _prepare(
    model: str, data: str, output: str, spec: JobSpec, shard_rows: int, resume: bool
) -> list[Shard]:
    if not Path(model).is_file():
        raise BatchInputError(f"model file not found: {model}")
    files = input_files(data)
    shards = plan_shards(files, shard_rows)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    done = sorted(p.name for p in out.glob("part-*.parquet"))
    if done and not resume:
        raise BatchInputError(
            f"output directory {out} already holds {len(done)} shards; pass --resume "
            "(resume=True) to finish that job, or choose an empty directory"
        )
    for stale in out.glob(".part-*.tmp-*"):  # left by a killed run; never renamed
        stale.unlink()
    manifest = {
        "model": os.path.abspath(model),
        "model_bytes": os.path.getsize(model),
        "kind": spec.kind,
        "inputs": [[os.path.abspath(f), os.path.getsize(f)] for f in files],
        "shard_rows": shard_rows,
        "shards": len(shards),
    }
    write_manifest(out, manifest)
    return shards


def default_shard_rows(spec: JobSpec) -> int:
    """Rows per shard, the unit of dispatch and of resumption. ONNX: 64 batches, so a
    shard's fixed costs (dispatch, Parquet write) stay small next to its compute
    (benchmarks/bench_batch.py); LLM rows take seconds each: one batch per shard."""
    return spec.batch_size if spec.kind == "gguf" else spec.batch_size * 64


def _spec(model: str, **kw: Any) -> JobSpec:
    sampling = dict(kw.pop("sampling", None) or {})
    columns = dict(kw.pop("columns", None) or {})
    stop = tuple(kw.pop("stop", ()) or ())
    kind = model_kind(model, kw.get("tokenizer"))
    return JobSpec(model=model, kind=kind, sampling=sampling, columns=columns, stop=stop, **kw)


def _pipeline(
    spec: JobSpec, shards: Sequence[Shard], output: str, concurrency: int | None, rows: bool
) -> Any:
    import ray
    import ray.data

    if concurrency is None:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        concurrency = max(1, cpus // max(spec.threads, 1))
    concurrency = max(1, min(concurrency, len(shards)))
    items = [{"shard": json.dumps(s.to_dict())} for s in shards]
    # one descriptor per block: shards are dispatched to the actors one at a time
    ds = ray.data.from_items(items, override_num_blocks=max(len(items), 1))
    return ds.map_batches(
        ShardWorker,
        fn_constructor_kwargs={
            "spec": spec,
            "out": str(Path(output).resolve()),
            "return_rows": rows,
        },
        batch_size=1,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=max(spec.threads, 1),
    )


def batch_predict(
    model: str,
    data: str,
    output: str,
    *,
    address: str | None = None,
    batch_size: int = 64,
    concurrency: int | None = None,
    threads_per_worker: int = 1,
    shard_rows: int | None = None,
    resume: bool = False,
    columns: Mapping[str, str] | None = None,
    tokenizer: str | None = None,
    max_length: int = 512,
    sampling: Mapping[str, Any] | None = None,
    max_tokens: int = 128,
    stop: Sequence[str] = (),
    n_ctx: int | None = None,
) -> Any:
    """A lazy Ray Dataset of the results: the input columns, the model's outputs,
    `_row` (row index in the input) and `_error` (null, or why that row failed).

    Consuming it also writes OUT's shards; shards already written are read back.
    MODEL ending in .gguf is an LLM (rows hold `prompt` or `messages`); with
    `tokenizer` (a tokenizer.json) an ONNX model is a sentence embedder of `text`.
    `sampling` holds SamplingParams fields (temperature, top_k, seed...).
    """
    spec = _spec(
        model,
        batch_size=batch_size,
        threads=threads_per_worker,
        columns=columns,
        tokenizer=tokenizer,
        max_length=max_length,
        sampling=sampling,
        max_tokens=max_tokens,
        stop=stop,
        n_ctx=n_ctx,
    )
    shard_rows = shard_rows or default_shard_rows(spec)
    shards = _prepare(model, data, output, spec, shard_rows, resume)
    connect(address)
    return _pipeline(spec, shards, output, concurrency, rows=True)


def run_batch(
    model: str, data: str, output: str, *, address: str | None = None, **kw: Any
) -> BatchSummary:
    """Run the job to the end, as `onnxexec batch` does; returns only a summary (the
    rows stay in the workers and OUT). Keyword arguments as for `batch_predict`."""
    t0 = time.perf_counter()
    concurrency = kw.pop("concurrency", None)
    resume = kw.pop("resume", False)
    threads = kw.pop("threads_per_worker", 1)
    shard_rows = kw.pop("shard_rows", None)
    spec = _spec(model, threads=threads, **kw)
    shard_rows = shard_rows or default_shard_rows(spec)
    shards = _prepare(model, data, output, spec, shard_rows, resume)
    done = {p.name for p in Path(output).glob("part-*.parquet")}
    todo = [s for s in shards if s.name not in done]
    summary = BatchSummary(output=output, shards_skipped=len(shards) - len(todo))
    if todo:
        connect(address)
        ds = _pipeline(replace(spec), todo, output, concurrency, rows=False)
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            summary.rows += int(batch["rows"].sum())
            summary.shards_written += int(batch["written"].sum())
            for errs in batch["errors"]:
                summary.errors += json.loads(str(errs))
    summary.seconds = time.perf_counter() - t0
    return summary
