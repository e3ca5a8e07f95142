"""GGUF language models: tokenizer, model, generation."""

from onnxexec.llm.tokenizer import StreamDecoder, Tokenizer, load_tokenizer

__all__ = ["StreamDecoder", "Tokenizer", "load_tokenizer"]
