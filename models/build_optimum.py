"""Hugging Face optimum exports of random-weight transformers models (issue #26).

    /work/venv-optimum/bin/python models/build_optimum.py OUT_DIR [--size tiny|full]
        [--only bert gpt2 gpt2_past llama llama_past vit whisper resnet mobilenetv2]

Run with a separate venv: optimum-onnx pins transformers<4.58, the project venv has
transformers 5 (see benchmarks/RESULTS.md, "optimum exports"). Each model is built from
a config (shapes like models/_specs.py; never downloaded), seeded, saved with
save_pretrained to a temporary directory and exported with optimum's `main_export`
(the code path of `optimum-cli export onnx`). Writes OUT_DIR/<name>_optimum.onnx and,
beside it, <name>_optimum.inputs.npz: batch-1 feeds named after the graph inputs, which
is what benchmarks/bench_onnx.py --optimum-dir reads. Whisper gives two graphs
(whisper_enc, whisper_dec: the encoder and the decoder without past).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SEQ = {"tiny": 16, "full": 64}
PAST = {"tiny": 16, "full": 63}  # decode step: past of this length plus one new token
IMAGE = {"tiny": 32, "full": 224}


@dataclass
class Job:
    name: str  # output stem, <name>_optimum.onnx
    arch: str  # key of _configs
    task: str  # optimum task
    files: dict[str, str]  # our name -> file in optimum's output directory


JOBS = {
    "bert": Job("bert", "bert", "feature-extraction", {"bert": "model.onnx"}),
    "gpt2": Job("gpt2", "gpt2", "text-generation", {"gpt2": "model.onnx"}),
    "gpt2_past": Job("gpt2_past", "gpt2", "text-generation-with-past", {"gpt2_past": "model.onnx"}),
    "llama": Job("llama", "llama", "text-generation", {"llama": "model.onnx"}),
    "llama_past": Job(
        "llama_past", "llama", "text-generation-with-past", {"llama_past": "model.onnx"}
    ),
    "vit": Job("vit", "vit", "image-classification", {"vit": "model.onnx"}),
    "resnet": Job("resnet", "resnet", "image-classification", {"resnet": "model.onnx"}),
    "mobilenetv2": Job(
        "mobilenetv2", "mobilenetv2", "image-classification", {"mobilenetv2": "model.onnx"}
    ),
    "whisper": Job(
        "whisper",
        "whisper",
        "automatic-speech-recognition",
        {"whisper_enc": "encoder_model.onnx", "whisper_dec": "decoder_model.onnx"},
    ),
}


def _configs(arch: str, size: str) -> Any:
    """(config, auto class) for one architecture; "full" mirrors models/_specs.py."""
    import transformers as tf

    tiny = size == "tiny"
    if arch == "bert":
        kw = dict(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            vocab_size=128,
            max_position_embeddings=64,
        )
        return tf.BertConfig(**kw) if tiny else tf.BertConfig(), tf.AutoModel
    if arch == "gpt2":
        kw = dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        return (tf.GPT2Config(**kw) if tiny else tf.GPT2Config()), tf.AutoModelForCausalLM
    if arch == "llama":
        if tiny:
            kw = dict(
                vocab_size=128,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
            )
        else:  # SmolLM2-135M shapes
            kw = dict(
                vocab_size=49152,
                hidden_size=576,
                intermediate_size=1536,
                num_hidden_layers=30,
                num_attention_heads=9,
                num_key_value_heads=3,
                rms_norm_eps=1e-5,
                tie_word_embeddings=True,
                rope_theta=100000.0,
            )
        return tf.LlamaConfig(max_position_embeddings=2048, **kw), tf.AutoModelForCausalLM
    if arch == "vit":
        kw = dict(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            image_size=32,
            patch_size=8,
        )
        cfg = tf.ViTConfig(num_labels=10, **kw) if tiny else tf.ViTConfig(num_labels=1000)
        return cfg, tf.AutoModelForImageClassification
    if arch == "resnet":
        cfg = tf.ResNetConfig(
            embedding_size=16 if tiny else 64,
            hidden_sizes=[32, 64, 128, 256] if tiny else [256, 512, 1024, 2048],
            depths=[1, 1, 1, 1] if tiny else [3, 4, 6, 3],
            num_labels=10 if tiny else 1000,
        )
        return cfg, tf.AutoModelForImageClassification
    if arch == "mobilenetv2":
        cfg = tf.MobileNetV2Config(
            image_size=32 if tiny else 224,
            depth_multiplier=0.35 if tiny else 1.0,
            num_labels=10 if tiny else 1000,
        )
        return cfg, tf.AutoModelForImageClassification
    if arch == "whisper":  # whisper-tiny's shapes at "full"
        kw = dict(
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            vocab_size=256,
            max_source_positions=1500,
            max_target_positions=64,
            pad_token_id=0,  # the defaults (50256...) index past a tiny vocabulary
            bos_token_id=1,
            eos_token_id=2,
        )
        full = dict(
            d_model=384,
            encoder_layers=4,
            decoder_layers=4,
            encoder_attention_heads=6,
            decoder_attention_heads=6,
            encoder_ffn_dim=1536,
            decoder_ffn_dim=1536,
        )
        cfg = tf.WhisperConfig(**(kw if tiny else {**kw, **full, "vocab_size": 51865}))
        cfg.decoder_start_token_id = 1
        return cfg, tf.AutoModelForSpeechSeq2Seq
    raise ValueError(f"unknown architecture {arch!r}")


def _dim(d: Any, size: str, batch: int, seq: int, past: int) -> int:
    """A concrete size for one graph input dim: optimum names its symbolic dims."""
    if isinstance(d, int):
        return d
    name = str(d)
    if name == "num_channels":
        return 3
    if name in ("height", "width"):
        return IMAGE[size]
    if "batch" in name:
        return batch
    if "past" in name and "+" in name:
        return past + seq
    if "past" in name:
        return past
    if "encoder_sequence_length" in name:
        return 1500  # whisper's encoder output frames for 30 s of audio
    return seq


def make_feeds(path: Path, size: str, with_past: bool) -> dict[str, np.ndarray]:
    """Batch-1 feeds for every graph input, from the graph's declared shapes."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    seq = 1 if with_past else SEQ[size]
    past = PAST[size] if with_past else 0
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for inp in model.graph.input:
        t = inp.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
        shape = tuple(_dim(d, size, 1, seq, past) for d in dims)
        name = inp.name
        if name == "token_type_ids":  # BERT's type vocabulary has 2 entries
            feeds[name] = np.zeros(shape, np.int64)
        elif name == "attention_mask":
            feeds[name] = np.ones(shape, np.int64)
        elif name == "position_ids":
            feeds[name] = np.arange(past, past + shape[-1], dtype=np.int64)[None, :]
        elif t.elem_type == onnx.TensorProto.INT64:
            feeds[name] = rng.integers(0, 64, size=shape, dtype=np.int64)
        elif name == "input_features":  # log-mel frames: (B, 80, 3000)
            feeds[name] = rng.standard_normal(shape, dtype=np.float32)
        else:
            feeds[name] = rng.standard_normal(shape, dtype=np.float32)
    return feeds


