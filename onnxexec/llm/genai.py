"""onnxruntime-genai model folders: genai_config.json + decoder ONNX + tokenizer.json.

The folder layout and the decoder's I/O names are those onnxruntime-genai's model builder
writes (onnxruntime-genai src/config.h, `model.decoder.inputs/outputs`): `input_ids`,
`attention_mask`, optional `position_ids`, `past_key_values.%d.key/value` in and
`logits`, `present.%d.key/value` out. The GroupQueryAttention graph the builder emits
derives seqlens_k / total_sequence_length from attention_mask itself, so the caller only
keeps the KV cache: present of one step is past of the next (no shared max-length buffer:
GQA with past length = total - new gives the same numbers, onnxruntime contrib_defs
GroupQueryAttention).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnxexec.errors import ModelLoadError

CONFIG = "genai_config.json"

# onnx element types -> numpy, for the empty past tensors of the first step.
_KV_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def is_genai_folder(path: str | Path) -> bool:
    """True when PATH is a directory holding an onnxruntime-genai genai_config.json."""
    p = Path(path)
    return p.is_dir() and (p / CONFIG).is_file()


@dataclass
class GenaiResult:
    """Tokens and timings of one `GenaiModel.generate` run."""

    prompt_tokens: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    prefill_tok_s: float = 0.0
    decode_tok_s: float = 0.0
    stop_reason: str = "length"


class GenaiModel:
    """A decoder-only genai folder run by onnxexec's InferenceSession, greedy decoding."""

    def __init__(
        self, folder: str | Path, threads: int = 0, profile_prefix: str | None = None
    ) -> None:
        """threads: intra-op threads (0: all cores); profile_prefix: write the session's
        onnxruntime-format profile there (`self.session.end_profiling()`)."""
        self.folder = Path(folder)
        cfg_path = self.folder / CONFIG
        try:
            self.config: dict[str, Any] = json.loads(cfg_path.read_text())
            model = self.config["model"]
            dec = model["decoder"]
            self.n_layers = int(dec["num_hidden_layers"])
            self.n_kv_heads = int(dec["num_key_value_heads"])
            self.head_size = int(dec["head_size"])
            self.inputs: dict[str, str] = dec["inputs"]
            self.outputs: dict[str, str] = dec["outputs"]
            onnx_path = self.folder / dec["filename"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ModelLoadError(f"{cfg_path}: not a usable genai_config.json ({e!r})") from e
        eos = model.get("eos_token_id", [])
        self.eos_ids = set(eos if isinstance(eos, list) else [eos])
        self.context_length = int(model.get("context_length", 2048))
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ModelLoadError(
                "genai folders need the `tokenizers` package (pip install onnxexec[genai])"
            ) from e
        tok_path = self.folder / "tokenizer.json"
        try:
            self.tokenizer = Tokenizer.from_file(str(tok_path))
        except Exception as e:  # tokenizers raises a bare Exception on bad files
            raise ModelLoadError(f"{tok_path}: cannot load tokenizer ({e})") from e
        from onnxexec.runtime import InferenceSession, SessionOptions

        so = SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        if profile_prefix:
            so.enable_profiling = True
            so.profile_file_prefix = profile_prefix
        self.session = InferenceSession(str(onnx_path), so)
        self._input_names = {i.name for i in self.session.get_inputs()}
        self._kv_dtype = np.float32
        for i in self.session.get_inputs():
            if i.name == self.inputs["past_key_names"] % 0:
                self._kv_dtype = _KV_DTYPES.get(i.type, np.float32)

    def encode(self, text: str) -> list[int]:
        """Token ids of TEXT as tokenizer.json defines them (its post-processor adds BOS)."""
        return list(self.tokenizer.encode(text).ids)

    def decode(self, ids: list[int]) -> str:
        """Text of IDS, special tokens skipped."""
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _empty_past(self) -> list[np.ndarray]:
        shape = (1, self.n_kv_heads, 0, self.head_size)
        return [np.zeros(shape, self._kv_dtype) for _ in range(2 * self.n_layers)]

    def _step(self, ids: list[int], past: list[np.ndarray], total: int) -> np.ndarray:
        """Run the decoder on IDS after TOTAL - len(IDS) cached positions; update PAST."""
        n = len(ids)
        feeds: dict[str, np.ndarray] = {
            self.inputs["input_ids"]: np.asarray([ids], np.int64),
            self.inputs["attention_mask"]: np.ones((1, total), np.int64),
        }
        pos_name = self.inputs.get("position_ids")
        if pos_name and pos_name in self._input_names:
            feeds[pos_name] = np.arange(total - n, total, dtype=np.int64)[None]
        names = []
        for layer in range(self.n_layers):
            feeds[self.inputs["past_key_names"] % layer] = past[2 * layer]
            feeds[self.inputs["past_value_names"] % layer] = past[2 * layer + 1]
            names += [
                self.outputs["present_key_names"] % layer,
                self.outputs["present_value_names"] % layer,
            ]
        out = self.session.run([self.outputs["logits"], *names], feeds)
        past[:] = out[1:]
        return np.asarray(out[0])[0, -1]

    def stream_ids(self, prompt_ids: list[int], max_new: int, res: GenaiResult) -> Iterator[int]:
        """Greedy tokens after PROMPT_IDS, stopping at EOS, MAX_NEW or the context length."""
        res.prompt_tokens = list(prompt_ids)
        past = self._empty_past()
        seq = list(prompt_ids)
        t0 = time.perf_counter()
        logits = self._step(seq, past, len(seq))
        res.prefill_tok_s = len(seq) / max(time.perf_counter() - t0, 1e-9)
        t1 = time.perf_counter()
        for _ in range(max_new):
            tok = int(np.argmax(logits))
            seq.append(tok)
            res.tokens.append(tok)
            yield tok
            if tok in self.eos_ids:
                res.stop_reason = "eos"
                break
            if len(seq) >= self.context_length or len(res.tokens) >= max_new:
                break
            logits = self._step([tok], past, len(seq))
        decoded = max(len(res.tokens) - 1, 0)
        res.decode_tok_s = decoded / max(time.perf_counter() - t1, 1e-9) if decoded else 0.0
        res.text = self.decode(res.tokens)

    def generate(self, prompt: str, max_new: int) -> GenaiResult:
        """Greedy-decode up to MAX_NEW tokens after PROMPT."""
        res = GenaiResult()
        for _ in self.stream_ids(self.encode(prompt), max_new, res):
            pass
        return res
