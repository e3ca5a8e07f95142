"""What to build: one factory per model name, returning a ModelSpec at a given size.

Every model gets random weights from a fixed seed (torch.manual_seed before
construction); transformers models are built from config objects, never downloaded.
Sizes: "tiny" (hidden 64, 2 layers, seq 16, 32x32 images; seconds to export, used by
tests/parity) and "full" (the benchmark models: BERT-base, GPT-2 small, a SmolLM2-135M
shaped Llama with grouped-query attention, ResNet-50, MobileNetV2, ViT-B/16 at 224).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import _torch_models as tm
import numpy as np
import torch
from torch import nn

InputMaker = Callable[[int, int, int], dict[str, np.ndarray]]  # (batch, seq, seed) -> feeds

TINY_VOCAB = 128
TINY_SEQ = 16
TINY_IMAGE = 32
FULL_IMAGE = 224


@dataclass
class ModelSpec:
    """A torch module plus everything needed to export it and feed the export."""

    name: str
    module: nn.Module
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic: dict[str, dict[int, str]]  # input/output name -> {axis: symbolic dim name}
    make_inputs: InputMaker
    seq: int  # example sequence length; 0 for image models
    bench_batch: int = 1  # batch of the sidecar inputs at --size full
    # Both exporters fold eval-mode BatchNorm into the preceding Conv; True asks the
    # TorchScript exporter to keep BatchNormalization nodes (as in ONNX model-zoo ResNets).
    keep_batchnorm: bool = False

    def feeds(self, batch: int, seq: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
        return self.make_inputs(batch, self.seq if seq is None else seq, seed)


def text_inputs(names: tuple[str, ...], vocab: int) -> InputMaker:
    """input_ids uniform in [0, vocab); attention_mask right-padded on odd rows.

    Right padding keeps every causal query row attending to at least one key; odd rows
    carry padding so the exporters trace the masked path (a trace of an all-ones mask
    may specialize the mask away).
    """

    def make(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        feeds = {"input_ids": rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)}
        mask = np.ones((batch, seq), dtype=np.int64)
        for b in range(1, batch, 2):
            mask[b, seq - (seq // 4 + b // 2) :] = 0
        feeds["attention_mask"] = mask
        types = np.zeros((batch, seq), dtype=np.int64)
        types[:, seq // 2 :] = 1  # sentence pair: A then B
        feeds["token_type_ids"] = types
        return {n: feeds[n] for n in names}

    return make


def image_inputs(size: int | tuple[int, int]) -> InputMaker:
    """pixel_values (B, 3, H, W) float32, standard normal (already 'normalized');
    `size` is H = W or (H, W)."""
    hw = (size, size) if isinstance(size, int) else size

    def make(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((batch, 3, *hw), dtype=np.float32)
        return {"pixel_values": x}

    return make


class BertWrapper(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        return out.last_hidden_state, out.pooler_output  # (B, T, D), (B, D)


class CausalLMWrapper(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits  # (B, T, V)


class ImageClassifierWrapper(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixel_values).logits  # (B, num_labels)


_BT = {0: "batch", 1: "seq"}
_B = {0: "batch"}


def bert(size: str) -> ModelSpec:
    import transformers

    if size == "tiny":
        cfg = transformers.BertConfig(
            vocab_size=TINY_VOCAB,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
        )
        seq = TINY_SEQ
    else:
        cfg = transformers.BertConfig()  # bert-base-uncased shapes
        seq = 128
    names = ("input_ids", "attention_mask", "token_type_ids")
    return ModelSpec(
        "bert",
        BertWrapper(transformers.BertModel(cfg)),
        names,
        ("last_hidden_state", "pooler_output"),
        {**dict.fromkeys(names, _BT), "last_hidden_state": _BT, "pooler_output": _B},
        text_inputs(names, cfg.vocab_size),
        seq,
    )


class SentenceEmbeddingWrapper(nn.Module):
    """sentence-transformers' MiniLM recipe: mean of the token states under the
    attention mask, L2-normalized."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)  # (B, D)
        return nn.functional.normalize(pooled, p=2.0, dim=1)


def bert_base(size: str) -> ModelSpec:
    """BERT-base's layer shapes (hidden 768, 12 heads, FFN 3072); at "tiny" 2 layers,
    a 1024-token vocabulary and seq 32, so the export takes seconds."""
    import transformers

    full = size != "tiny"
    cfg = transformers.BertConfig(
        vocab_size=30522 if full else 1024,
        num_hidden_layers=12 if full else 2,
        max_position_embeddings=512 if full else 64,
    )
    spec = bert(size)
    spec.name, spec.module, spec.seq = (
        "bert_base",
        BertWrapper(transformers.BertModel(cfg)),
        128 if full else 32,
    )
    spec.make_inputs = text_inputs(spec.input_names, cfg.vocab_size)
    return spec


def minilm(size: str) -> ModelSpec:
    """all-MiniLM-L6-v2's shapes (6 layers, hidden 384, 12 heads, FFN 1536) as a
    sentence-embedding export; at "tiny" a 1024-token vocabulary and seq 32."""
    import transformers

    full = size != "tiny"
    cfg = transformers.BertConfig(
        vocab_size=30522 if full else 1024,
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        max_position_embeddings=512 if full else 64,
    )
    names = ("input_ids", "attention_mask")
    return ModelSpec(
        "minilm",
        SentenceEmbeddingWrapper(transformers.BertModel(cfg)),
        names,
        ("sentence_embedding",),
        {**dict.fromkeys(names, _BT), "sentence_embedding": _B},
        text_inputs(names, cfg.vocab_size),
        128 if full else 32,
    )


