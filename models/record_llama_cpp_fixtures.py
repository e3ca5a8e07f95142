"""Record llama.cpp's outputs as JSON fixtures for tests/parity/test_llama_cpp_parity.py.

    python models/record_llama_cpp_fixtures.py [--out tests/parity/fixtures] [--skip-smollm2]

Needs llama-cpp-python (run once, offline, whenever the fixtures must change); the
parity test then runs without it. For every tiny GGUF of models/build_tiny_gguf.py
(built into a temporary directory) the fixture holds the file's sha256, llama.cpp's
prompt ids, 16 greedy ids, the top-5 logits (ids + values) at the first prompt
positions and the last one, and the top-2 logit values of each greedy step (their gap
says how close each greedy choice was). For SmolLM2-135M-Instruct Q4_1 it holds the
prompt ids of a 100+-token prompt and 64 greedy ids with the same per-step data.
`--compare MODEL` instead prints, tensor by tensor, how far onnxexec's intermediate
values are from llama.cpp's (read through llama.cpp's eval callback): the tool for
hunting numeric differences.

llama.cpp runs as llama-cpp-python sets it up: n_threads=2, logits_all=True, its
default F16 KV cache and no flash attention; tokenize(add_bos per the GGUF's
tokenizer.ggml.add_bos_token, special=True); greedy = argmax of each step's logits.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_tiny_gguf as tiny

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "parity" / "fixtures"
TINY_PROMPT = (
    "The quick brown fox jumps over the lazy dog, and then it runs back "
    "home to sleep under the old oak tree."
)
SMOLLM2_PROMPT = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n<|im_start|>user\nHere is a short passage about the water cycle. "
    "Water evaporates from oceans, lakes and rivers when the sun heats it. The vapour "
    "rises, cools and condenses into tiny droplets that form clouds. When the droplets "
    "grow heavy they fall back to the ground as rain, snow or hail. Some of this water "
    "flows over the land into streams, while some soaks into the soil and becomes "
    "groundwater. Please summarise the passage in two sentences and explain why the "
    "cycle matters for life on Earth.<|im_end|>\n<|im_start|>assistant\n"
)
TINY_GREEDY, SMOLLM2_GREEDY = 16, 64
TOP_POSITIONS = 3  # top-5 logits recorded at prompt positions 0..2 and the last one


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _top(logits: np.ndarray, k: int) -> dict[str, list]:
    ids = np.argsort(-logits, kind="stable")[:k]
    return {"ids": [int(i) for i in ids], "values": [round(float(logits[i]), 5) for i in ids]}


def run_llama_cpp(path: Path, prompt: str, n_greedy: int, n_ctx: int = 512) -> dict[str, Any]:
    """Prompt ids, greedy ids and logit summaries from llama.cpp."""
    import llama_cpp

    from onnxexec.loaders.gguf_reader import read_gguf

    add_bos = bool(read_gguf(path).metadata.get("tokenizer.ggml.add_bos_token", False))
    llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=2, logits_all=True, verbose=False)
    ids = llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
    llm.reset()
    llm.eval(ids)
    scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)
    positions = [*range(min(TOP_POSITIONS, len(ids))), len(ids) - 1]
    out: dict[str, Any] = {
        "prompt_ids": [int(t) for t in ids],
        "prompt_top5": {str(p): _top(scores[p], 5) for p in positions},
    }
    greedy, steps = [], []
    for _ in range(n_greedy):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        tok = int(np.argmax(logits))
        greedy.append(tok)
        steps.append(_top(logits, 2)["values"])
        llm.eval([tok])
    out["greedy_ids"] = greedy
    out["greedy_top2"] = steps
    del llm
    return out


def record_tiny(out_dir: Path) -> dict[str, Any]:
    import llama_cpp

    records: dict[str, Any] = {}
    vocab = tiny.load_vocab()
    with tempfile.TemporaryDirectory() as tmp:
        for arch in tiny.ARCHS:
            for t in tiny.TYPES:
                path = tiny.build_tiny_gguf(arch, t, Path(tmp) / f"tiny-{arch}-{t}.gguf", vocab)
                rec = {"file": path.name, "sha256": sha256(path)}
                rec.update(run_llama_cpp(path, TINY_PROMPT, TINY_GREEDY))
                records[f"{arch}-{t}"] = rec
                print(
                    f"{arch}-{t}: {len(rec['prompt_ids'])} prompt ids, greedy "
                    f"{rec['greedy_ids'][:6]}...",
                    file=sys.stderr,
                )
    doc = {
        "llama_cpp_python": llama_cpp.__version__,
        "prompt": TINY_PROMPT,
        "n_greedy": TINY_GREEDY,
        "models": records,
    }
    (out_dir / "tiny_gguf.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def record_smollm2(out_dir: Path) -> dict[str, Any]:
    import llama_cpp

    path = tiny.smollm2_path()
    rec = {"file": path.name, "sha256": sha256(path)}
    rec.update(run_llama_cpp(path, SMOLLM2_PROMPT, SMOLLM2_GREEDY))
    doc = {
        "llama_cpp_python": llama_cpp.__version__,
        "prompt": SMOLLM2_PROMPT,
        "n_greedy": SMOLLM2_GREEDY,
        **rec,
    }
    (out_dir / "smollm2_q4_1.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(
        f"smollm2: {len(rec['prompt_ids'])} prompt ids, greedy {rec['greedy_ids'][:8]}...",
        file=sys.stderr,
    )
    return doc


class _GGMLTensor(ctypes.Structure):
    """struct ggml_tensor (ggml/include/ggml.h), to read tensors in the eval callback."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * 16),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * 64),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def llama_cpp_tensors(path: Path, tokens: list[int], n_ctx: int = 512) -> dict[str, list]:
    """Every f32 tensor llama.cpp computes for one batch of `tokens` (from position 0),
    by name ("attn_norm-0", "Qcur-0", ..., "result_output"), via the eval callback."""
    import llama_cpp as lc

    store: dict[str, list] = {}

    @lc.ggml_backend_sched_eval_callback
    def callback(ptr, ask, _user):
        if ask:
            return True
        t = _GGMLTensor.from_address(ptr)
        if t.type == 0 and t.data:  # GGML_TYPE_F32
            base = np.ctypeslib.as_array(
                ctypes.cast(t.data, ctypes.POINTER(ctypes.c_float)), shape=(1,)
            )
            arr = np.lib.stride_tricks.as_strided(
                base, shape=tuple(t.ne)[::-1], strides=tuple(t.nb)[::-1]
            )
            store.setdefault(t.name.decode(), []).append(arr.copy())
        return True

    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(str(path).encode(), lc.llama_model_default_params())
    cp = lc.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = n_ctx, 512, 512, 2, 2
    cp.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.cb_eval = callback
    ctx = lc.llama_init_from_model(model, cp)
    batch = lc.llama_batch_init(len(tokens), 0, 1)
    batch.n_tokens = len(tokens)
    for i, tok in enumerate(tokens):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = tok, i, 1, 1
        batch.seq_id[i][0] = 0
    rc = lc.llama_decode(ctx, batch)
    lc.llama_batch_free(batch)
    lc.llama_free(ctx)
    lc.llama_model_free(model)
    if rc != 0:
        raise RuntimeError(f"llama_decode failed ({rc})")
    return store


