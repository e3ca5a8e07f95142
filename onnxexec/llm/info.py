"""`onnxexec info MODEL.gguf`: metadata, tensor table and the IR graph of a GGUF file."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from onnxexec.loaders.gguf_reader import read_gguf


def _short(v: Any) -> str:
    if isinstance(v, list | tuple):
        head = ", ".join(repr(x) for x in list(v)[:4])
        return f"[{head}{', ...' if len(v) > 4 else ''}] ({len(v)} items)"
    if isinstance(v, str) and len(v) > 120:
        return repr(v[:117] + "...") + f" ({len(v)} chars)"
    return repr(v)


def describe_gguf(path: str, show_graph: bool = False) -> list[str]:
    f = read_gguf(path)
    lines = [f"GGUF v{f.version}: {path}", "metadata:"]
    for k, v in f.metadata.items():
        lines.append(f"  {k} = {_short(v)}")
    types = Counter(t.ggml_type.name for t in f.tensors.values())
    total = sum(t.n_bytes for t in f.tensors.values())
    n_params = sum(int(np.prod(t.shape)) for t in f.tensors.values())
    lines.append(
        f"tensors: {len(f.tensors)}, {n_params:,} parameters, {total / 1e6:.1f} MB "
        f"({', '.join(f'{n} {k}' for k, n in types.most_common())})"
    )
    lines.append(f"  {'name':<32}{'type':<8}{'shape':<20}{'bytes':>12}")
    for t in f.tensors.values():
        lines.append(f"  {t.name:<32}{t.ggml_type.name:<8}{list(t.shape)!s:<20}{t.n_bytes:>12,}")
    if show_graph:
        from onnxexec.ir.printer import format_graph
        from onnxexec.llm.config import config_from_metadata
        from onnxexec.llm.graph import build_llm_graph
        from onnxexec.llm.model import prepare_tensor

        emb = f.tensors["token_embd.weight"]
        cfg = config_from_metadata(f.metadata, n_vocab=emb.shape[0])
        weights = {n: prepare_tensor(t) for n, t in f.tensors.items()}
        lines.append(format_graph(build_llm_graph(cfg, weights, n_ctx=cfg.n_ctx_train)))
    return lines
