"""Shard planning and reading without Ray: every shard of a CSV, JSONL, Parquet or npz
input read on its own, concatenated, equals the whole file read by pyarrow / numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onnxexec.ray.sources import BatchInputError, input_files, plan_shards, read_shard

pa = pytest.importorskip("pyarrow")


def _all_rows(shards) -> list[dict]:
    return [r for s in shards for r in read_shard(s).to_pylist()]


def test_csv_and_jsonl_shards_by_byte_range(tmp_path):
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson

    rows = [{"a": i, "b": f"t{i},x" if i % 3 else "plain", "c": i * 0.5} for i in range(23)]
    csv_path = tmp_path / "d.csv"
    pcsv.write_csv(pa.Table.from_pylist(rows), csv_path)
    jl = tmp_path / "d.jsonl"
    jl.write_text(
        "".join(json.dumps(r) + "\n" + ("\n" if i == 5 else "") for i, r in enumerate(rows))
    )
    for path, whole in ((csv_path, pcsv.read_csv(csv_path)), (jl, pjson.read_json(jl))):
        shards = plan_shards(input_files(str(path)), 5)
        assert [(s.start, s.stop) for s in shards] == [
            (0, 5),
            (5, 10),
            (10, 15),
            (15, 20),
            (20, 23),
        ]
        assert _all_rows(shards) == whole.to_pylist()


def test_parquet_directory_and_npz(tmp_path):
    import pyarrow.parquet as pq

    d = tmp_path / "pq"
    d.mkdir()
    for k in range(2):
        pq.write_table(pa.table({"v": np.arange(k * 30, k * 30 + 30)}), d / f"{k}.parquet",
                       row_group_size=7)  # fmt: skip
    shards = plan_shards(input_files(str(d)), 8)
    assert [s.row_offset for s in shards] == [0, 8, 16, 24, 30, 38, 46, 54]
    assert [r["v"] for r in _all_rows(shards)] == list(range(60))
    x = np.random.default_rng(0).standard_normal((10, 2, 3)).astype(np.float32)
    np.savez(tmp_path / "a.npz", x=x, k=np.arange(10))
    t = pa.concat_tables(read_shard(s) for s in plan_shards([str(tmp_path / "a.npz")], 4))
    np.testing.assert_array_equal(np.stack(t.column("x").to_numpy(False)), x.reshape(10, 6))
    assert t.column("k").to_pylist() == list(range(10))


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(BatchInputError, match="not found"):
        input_files(str(tmp_path / "missing.parquet"))
    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "b.jsonl").write_text('{"x": 1}\n')
    with pytest.raises(BatchInputError, match="one format"):
        input_files(str(tmp_path))
    np.savez(tmp_path / "c.npz", a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(BatchInputError, match="same first"):
        plan_shards([str(tmp_path / "c.npz")], 2)