def build(job: Job, out: Path, size: str, seed: int = 0) -> list[Path]:
    import onnx
    import torch
    from optimum.exporters.onnx import main_export

    cfg, auto = _configs(job.arch, size)
    torch.manual_seed(seed)
    model = auto.from_config(cfg).eval()
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "hf", Path(tmp) / "onnx"
        model.save_pretrained(src)
        main_export(str(src), output=str(dst), task=job.task, do_validation=False)
        for name, file in job.files.items():
            path = out / f"{name}_optimum.onnx"
            # re-saved as one file: the bench and the CLI take a single .onnx path
            onnx.save(onnx.load(str(dst / file)), str(path))
            feeds = make_feeds(path, size, job.task.endswith("with-past"))
            np.savez(path.with_name(path.stem + ".inputs.npz"), **feeds)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--size", choices=("tiny", "full"), default="tiny")
    p.add_argument("--only", nargs="+", choices=sorted(JOBS), default=sorted(JOBS))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in args.only:
        try:
            for path in build(JOBS[name], args.out, args.size):
                print("wrote", path, flush=True)
        except Exception as e:  # one architecture optimum cannot export must not stop the rest
            failed.append(name)
            print(f"{name}: FAILED {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    shutil.rmtree(args.out / "__pycache__", ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
