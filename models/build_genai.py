"""Tiny onnxruntime-genai models for parity tests, made by genai's own model builder.

    python models/build_genai.py OUT_DIR [--arch llama,qwen2] [--precision fp32,int4]
        [--hidden 128 --layers 2]   (larger sizes for benchmarks/bench_genai.py)

For each architecture: a transformers config (2 layers, hidden 128, 4 heads / 2 KV
heads) with random weights (torch.manual_seed per architecture) saved with
save_pretrained into OUT_DIR/hf-{arch}, a tokenizer.json built offline with the
`tokenizers` package from SmolLM2's byte-level BPE cut to its first N_VOCAB tokens
(tests/parity/fixtures/tiny_vocab.json, the same vocabulary as build_tiny_gguf.py),
then `python -m onnxruntime_genai.models.builder -m hf -o OUT_DIR/genai-{arch}-{p}
-p {p} -e cpu` writes model.onnx + genai_config.json + tokenizer files.

`build(out_dir)` skips a folder that already has a model.onnx, so tests can call it
on a cache directory and pay the build once.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB = ROOT / "tests" / "parity" / "fixtures" / "tiny_vocab.json"
N_VOCAB = 2048
ARCHS = ("llama", "qwen2")
PRECISIONS = ("fp32", "int4")


def _tokenizer_json(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    d = json.loads(VOCAB.read_text())
    tokens = d["tokens"][:N_VOCAB]
    vocab = {t: i for i, t in enumerate(tokens)}
    # Merge i makes token 252 + i (see build_tiny_gguf.py), so these merges are closed.
    merges = [tuple(m.split(" ")) for m in d["merges"][: N_VOCAB - 252]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(tokens, d["token_types"], strict=False) if ty == 3]
    tok.add_special_tokens(specials)
    tok.save(str(path))
    (path.parent / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|im_start|>",
                "eos_token": "<|endoftext|>",
                "model_max_length": 2048,
            }
        )
    )


def _hf_model(arch: str, out: Path, hidden: int = 128, layers: int = 2) -> None:
    import torch
    import transformers

    common = dict(
        vocab_size=N_VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(ARCHS.index(arch) + 1)
    if arch == "llama":
        cfg = transformers.LlamaConfig(**common)
        model = transformers.LlamaForCausalLM(cfg)
    else:
        cfg = transformers.Qwen2Config(**common)
        model = transformers.Qwen2ForCausalLM(cfg)
    # Larger-than-default init so logits have a spread of several units: greedy
    # decoding is then rarely decided by a near-tie between int4 paths.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 1.0 / p.shape[1] ** 0.5 * (3.0 if "embed" in name else 1.0))
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.1)
    model.save_pretrained(out, safe_serialization=True)
    _tokenizer_json(out / "tokenizer.json")


def build(
    out_dir: Path, archs=ARCHS, precisions=PRECISIONS, hidden: int = 128, layers: int = 2
) -> dict[tuple[str, str], Path]:
    """Build (or reuse) every arch x precision folder; the test size is the default,
    larger ones (benchmarks) get a -h{hidden}-l{layers} suffix."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, str], Path] = {}
    tag = "" if (hidden, layers) == (128, 2) else f"-h{hidden}-l{layers}"
    for arch in archs:
        hf = out_dir / f"hf-{arch}{tag}"
        if not (hf / "config.json").exists():
            _hf_model(arch, hf, hidden, layers)
        for p in precisions:
            dst = out_dir / f"genai-{arch}-{p}{tag}"
            if not (dst / "model.onnx").exists():
                cmd = [
                    sys.executable, "-m", "onnxruntime_genai.models.builder",
                    "-m", str(hf), "-o", str(dst), "-p", p, "-e", "cpu",
                    "-c", str(out_dir / "hf-cache"),
                ]  # fmt: skip
                subprocess.run(cmd, check=True, capture_output=True)
            done[(arch, p)] = dst
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--arch", default=",".join(ARCHS))
    ap.add_argument("--precision", default=",".join(PRECISIONS))
    ap.add_argument("--hidden", type=int, default=128, help="hidden size (benchmarks: 1024)")
    ap.add_argument("--layers", type=int, default=2)
    a = ap.parse_args()
    built = build(a.out_dir, a.arch.split(","), a.precision.split(","), a.hidden, a.layers)
    for key, path in built.items():
        print(key, path)


if __name__ == "__main__":
    main()
