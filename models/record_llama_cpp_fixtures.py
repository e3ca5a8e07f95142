"""Record llama.cpp's outputs as JSON fixtures for tests/parity/test_llama_cpp_parity.py.

    python models/record_llama_cpp_fixtures.py [--out tests/parity/fixtures] [--skip-smollm2]

Needs llama-cpp-python (run once, offline, whenever the fixtures must change); the
parity test then runs without it. For every tiny GGUF of models/build_tiny_gguf.py
(built into a temporary directory) the fixture holds the file's sha256, llama.cpp's
prompt ids, 16 greedy ids, the top-5 logits (ids + values) at the first prompt
positions and the last one, and the top-2 logit values of each greedy step (their gap
says how close each greedy choice was). For SmolLM2-135M-Instruct Q4_1 it holds the
prompt ids of a 100+-token prompt and 64 greedy ids with the same per-step data.

llama.cpp runs as llama-cpp-python sets it up: n_threads=2, logits_all=True, its
default F16 KV cache and no flash attention; tokenize(add_bos per the GGUF's
tokenizer.ggml.add_bos_token, special=True); greedy = argmax of each step's logits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_tiny_gguf as tiny  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "parity" / "fixtures"
TINY_PROMPT = ("The quick brown fox jumps over the lazy dog, and then it runs back "
               "home to sleep under the old oak tree.")
SMOLLM2_PROMPT = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n<|im_start|>user\nHere is a short passage about the water cycle. "
    "Water evaporates from oceans, lakes and rivers when the sun heats it. The vapour "
    "rises, cools and condenses into tiny droplets that form clouds. When the droplets "
    "grow heavy they fall back to the ground as rain, snow or hail. Some of this water "
    "flows over the land into streams, while some soaks into the soil and becomes "
    "groundwater. Please summarise the passage in two sentences and explain why the "
    "cycle matters for life on Earth.<|im_end|>\n<|im_start|>assistant\n"
)
TINY_GREEDY, SMOLLM2_GREEDY = 16, 64
TOP_POSITIONS = 3  # top-5 logits recorded at prompt positions 0..2 and the last one


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _top(logits: np.ndarray, k: int) -> dict[str, list]:
    ids = np.argsort(-logits, kind="stable")[:k]
    return {"ids": [int(i) for i in ids], "values": [round(float(logits[i]), 5) for i in ids]}


def run_llama_cpp(path: Path, prompt: str, n_greedy: int, n_ctx: int = 512) -> dict[str, Any]:
    """Prompt ids, greedy ids and logit summaries from llama.cpp."""
    import llama_cpp

    from onnxexec.loaders.gguf_reader import read_gguf

    add_bos = bool(read_gguf(path).metadata.get("tokenizer.ggml.add_bos_token", False))
    llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=2, logits_all=True, verbose=False)
    ids = llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
    llm.reset()
    llm.eval(ids)
    scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)
    positions = [*range(min(TOP_POSITIONS, len(ids))), len(ids) - 1]
    out: dict[str, Any] = {
        "prompt_ids": [int(t) for t in ids],
        "prompt_top5": {str(p): _top(scores[p], 5) for p in positions},
    }
    greedy, steps = [], []
    for _ in range(n_greedy):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        tok = int(np.argmax(logits))
        greedy.append(tok)
        steps.append(_top(logits, 2)["values"])
        llm.eval([tok])
    out["greedy_ids"] = greedy
    out["greedy_top2"] = steps
    del llm
    return out


def record_tiny(out_dir: Path) -> dict[str, Any]:
    import llama_cpp

    records: dict[str, Any] = {}
    vocab = tiny.load_vocab()
    with tempfile.TemporaryDirectory() as tmp:
        for arch in tiny.ARCHS:
            for t in tiny.TYPES:
                path = tiny.build_tiny_gguf(arch, t, Path(tmp) / f"tiny-{arch}-{t}.gguf", vocab)
                rec = {"file": path.name, "sha256": sha256(path)}
                rec.update(run_llama_cpp(path, TINY_PROMPT, TINY_GREEDY))
                records[f"{arch}-{t}"] = rec
                print(f"{arch}-{t}: {len(rec['prompt_ids'])} prompt ids, greedy "
                      f"{rec['greedy_ids'][:6]}...", file=sys.stderr)
    doc = {"llama_cpp_python": llama_cpp.__version__, "prompt": TINY_PROMPT,
           "n_greedy": TINY_GREEDY, "models": records}
    (out_dir / "tiny_gguf.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def record_smollm2(out_dir: Path) -> dict[str, Any]:
    import llama_cpp

    path = tiny.smollm2_path()
    rec = {"file": path.name, "sha256": sha256(path)}
    rec.update(run_llama_cpp(path, SMOLLM2_PROMPT, SMOLLM2_GREEDY))
    doc = {"llama_cpp_python": llama_cpp.__version__, "prompt": SMOLLM2_PROMPT,
           "n_greedy": SMOLLM2_GREEDY, **rec}
    (out_dir / "smollm2_q4_1.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"smollm2: {len(rec['prompt_ids'])} prompt ids, greedy {rec['greedy_ids'][:8]}...",
          file=sys.stderr)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--skip-smollm2", action="store_true")
    ap.add_argument("--skip-tiny", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.skip_tiny:
        record_tiny(args.out)
    if not args.skip_smollm2:
        record_smollm2(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
