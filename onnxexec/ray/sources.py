"""Input data for `onnxexec batch`: shard planning and reading, without Ray.

A job's input (Parquet, CSV or JSONL files - a directory, a glob or one file - or one
`.npz`) is cut into shards of `shard_rows` rows in file order. The plan depends only on
the sorted file list, the file sizes and `shard_rows`, so a resumed job computes the same
shards and can skip those whose output is already on disk. CSV and JSONL shards carry the
byte range of their lines, so a worker reads only its own lines (a CSV value must not
contain a newline: the planner counts lines, not records).
"""

from __future__ import annotations

import glob
import io
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnxexec.errors import OnnxExecError

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".npz": "npz",
}


class BatchInputError(OnnxExecError, ValueError):
    """The batch job's input or output location cannot be used as given."""


@dataclass(frozen=True)
class Shard:
    """Rows [start, stop) of one input file; for CSV/JSONL also their byte range."""

    index: int
    path: str
    fmt: str
    start: int  # row index within the file
    stop: int
    row_offset: int  # index of the first row in the whole job (reported with errors)
    byte_start: int = 0
    byte_stop: int = 0

    @property
    def name(self) -> str:
        return f"part-{self.index:06d}.parquet"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def input_files(data: str | os.PathLike) -> list[str]:
    """The sorted shard files of DATA (a directory, a glob or a file), one format."""
    text = str(data)
    p = Path(text)
    if p.is_dir():
        files = sorted(str(f) for f in p.iterdir() if f.suffix.lower() in FORMATS)
    elif any(c in text for c in "*?["):
        files = sorted(glob.glob(text))
    elif p.is_file():
        files = [text]
    else:
        raise BatchInputError(f"input not found: {text}")
    if not files:
        raise BatchInputError(f"no .parquet, .csv, .jsonl or .npz files in input {text}")
    fmts = {FORMATS.get(Path(f).suffix.lower()) for f in files}
    if None in fmts or len(fmts) != 1:
        raise BatchInputError(
            f"input {text}: all files must share one format of {sorted(set(FORMATS))}, "
            f"got {sorted(Path(f).suffix for f in files)}"
        )
    if fmts == {"npz"} and len(files) > 1:
        raise BatchInputError(f"input {text}: give one .npz file, got {len(files)}")
    return files


def _line_offsets(path: str, skip_header: bool) -> list[int]:
    """Byte offset of each non-blank line, and the file size last."""
    offsets: list[int] = []
    pos = 0
    with open(path, "rb") as f:
        if skip_header:
            pos = len(f.readline())
        for line in f:
            if line.strip():
                offsets.append(pos)
            pos += len(line)
    offsets.append(pos)
    return offsets


def plan_shards(files: list[str], shard_rows: int) -> list[Shard]:
    """Cut the files into shards of at most `shard_rows` rows, in file order."""
    if shard_rows <= 0:
        raise BatchInputError(f"shard_rows must be positive, got {shard_rows}")
    shards: list[Shard] = []
    total = 0
    for path in files:
        fmt = FORMATS[Path(path).suffix.lower()]
        offsets: list[int] = []
        if fmt == "parquet":
            import pyarrow.parquet as pq

            n = pq.ParquetFile(path).metadata.num_rows
        elif fmt == "npz":
            n = _npz_rows(path)
        else:
            offsets = _line_offsets(path, skip_header=fmt == "csv")
            n = len(offsets) - 1
        for start in range(0, n, shard_rows):
            stop = min(start + shard_rows, n)
            b0, b1 = (offsets[start], offsets[stop]) if offsets else (0, 0)
            shards.append(Shard(len(shards), path, fmt, start, stop, total + start, b0, b1))
        total += n
    return shards


def _npz_rows(path: str) -> int:
    with np.load(path) as z:
        lengths = {k: z[k].shape[0] if z[k].ndim else -1 for k in z.files}
    if not lengths or len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise BatchInputError(
            f"{path}: every array must have the same first (row) dimension, got {lengths}"
        )
    return next(iter(lengths.values()))


def read_shard(shard: Shard) -> Any:
    """The shard's rows as a pyarrow Table (npz arrays of rank > 1 become list columns)."""
    import pyarrow as pa

    if shard.fmt == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(shard.path)
        groups, first, row = [], 0, 0
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if row + n > shard.start and row < shard.stop:
                if not groups:
                    first = row
                groups.append(g)
            row += n
        table = pf.read_row_groups(groups)
        return table.slice(shard.start - first, shard.stop - shard.start)
    if shard.fmt == "npz":
        with np.load(shard.path) as z:
            return pa.table({k: to_arrow(z[k][shard.start : shard.stop]) for k in z.files})
    with open(shard.path, "rb") as f:
        header = f.readline() if shard.fmt == "csv" else b""
        f.seek(shard.byte_start)
        body = f.read(shard.byte_stop - shard.byte_start)
    if shard.fmt == "csv":
        import pyarrow.csv as pcsv

        return pcsv.read_csv(io.BytesIO(header + body))
    import pyarrow.json as pjson

    # nested values (chat messages, feature lists) kept as parsed: explicit schema inference
    return pjson.read_json(io.BytesIO(body))


def to_arrow(arr: np.ndarray) -> Any:
    """(N, ...) array -> an arrow column: scalars for rank 1, else a fixed-size list per
    row holding the row flattened in C order."""
    import pyarrow as pa

    if arr.ndim <= 1:
        return pa.array(arr)
    width = int(np.prod(arr.shape[1:]))
    flat = np.ascontiguousarray(arr).reshape(-1)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), width)


def column_to_numpy(column: Any) -> np.ndarray:
    """An arrow column -> (N,) or (N, W) numpy array (list columns must be rectangular)."""
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if col.null_count:
        raise BatchInputError("the column has null values")
    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type):
        values = col.flatten()
        n = len(col)
        if n and len(values) % n:
            raise BatchInputError("its lists have different lengths")
        flat = values.to_numpy(zero_copy_only=False)
        if n and pa.types.is_list(col.type):
            lengths = np.diff(col.offsets.to_numpy())
            if (lengths != lengths[0]).any():
                raise BatchInputError("its lists have different lengths")
        return flat.reshape(n, -1) if n else flat.reshape(0, 0)
    return col.to_numpy(zero_copy_only=False)


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Write OUT/_plan.json atomically, or check that it matches a previous run's."""
    path = out / "_plan.json"
    if path.exists():
        old = json.loads(path.read_text())
        changed = sorted(k for k in {*old, *manifest} if old.get(k) != manifest.get(k))
        if changed:
            raise BatchInputError(
                f"{out} holds the output of a different job ({path} differs in "
                f"{', '.join(changed)}); resume with the same model, input and --batch-size / "
                "--shard-rows, or use an empty output directory"
            )
        return
    tmp = out / f"._plan.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, path)
