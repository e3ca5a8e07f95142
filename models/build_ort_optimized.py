"""Build models as onnxruntime's transformer optimizer emits them (com.microsoft ops).

    python models/build_ort_optimized.py OUT_DIR [--only NAME[@LEVEL] ...] [--size tiny|full]

For each model (bert, gpt2, vit from _specs.py; bart and t5 encoders defined here;
random seeded weights from transformers configs): export it with the TorchScript
exporter (the optimizer's fusions match its graphs), run
`onnxruntime.transformers.optimizer.optimize_model(model_type=...)` with the fp32 CPU
options at an optimizer `opt_level` (LEVEL "default": the model type's default, 1
today; 0: the Python fusions alone; 2: onnxruntime's extended CPU fusions too; "ort":
onnxruntime's extended-level graph rewrites alone, only_onnxruntime=True; "mha": the
default level with FusionOptions use_multi_head_attention and enable_gelu_approximation),
and
write OUT_DIR/<name>_ortopt_<LEVEL>.onnx, its .inputs.npz and a manifest.json entry
listing the optimized graph's op types. Nothing is downloaded; existing files are
reused.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import onnx
import torch
from _onnx_export import export
from _specs import TINY_SEQ, TINY_VOCAB, ModelSpec, make_spec, text_inputs

MANIFEST = "manifest.json"
# name -> (optimizer model_type, heads, hidden) at --size tiny / full
OPTIMIZED: dict[str, tuple[str, dict[str, tuple[int, int]]]] = {
    "bert": ("bert", {"tiny": (4, 64), "full": (12, 768)}),
    "gpt2": ("gpt2", {"tiny": (4, 64), "full": (12, 768)}),
    "vit": ("vit", {"tiny": (4, 64), "full": (12, 768)}),
    "bart": ("bart", {"tiny": (4, 64)}),
    "t5": ("t5", {"tiny": (4, 64)}),
}


class _Encoder(torch.nn.Module):
    """An encoder-decoder's encoder: (input_ids, attention_mask) -> last_hidden_state."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _encoder_spec(name: str) -> ModelSpec:
    """bart / t5 encoders at the tiny size (not in _specs.py: only the optimizer uses
    them; its bart / t5 types fuse their LayerNorm / RMSNorm and GELU)."""
    import transformers

    torch.manual_seed(0)
    if name == "bart":
        cfg = transformers.BartConfig(
            vocab_size=TINY_VOCAB,
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            max_position_embeddings=64,
        )
        encoder = transformers.BartModel(cfg).get_encoder()
    else:
        cfg = transformers.T5Config(
            vocab_size=TINY_VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4
        )
        encoder = transformers.T5EncoderModel(cfg)
    names = ("input_ids", "attention_mask")
    axes = {0: "batch", 1: "seq"}
    return ModelSpec(
        name,
        _Encoder(encoder).eval(),
        names,
        ("last_hidden_state",),
        {**dict.fromkeys(names, axes), "last_hidden_state": axes},
        text_inputs(names, TINY_VOCAB),
        TINY_SEQ,
    )


LEVELS = {"default": None, "0": 0, "2": 2, "ort": 2, "mha": None}
DEFAULT_JOBS = (
    "bert@default",
    "bert@0",
    "gpt2@default",
    "gpt2@0",
    "vit@default",
    "bart@default",
    "t5@default",
    "bart@ort",
    "gpt2@ort",
    "bert@mha",
)


def build_one(name: str, level: str, size: str, out: Path) -> dict:
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    model_type, dims = OPTIMIZED[name]
    heads, hidden = dims[size]
    spec = _encoder_spec(name) if name in ("bart", "t5") else make_spec(name, size)
    # the optimizer's attention fusions match the eager (matmul-softmax-matmul) graph,
    # not the scaled_dot_product_attention one transformers picks by default
    for m in spec.module.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None:
            cfg._attn_implementation = "eager"
    stem = f"{name}_ortopt_{level}"
    file = f"{stem}.onnx"
    entry: dict = {"name": name, "level": level, "file": file, "model_type": model_type}
    options = None
    if level == "mha":
        options = FusionOptions(model_type)
        options.use_multi_head_attention = True
        options.enable_gelu_approximation = True
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        export(spec, "torchscript", raw)
        opt = optimize_model(
            str(raw),
            model_type=model_type,
            num_heads=heads,
            hidden_size=hidden,
            opt_level=LEVELS[level],
            use_gpu=False,
            only_onnxruntime=level == "ort",
            optimization_options=options,
        )
        opt.save_model_to_file(str(out / file))
    model = onnx.load(str(out / file))
    entry["op_types"] = dict(
        Counter(f"{n.domain}::{n.op_type}" if n.domain else n.op_type for n in model.graph.node)
    )
    feeds = spec.feeds(2)
    declared = {i.name for i in model.graph.input}
    np.savez(out / f"{stem}.inputs.npz", **{k: v for k, v in feeds.items() if k in declared})
    entry["inputs"] = f"{stem}.inputs.npz"
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*", default=list(DEFAULT_JOBS), metavar="NAME@LEVEL")
    p.add_argument("--size", default="tiny", choices=("tiny", "full"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / MANIFEST
    manifest = json.loads(path.read_text()) if path.exists() else {}
    failed = 0
    for job in args.only:
        name, _, level = job.partition("@")
        if name not in OPTIMIZED or (level or "default") not in LEVELS:
            p.error(f"unknown job {job!r}: NAME in {sorted(OPTIMIZED)}, LEVEL in {list(LEVELS)}")
        level = level or "default"
        key = f"{name}@{level}:{args.size}"
        have = manifest.get(key, {})
        if have and not have.get("error") and (args.out / have["file"]).exists():
            continue
        try:
            manifest[key] = build_one(name, level, args.size, args.out)
        except Exception:
            failed += 1
            manifest[key] = {"name": name, "error": traceback.format_exc()[-3000:]}
        path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        print(key, manifest[key].get("op_types") or manifest[key]["error"][-500:], flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
