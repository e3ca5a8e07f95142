"""Well-formed seed inputs the mutators start from: small ONNX models, tiny GGUF LLMs
and tokenizer metadata of each vocabulary family (SPM, BPE, WPM, UGM)."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "parity" / "fixtures"


def _model(nodes: list, inputs: list, outputs: list, inits: list, opset: int = 17) -> bytes:
    from onnx import helper

    g = helper.make_graph(nodes, "seed", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


@functools.cache
def onnx_seeds() -> tuple[bytes, ...]:
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)

    def init(name: str, a: np.ndarray) -> Any:
        return nh.from_array(a, name)

    def vi(name: str, elem: int, shape: list) -> Any:
        return h.make_tensor_value_info(name, elem, shape)

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    seeds = [
        _model(
            [
                h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
                h.make_node("Relu", ["c"], ["r"]),
                h.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
            ],
            [vi("x", T.FLOAT, [1, 3, 8, 8])],
            [vi("y", T.FLOAT, [1, 4, 4, 4])],
            [init("w", f32(4, 3, 3, 3)), init("b", f32(4))],
        ),
        _model(
            [
                h.make_node("MatMul", ["x", "w"], ["m"]),
                h.make_node("Add", ["m", "b"], ["a"]),
                h.make_node("Softmax", ["a"], ["s"], axis=-1),
                h.make_node("Gather", ["s", "idx"], ["y"], axis=1),
            ],
            [vi("x", T.FLOAT, [2, 8])],
            [vi("y", T.FLOAT, [2, 3])],
            [init("w", f32(8, 6)), init("b", f32(6)), init("idx", np.array([0, 5, 2], np.int64))],
        ),
        _model(
            [
                h.make_node("Reshape", ["x", "shape"], ["r"]),
                h.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
                h.make_node("Split", ["t", "sp"], ["s0", "s1"], axis=1),
                h.make_node("Concat", ["s1", "s0"], ["y"], axis=1),
            ],
            [vi("x", T.FLOAT, [2, 12])],
            [vi("y", T.FLOAT, [2, 4, 3])],
            [init("shape", np.array([2, 3, 4], np.int64)), init("sp", np.array([1, 3], np.int64))],
            opset=18,
        ),
        _model(
            [
                h.make_node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
                h.make_node("Gemm", ["n", "w", "c"], ["y"], transB=1, alpha=0.5),
            ],
            [vi("x", T.FLOAT, [3, 8])],
            [vi("y", T.FLOAT, [3, 5])],
            [init("g", f32(8)), init("be", f32(8)), init("w", f32(5, 8)), init("c", f32(5))],
        ),
        _model(
            [
                h.make_node(
                    "If",
                    ["cond"],
                    ["y"],
                    then_branch=h.make_graph(
                        [h.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", T.FLOAT, [4])]
                    ),
                    else_branch=h.make_graph(
                        [h.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT, [4])]
                    ),
                )
            ],
            [vi("cond", T.BOOL, []), vi("x", T.FLOAT, [4])],
            [vi("y", T.FLOAT, [4])],
            [],
        ),
        _model(
            [
                h.make_node("Slice", ["x", "st", "en", "ax"], ["s"]),
                h.make_node("Pad", ["s", "pads"], ["p"], mode="reflect"),
                h.make_node("ReduceMean", ["p", "rax"], ["m"], keepdims=1),
                h.make_node("Cast", ["m"], ["y"], to=T.INT32),
            ],
            [vi("x", T.FLOAT, [2, 6, 6])],
            [vi("y", T.INT32, [2, 1, 6])],
            [
                init("st", np.array([1], np.int64)),
                init("en", np.array([5], np.int64)),
                init("ax", np.array([1], np.int64)),
                init("pads", np.array([0, 1, 0, 0, 1, 0], np.int64)),
                init("rax", np.array([1], np.int64)),
            ],
            opset=18,
        ),
        _model(
            [
                h.make_node("AveragePool", ["x"], ["p"], kernel_shape=[3], pads=[1, 1]),
                h.make_node("TopK", ["p", "k"], ["v", "i"], axis=-1),
                h.make_node("Einsum", ["v", "w"], ["y"], equation="bcl,dl->bcd"),
            ],
            [vi("x", T.FLOAT, [1, 2, 10])],
            [vi("y", T.FLOAT, [1, 2, 3]), vi("i", T.INT64, [1, 2, 4])],
            [init("k", np.array([4], np.int64)), init("w", f32(3, 4))],
        ),
        _external_seed(f32(3, 4)),
    ]
    return tuple(seeds)


EXTERNAL = "w.bin"  # the external-data file run_onnx writes next to a case's model
EXTERNAL_BYTES = np.arange(64, dtype=np.float32).tobytes()


def _external_seed(w: np.ndarray) -> bytes:
    """MatMul with its weight in EXTERNAL at offset 16 (works only when loaded from a
    file: from bytes it is a clean error)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    t = T(name="w", data_type=T.FLOAT, dims=[3, 4], data_location=T.EXTERNAL)
    for k, v in (("location", EXTERNAL), ("offset", "16"), ("length", "48")):
        e = t.external_data.add()
        e.key, e.value = k, v
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 4])
    return _model([h.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [t])


@functools.cache
def gguf_seeds() -> tuple[bytes, ...]:
    """Tiny one-layer decoders: llama F32, qwen2 Q8_0 (biases), gemma3 (windows, softcap)."""
    from tests.unit.llm._tiny import write_tiny_gguf

    out = []
    with tempfile.TemporaryDirectory() as d:
        for i, (arch, kw) in enumerate(
            [
                ("llama", {}),
                ("qwen2", {"wtype": "Q8_0"}),
                ("gemma3", {"window": 4, "softcap": 30.0, "n_layer": 2}),
            ]
        ):
            kw = {"n_layer": 1, **kw}
            p = write_tiny_gguf(Path(d) / f"s{i}.gguf", arch=arch, seed=i, **kw)
            out.append(p.read_bytes())
    return tuple(out)


K = "tokenizer.ggml."


@functools.cache
def tokenizer_seeds() -> tuple[dict[str, Any], ...]:
    """Metadata of one vocabulary per family, as read_gguf decodes it."""
    v = json.loads((FIXTURES / "tiny_vocab.json").read_text())
    bpe = {
        "general.architecture": "llama",
        K + "model": "gpt2",
        K + "pre": "smollm",
        K + "tokens": v["tokens"],
        K + "token_type": v["token_types"],
        K + "merges": v["merges"],
        K + "bos_token_id": 1,
        K + "eos_token_id": 2,
    }
    pieces = ["▁", "▁t", "he", "▁the", "▁a", "in", "er", "an", "▁s", "on", "▁w", "re", "at"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    spm_tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces]
    spm_tokens += [*letters, "<|user|>"]
    spm = {
        "general.architecture": "llama",
        K + "model": "llama",
        K + "tokens": spm_tokens,
        K + "scores": [0.0, 0.0, 0.0]
        + [0.0] * 256
        + [-float(i) for i in range(len(pieces))]
        + [-20.0 - i for i in range(len(letters))]
        + [0.0],
        K + "token_type": [2, 3, 3] + [6] * 256 + [1] * (len(pieces) + len(letters)) + [4],
        K + "add_bos_token": True,
        "general.name": "phi-3 seed",  # takes model_attrs' phi-3 branch
    }
    # llama.cpp's BERT vocabularies mark word starts with "▁" (convert_hf_to_gguf)
    words = ["▁the", "▁a", "s", "ing", "▁un", "aff", "able", "▁hello", "▁,", "▁.", "▁!"]
    wpm_tokens = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]"]
    wpm_tokens += ["[MASK]", *words, *letters, *(f"▁{c}" for c in letters)]
    wpm = {
        "general.architecture": "bert",
        K + "model": "bert",
        K + "tokens": wpm_tokens,
        K + "token_type": [3] + [5] * 99 + [2, 3, 3, 3] + [1] * (len(wpm_tokens) - 104),
    }
    ugm_tokens = ["<pad>", "</s>", "<unk>", "▁", *("▁" + w for w in ("the", "a", "hello"))]
    ugm_tokens += [*letters, "<extra_id_0>"]
    ugm = {
        "general.architecture": "t5",
        K + "model": "t5",
        K + "tokens": ugm_tokens,
        K + "scores": [0.0, 0.0, 0.0, -2.0, -3.0, -4.0, -5.0]
        + [-8.0 - i / 10 for i in range(26)]
        + [0.0],
        K + "token_type": [3, 3, 2] + [1] * (len(ugm_tokens) - 4) + [4],
    }
    return (bpe, spm, wpm, ugm)
