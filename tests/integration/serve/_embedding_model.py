"""A tiny sentence-embedding model built offline: a random-weight transformers BertModel
exported to ONNX by torch (TorchScript exporter) and a WordPiece tokenizer.json built with
the `tokenizers` package."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "hello", "world", "a", "big", "red"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS + ["##s", "##ing"])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(path))
    return path


def build_model(path: Path, vocab_size: int) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    bert = BertModel(cfg).eval()

    class Encoder(torch.nn.Module):  # keyword arguments: BertModel's positional order varies
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask, types):
            return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]

    model = Encoder().eval()
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    types = torch.zeros_like(ids)
    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (ids, mask, types),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                n: axes
                for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
            },
        )
    return path