# (llama.cpp tensor name, index among same-named tensors, onnxexec value) per layer
_LAYER_PAIRS = [
    ("attn_norm", 0, "attn_norm"),
    ("Qcur", 0, "q"),
    ("Kcur", 0, "k"),
    ("Vcur", 0, "v"),
    ("Qcur", -1, "q_rope"),
    ("Kcur", -1, "k_rope"),
    ("kqv_out", 0, "attn"),
    ("attn_out", 0, "attn_out"),
    ("ffn_inp", 0, "attn_residual"),
    ("ffn_norm", 0, "ffn_norm"),
    ("ffn_gate", 0, "ffn_gate"),
    ("ffn_up", 0, "ffn_up"),
    ("ffn_out", 0, "ffn_down"),
    ("l_out", 0, "out"),
]


def compare(path: Path, prompt: str, n_layers: int = 2, mode: str = "int8") -> None:
    """Print max |difference| / max |llama.cpp| per tensor, onnxexec vs llama.cpp."""
    import dataclasses

    from onnxexec.ir.graph import ValueInfo
    from onnxexec.llm.graph import GraphOptions, build_llm_graph
    from onnxexec.llm.model import LLM
    from onnxexec.runtime.executor import execute
    from onnxexec.runtime.plan import plan_graph

    llm = LLM(path, n_ctx=512, options=GraphOptions(matmul_mode=mode, fuse=False))
    ids = llm.tokenizer.encode(prompt, add_special=True, parse_special=True)
    ref = llama_cpp_tensors(path, ids)
    g = build_llm_graph(
        llm.config, llm.weights, n_ctx=llm.n_ctx, last_only=False, options=llm.options
    )
    outs = tuple(ValueInfo(n.outputs[0]) for n in g.nodes)
    feeds = dict(llm._feeds, tokens=np.asarray(ids, np.int64), pos=np.asarray(0, np.int64))
    ours = dict(
        zip(
            [o.name for o in outs],
            execute(plan_graph(dataclasses.replace(g, outputs=outs)), feeds),
            strict=True,
        )
    )
    pairs = [
        (f"{a}-{il}", i, f"blk.{il}.{b}")
        for il in range(min(n_layers, llm.config.n_layer))
        for a, i, b in _LAYER_PAIRS
    ]
    pairs += [("result_norm", 0, "result_norm"), ("result_output", 0, "logits")]
    for name, idx, value in pairs:
        if name not in ref or value not in ours:
            continue
        a = ref[name][idx].reshape(len(ids), -1)
        b = ours[value].reshape(len(ids), -1)
        rel = float(np.abs(a - b).max() / max(float(np.abs(a).max()), 1e-30))
        print(f"{name:16s} {value:22s} max rel diff {rel:.2e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--skip-smollm2", action="store_true")
    ap.add_argument("--skip-tiny", action="store_true")
    ap.add_argument(
        "--compare",
        type=Path,
        metavar="MODEL",
        help="instead: print per-tensor differences onnxexec vs llama.cpp",
    )
    ap.add_argument("--mode", default="int8", help="QMatMul mode for --compare")
    args = ap.parse_args(argv)
    if args.compare:
        compare(args.compare, TINY_PROMPT, mode=args.mode)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.skip_tiny:
        record_tiny(args.out)
    if not args.skip_smollm2:
        record_smollm2(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