def gpt2(size: str) -> ModelSpec:
    import transformers

    if size == "tiny":
        cfg = transformers.GPT2Config(
            vocab_size=TINY_VOCAB,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=64,
            bos_token_id=TINY_VOCAB - 1,
            eos_token_id=TINY_VOCAB - 1,
        )
        seq = TINY_SEQ
    else:
        cfg = transformers.GPT2Config()  # gpt2 (small): 12 x 768, 50257 tokens
        seq = 64
    names = ("input_ids", "attention_mask")
    return ModelSpec(
        "gpt2",
        CausalLMWrapper(transformers.GPT2LMHeadModel(cfg)),
        names,
        ("logits",),
        {**dict.fromkeys(names, _BT), "logits": _BT},
        text_inputs(names, cfg.vocab_size),
        seq,
    )


def llama(size: str) -> ModelSpec:
    """Llama decoder with grouped-query attention (num_key_value_heads < num_attention_heads)."""
    import transformers

    if size == "tiny":
        cfg = transformers.LlamaConfig(
            vocab_size=TINY_VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
        seq = TINY_SEQ
    else:  # SmolLM2-135M shapes: 30 x 576, 9 query heads sharing 3 KV heads
        cfg = transformers.LlamaConfig(
            vocab_size=49152,
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            max_position_embeddings=8192,
            rms_norm_eps=1e-5,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        )
        seq = 64
    names = ("input_ids", "attention_mask")
    return ModelSpec(
        "llama",
        CausalLMWrapper(transformers.LlamaForCausalLM(cfg)),
        names,
        ("logits",),
        {**dict.fromkeys(names, _BT), "logits": _BT},
        text_inputs(names, cfg.vocab_size),
        seq,
    )


def vit(size: str) -> ModelSpec:
    import transformers

    if size == "tiny":
        cfg = transformers.ViTConfig(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            image_size=TINY_IMAGE,
            patch_size=8,
            num_labels=10,
        )
        image = TINY_IMAGE
    else:  # ViT-B/16 at 224
        cfg = transformers.ViTConfig(image_size=FULL_IMAGE, patch_size=16, num_labels=1000)
        image = FULL_IMAGE
    model = transformers.ViTForImageClassification(cfg)
    return ModelSpec(
        "vit",
        ImageClassifierWrapper(model),
        ("pixel_values",),
        ("logits",),
        {"pixel_values": _B, "logits": _B},
        image_inputs(image),
        0,
    )


def _cnn(name: str, model: nn.Module, size: str) -> ModelSpec:
    gen = torch.Generator().manual_seed(1)
    tm.randomize_batchnorm(model, gen)
    image = TINY_IMAGE if size == "tiny" else FULL_IMAGE
    return ModelSpec(
        name,
        model,
        ("pixel_values",),
        ("logits",),
        {"pixel_values": _B, "logits": _B},
        image_inputs(image),
        0,
    )


def resnet(size: str) -> ModelSpec:
    spec = _cnn("resnet", tm.resnet(size), size)
    spec.keep_batchnorm = True
    return spec


def mobilenetv2(size: str) -> ModelSpec:
    return _cnn("mobilenetv2", tm.mobilenetv2(size), size)


def mobilenetv2_hf(size: str) -> ModelSpec:
    """transformers' MobileNetV2 (random weights): TensorFlow 'SAME' padding as explicit
    Pad nodes before the strided convs and ReLU6 as separate Clip nodes, unlike the
    torchvision-style model above. tiny: depth multiplier 0.35 at 32x32."""
    import transformers

    if size == "tiny":
        cfg = transformers.MobileNetV2Config(
            depth_multiplier=0.35, image_size=TINY_IMAGE, num_labels=10
        )
    else:
        cfg = transformers.MobileNetV2Config(image_size=FULL_IMAGE, num_labels=1000)
    model = transformers.MobileNetV2ForImageClassification(cfg)
    for m in model.modules():  # transformers' init (std 0.02) shrinks the logits to ~1e-27
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
    spec = _cnn("mobilenetv2_hf", ImageClassifierWrapper(model), size)
    return spec


def upsample_head(size: str) -> ModelSpec:
    """A conv fed by a Resize (tm.UpsampleHead); full: 368x544 input."""
    spec = _cnn("upsample_head", tm.upsample_head(size), size)
    spec.output_names = ("prob",)
    spec.dynamic = {"pixel_values": _B, "prob": _B}
    if size != "tiny":
        spec.make_inputs = image_inputs((368, 544))
    return spec


FACTORIES: dict[str, Callable[[str], ModelSpec]] = {
    "bert": bert,
    "gpt2": gpt2,
    "llama": llama,
    "vit": vit,
    "resnet": resnet,
    "mobilenetv2": mobilenetv2,
    "mobilenetv2_hf": mobilenetv2_hf,
    "upsample_head": upsample_head,
}


# Built only when asked for (--only): exports the parity tests check at every
# optimization level, not part of the default set the benchmarks build.
EXTRA_FACTORIES: dict[str, Callable[[str], ModelSpec]] = {
    "bert_base": bert_base,
    "minilm": minilm,
}


def make_spec(name: str, size: str, seed: int = 0) -> ModelSpec:
    """Seeded construction: the same (name, size, seed) always gives the same weights."""
    torch.manual_seed(seed)
    spec = (FACTORIES | EXTRA_FACTORIES)[name](size)
    spec.module.eval()
    return spec
