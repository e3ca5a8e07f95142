"""What one fuzz case does, inside a worker process, and how its ending is classified.

Outcomes: "ok" (no error), "clean" (an OnnxExecError, or a ValueError the API
documents for the argument the target passed on purpose), "raw" (any other
exception: a bug). Crashes and hangs are seen by the parent (pool.py).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.errors import OnnxExecError

_NP = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def run_onnx(data: bytes, work: str) -> None:
    """Session creation from the bytes (or, for odd lengths, from a file: the mmap and
    preadv path), then one run with feeds of the declared shapes (symbolic or odd
    dims become 2)."""
    import onnxexec
    from tests.fuzz.seeds import EXTERNAL, EXTERNAL_BYTES

    ext = os.path.join(work, EXTERNAL)
    if not os.path.exists(ext):
        with open(ext, "wb") as f:
            f.write(EXTERNAL_BYTES)
    source: bytes | str = data
    if len(data) % 2:
        source = os.path.join(work, "case.onnx")
        with open(source, "wb") as f:
            f.write(data)
    sess = onnxexec.InferenceSession(source)
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        dtype = _NP.get(i.type)
        if dtype is None:
            return  # a feed type the fuzzer does not build: creation was the test
        shape = [d if isinstance(d, int) and 0 <= d <= 16 else 2 for d in i.shape or ()]
        feeds[i.name] = (rng.standard_normal(shape) * 3).astype(dtype)
    sess.run(None, feeds)


def run_gguf(data: bytes, work: str) -> None:
    """read_gguf, LLM load, a prompt of two tokens and one decode step, detokenized."""
    from onnxexec.llm.model import LLM
    from onnxexec.loaders.gguf_reader import read_gguf

    path = os.path.join(work, "case.gguf")
    with open(path, "wb") as f:
        f.write(data)
    read_gguf(path)
    llm = LLM(path, n_batch=4)  # the default n_ctx: within the file's context_length
    n = llm.config.n_vocab
    ids = [t % n for t in llm.tokenizer.encode("Hi there", add_special=False)[:2]] or [0]
    ids = ids[: llm.n_ctx]  # context_length may be 1
    logits = llm.eval(ids)
    nxt = int(np.argmax(logits[-1]))
    if llm.n_past < llm.n_ctx:
        llm.eval([nxt])
    llm.tokenizer.decode([*ids, nxt])


def run_tokenizer(payload: tuple[dict[str, Any], list[str], list[int]], _work: str) -> None:
    """Load from metadata, encode each text (ids must be in the vocabulary), decode them
    back, then decode given ids, out-of-range ones expected to raise ValueError."""
    from onnxexec.llm import load_tokenizer

    md, texts, ids = payload
    tok = load_tokenizer(md)
    n = tok.vocab_size
    for i, text in enumerate(texts):
        for add_special, parse_special in ((True, False), (False, True)):
            out = tok.encode(text, add_special=add_special, parse_special=parse_special)
            bad = [t for t in out if not (isinstance(t, int) and 0 <= t < n)]
            if bad:
                raise AssertionError(f"encode(text #{i}) gave ids outside [0, {n}): {bad[:5]}")
            tok.decode(out)
    good = [t % n for t in ids]
    tok.decode(good)
    s = tok.stream(skip_special=True)
    s.push_many(good)
    s.flush()
    outside = [t for t in ids if not 0 <= t < n]
    if outside:
        try:
            tok.decode(outside[:1])
        except ValueError:
            pass  # documented: token ids outside the vocabulary
        else:
            raise AssertionError(f"decode([{outside[0]}]) did not raise for {n} tokens")


def run_selftest(what: str, _work: str) -> None:
    """Each outcome on demand, to test the harness itself."""
    if what == "crash":
        import ctypes

        ctypes.string_at(0)  # SIGSEGV
    elif what == "hang":
        import time

        time.sleep(3600)
    elif what == "raw":
        {}["missing"]
    elif what == "clean":
        raise OnnxExecError("a clean error")
    elif what == "memory":
        np.ones(1 << 40, np.uint8)  # 1 TiB: MemoryError under the worker's limit


TARGETS: dict[str, Callable[[Any, str], None]] = {
    "selftest": run_selftest,
    "onnx": run_onnx,
    "gguf": run_gguf,
    "tokenizer": run_tokenizer,
}


def classify(target: str, payload: Any, work: str) -> tuple[str, str]:
    """(outcome, detail) of one case; detail names the exception and where it came from."""
    try:
        TARGETS[target](payload, work)
    except OnnxExecError as e:
        return "clean", type(e).__name__
    except Exception as e:
        frames = traceback.extract_tb(e.__traceback__)
        where = next(
            (
                f"{f.filename.rsplit('/onnxexec/', 1)[-1]}:{f.lineno}"
                for f in reversed(frames)
                if "/onnxexec/" in f.filename
            ),
            f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?",
        )
        return "raw", f"{type(e).__name__} at {where}: {str(e)[:200]}"
    return "ok", ""
